// Two PyMGRIT semantics, checked against a serial transcription of PyMGRIT's two-level V-cycle
// (DESIGN.md, "PyMGRIT conventions") at every rank count:
//  (a) C-relaxation runs left to right: of two adjacent C-points (explicit levels), the second
//      steps from the freshly relaxed first, whichever ranks own them;
//  (b) with spatial transfers, the nested phase starts each coarse level from the App's
//      initial value on that level (App::init(t, level)), not from the restricted fine one.
// The XBraid convention keeps its own order (intervals from the right) and is rank-independent.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <optional>
#include <vector>

#include "weft/mgrit/solver.hpp"

namespace weft::mgrit {
namespace {

constexpr double kLambda = 1.0;

double decay(double u, double t0, double t1) {
  return u / (1.0 + kLambda * (t1 - t0));  // backward Euler for u' = -lambda u
}

// u' = -lambda u, u(0) = 1, zero guess elsewhere.
struct Decay {
  using State = double;
  double init(double t) const { return t == 0.0 ? 1.0 : 0.0; }
  void step(const double& in, double& out, double t0, double t1, const StepInfo&) const {
    out = decay(in, t0, t1);
  }
};

// The same with (identity) spatial transfers and a coarse-level initial value of 2, so that the
// App's value on the coarse level and the restricted fine one (1) can be told apart.
struct DecayWithLevels : Decay {
  static constexpr double kCoarseStart = 2.0;
  double init(double t) const { return Decay::init(t); }
  double init(double t, int level) const { return level == 0 ? init(t) : kCoarseStart; }
  void coarsen(const double& fine, double& coarse, int) const { coarse = fine; }
  void refine(const double& coarse, double& fine, int) const { fine = coarse; }
};

// PyMGRIT's two-level V-cycle on fine times `t` with C-points `cpoints` (fine indices), as
// DESIGN.md states it: F-relaxation (first iteration), C- then F-relaxation with C-points
// relaxed left to right, FAS restriction by injection, sequential coarse solve, correction,
// F-relaxation; the residual over the fine C-points i > 0 after each cycle.
std::vector<double> pymgrit_two_levels(const std::vector<double>& t,
                                       const std::vector<index_t>& cpoints, int iterations,
                                       std::optional<double> nested_coarse_start) {
  const size_t n = t.size(), m = cpoints.size();
  std::vector<bool> is_c(n, false);
  for (index_t c : cpoints) is_c[static_cast<size_t>(c)] = true;
  std::vector<double> u(n, 0.0), v(m), g(m), uc(m);
  u[0] = 1.0;
  auto relax = [&](bool c_points) {
    for (size_t i = 1; i < n; ++i)
      if (is_c[i] == c_points) u[i] = decay(u[i - 1], t[i - 1], t[i]);
  };
  auto tc = [&](size_t j) { return t[static_cast<size_t>(cpoints[j])]; };
  auto uat = [&](size_t j) -> double& { return u[static_cast<size_t>(cpoints[j])]; };
  if (nested_coarse_start) {
    uc[0] = *nested_coarse_start;
    for (size_t j = 1; j < m; ++j) uat(j) = uc[j] = decay(uc[j - 1], tc(j - 1), tc(j));
  }
  std::vector<double> residuals;
  for (int k = 0; k < iterations; ++k) {
    if (k == 0) relax(false);
    relax(true);
    relax(false);
    for (size_t j = 0; j < m; ++j) v[j] = uat(j);
    for (size_t j = 1; j < m; ++j) {
      const size_t c = static_cast<size_t>(cpoints[j]);
      g[j] = decay(u[c - 1], t[c - 1], t[c]) - u[c] + v[j] - decay(v[j - 1], tc(j - 1), tc(j));
    }
    uc[0] = v[0];
    for (size_t j = 1; j < m; ++j) uc[j] = g[j] + decay(uc[j - 1], tc(j - 1), tc(j));
    for (size_t j = 1; j < m; ++j) uat(j) += uc[j] - v[j];
    relax(false);
    double sum = 0;
    for (size_t j = 1; j < m; ++j) {
      const size_t c = static_cast<size_t>(cpoints[j]);
      const double r = decay(u[c - 1], t[c - 1], t[c]) - u[c];
      sum += r * r;
    }
    residuals.push_back(std::sqrt(sum));
  }
  return residuals;
}

std::vector<double> residuals_of(const Result& r) {
  std::vector<double> out;
  for (const auto& value : r.residuals) out.push_back(value.value_or(-1.0));
  return out;
}

void expect_same(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k)
    EXPECT_NEAR(got[k], want[k], 1e-12 * std::abs(want[k]) + 1e-300) << "iteration " << k;
}

const TimeGrid kGrid = TimeGrid::uniform(0.0, 4.0, 16);
// A run of adjacent C-points from 0 to 6 that crosses every rank boundary at 2-4 ranks.
const std::vector<index_t> kAdjacent = {0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 14, 16};

Options two_levels(Convention convention) {
  return Options().convention(convention).max_levels(2).max_iterations(3).abs_tol(0.0);
}

TEST(PyMGRIT, AdjacentCPointsRelaxLeftToRightWithTheFreshValue) {
  Decay app;
  const std::vector<std::vector<index_t>> levels = {kAdjacent};
  Solver<Decay> solver(app, MPI_COMM_WORLD, kGrid, levels,
                       two_levels(Convention::PyMGRIT).initial_phase(InitialPhase::None));
  expect_same(residuals_of(solver.solve()),
              pymgrit_two_levels(kGrid.times(), kAdjacent, 3, std::nullopt));
}

TEST(PyMGRIT, NestedPhaseStartsTheCoarseLevelFromTheAppsValueThere) {
  DecayWithLevels app;
  Solver<DecayWithLevels> solver(app, MPI_COMM_WORLD, kGrid, two_levels(Convention::PyMGRIT));
  std::vector<index_t> every_other;
  for (index_t i = 0; i <= 16; i += 2) every_other.push_back(i);
  expect_same(residuals_of(solver.solve()),
              pymgrit_two_levels(kGrid.times(), every_other, 3, DecayWithLevels::kCoarseStart));
}

// XBraid relaxes intervals from the right (adjacent C-points from old values) and restricts
// the fine initial value; either way the answer does not depend on the rank count.
TEST(XBraid, AdjacentCPointsGiveTheSameResidualsAtEveryRankCount) {
  Decay app;
  const std::vector<std::vector<index_t>> levels = {kAdjacent};
  const Options o = two_levels(Convention::XBraid).initial_phase(InitialPhase::Nested);
  const auto parallel = residuals_of(Solver<Decay>(app, MPI_COMM_WORLD, kGrid, levels, o).solve());
  const auto serial = residuals_of(Solver<Decay>(app, MPI_COMM_SELF, kGrid, levels, o).solve());
  expect_same(parallel, serial);
  DecayWithLevels with_levels;
  const auto restricted =
      residuals_of(Solver<DecayWithLevels>(with_levels, MPI_COMM_SELF, kGrid, levels, o).solve());
  expect_same(restricted, serial);  // XBraid ignores App::init(t, level)
}

}  // namespace
}  // namespace weft::mgrit
