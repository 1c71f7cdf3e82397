#pragma once
// Comparisons the tests share: a value against a reference at a relative tolerance, and two
// sequences (residual histories) entry by entry.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace weft::test_support {

/// |value - exact| <= rel |exact|.
inline void expect_relative(double value, double exact, double rel, const std::string& what) {
  EXPECT_LE(std::abs(value - exact), rel * std::abs(exact))
      << what << ": " << value << " vs " << exact << " (relative "
      << std::abs(value - exact) / std::abs(exact) << ")";
}

/// The same length, and entry k within rel · max(|want[k]|, floor) (entries below `floor`
/// compared absolutely).
inline void expect_same_sequence(const std::vector<double>& got, const std::vector<double>& want,
                                 double rel, double floor, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t k = 0; k < got.size(); ++k)
    EXPECT_LE(std::abs(got[k] - want[k]), rel * std::max(std::abs(want[k]), floor))
        << what << " k=" << k << ": " << got[k] << " vs " << want[k];
}

}  // namespace weft::test_support
