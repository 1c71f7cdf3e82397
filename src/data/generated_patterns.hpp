#pragma once
// The generated image sets' class patterns (CIFAR and image-folder layouts): class k is a
// stripe texture of fixed orientation, frequency and colour under random phase, brightness,
// contrast and noise. Private to weft_data.
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace weft::data {

/// splitmix64: the generated sets' only source of randomness (bytes depend on the seed alone).
struct Random {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

/// Draws a 3 x side x side RGB image of class `k` into `image` (channel-major).
inline void draw_stripes(int k, std::int64_t side, Random& random, std::uint8_t* image) {
  constexpr double kPi = 3.14159265358979323846;
  // The class: stripe orientation (10 angles), frequency (one per ten classes) and colour.
  const double angle = kPi * (k % 10) / 10.0, frequency = 2.0 + k / 10;
  const double colour[3] = {0.4 + 0.6 * ((k % 3) == 0), 0.4 + 0.6 * ((k % 3) == 1),
                            0.4 + 0.6 * ((k % 3) == 2)};
  // The sample: phase, brightness, contrast, noise.
  const double phase = 2 * kPi * random.uniform(), base = 80 + 60 * random.uniform();
  const double amplitude = 40 + 30 * random.uniform();
  const double c = std::cos(angle), s = std::sin(angle);
  const auto n = static_cast<double>(side);
  for (std::int64_t ch = 0; ch < 3; ++ch)
    for (std::int64_t y = 0; y < side; ++y)
      for (std::int64_t x = 0; x < side; ++x) {
        const double u = (static_cast<double>(x) * c + static_cast<double>(y) * s) / n;
        const double v = base + amplitude * colour[ch] * std::sin(2 * kPi * frequency * u + phase) +
                         24 * (random.uniform() - 0.5);
        image[(ch * side + y) * side + x] = static_cast<std::uint8_t>(std::clamp(v, 0.0, 255.0));
      }
}

}  // namespace weft::data
