// Temporal refinement (Options::refinement): after refinements the solver converges to the
// sequential solution on the refined grid in every configuration refinement allows, at every
// rank count; the limits stop it; and what it cannot do is refused in one line naming the
// option. (XBraid's own histories: refinement_reference_test.cpp.)
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "solver_points.hpp"
#include "weft/mgrit/problems/dahlquist.hpp"
#include "weft/mgrit/solver.hpp"

namespace weft::mgrit {
namespace {

// u' = -u + cos(2 pi t) with backward Euler. In iteration k of `windows`, the steps of the
// original grid (length 1/32) ending in the window (a, b] ask to be split in `factor`; all
// others in 1, so a repeated cycle does not refine again.
struct Forced {
  using State = double;
  std::map<int, std::pair<double, double>> windows{{1, {0.25, 0.5}}};
  int factor = 3;

  State init(double t) const { return t == 0 ? 1.0 : 0.3; }
  void step(const State& in, State& out, double t0, double t1, const StepInfo&) const {
    out = (in + (t1 - t0) * std::cos(2 * M_PI * t1)) / (1 + (t1 - t0));
  }
  int refine_factor(const State&, double t0, double t1, const StepInfo& info) const {
    const auto w = windows.find(info.iteration);
    if (w == windows.end() || t1 - t0 < 1.0 / 33) return 1;
    return t1 > w->second.first && t1 <= w->second.second ? factor : 1;
  }
};

// The largest difference, over all ranks, between the stored points and a sequential march on
// the solver's (refined) grid.
double error_against_sequential(Solver<Forced>& solver) {
  const TimeGrid grid = solver.fine_grid();
  Forced app;
  std::vector<double> exact{1.0};
  for (index_t i = 1; i <= grid.intervals(); ++i) {
    double out = 0;
    app.step(exact.back(), out, grid.times()[static_cast<size_t>(i - 1)],
             grid.times()[static_cast<size_t>(i)], StepInfo{});
    exact.push_back(out);
  }
  return test::max_stored_error(solver, exact);
}

Options base() {
  return Options().refinement(true).max_levels(4).min_coarse(2).abs_tol(1e-12).max_iterations(40);
}

TEST(SolverRefinement, ConvergesToTheSequentialSolutionOnTheRefinedGrid) {
  using Windows = std::map<int, std::pair<double, double>>;
  struct Case {
    std::string name;
    Options options;
    Windows windows;
    index_t intervals;  ///< 32 steps; 8 of them in each window, split in 3
    int factor = 3;
  };
  const Windows second{{1, {0.25, 0.5}}};
  const std::vector<Case> cases = {
      {"xbraid V", base(), second, 48},
      {"xbraid F, cf 4, 2 sweeps", base().cycle(Cycle::F).cfactor(4).nrelax(2), second, 48},
      {"C-point storage", base().storage(Storage::CPoints), second, 48},
      {"F-relaxation", base().nrelax(0), second, 48},
      {"twice", base(), {{1, {0.25, 0.5}}, {3, {0.5, 0.75}}}, 64},
      // The skip phase steps no fine point, so the App can ask only from iteration 1 on.
      {"skip phase", base().initial_phase(InitialPhase::Skip), {{1, {0.0, 0.25}}}, 48},
      // One step becomes 24: at 3-4 ranks whole blocks of the new grid lie inside it, their
      // values chained from the rank before.
      {"one step split across ranks", base(), {{1, {0.25, 0.28125}}}, 55, 24},
      {"pymgrit", base().convention(Convention::PyMGRIT), {{2, {0.75, 1.0}}}, 48},
      {"pymgrit, C-point storage",
       base().convention(Convention::PyMGRIT).storage(Storage::CPoints),
       {{0, {0.0, 0.25}}},
       48},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Forced app;
    app.windows = c.windows;
    app.factor = c.factor;
    Solver<Forced> solver(app, MPI_COMM_WORLD, TimeGrid::uniform(0.0, 1.0, 32), c.options);
    const Result r = solver.solve();
    EXPECT_TRUE(r.converged);
    EXPECT_EQ(r.intervals, c.intervals);
    EXPECT_EQ(solver.fine_grid().intervals(), c.intervals);
    EXPECT_EQ(solver.statistics().intervals_per_level.front(), c.intervals);
    EXPECT_FALSE(r.refinements.empty());
    for (const Refinement& f : r.refinements) EXPECT_GT(f.intervals_after, f.intervals_before);
    EXPECT_LT(error_against_sequential(solver), 1e-10);
  }
}

// Each split step becomes `factor` equal steps; the others stay.
TEST(SolverRefinement, SplitsTheAskedStepsUniformly) {
  Forced app;
  Solver<Forced> solver(app, MPI_COMM_WORLD, TimeGrid::uniform(0.0, 1.0, 32), base());
  const Result r = solver.solve();
  ASSERT_EQ(r.refinements.size(), 1u);
  EXPECT_EQ(r.refinements[0].iteration, 1);
  EXPECT_EQ(r.refinements[0].intervals_before, 32);
  EXPECT_EQ(r.refinements[0].intervals_after, 48);
  const TimeGrid grid = solver.fine_grid();
  const auto& t = grid.times();
  for (size_t i = 1; i < t.size(); ++i) {
    const bool split = t[i] > 0.25 + 1e-12 && t[i] <= 0.5 + 1e-12;
    EXPECT_NEAR(t[i] - t[i - 1], split ? 1.0 / 96 : 1.0 / 32, 1e-14) << "step " << i;
  }
}

TEST(SolverRefinement, LimitsStopItForGood) {
  // Asks in iterations 1, 2 and 3; `error` gets the distance to the sequential solution.
  auto run = [](const Options& o, double& error) {
    Forced app;
    app.windows = {{1, {0.0, 0.25}}, {2, {0.25, 0.5}}, {3, {0.5, 0.75}}};
    Solver<Forced> solver(app, MPI_COMM_WORLD, TimeGrid::uniform(0.0, 1.0, 32), o);
    const Result r = solver.solve();
    error = error_against_sequential(solver);
    return r;
  };
  double error = 0;
  // Checked at the top of every cycle: the one repeated after the second refinement stops it.
  const Result two = run(base().max_refinements(2), error);
  ASSERT_EQ(two.refinements.size(), 2u);
  EXPECT_EQ(two.refinements[0].iteration, 1);
  EXPECT_EQ(two.refinements[1].iteration, 2);
  EXPECT_EQ(two.refinement_stopped, std::optional<int>(2));
  EXPECT_EQ(two.intervals, 64);
  EXPECT_LT(error, 1e-10);
  // The cutoff is checked before refining: 32 < 40 refines to 48, which stops it.
  const Result cut = run(base().refinement_cutoff(40), error);
  ASSERT_EQ(cut.refinements.size(), 1u);
  EXPECT_EQ(cut.intervals, 48);
  EXPECT_EQ(cut.refinement_stopped, std::optional<int>(1));
  EXPECT_LT(error, 1e-10);
}

TEST(SolverRefinement, RefusesWhatItCannotDo) {
  const TimeGrid grid = TimeGrid::uniform(0.0, 1.0, 32);
  auto refused = [&](const Options& o, const std::string& words) {
    Forced app;
    try {
      Solver<Forced> solver(app, MPI_COMM_WORLD, grid, o);
      ADD_FAILURE() << "accepted; expected a refusal with '" << words << "'";
    } catch (const InvalidOption& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused(base().direction(Direction::Reverse), "option refinement: forward solves only");
  refused(base().periodic(true), "option refinement: not with periodic");
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::vector<index_t> blocks;
  for (int q = 0; q < ranks; ++q) blocks.push_back(q);
  refused(base().rank_blocks(blocks), "option refinement: not with rank_blocks");
  refused(base().max_refinements(-1), "option max_refinements: -1 is invalid");
  refused(base().refinement_cutoff(0), "option refinement_cutoff: 0 is invalid");
  {
    Forced app;
    EXPECT_THROW(Solver<Forced>(app, MPI_COMM_WORLD, grid, {{0, 8, 16, 24, 32}}, base()),
                 InvalidOption);
  }
  {
    problems::Dahlquist app(-1.0, problems::Integrator::BackwardEuler, 0.0,
                            problems::InitialGuess::constant(0.5));
    try {
      Solver<problems::Dahlquist> solver(app, MPI_COMM_WORLD, grid, base());
      ADD_FAILURE() << "an App without refine_factor was accepted";
    } catch (const InvalidOption& e) {
      EXPECT_NE(std::string(e.what()).find("has no refine_factor"), std::string::npos);
    }
  }
  {
    // A factor below 1 is reported on every rank, naming the interval.
    Forced app;
    app.factor = 0;
    Solver<Forced> solver(app, MPI_COMM_WORLD, grid, base());
    try {
      solver.solve();
      ADD_FAILURE() << "a factor of 0 was accepted";
    } catch (const InvalidOption& e) {
      EXPECT_NE(std::string(e.what()).find("refine_factor gave 0 for the interval (8, 9]"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace weft::mgrit
