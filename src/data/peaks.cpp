#include "weft/data/peaks.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "weft/util/error.hpp"

namespace weft::data {

double peaks(double x, double y) {
  const double x2 = x * x;
  const double y2 = y * y;
  return 3.0 * (1.0 - x) * (1.0 - x) * std::exp(-x2 - (y + 1.0) * (y + 1.0)) -
         10.0 * (x / 5.0 - x2 * x - y2 * y2 * y) * std::exp(-x2 - y2) -
         std::exp(-(x + 1.0) * (x + 1.0) - y2) / 3.0;
}

std::int64_t peaks_class(double x, double y) {
  const double p = peaks(x, y);
  // Number of thresholds <= p.
  return std::upper_bound(kPeaksThresholds.begin(), kPeaksThresholds.end(), p) -
         kPeaksThresholds.begin();
}

PeaksSet make_peaks(std::int64_t n, std::uint64_t seed) {
  if (n < 0) throw InvalidOption("make_peaks: n must be >= 0, got " + std::to_string(n));
  std::mt19937_64 rng(seed);
  // Top 53 bits -> [0, 1) exactly representable in double; the same on every platform.
  const auto coordinate = [&rng] {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    return static_cast<float>(-kPeaksHalfWidth + 2.0 * kPeaksHalfWidth * u);
  };
  PeaksSet s;
  s.points.resize(static_cast<std::size_t>(2 * n));
  s.labels.resize(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < s.labels.size(); ++i) {
    const float x = coordinate();
    const float y = coordinate();
    s.points[2 * i] = x;
    s.points[2 * i + 1] = y;
    s.labels[i] = peaks_class(x, y);
  }
  return s;
}

}  // namespace weft::data
