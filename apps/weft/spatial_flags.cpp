// `weft train --spatial-levels LIST` (see spatial_flags.hpp).
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
                    fmt::format("--spatial-levels {} makes level {} coarse in space, and level {} "
                                "under F-relaxation (0) never converges",
                                spatial, l, above));
    o.nrelax(1, above);
  }
  return o;
}
}  // namespace

void apply_spatial_levels(const std::string& text, TrainConfig& c, const GivenNrelax& given_fwd,
                          const GivenNrelax& given_bwd) {
  const char* flag = "--spatial-levels";
  const int forward = c.parallel.forward().max_levels();
  const int backward = c.parallel.backward().max_levels();
  const int levels = std::max(forward, backward);
  const std::string accepted = fmt::format(
      "one 0/1 per level ({} = the larger of --fwd-levels {} and --bwd-levels {}), the first 0",
      levels, forward, backward);
  const std::vector<int> flags = parse_int_list(flag, text, 0, accepted);
  if (static_cast<int>(flags.size()) != levels)
    invalid_value(flag, text, accepted,
                  fmt::format("{} values for {} levels", flags.size(), levels));
  for (int v : flags)
    if (v > 1) invalid_value(flag, text, accepted, fmt::format("{} is not 0 or 1", v));
  if (flags.front() != 0)
    invalid_value(flag, text, accepted, "level 0 is the fine grid: it cannot be coarsened");
  if (!is_convolutional(c.model))
    invalid_value(flag, text, "used with convolutional models (resnet, stages, conv3d)",
                  fmt::format("--model {} has no convolutional steps", c.model.kind));
  const auto prefix = [&](int n) { return std::vector<int>(flags.begin(), flags.begin() + n); };
  c.parallel.spatial_levels(prefix(forward), prefix(backward));
  c.parallel
      .forward(relax_above_coarse_space(c.parallel.forward(), prefix(forward), given_fwd, text))
      .backward(relax_above_coarse_space(c.parallel.backward(), prefix(backward), given_bwd, text));
}

}  // namespace weft::cli
