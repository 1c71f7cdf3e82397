// The shapes3d generator. Each class is a signed distance function in the shape's own frame
// (unit scale, inside the unit ball); a voxel's value is its partial-volume coverage
// clamp(0.5 - distance in voxels, 0, 1), so edges are soft as in a real scan. For the
// polytopes (cone, pyramid, octahedron, ellipsoid) the distance is the largest plane distance,
// exact inside and a lower bound outside, which is all the half-voxel edge needs.
#include "weft/data/shapes3d.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <system_error>

#include "weft/util/error.hpp"

namespace weft::data {
namespace {

// splitmix64 (Steele, Lea, Flood 2014): seeds the generator from (seed, split, sample).
std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman, Vigna 2018).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) {
    for (auto& w : s_) w = splitmix64(seed);
  }
  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::array<std::uint64_t, 4> s_{};
};

struct Vec {
  double x, y, z;
};

double length(double a, double b) {
  return std::sqrt(a * a + b * b);
}
double length(const Vec& v) {
  return std::sqrt(v.x * v.x + v.y * v.y + v.z * v.z);
}

double box(const Vec& p, double half) {
  const double qx = std::abs(p.x) - half, qy = std::abs(p.y) - half, qz = std::abs(p.z) - half;
  const double outside = length({std::max(qx, 0.0), std::max(qy, 0.0), std::max(qz, 0.0)});
  return outside + std::min(std::max(qx, std::max(qy, qz)), 0.0);
}

// Distance to the line through (r0, y0) with outward unit normal (nr, ny), in the (r, y) plane.
double side(double r, double y, double r0, double y0, double nr, double ny) {
  return (r - r0) * nr + (y - y0) * ny;
}

// The slanted sides of the cone and the pyramid: from (0.55, -0.5) at the base to the apex
// (0, 0.7); outward normal (1.2, 0.55) / |(1.2, 0.55)|.
constexpr double kSlopeR = 0.9090678;  // 1.2 / sqrt(1.2^2 + 0.55^2)
constexpr double kSlopeY = 0.4166561;  // 0.55 / sqrt(1.2^2 + 0.55^2)

// Signed distance of the shape of `label` at p (the shape's frame, unit scale).
double distance(int label, const Vec& p) {
  switch (label) {
    case 0:  // sphere
      return length(p) - 0.8;
    case 1:  // cube
      return box(p, 0.5);
    case 2: {  // cylinder along y, radius 0.45, height 1.4
      const double dr = length(p.x, p.z) - 0.45, dy = std::abs(p.y) - 0.7;
      return std::min(std::max(dr, dy), 0.0) + length(std::max(dr, 0.0), std::max(dy, 0.0));
    }
    case 3:  // cone: round base of radius 0.55 at y = -0.5, apex at y = 0.7
      return std::max(-p.y - 0.5, side(length(p.x, p.z), p.y, 0.55, -0.5, kSlopeR, kSlopeY));
    case 4:  // torus around y, radii 0.6 and 0.22
      return length(length(p.x, p.z) - 0.6, p.y) - 0.22;
    case 5:  // pyramid: square base of half side 0.55 at y = -0.5, apex at y = 0.7
      return std::max({-p.y - 0.5, side(std::abs(p.x), p.y, 0.55, -0.5, kSlopeR, kSlopeY),
                       side(std::abs(p.z), p.y, 0.55, -0.5, kSlopeR, kSlopeY)});
    case 6: {  // ellipsoid with semi-axes 0.85, 0.5, 0.3 (scaled by the shortest)
      const double k = length({p.x / 0.85, p.y / 0.5, p.z / 0.3});
      return (k - 1.0) * 0.3;
    }
    case 7:  // hollow box: a shell of thickness 0.2 around the cube of half side 0.45
      return std::abs(box(p, 0.45)) - 0.1;
    case 8: {  // capsule: segment y in [-0.45, 0.45], radius 0.33
      const double y = p.y - std::min(std::max(p.y, -0.45), 0.45);
      return length({p.x, y, p.z}) - 0.33;
    }
    default:  // octahedron |x| + |y| + |z| <= 0.85
      return (std::abs(p.x) + std::abs(p.y) + std::abs(p.z) - 0.85) * 0.5773503;
  }
}

// Every shape lies within this radius of its centre (unit scale).
constexpr double kBoundingRadius = 1.0;

// A uniformly random rotation: a point uniform in the unit 4-ball, normalised, is a uniform
// unit quaternion (no trigonometry, so no dependence on the math library's sin/cos).
std::array<double, 9> random_rotation(Rng& rng) {
  double w, x, y, z, n2;
  do {
    w = rng.uniform(-1, 1);
    x = rng.uniform(-1, 1);
    y = rng.uniform(-1, 1);
    z = rng.uniform(-1, 1);
    n2 = w * w + x * x + y * y + z * z;
  } while (n2 > 1.0 || n2 < 1e-6);
  const double s = 2.0 / n2;  // normalises the quaternion inside the formula
  return {1 - s * (y * y + z * z), s * (x * y - w * z),     s * (x * z + w * y),
          s * (x * y + w * z),     1 - s * (x * x + z * z), s * (y * z - w * x),
          s * (x * z - w * y),     s * (y * z + w * x),     1 - s * (x * x + y * y)};
}

std::uint64_t stream_seed(std::uint64_t seed, Split split, std::int64_t sample) {
  const std::uint64_t tag = split == Split::Train ? 0x7472616eULL : 0x74657374ULL;
  std::uint64_t x = seed ^ (tag << 32);
  x = splitmix64(x);
  x += static_cast<std::uint64_t>(sample) * 0xd1342543de82ef95ULL;
  return splitmix64(x);
}

// Draws sample `label`'s pose, brightness and noise from `rng` into `out` (size^3 voxels).
void render(int label, std::int64_t size, double noise_voxels, Rng& rng, std::uint8_t* out) {
  const double half = 0.5 * static_cast<double>(size);
  // Voxels per unit of the shape's frame (at most half - 1: small grids keep a free border).
  const double scale = std::min(half * rng.uniform(0.5, 0.8), half - 1.0);
  // The bounding ball stays a voxel inside the grid: the outermost voxels are never covered.
  const double room = std::max(0.0, half - scale * kBoundingRadius - 1.0);
  const Vec centre = {half + rng.uniform(-1, 1) * room, half + rng.uniform(-1, 1) * room,
                      half + rng.uniform(-1, 1) * room};
  const std::array<double, 9> r = random_rotation(rng);
  const double brightness = rng.uniform(0.6, 1.0);
  const double inv = 1.0 / scale;

  std::fill(out, out + size * size * size, std::uint8_t{0});
  // Only voxels within the bounding ball's box (plus the half-voxel edge) can be covered.
  const double reach = scale * kBoundingRadius + 1.0;
  auto range = [&](double c) {
    const auto lo = static_cast<std::int64_t>(std::max(0.0, std::floor(c - reach)));
    const auto hi =
        static_cast<std::int64_t>(std::min(static_cast<double>(size), std::ceil(c + reach)));
    return std::make_pair(lo, hi);
  };
  const auto [z0, z1] = range(centre.z);
  const auto [y0, y1] = range(centre.y);
  const auto [x0, x1] = range(centre.x);
  for (std::int64_t k = z0; k < z1; ++k)
    for (std::int64_t j = y0; j < y1; ++j)
      for (std::int64_t i = x0; i < x1; ++i) {
        const double dx = (static_cast<double>(i) + 0.5 - centre.x) * inv;
        const double dy = (static_cast<double>(j) + 0.5 - centre.y) * inv;
        const double dz = (static_cast<double>(k) + 0.5 - centre.z) * inv;
        // The shape's frame: the transposed rotation applied to the offset.
        const Vec p = {r[0] * dx + r[3] * dy + r[6] * dz, r[1] * dx + r[4] * dy + r[7] * dz,
                       r[2] * dx + r[5] * dy + r[8] * dz};
        const double coverage = std::min(1.0, std::max(0.0, 0.5 - distance(label, p) * scale));
        if (coverage <= 0) continue;
        const double value = coverage * brightness * (1.0 + 0.15 * rng.uniform(-1, 1));
        out[(k * size + j) * size + i] =
            static_cast<std::uint8_t>(std::min(255.0, 255.0 * value + 0.5));
      }
  if (noise_voxels <= 0) return;
  // Scattered noise voxels: each voxel independently with probability noise_voxels.
  const auto threshold = static_cast<std::uint64_t>(noise_voxels * 0x1.0p53);
  for (std::int64_t v = 0; v < size * size * size; ++v) {
    const std::uint64_t u = rng.next();
    if ((u >> 11) < threshold) out[v] = static_cast<std::uint8_t>(u & 0xff);
  }
}

}  // namespace

const std::vector<std::string>& shapes3d_classes() {
  static const std::vector<std::string> names = {"sphere",  "cube",      "cylinder",  "cone",
                                                 "torus",   "pyramid",   "ellipsoid", "hollow box",
                                                 "capsule", "octahedron"};
  return names;
}

ImageSet generate_shapes3d(const Shapes3dOptions& o) {
  if (o.count < 0)
    throw InvalidOption("Shapes3d", "count",
                        std::to_string(o.count) + " is invalid; accepted: an integer >= 0");
  if (o.size < 4 || o.size > 256)
    throw InvalidOption("Shapes3d", "size",
                        std::to_string(o.size) + " is invalid; accepted: 4..256 voxels per side");
  if (!(o.noise_voxels >= 0 && o.noise_voxels <= 1))
    throw InvalidOption(
        "Shapes3d", "noise_voxels",
        number_text(o.noise_voxels) + " is invalid; accepted: a fraction in [0, 1]");
  const auto classes = static_cast<int>(shapes3d_classes().size());
  ImageSet set;
  set.spatial_dims = 3;
  set.count = o.count;
  set.depth = set.rows = set.cols = o.size;
  set.pixels.resize(static_cast<std::size_t>(o.count * set.image_size()));
  set.labels.resize(static_cast<std::size_t>(o.count));
  for (std::int64_t n = 0; n < o.count; ++n) {
    const int label = static_cast<int>(n % classes);
    set.labels[static_cast<std::size_t>(n)] = static_cast<std::uint8_t>(label);
    Rng rng(stream_seed(o.seed, o.split, n));
    render(label, o.size, o.noise_voxels, rng,
           set.pixels.data() + static_cast<std::size_t>(n * set.image_size()));
  }
  return set;
}

void write_shapes3d(const std::string& dir, std::int64_t train_count, std::int64_t test_count,
                    std::int64_t size, std::uint64_t seed) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw BadData(dir + ": cannot create the folder (" + ec.message() + ")");
  for (const Split split : {Split::Train, Split::Test}) {
    Shapes3dOptions o;
    o.count = split == Split::Train ? train_count : test_count;
    o.size = size;
    o.seed = seed;
    o.split = split;
    const ImageSet set = generate_shapes3d(o);
    const std::filesystem::path d(dir);
    write_idx(set, (d / (images_file(split, 3) + ".gz")).string(),
              (d / (labels_file(split) + ".gz")).string());
  }
}

}  // namespace weft::data
