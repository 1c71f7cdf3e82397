#pragma once
// `weft train --spatial-levels LIST` (spatial_flags.cpp): which MGRIT levels coarsen in space;
// --fwd-spatial-levels and --bwd-spatial-levels set one direction.
#include <array>
#include <string>

#include "training.hpp"

namespace weft::cli {

/// The flags that choose levels coarse in space, for messages naming those given.
inline constexpr std::array<const char*, 3> kSpatialLevelFlags{
    "--spatial-levels", "--fwd-spatial-levels", "--bwd-spatial-levels"};

/// Models whose step states are images (4-D or 5-D tensors), where spatial coarsening applies.
bool is_convolutional(const ModelConfig& model);

/// What the user gave for one direction's --fwd-nrelax or --bwd-nrelax (count 0: nothing).
struct GivenNrelax {
  std::string flag, text;
  int count = 0;  ///< levels 0 .. count-1 were given
};

/// The lists given: --spatial-levels (both directions), --fwd-spatial-levels,
/// --bwd-spatial-levels (one direction each, replacing --spatial-levels there); empty: not given.
struct SpatialTexts {
  std::string both, forward, backward;
};

/// Sets c.parallel's spatial levels: --spatial-levels has one 0/1 per level of the direction
/// with more levels (--fwd-levels, --bwd-levels) and the other direction uses the first
/// entries; a per-direction list has one per level of its direction; every list starts with 0.
/// A direction given no list has no level coarse in space. A level above one coarse in space
/// relaxes with FCF unless nrelax was given for it: F-relaxation there stagnates
/// (docs/training.md, "Spatial coarsening"), and a given 0 is refused. Call after c.parallel's
/// solver options are set. Throws weft::InvalidOption naming the list's flag for a wrong length
/// or value, or a model without convolutional steps, and naming the nrelax flag for a given 0
/// above a level coarse in space.
void apply_spatial_levels(const SpatialTexts& texts, TrainConfig& c, const GivenNrelax& forward,
                          const GivenNrelax& backward);

}  // namespace weft::cli
