// Temporal refinement against XBraid's ex-06 `-refinet` (XBraid 52178c8, the same histories at
// 1-4 ranks): u' = -4u - t + 1 on [0, 0.5], 19 steps, 100 levels down to 8 points, cf 2, FCF,
// skip 0, `-max_tpts 400 -mi 9`; error estimates of order 2 (backward Euler), and the App splits
// in two the steps whose estimate exceeds a fraction of the largest, from iteration 2 on
// (ex-06: 0.02; a copy of ex-06 with the fraction 0.5 gave the non-uniform case). XBraid prints
// a refined cycle's residual, then the same iteration again on the new grid; the references
// are braid.out.cycle's 16 digits, compared to 1e-9.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <vector>

#include "weft/mgrit/problems/linear.hpp"
#include "weft/mgrit/solver.hpp"

namespace weft::mgrit {
namespace {

using problems::InitialGuess;
using problems::LinearOde;

struct RefinedRun {
  Result result;
  TimeGrid grid = TimeGrid::uniform(0, 1, 1);
  double final_error = 0;
  Statistics stats;
};

RefinedRun ex06_refined(double fraction, Storage storage = Storage::All, index_t cutoff = 400) {
  LinearOde app(LinearOde::Parameters{-4.0, -1.0, 1.0, 1.0},
                problems::LevelList<LinearOde::Method>{LinearOde::Method::BackwardEuler}, 0.0,
                InitialGuess::constant(0.456));
  app.refine_fraction(fraction);
  Options o;
  o.max_levels(100).min_coarse(8).cfactor(2).initial_phase(InitialPhase::None);
  o.abs_tol(1e-12 / std::sqrt(0.5 / 255)).max_iterations(9).storage(storage);
  o.error_estimates(2).refinement(true).refinement_cutoff(cutoff);
  Solver<LinearOde> solver(app, MPI_COMM_WORLD, TimeGrid::uniform(0.0, 0.5, 19), o);
  RefinedRun run;
  run.result = solver.solve();
  run.grid = solver.fine_grid();
  run.stats = solver.statistics();
  double error = -1;
  if (const double* u = solver.state(run.grid.intervals())) error = std::abs(*u - app.exact(0.5));
  MPI_Allreduce(&error, &run.final_error, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return run;
}

struct Cycle {
  int iteration;
  index_t intervals;
  double residual;
  bool refined;  ///< the grid was refined after this cycle
};

// Every cycle in order: each iteration's refined cycles (Result::refinements), then its last.
void expect_cycles(const Result& r, const std::vector<Cycle>& cycles) {
  std::vector<Cycle> seen;
  index_t intervals = 19;
  size_t f = 0;
  for (int k = 0; k < r.iterations; ++k) {
    for (; f < r.refinements.size() && r.refinements[f].iteration == k; ++f) {
      const Refinement& refinement = r.refinements[f];
      EXPECT_EQ(refinement.intervals_before, intervals);
      ASSERT_TRUE(refinement.residual);
      seen.push_back({k, intervals, *refinement.residual, true});
      intervals = refinement.intervals_after;
    }
    ASSERT_TRUE(r.residuals[static_cast<size_t>(k)]);
    seen.push_back({k, intervals, *r.residuals[static_cast<size_t>(k)], false});
  }
  EXPECT_EQ(f, r.refinements.size());
  ASSERT_EQ(seen.size(), cycles.size());
  for (size_t i = 0; i < cycles.size(); ++i) {
    EXPECT_EQ(seen[i].iteration, cycles[i].iteration) << "cycle " << i;
    EXPECT_EQ(seen[i].intervals, cycles[i].intervals) << "cycle " << i;
    EXPECT_EQ(seen[i].refined, cycles[i].refined) << "cycle " << i;
    EXPECT_NEAR(seen[i].residual, cycles[i].residual, 1e-9 * cycles[i].residual) << "cycle " << i;
  }
}

TEST(XBraidRefinement, Ex06RefinesEveryStepUntilTheCutoff) {
  const RefinedRun run = ex06_refined(0.02);
  expect_cycles(run.result, {{0, 19, 3.489600273499907e-01, false},
                             {1, 19, 2.783121771543617e-03, false},
                             {2, 19, 3.876263745323712e-05, true},
                             {2, 38, 3.249961733581417e-03, false},
                             {3, 38, 1.030514396631143e-04, true},
                             {3, 76, 1.291179166260404e-03, false},
                             {4, 76, 5.828230209605678e-05, true},
                             {4, 152, 4.843840190176053e-04, false},
                             {5, 152, 3.031804729615481e-05, true},
                             {5, 304, 1.764583813543388e-04, false},
                             {6, 304, 1.535581580028012e-05, true},
                             {6, 608, 6.333324847728153e-05, false},
                             {7, 608, 7.712011951831340e-06, false},
                             {8, 608, 1.762635578996885e-07, false}});
  ASSERT_TRUE(run.result.refinement_stopped);
  EXPECT_EQ(*run.result.refinement_stopped, 6);  // 608 >= 400 intervals
  EXPECT_FALSE(run.result.converged);
  EXPECT_EQ(run.result.intervals, 608);
  EXPECT_EQ(run.grid.intervals(), 608);
  EXPECT_EQ(run.stats.intervals_per_level.size(), 7u);  // XBraid: 7 levels
  for (index_t i = 0; i <= 608; ++i)
    EXPECT_NEAR(run.grid.times()[static_cast<size_t>(i)], 0.5 * static_cast<double>(i) / 608,
                1e-15);
  EXPECT_NEAR(run.final_error, 3.0588851761120806e-04, 1e-12);
}

// Fraction 0.5: only the steps where the error is largest are split, so the grid ends graded:
// 196 steps of h/16 from t = 0, then 54 of h/8 (h = 0.5/19), after 7 refinements; the last
// one follows iteration 8's first cycle, so iteration 8 runs twice and the run ends there.
TEST(XBraidRefinement, Ex06RefinesWhereTheEstimateIsLargest) {
  const RefinedRun run = ex06_refined(0.5);
  expect_cycles(run.result, {{0, 19, 3.489600273499907e-01, false},
                             {1, 19, 2.783121771543617e-03, false},
                             {2, 19, 3.876263745323712e-05, true},
                             {2, 27, 2.929584183650181e-03, false},
                             {3, 27, 5.932110090137173e-05, true},
                             {3, 41, 1.561224521857263e-03, false},
                             {4, 41, 3.217453677964919e-05, true},
                             {4, 58, 9.099935246878342e-04, false},
                             {5, 58, 3.003269387012359e-05, true},
                             {5, 90, 5.543853528438508e-04, false},
                             {6, 90, 2.536529646302929e-05, true},
                             {6, 122, 2.910730468031123e-04, false},
                             {7, 122, 1.374026164829965e-05, true},
                             {7, 194, 1.955310490519432e-04, false},
                             {8, 194, 1.248553245437661e-05, true},
                             {8, 250, 8.843357299539751e-05, false}});
  EXPECT_FALSE(run.result.refinement_stopped);
  EXPECT_EQ(run.stats.intervals_per_level.size(), 5u);  // XBraid: 5 levels
  const double h = 0.5 / 19;
  ASSERT_EQ(run.grid.intervals(), 250);
  for (index_t i = 1; i <= 250; ++i) {
    const double dt =
        run.grid.times()[static_cast<size_t>(i)] - run.grid.times()[static_cast<size_t>(i - 1)];
    EXPECT_NEAR(dt, i <= 196 ? h / 16 : h / 8, 1e-14) << "step " << i;
  }
  EXPECT_NEAR(run.final_error, 8.1449919538206794e-04, 1e-12);
}

// C-point storage keeps F-points only inside sweeps; the refinement copies them out as its
// F-relaxation walks them, so the run is the same.
TEST(XBraidRefinement, CPointStorageRefinesTheSame) {
  const RefinedRun all = ex06_refined(0.5);
  const RefinedRun cpoints = ex06_refined(0.5, Storage::CPoints);
  ASSERT_EQ(all.result.residuals.size(), cpoints.result.residuals.size());
  for (size_t k = 0; k < all.result.residuals.size(); ++k)
    EXPECT_NEAR(*cpoints.result.residuals[k], *all.result.residuals[k],
                1e-12 * *all.result.residuals[k]);
  EXPECT_EQ(cpoints.grid.times(), all.grid.times());
  EXPECT_NEAR(cpoints.final_error, all.final_error, 1e-15);
}

}  // namespace
}  // namespace weft::mgrit
