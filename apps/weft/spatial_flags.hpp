#pragma once
// `weft train --spatial-levels LIST` (spatial_flags.cpp): which MGRIT levels coarsen in space.
#include <string>

#include "training.hpp"

namespace weft::cli {

/// Models whose step states are images (4-D or 5-D tensors), where spatial coarsening applies.
bool is_convolutional(const ModelConfig& model);

/// Sets c.parallel's spatial levels from LIST: one 0/1 per level of the direction with more
/// levels (--fwd-levels, --bwd-levels), the first 0; the other direction uses the first entries.
/// Call after c.parallel's solver options are set. Throws weft::InvalidOption naming
/// --spatial-levels for a wrong length or value, or a model without convolutional steps.
void apply_spatial_levels(const std::string& text, TrainConfig& c);

}  // namespace weft::cli
