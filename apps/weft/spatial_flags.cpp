// `weft train --spatial-levels LIST` (see spatial_flags.hpp).
#include "spatial_flags.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "cli_support.hpp"

namespace weft::cli {

bool is_convolutional(const ModelConfig& model) {
  return model.kind == "resnet" || model.kind == "stages" || model.kind == "conv3d";
}

void apply_spatial_levels(const std::string& text, TrainConfig& c) {
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
}

}  // namespace weft::cli
