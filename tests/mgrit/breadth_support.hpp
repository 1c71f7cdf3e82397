#pragma once
// Helpers of the breadth tests: an observer that records the final fine-grid values, a gather of
// the whole solution on every rank, and comparisons of solutions and residual histories.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <map>
#include <utility>
#include <vector>

#include "expect.hpp"
#include "weft/mgrit/solver.hpp"

namespace weft::mgrit::breadth {

using Solution = std::vector<std::vector<double>>;  // [fine index][component]

inline std::vector<double> values(double u) {
  return {u};
}
inline std::vector<double> values(const std::vector<double>& u) {
  return u;
}
template <std::size_t N>
std::vector<double> values(const std::array<double, N>& u) {
  return {u.begin(), u.end()};
}

/// Adds an observer that records the final fine-grid values on this rank.
template <class Base>
struct Recorded : Base {
  using Base::Base;
  explicit Recorded(Base base) : Base(std::move(base)) {}
  std::map<index_t, std::vector<double>> seen;
  void observe(const typename Base::State& u, double, index_t index) { seen[index] = values(u); }
};

/// Every rank gets the whole fine solution (each point is observed exactly once, on its owner).
inline Solution gather(const std::map<index_t, std::vector<double>>& seen, index_t points,
                       MPI_Comm comm) {
  std::size_t width = seen.empty() ? 0 : seen.begin()->second.size();
  unsigned long long w = width, wmax = 0;
  MPI_Allreduce(&w, &wmax, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm);
  width = static_cast<std::size_t>(wmax);
  std::vector<double> local(static_cast<std::size_t>(points) * width, 0.0);
  std::vector<double> mask(static_cast<std::size_t>(points), 0.0);
  for (const auto& [i, v] : seen) {
    std::copy(v.begin(), v.end(),
              local.begin() + static_cast<long>(static_cast<std::size_t>(i) * width));
    mask[static_cast<std::size_t>(i)] = 1.0;
  }
  std::vector<double> all(local.size()), count(mask.size());
  MPI_Allreduce(local.data(), all.data(), static_cast<int>(all.size()), MPI_DOUBLE, MPI_SUM, comm);
  MPI_Allreduce(mask.data(), count.data(), static_cast<int>(count.size()), MPI_DOUBLE, MPI_SUM,
                comm);
  Solution out(static_cast<std::size_t>(points));
  for (std::size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(count[i], 1.0) << "point " << i << " observed " << count[i] << " times";
    out[i].assign(all.begin() + static_cast<long>(i * width),
                  all.begin() + static_cast<long>((i + 1) * width));
  }
  return out;
}

/// max |a - b| / max |b| over all points and components.
inline double max_relative_difference(const Solution& a, const Solution& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t c = 0; c < a[i].size(); ++c) {
      diff = std::max(diff, std::abs(a[i][c] - b[i][c]));
      scale = std::max(scale, std::abs(b[i][c]));
    }
  return diff / scale;
}

/// Solves with a Recorded<App> made by `make` and returns the gathered solution.
template <class App, class Make>
Solution solve_and_gather(Make make, const TimeGrid& grid, const Options& options, MPI_Comm comm,
                          Result* result = nullptr, Statistics* stats = nullptr) {
  Recorded<App> app(make());
  Solver<Recorded<App>> solver(app, comm, grid, options);
  const Result r = solver.solve();
  if (result) *result = r;
  if (stats) *stats = solver.statistics();
  return gather(app.seen, grid.points(), comm);
}

/// The fine sequential solution (one level, on this rank alone).
template <class App, class Make>
Solution sequential(Make make, const TimeGrid& grid) {
  return solve_and_gather<App>(make, grid, Options().max_levels(1), MPI_COMM_SELF);
}

/// Residual histories equal to `rel` (relative), entries below `floor` compared absolutely.
inline void expect_same_history(const Result& a, const Result& b, double rel, double floor = 0.0) {
  ASSERT_EQ(a.iterations, b.iterations);
  ASSERT_EQ(a.residuals.size(), b.residuals.size());
  std::vector<double> x, y;  // the residuals both histories computed
  for (std::size_t k = 0; k < a.residuals.size(); ++k) {
    ASSERT_EQ(a.residuals[k].has_value(), b.residuals[k].has_value()) << "k=" << k;
    if (!a.residuals[k]) continue;
    x.push_back(*a.residuals[k]);
    y.push_back(*b.residuals[k]);
  }
  weft::test_support::expect_same_sequence(x, y, rel, floor, "residual history");
}

/// The geometric mean of the measured convergence factors r_k/r_{k-1}.
inline double mean_factor(const Result& r) {
  double log_sum = 0;
  int n = 0;
  for (const auto& f : r.factors)
    if (f && *f > 0) {
      log_sum += std::log(*f);
      ++n;
    }
  return n ? std::exp(log_sum / n) : 0.0;
}

inline int world_size() {
  int p = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}
inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

}  // namespace weft::mgrit::breadth
