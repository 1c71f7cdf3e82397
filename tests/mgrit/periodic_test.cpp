// Time-periodic solves (Options::periodic): the solver converges to the discrete periodic
// solution at every point, in every configuration a periodic solve allows, at every rank count;
// and refuses the ones it does not allow, in one line naming the option.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <string>
#include <vector>

#include "solver_points.hpp"
#include "weft/mgrit/solver.hpp"

namespace weft::mgrit {
namespace {

// u' = -u + cos(2 pi t) with backward Euler: its period-1 solution is not constant, so a
// solver that mistreats the wrap step (from t_{N-1} to t_N, into point 0) lands elsewhere.
struct Forced {
  using State = double;
  State init(double t) const { return t == 0 ? 1.0 : 0.3; }
  void step(const State& in, State& out, double t0, double t1, const StepInfo& info) {
    out = (in + (t1 - t0) * std::cos(2 * M_PI * t1)) / (1 + (t1 - t0));
    if (info.level == 0 && t1 == 1.0) {
      wrap_from = info.from;
      wrap_to = info.to;
    }
  }
  index_t wrap_from = -1, wrap_to = -1;  ///< the last fine step that ended at t = 1
};

// The sequential periodic solution: the N steps are an affine map u -> s u + q of point 0, whose
// fixed point is point 0; the other points follow by marching.
std::vector<double> periodic_solution(const TimeGrid& grid) {
  Forced app;
  const index_t n = grid.intervals();
  auto march = [&](double u, std::vector<double>* points) {
    for (index_t i = 0; i < n; ++i) {
      if (points) points->push_back(u);
      double out = 0;
      app.step(u, out, grid.times()[static_cast<size_t>(i)],
               grid.times()[static_cast<size_t>(i + 1)], StepInfo{});
      u = out;
    }
    return u;
  };
  const double q = march(0.0, nullptr), s = march(1.0, nullptr) - q;
  std::vector<double> points;
  march(q / (1 - s), &points);
  return points;
}

int world_ranks() {
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  return ranks;
}

// Every stored point against the sequential periodic solution; the largest error over all ranks.
double max_error(Solver<Forced>& solver, const std::vector<double>& exact) {
  return test::max_stored_error(solver, exact);
}

TEST(SolverPeriodic, ConvergesToTheDiscretePeriodicSolutionInEveryConfiguration) {
  const TimeGrid grid = TimeGrid::uniform(0.0, 1.0, 64);
  const std::vector<double> exact = periodic_solution(grid);
  const int ranks = world_ranks();
  struct Case {
    std::string name;
    Options options;
  };
  auto base = [] { return Options().periodic(true).max_levels(4).min_coarse(2).abs_tol(1e-12); };
  std::vector<Case> cases = {
      {"xbraid V", base()},
      {"xbraid F, cf 4, 2 sweeps", base().cycle(Cycle::F).cfactor(4).nrelax(2)},
      {"skip phase", base().initial_phase(InitialPhase::Skip)},
      {"relax-only coarsest", base().relax_only_coarsest(true).nrelax_coarsest(3)},
      {"weighted C-relaxation", base().cweight(1.3)},
      {"C-point storage", base().storage(Storage::CPoints)},
      {"pymgrit", base().convention(Convention::PyMGRIT)},
      {"two levels", base().max_levels(2).nrelax(2)},
  };
  if (ranks > 1) {
    // Rank 0 empty: point 0 and the ring's first link on rank 1.
    std::vector<index_t> blocks(static_cast<size_t>(ranks), 0);
    for (int r = 2; r < ranks; ++r) blocks[static_cast<size_t>(r)] = 30 + 10 * (r - 2);
    cases.push_back({"rank 0 empty", base().rank_blocks(blocks)});
  }
  for (const Case& c : cases) {
    Forced app;
    Solver<Forced> solver(app, MPI_COMM_WORLD, grid, c.options);
    const Result r = solver.solve();
    EXPECT_TRUE(r.converged) << c.name;
    EXPECT_LT(max_error(solver, exact), 1e-10) << c.name;
  }
}

// The wrap step goes from point N - 1 to point N (point 0's image, at t1): the App sees the
// period's end. Only the owner of point 0 takes it on the fine level (C-relaxing point 0).
TEST(SolverPeriodic, TheWrapStepGoesFromTheLastPointToTheEndOfThePeriod) {
  const TimeGrid grid = TimeGrid::uniform(0.0, 1.0, 16);
  Forced app;
  Solver<Forced> solver(app, MPI_COMM_WORLD, grid,
                        Options().periodic(true).max_levels(2).min_coarse(2).max_iterations(2));
  solver.solve();
  if (solver.local_begin() == 0) {
    EXPECT_EQ(app.wrap_from, 15);
    EXPECT_EQ(app.wrap_to, 16);
  } else {
    EXPECT_EQ(app.wrap_to, -1);
  }
}

TEST(SolverPeriodic, WarmStartKeepsPointZero) {
  const TimeGrid grid = TimeGrid::uniform(0.0, 1.0, 64);
  const std::vector<double> exact = periodic_solution(grid);
  Forced app;
  Solver<Forced> solver(app, MPI_COMM_WORLD, grid,
                        Options()
                            .periodic(true)
                            .max_levels(3)
                            .abs_tol(1e-12)
                            .initial_phase(InitialPhase::None)
                            .warm_start(true));
  solver.solve();
  const Result again = solver.solve();
  EXPECT_EQ(again.iterations, 1);  // already converged, point 0 included
  EXPECT_LT(max_error(solver, exact), 1e-10);
}

std::string refusal(const TimeGrid& grid, const Options& o) {
  try {
    Forced app;
    Solver<Forced> solver(app, MPI_COMM_WORLD, grid, o);
    return "";
  } catch (const InvalidOption& e) {
    return e.what();
  }
}

TEST(SolverPeriodic, RefusesWhatAPeriodicSolveCannotDo) {
  const TimeGrid grid = TimeGrid::uniform(0.0, 1.0, 64);
  const Options p = Options().periodic(true).max_levels(3);
  struct Case {
    std::string name;
    TimeGrid grid;
    Options options;
    std::string mentions;
  };
  const std::vector<Case> cases = {
      {"sequential guess", grid, Options(p).initial_guess(InitialGuess::Sequential),
       "not with the sequential initial guess"},
      {"reverse", grid, Options(p).direction(Direction::Reverse), "forward solves only"},
      {"one level", grid, Options(p).max_levels(1), "needs max_levels >= 2"},
      {"richardson", grid, Options(p).richardson(2), "not with richardson"},
      {"not divisible", TimeGrid::uniform(0.0, 1.0, 30), Options(p).cfactor(4),
       "intervals divisible by its coarsening factor: level 0 has 30, cf 4"},
      {"too short", TimeGrid::uniform(0.0, 1.0, 8), Options(p).min_coarse(8),
       "needs two or more levels: 8 steps give one with min_coarse 8"},
  };
  for (const Case& c : cases) {
    const std::string what = refusal(c.grid, c.options);
    EXPECT_NE(what.find("periodic"), std::string::npos) << c.name << ": " << what;
    EXPECT_NE(what.find(c.mentions), std::string::npos) << c.name << ": " << what;
  }
  try {
    Forced app;
    Solver<Forced> solver(app, MPI_COMM_WORLD, grid, {{0, 4, 8, 16, 32, 64}}, p);
    ADD_FAILURE() << "explicit levels accepted";
  } catch (const InvalidOption& e) {
    EXPECT_NE(std::string(e.what()).find("needs uniform coarsening"), std::string::npos);
  }
}

}  // namespace
}  // namespace weft::mgrit
