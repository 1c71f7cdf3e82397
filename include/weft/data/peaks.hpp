#pragma once
// The synthetic "peaks" problem: 5-class classification of points (x, y) in [-3, 3]^2 by the
// level sets of MATLAB's peaks function
//   p(x, y) = 3(1-x)^2 e^{-x^2-(y+1)^2} - 10(x/5 - x^3 - y^5) e^{-x^2-y^2} - e^{-(x+1)^2-y^2}/3.
// Class k holds the points with kPeaksThresholds[k-1] <= p < kPeaksThresholds[k] (the
// outer bounds being -inf and +inf).
#include <array>
#include <cstdint>
#include <vector>

namespace weft::data {

/// The 20/40/60/80% area quantiles of p over [-3, 3]^2, so that the five classes each cover
/// about a fifth of the square. Obtained once from the 4000x4000 cell-midpoint grid (16e6
/// values of p, std::nth_element), rounded to 4 decimals.
inline constexpr std::array<double, 4> kPeaksThresholds = {-0.3079, 0.0017, 0.1536, 1.3136};
inline constexpr int kPeaksClasses = 5;
inline constexpr double kPeaksHalfWidth = 3.0;  // the domain is [-3, 3]^2

/// MATLAB's peaks function.
double peaks(double x, double y);

/// The class (0..4) of the point (x, y).
std::int64_t peaks_class(double x, double y);

struct PeaksSet {
  std::vector<float> points;         // n x 2, row-major: x0, y0, x1, y1, ...
  std::vector<std::int64_t> labels;  // n
  std::int64_t count() const { return static_cast<std::int64_t>(labels.size()); }
};

/// n points uniform in [-3, 3]^2 with their classes, deterministic in `seed` on every platform
/// (std::mt19937_64 with weft's own 53-bit mapping to [0, 1), not std's distributions, whose
/// output differs between standard libraries). Labels are computed from the stored float
/// coordinates, so peaks_class(points[2i], points[2i+1]) == labels[i] exactly.
PeaksSet make_peaks(std::int64_t n, std::uint64_t seed);

}  // namespace weft::data
