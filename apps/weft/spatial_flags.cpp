// `weft train --spatial-levels LIST` and its per-direction forms (see spatial_flags.hpp).
#include "spatial_flags.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "cli_support.hpp"
#include "weft/train/model_registry.hpp"

namespace weft::cli {

bool is_convolutional(const ModelConfig& model) {
  return train::model_kind(model).convolutional();
}

namespace {
// FCF on every level above one coarse in space, unless the user chose that level's nrelax.
mgrit::Options relax_above_coarse_space(mgrit::Options o, const std::vector<int>& flags,
                                        const GivenNrelax& given, const std::string& spatial) {
  for (size_t l = 1; l < flags.size(); ++l) {
    const int above = static_cast<int>(l) - 1;
    if (flags[l] != 1 || o.nrelax_at(above) >= 1) continue;
    if (above < given.count)
      invalid_value(given.flag, given.text, "nrelax >= 1 on a level above one coarse in space",
                    fmt::format("{} makes level {} coarse in space, and level {} under "
                                "F-relaxation (0) never converges",
                                spatial, l, above));
    o.nrelax(1, above);
  }
  return o;
}
}  // namespace

namespace {
/// One flag's list: `count` 0/1 values, the first 0 (InvalidOption naming the flag otherwise).
std::vector<int> parse_flags(const char* flag, const std::string& text, int count,
                             const std::string& accepted) {
  const std::vector<int> flags = parse_int_list(flag, text, 0, accepted);
  if (static_cast<int>(flags.size()) != count)
    invalid_value(flag, text, accepted,
                  fmt::format("{} values for {} levels", flags.size(), count));
  for (int v : flags)
    if (v > 1) invalid_value(flag, text, accepted, fmt::format("{} is not 0 or 1", v));
  if (flags.front() != 0)
    invalid_value(flag, text, accepted, "level 0 is the fine grid: it cannot be coarsened");
  return flags;
}
}  // namespace

void apply_spatial_levels(const SpatialTexts& texts, TrainConfig& c, const GivenNrelax& given_fwd,
                          const GivenNrelax& given_bwd) {
  const int forward = c.parallel.forward().max_levels();
  const int backward = c.parallel.backward().max_levels();
  std::vector<int> fwd, bwd;
  std::string fwd_text, bwd_text;  // the flag and list that set each direction, for messages
  const char* any_flag = nullptr;  // the last list given, for the model check
  std::string any_text;
  if (!texts.both.empty()) {
    any_flag = "--spatial-levels";
    any_text = texts.both;
    const int levels = std::max(forward, backward);
    const std::vector<int> flags = parse_flags(
        any_flag, texts.both, levels,
        fmt::format(
            "one 0/1 per level ({} = the larger of --fwd-levels {} and --bwd-levels {}), the "
            "first 0",
            levels, forward, backward));
    fwd.assign(flags.begin(), flags.begin() + forward);
    bwd.assign(flags.begin(), flags.begin() + backward);
    fwd_text = bwd_text = "--spatial-levels " + texts.both;
  }
  const auto one_direction = [&](const char* flag, const std::string& text, int levels,
                                 const char* levels_flag, std::vector<int>& flags,
                                 std::string& label) {
    if (text.empty()) return;
    any_flag = flag;
    any_text = text;
    flags = parse_flags(
        flag, text, levels,
        fmt::format("one 0/1 per level of this solve ({} {}), the first 0", levels_flag, levels));
    label = std::string(flag) + " " + text;
  };
  one_direction("--fwd-spatial-levels", texts.forward, forward, "--fwd-levels", fwd, fwd_text);
  one_direction("--bwd-spatial-levels", texts.backward, backward, "--bwd-levels", bwd, bwd_text);
  if (!any_flag) return;
  if (!is_convolutional(c.model))
    invalid_value(any_flag, any_text, "used with convolutional models (resnet, stages, conv3d)",
                  fmt::format("--model {} has no convolutional steps", c.model.kind));
  c.parallel.spatial_levels(fwd, bwd);
  c.parallel.forward(relax_above_coarse_space(c.parallel.forward(), fwd, given_fwd, fwd_text))
      .backward(relax_above_coarse_space(c.parallel.backward(), bwd, given_bwd, bwd_text));
}

}  // namespace weft::cli
