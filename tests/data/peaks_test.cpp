#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "weft/data/peaks.hpp"
#include "weft/util/error.hpp"

namespace {

using weft::data::make_peaks;

TEST(Peaks, FunctionValues) {
  // p(0, 0) = 3/e - 1/(3e); MATLAB's peaks(0, 0) prints 0.9810.
  EXPECT_NEAR(weft::data::peaks(0.0, 0.0), 8.0 / (3.0 * std::exp(1.0)), 1e-15);
  // Known extrema of peaks: max about 8.1 near (-0.0093, 1.58), min about -6.55 near
  // (0.228, -1.626).
  EXPECT_NEAR(weft::data::peaks(-0.0093, 1.5814), 8.1062, 1e-3);
  EXPECT_NEAR(weft::data::peaks(0.2283, -1.6255), -6.5511, 1e-3);
}

TEST(Peaks, ClassesFollowThresholds) {
  const auto& t = weft::data::kPeaksThresholds;
  for (std::size_t i = 1; i < t.size(); ++i) EXPECT_LT(t[i - 1], t[i]);
  EXPECT_EQ(weft::data::peaks_class(-0.0093, 1.5814), 4);  // the maximum
  EXPECT_EQ(weft::data::peaks_class(0.2283, -1.6255), 0);  // the minimum
}

TEST(Peaks, DeterministicBySeed) {
  const auto a = make_peaks(1000, 42);
  const auto b = make_peaks(1000, 42);
  const auto c = make_peaks(1000, 43);
  EXPECT_EQ(a.points, b.points);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(a.points, c.points);
  // A shorter set is a prefix of a longer one with the same seed.
  const auto d = make_peaks(10, 42);
  EXPECT_TRUE(std::equal(d.points.begin(), d.points.end(), a.points.begin()));
  EXPECT_EQ(make_peaks(0, 1).count(), 0);
  EXPECT_THROW(make_peaks(-1, 1), weft::InvalidOption);
}

TEST(Peaks, LabelsConsistentWithFunction) {
  const auto s = make_peaks(20000, 7);
  ASSERT_EQ(s.count(), 20000);
  ASSERT_EQ(s.points.size(), 40000u);
  const auto& t = weft::data::kPeaksThresholds;
  for (std::size_t i = 0; i < s.labels.size(); ++i) {
    const double x = s.points[2 * i], y = s.points[2 * i + 1];
    ASSERT_GE(x, -3.0);
    ASSERT_LE(x, 3.0);
    ASSERT_GE(y, -3.0);
    ASSERT_LE(y, 3.0);
    const std::int64_t k = s.labels[i];
    ASSERT_GE(k, 0);
    ASSERT_LT(k, weft::data::kPeaksClasses);
    const double p = weft::data::peaks(x, y);
    if (k > 0) {
      ASSERT_GE(p, t[static_cast<std::size_t>(k - 1)]) << i;
    }
    if (k < 4) {
      ASSERT_LT(p, t[static_cast<std::size_t>(k)]) << i;
    }
  }
}

TEST(Peaks, ClassesRoughlyBalanced) {
  const auto s = make_peaks(20000, 2024);
  std::vector<std::int64_t> n(weft::data::kPeaksClasses, 0);
  for (auto k : s.labels) ++n.at(static_cast<std::size_t>(k));
  for (std::size_t k = 0; k < n.size(); ++k) {
    EXPECT_GE(n[k], 2000) << "class " << k;  // 10%
    EXPECT_LE(n[k], 6000) << "class " << k;  // 30%
  }
}

}  // namespace
