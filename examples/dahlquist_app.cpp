// The smallest complete weft::mgrit program: Dahlquist's equation u' = lambda*u, u(0) = 1,
// backward Euler, solved time-parallel with MGRIT on every rank of MPI_COMM_WORLD.
//
//   mpirun -np 4 ./weft_example_dahlquist
//
// The App is all the user writes (see include/weft/mgrit/app.hpp and docs/mgrit.md): the state
// type, its initial value, and one time step. With an arithmetic State (double) the solver
// supplies sum, norm, copy and the MPI buffers itself; `observe` is optional and receives the
// final fine-grid values on the rank that owns them.
#include <mpi.h>

#include <cmath>
#include <cstdio>

#include "weft/mgrit/solver.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace mgrit = weft::mgrit;

struct DahlquistApp {
  using State = double;

  double lambda = -1.0;
  double max_error = 0.0;  // largest |u - exact| seen by observe() on this rank

  // u(t0) at the first point; the initial guess everywhere else.
  State init(double t) const { return t == 0.0 ? 1.0 : 0.0; }

  // out = Phi(in): one backward Euler step from t0 to t1.
  void step(const State& in, State& out, double t0, double t1, const mgrit::StepInfo&) const {
    out = in / (1.0 - lambda * (t1 - t0));
  }

  // Optional: the final fine-grid values, once per point, on the rank that owns the point.
  void observe(const State& u, double t, mgrit::index_t index) {
    const double h = 5.0 / 100;  // the grid below
    const double exact = std::pow(1.0 / (1.0 - lambda * h), static_cast<double>(index));
    max_error = std::fmax(max_error, std::fabs(u - exact));
    (void)t;
  }
};

int main(int argc, char** argv) {
  weft::mpi::Environment env(&argc, &argv);
  const int rank = weft::mpi::rank(MPI_COMM_WORLD);
  try {
    DahlquistApp app;
    const auto grid = mgrit::TimeGrid::uniform(0.0, 5.0, 100);
    const auto options = mgrit::Options()
                             .max_levels(3)
                             .cfactor(2)
                             .nrelax(1)  // FCF relaxation
                             .abs_tol(1e-10)
                             .convention(mgrit::Convention::PyMGRIT);
    mgrit::Solver<DahlquistApp> solver(app, MPI_COMM_WORLD, grid, options);
    const mgrit::Result result = solver.solve();

    // Every rank compared its own points with the sequential solution; combine.
    double error = 0.0;
    MPI_Reduce(&app.max_error, &error, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      for (std::size_t k = 0; k < result.residuals.size(); ++k)
        if (result.residuals[k])
          std::printf("iteration %zu  residual %.6e\n", k, *result.residuals[k]);
      std::printf("%s after %d iterations; max |u - sequential| = %.3e\n",
                  result.converged ? "converged" : "not converged", result.iterations, error);
    }
    return result.converged ? 0 : 1;
  } catch (const weft::Error& e) {
    if (rank == 0) std::fprintf(stderr, "dahlquist_app: %s\n", e.what());
    return 1;
  }
}
