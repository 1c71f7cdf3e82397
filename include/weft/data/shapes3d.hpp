#pragma once
// shapes3d: a generated 3-D classification benchmark (no 3-D shape set is installable here).
// Each sample is a size^3 grid of voxels (0..255) holding one primitive shape of one of ten
// classes, with a random rotation, scale, position and brightness, partial-volume edges, voxel
// intensity noise and scattered noise voxels. Everything is plain C++: a small PRNG
// (splitmix64 seeding xoshiro256**) and +,-,*,/,sqrt only, so the bytes depend on the seed
// alone, not on the standard library. Sample i depends only on (seed, split, i): a shorter set
// is a prefix of a longer one, and the train and test splits use different streams.
#include <cstdint>
#include <string>
#include <vector>

#include "weft/data/idx.hpp"

namespace weft::data {

/// The classes, in label order: sphere, cube, cylinder, cone, torus, pyramid, ellipsoid,
/// hollow box, capsule, octahedron.
const std::vector<std::string>& shapes3d_classes();

struct Shapes3dOptions {
  std::int64_t count = 1000;  ///< samples; labels cycle through the classes (balanced)
  std::int64_t size = 32;     ///< voxels per side, 4..256
  std::uint64_t seed = 1;     ///< the train and test splits draw from different streams
  Split split = Split::Train;
  double noise_voxels = 0.005;  ///< fraction of voxels replaced by a random value, [0, 1]
};

/// A volume set (spatial_dims 3, depth = rows = cols = size) with labels 0..9. Throws
/// weft::InvalidOption("Shapes3d", field, ...) for a count < 0, a size outside 4..256 or a
/// noise fraction outside [0, 1].
ImageSet generate_shapes3d(const Shapes3dOptions& options);

/// Generates both splits and writes them to `dir` (created if missing) as gzip IDX files with
/// the standard names (train-images-idx4-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-...).
void write_shapes3d(const std::string& dir, std::int64_t train_count, std::int64_t test_count,
                    std::int64_t size, std::uint64_t seed);

}  // namespace weft::data
