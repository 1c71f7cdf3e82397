#pragma once
// `weft train --spatial-levels LIST` (spatial_flags.cpp): which MGRIT levels coarsen in space.
#include <string>

#include "training.hpp"

namespace weft::cli {

/// Models whose step states are images (4-D or 5-D tensors), where spatial coarsening applies.
bool is_convolutional(const ModelConfig& model);

/// What the user gave for one direction's --fwd-nrelax or --bwd-nrelax (count 0: nothing).
struct GivenNrelax {
  std::string flag, text;
  int count = 0;  ///< levels 0 .. count-1 were given
};

/// Sets c.parallel's spatial levels from LIST: one 0/1 per level of the direction with more
/// levels (--fwd-levels, --bwd-levels), the first 0; the other direction uses the first entries.
/// A level above one coarse in space relaxes with FCF unless nrelax was given for it: F-relaxation
/// there stagnates (docs/training.md, "Spatial coarsening"), and a given 0 is refused.
/// Call after c.parallel's solver options are set. Throws weft::InvalidOption naming
/// --spatial-levels for a wrong length or value, or a model without convolutional steps, and
/// naming the nrelax flag for a given 0 above a level coarse in space.
void apply_spatial_levels(const std::string& text, TrainConfig& c, const GivenNrelax& forward,
                          const GivenNrelax& backward);

}  // namespace weft::cli
