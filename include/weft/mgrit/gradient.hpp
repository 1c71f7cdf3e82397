#pragma once
// Gradients through a time-parallel solve: the discrete adjoint by a reverse-time MGRIT solve.
//
// For the objective J = 1/2 ||u_N||^2 (||.|| the App's norm, which must be the Euclidean norm
// of the state for dJ/du_N = u_N to hold) and a scalar parameter p of the step u_{n+1} =
// Phi_n(u_n; p), the discrete adjoint is
//   lambda_N = u_N,   lambda_n = (d Phi_n / d u)(u_n)^T lambda_{n+1},
//   dJ/dp = sum_{n=0}^{N-1} lambda_{n+1}^T (d Phi_n / d p)(u_n),
// exactly the derivative of the discrete solution (u_0 does not depend on p).
//
// A *gradient App* is an App (app.hpp) with two more members:
//   void step_adjoint(const State& adj_in, State& adj_out, const State& u, double t0, double t1,
//                     const StepInfo& info);
//       adj_out = (d Phi / d u)^T adj_in for the forward step from t0 to t1 (t0 < t1) on level
//       info.level (coarse levels: the coarse step, h = t1 - t0), at u = the forward state at t0
//       on the *fine* spatial grid (a linear step ignores it; a nonlinear step with spatial
//       coarsening must restrict it itself). info describes the forward step (from < to).
//   double step_parameter(const State& adj, const State& u, double t0, double t1,
//                         const StepInfo& info);
//       adj^T (d Phi / d p)(u) for the fine step from t0 to t1 (only ever called on level 0).
//
//   problems::DahlquistLevels app(-1.0, Integrator::BackwardEuler, 0.0, InitialGuess::zero());
//   GradientResult g = gradient(app, MPI_COMM_WORLD, TimeGrid::uniform(0, 2, 64),
//                               Options().max_levels(3).abs_tol(1e-13));
//   // g.objective = J, g.gradient = dJ/dlambda (the same on every rank)
//
// How: the forward Solver runs with Storage::All on level 0, so each rank keeps u_n for its
// own fine points; the adjoint Solver runs on the same ranks with Direction::Reverse, so every
// adjoint step from n+1 to n runs on the rank that owns u_n, and FinalSweep::CF, in which the
// solver steps every fine interval exactly once with StepInfo::done = true on level 0: there
// the parameter derivative is accumulated (with one level the sequential solve itself has
// done = true). J and dJ/dp are summed over the ranks.
#include <mpi.h>

#include <string>
#include <utility>

#include "weft/mgrit/app.hpp"
#include "weft/mgrit/hierarchy.hpp"
#include "weft/mgrit/options.hpp"
#include "weft/mgrit/result.hpp"
#include "weft/mgrit/solver.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace weft::mgrit {

/// The App of the adjoint solve, built on a forward App and its finished forward Solver.
/// State is the forward State; sum, norm, copy, buffers and spatial transfers are the forward
/// App's (spatial transfers default to copies).
template <class App>
class AdjointApp {
 public:
  using State = typename App::State;
  using Ops = AppOps<App>;

  /// `forward` must have solved with Storage::All on level 0 and must outlive this object.
  AdjointApp(App& app, const Solver<App>& forward, const TimeGrid& grid)
      : app_(app), forward_(forward), t_final_(grid.times().back()), last_(grid.intervals()) {}

  /// lambda_N = u_N at the final time (on the rank that owns it), zero elsewhere.
  State init(double t) {
    State s = app_.init(t);
    const State* u_final = t == t_final_ ? forward_.state(last_) : nullptr;
    if (u_final) {
      Ops::copy(app_, *u_final, s);
    } else {
      Ops::sum(app_, 0.0, s, 0.0, s);
    }
    return s;
  }

  /// Reverse step from user index info.from = n+1 down to info.to = n.
  void step(const State& in, State& out, double t0, double t1, const StepInfo& info) {
    const State* u = forward_.state(info.to);
    if (!u)
      throw BadData(mpi::where(forward_.comm()) + ": adjoint step to point " +
                    std::to_string(info.to) +
                    " has no forward state here (run the forward solve with Storage::All on "
                    "level 0, on the same communicator)");
    StepInfo fwd = info;
    fwd.from = info.to;
    fwd.to = info.from;
    fwd.direction = Direction::Forward;
    app_.step_adjoint(in, out, *u, t1, t0, fwd);
    if (info.done && info.level == 0) {
      gradient_ += app_.step_parameter(in, *u, t1, t0, fwd);
      ++accumulated_;
    }
  }

  void sum(double a, const State& x, double b, State& y) { Ops::sum(app_, a, x, b, y); }
  double norm(const State& u) { return Ops::norm(app_, u); }
  void copy(const State& src, State& dst) { Ops::copy(app_, src, dst); }
  std::size_t buffer_size(const State& like) { return Ops::buffer_size(app_, like); }
  void pack(const State& u, void* buffer) { Ops::pack(app_, u, buffer); }
  void unpack(const void* buffer, State& u) { Ops::unpack(app_, buffer, u); }
  void coarsen(const State& fine, State& coarse, int fine_level) {
    Ops::coarsen(app_, fine, coarse, fine_level);
  }
  void refine(const State& coarse, State& fine, int coarse_level) {
    Ops::refine(app_, coarse, fine, coarse_level);
  }

  /// This rank's share of dJ/dp, and the number of fine steps that contributed to it.
  double local_gradient() const { return gradient_; }
  index_t accumulated_steps() const { return accumulated_; }
  void reset() {
    gradient_ = 0;
    accumulated_ = 0;
  }

 private:
  App& app_;
  const Solver<App>& forward_;
  double t_final_;
  index_t last_;
  double gradient_ = 0;
  index_t accumulated_ = 0;
};

struct GradientResult {
  double objective = 0;  ///< J = 1/2 ||u_N||^2
  double gradient = 0;   ///< dJ/dp
  Result forward, adjoint;
  Statistics forward_statistics, adjoint_statistics;  ///< this rank's
};

/// J and dJ/dp by a forward MGRIT solve and a reverse-time MGRIT solve of the discrete adjoint
/// (collective over `comm`). `forward` is used with Storage::All on level 0; `adjoint` with
/// Direction::Reverse and FinalSweep::CF (both forced). Both must be Forward-direction options.
template <class App>
GradientResult gradient(App& app, MPI_Comm comm, const TimeGrid& grid, const Options& forward,
                        const Options& adjoint) {
  if (forward.direction() != Direction::Forward)
    throw InvalidOption(
        "gradient: the forward options have direction reverse; accepted: forward (the adjoint "
        "solve runs in reverse by itself)");
  if (adjoint.direction() != Direction::Forward)
    throw InvalidOption(
        "gradient: set the adjoint options' direction to forward; the adjoint solve is made "
        "reverse by gradient() itself");
  GradientResult out;
  Solver<App> fwd(app, comm, grid, Options(forward).storage(Storage::All, 0));
  out.forward = fwd.solve();
  out.forward_statistics = fwd.statistics();

  // Storage::All on level 0 also for the adjoint: with C-point storage the final CF sweep would
  // recompute (and so step twice, with done = true) the fine F-points in its C-sweep.
  AdjointApp<App> adj_app(app, fwd, grid);
  Solver<AdjointApp<App>> adj(adj_app, comm, grid,
                              Options(adjoint)
                                  .storage(Storage::All, 0)
                                  .direction(Direction::Reverse)
                                  .final_sweep(FinalSweep::CF));
  out.adjoint = adj.solve();
  out.adjoint_statistics = adj.statistics();

  double local[3] = {0.0, adj_app.local_gradient(),
                     static_cast<double>(adj_app.accumulated_steps())};
  if (const auto* u_final = fwd.state(grid.intervals())) {
    const double norm = AppOps<App>::norm(app, *u_final);
    local[0] = 0.5 * norm * norm;
  }
  double global[3] = {0.0, 0.0, 0.0};
  mpi::check(MPI_Allreduce(local, global, 3, MPI_DOUBLE, MPI_SUM, comm),
             "MPI_Allreduce (gradient)");
  if (global[2] != static_cast<double>(grid.intervals()))
    throw Error("gradient: the final adjoint sweep stepped " +
                std::to_string(static_cast<long long>(global[2])) +
                " fine intervals with StepInfo::done, expected each of the " +
                std::to_string(grid.intervals()) + " exactly once");
  out.objective = global[0];
  out.gradient = global[1];
  return out;
}

/// The same options for both solves.
template <class App>
GradientResult gradient(App& app, MPI_Comm comm, const TimeGrid& grid, const Options& options) {
  return gradient(app, comm, grid, options, options);
}

}  // namespace weft::mgrit
