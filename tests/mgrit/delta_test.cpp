// Delta correction (delta.hpp) beyond XBraid's example (delta_reference_test.cpp): on a linear
// system the full-rank correction makes every coarse propagator exact, so one V-cycle solves
// the problem at any rank count; what the correction is not implemented with is refused in one
// line; a basis that is not linearly independent is reported, not divided by zero.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "weft/mgrit/delta.hpp"
#include "weft/mgrit/solver.hpp"
#include "weft/util/error.hpp"

namespace weft::mgrit {
namespace {

// u' = A u, forward Euler: a non-normal, rotating, decaying 3x3 system.
struct LinearSystem {
  using State = std::array<double, 3>;
  static constexpr double A[3][3] = {{-1.0, 2.0, 0.0}, {-2.0, -1.0, 0.5}, {0.0, 0.3, -0.5}};
  bool dependent_basis = false;

  State init(double t) const { return t == 0 ? State{1.0, -0.5, 2.0} : State{0.2, 0.1, -0.3}; }
  static void apply(const State& in, State& out, double h) {
    for (int i = 0; i < 3; ++i) {
      out[i] = in[i];
      for (int k = 0; k < 3; ++k) out[i] += h * A[i][k] * in[k];
    }
  }
  void step(const State& in, State& out, double t0, double t1, const StepInfo&) const {
    apply(in, out, t1 - t0);
  }
  void step_tangent(const State&, const State&, State& v, double t0, double t1,
                    const StepInfo&) const {
    const State in = v;
    apply(in, v, t1 - t0);
  }
  void sum(double a, const State& x, double b, State& y) const {
    for (int i = 0; i < 3; ++i) y[i] = a * x[i] + b * y[i];
  }
  double inner_product(const State& a, const State& b) const {
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
  }
  double norm(const State& u) const { return std::sqrt(inner_product(u, u)); }
  State basis_vector(double, int index) const {
    if (dependent_basis) return State{1.0, 1.0, 0.0};
    State e{};
    e[static_cast<size_t>(index)] = 1.0;
    return e;
  }
};

const index_t kSteps = 64;
const TimeGrid kGrid = TimeGrid::uniform(0.0, 2.0, kSteps);

Options xbraid_f_relaxation(int levels) {
  Options o;
  o.max_levels(levels).cfactor(2).nrelax(0).initial_phase(InitialPhase::None).abs_tol(1e-13);
  o.max_iterations(20);
  return o;
}

std::vector<LinearSystem::State> sequential() {
  LinearSystem app;
  std::vector<LinearSystem::State> u{app.init(0.0)};
  for (index_t i = 1; i <= kSteps; ++i) {
    LinearSystem::State next{};
    app.step(u.back(), next, kGrid.times()[static_cast<size_t>(i - 1)],
             kGrid.times()[static_cast<size_t>(i)], StepInfo{});
    u.push_back(next);
  }
  return u;
}

// The largest difference of the stored points from the sequential march, over all ranks.
double error(const Solver<DeltaCorrected<LinearSystem>>& solver) {
  const auto exact = sequential();
  double worst = 0;
  for (index_t i = solver.local_begin(); i < solver.local_end(); ++i)
    if (const auto* s = solver.state(i))
      for (int k = 0; k < 3; ++k)
        worst = std::max(worst, std::abs(s->u[static_cast<size_t>(k)] -
                                         exact[static_cast<size_t>(i)][static_cast<size_t>(k)]));
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

TEST(DeltaCorrection, FullRankMakesTheCoarseGridsExactOnALinearSystem) {
  for (int levels : {2, 3, 4}) {
    for (Storage storage : {Storage::All, Storage::CPoints}) {
      LinearSystem system;
      DeltaCorrected<LinearSystem> app(system, DeltaOptions{3, true});
      Options o = xbraid_f_relaxation(levels);
      o.storage(storage);
      Solver<DeltaCorrected<LinearSystem>> solver(app, MPI_COMM_WORLD, kGrid, o);
      const Result r = solver.solve();
      ASSERT_GE(r.residuals.size(), 2u) << levels << " levels";
      // One cycle: the residual left is round-off of the first one.
      EXPECT_LT(*r.residuals[1], 1e-13 * *r.residuals[0]) << levels << " levels";
      EXPECT_TRUE(r.converged);
      EXPECT_LT(error(solver), 1e-13) << levels << " levels";
    }
  }
}

TEST(DeltaCorrection, WithoutItTheSameCycleIsFarFromExact) {
  LinearSystem app;
  Solver<LinearSystem> solver(app, MPI_COMM_WORLD, kGrid, xbraid_f_relaxation(3));
  const Result r = solver.solve();
  ASSERT_GE(r.residuals.size(), 2u);
  EXPECT_GT(*r.residuals[1], 1e-4 * *r.residuals[0]);
}

// A lower rank on the linear system still converges to the sequential solution.
TEST(DeltaCorrection, LowRankConvergesToTheSequentialSolution) {
  for (bool lyapunov : {true, false}) {
    LinearSystem system;
    DeltaCorrected<LinearSystem> app(system, DeltaOptions{1, lyapunov});
    Options o = xbraid_f_relaxation(3);
    o.nrelax(1);
    Solver<DeltaCorrected<LinearSystem>> solver(app, MPI_COMM_WORLD, kGrid, o);
    const Result r = solver.solve();
    EXPECT_TRUE(r.converged) << "lyapunov " << lyapunov;
    EXPECT_LT(error(solver), 1e-12) << "lyapunov " << lyapunov;
  }
}

void expect_refused(Options o, const std::string& what) {
  LinearSystem system;
  DeltaCorrected<LinearSystem> app(system, DeltaOptions{2, true});
  try {
    Solver<DeltaCorrected<LinearSystem>> solver(app, MPI_COMM_WORLD, kGrid, o);
    ADD_FAILURE() << "accepted: " << what;
  } catch (const InvalidOption& e) {
    EXPECT_NE(std::string(e.what()).find("delta correction: not with " + what), std::string::npos)
        << e.what();
  }
}

TEST(DeltaCorrection, RefusesWhatItIsNotImplementedWith) {
  expect_refused(xbraid_f_relaxation(3).convention(Convention::PyMGRIT), "the PyMGRIT convention");
  expect_refused(xbraid_f_relaxation(3).periodic(true), "a periodic problem");
  expect_refused(xbraid_f_relaxation(3).richardson(2), "Richardson extrapolation");
  expect_refused(xbraid_f_relaxation(3).direction(Direction::Reverse), "a reverse-time solve");
  LinearSystem system;
  EXPECT_THROW(DeltaCorrected<LinearSystem>(system, DeltaOptions{0, true}), InvalidOption);
}

TEST(DeltaCorrection, ReportsALinearlyDependentBasis) {
  LinearSystem system;
  system.dependent_basis = true;
  DeltaCorrected<LinearSystem> app(system, DeltaOptions{2, true});
  try {
    // Each rank alone: the error is local to the ranks whose states meet it (a front end
    // aborts the others, as for any error inside an App).
    Solver<DeltaCorrected<LinearSystem>> solver(app, MPI_COMM_SELF, kGrid, xbraid_f_relaxation(3));
    solver.solve();
    ADD_FAILURE() << "a dependent basis was accepted";
  } catch (const Divergence& e) {
    EXPECT_NE(std::string(e.what()).find("basis vector 1 is linearly dependent"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace weft::mgrit
