#pragma once
// Private to the catalogue: how a model problem's App runs. run_problem solves (wrapping the App
// in an observer that records the final fine-grid values when the solution is asked for: an
// observer costs an extra fine sweep in some configurations, so it is only there when needed);
// run_gradient adds the adjoint solve. Both fill a RunSummary on rank 0.
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "weft/mgrit/app.hpp"
#include "weft/mgrit/delta.hpp"
#include "weft/mgrit/gradient.hpp"
#include "weft/mgrit/problems/catalogue.hpp"
#include "weft/mgrit/solver.hpp"
#include "weft/util/mpi.hpp"

#ifdef WEFT_HAVE_PETSC
#include "weft/mgrit/problems/petsc_heat2d.hpp"
#endif

namespace weft::mgrit::problems::detail {

inline std::vector<double> values_of(double u) {
  return {u};
}
inline std::vector<double> values_of(const std::vector<double>& u) {
  return u;
}
template <std::size_t N>
std::vector<double> values_of(const std::array<double, N>& u) {
  return {u.begin(), u.end()};
}

/// The values to record for the observed state `u`, or nothing on the ranks that do not record
/// (a space-parallel problem overloads this: collective over its space ranks, one records).
template <class Problem>
std::optional<std::vector<double>> record_values(Problem&, const typename Problem::State& u) {
  return values_of(u);
}

#ifdef WEFT_HAVE_PETSC
// Collective over the space ranks (which all observe the same points); space rank 0 records.
inline std::optional<std::vector<double>> record_values(PetscHeat2D& problem,
                                                        const PetscVector& u) {
  std::vector<double> all = problem.gather(u);
  if (mpi::rank(problem.space()) != 0) return std::nullopt;
  return all;
}
#endif

/// The problem as an App, plus an observer that records the final values.
template <class Problem>
class Observed {
  using Ops = AppOps<Problem>;

 public:
  using State = typename Problem::State;

  explicit Observed(Problem& problem) : problem_(problem) {}

  State init(double t) { return problem_.init(t); }
  void step(const State& in, State& out, double t0, double t1, const StepInfo& info) {
    problem_.step(in, out, t0, t1, info);
  }
  void sum(double a, const State& x, double b, State& y) { Ops::sum(problem_, a, x, b, y); }
  double norm(const State& u) { return Ops::norm(problem_, u); }
  void copy(const State& src, State& dst) { Ops::copy(problem_, src, dst); }
  std::size_t buffer_size(const State& like) { return Ops::buffer_size(problem_, like); }
  void pack(const State& u, void* buffer) { Ops::pack(problem_, u, buffer); }
  void unpack(const void* buffer, State& u) { Ops::unpack(problem_, buffer, u); }
  // Spatial transfers only where the problem has them (AppOps detects these members).
  template <class P = Problem, std::enable_if_t<AppOps<P>::spatial, int> = 0>
  void coarsen(const State& fine, State& coarse, int fine_level) {
    Ops::coarsen(problem_, fine, coarse, fine_level);
  }
  template <class P = Problem, std::enable_if_t<AppOps<P>::spatial, int> = 0>
  void refine(const State& coarse, State& fine, int coarse_level) {
    Ops::refine(problem_, coarse, fine, coarse_level);
  }
  void observe(const State& u, double t, index_t index) {
    if (auto values = record_values(problem_, u))
      observed_[index] = SolutionPoint{t, std::move(*values)};
  }
  template <class P = Problem,
            std::enable_if_t<mgrit::detail::has_refine_factor<P>::value, int> = 0>
  int refine_factor(const State& u, double t0, double t1, const StepInfo& info) {
    return problem_.refine_factor(u, t0, t1, info);
  }
  void check_levels(int levels) const { problem_.check_levels(levels); }
  // Delta correction's members, where the problem has them (DeltaCorrected<Observed<P>>).
  template <class P = Problem,
            std::enable_if_t<mgrit::detail::has_delta_members<P>::value, int> = 0>
  void step_tangent(const State& u0, const State& u1, State& v, double t0, double t1,
                    const StepInfo& info) {
    problem_.step_tangent(u0, u1, v, t0, t1, info);
  }
  template <class P = Problem,
            std::enable_if_t<mgrit::detail::has_delta_members<P>::value, int> = 0>
  double inner_product(const State& a, const State& b) {
    return problem_.inner_product(a, b);
  }
  template <class P = Problem,
            std::enable_if_t<mgrit::detail::has_delta_members<P>::value, int> = 0>
  State basis_vector(double t, int index) {
    return problem_.basis_vector(t, index);
  }

  const std::map<index_t, SolutionPoint>& observed() const { return observed_; }

 private:
  Problem& problem_;
  std::map<index_t, SolutionPoint> observed_;
};

/// Where a run happens: the solver's (time) communicator, and whether this rank's observed
/// points are gathered (all ranks, or space rank 0 of each time group).
struct Layout {
  MPI_Comm time = MPI_COMM_WORLD;
  bool records = true;
};

void describe_hierarchy(const Hierarchy& h, const Options& effective, RunSummary& sum);
/// Timings (max over the ranks of `comm`) and steps per level (summed) on rank 0.
void collect_statistics(const Statistics& st, MPI_Comm comm, RunSummary& sum);
/// Collective over the recording ranks of `comm`: their observed points, on rank 0.
void gather_solution(const std::map<index_t, SolutionPoint>& observed, MPI_Comm comm, int width,
                     index_t nt, RunSummary& sum);

/// Problems with `State exact(double t) const` (not the space-parallel one: its norm is
/// collective over its space ranks, which the last time point's owner alone cannot call).
template <class P, class = void>
struct has_exact : std::false_type {};
template <class P>
struct has_exact<P, std::void_t<decltype(std::declval<const P&>().exact(0.0))>>
    : std::is_same<decltype(std::declval<const P&>().exact(0.0)), typename P::State> {};

/// Problems with `State periodic_exact(double t, double t_end) const`: the solution with
/// u(t_start) = u(t_end).
template <class P, class = void>
struct has_periodic_exact : std::false_type {};
template <class P>
struct has_periodic_exact<P,
                          std::void_t<decltype(std::declval<const P&>().periodic_exact(0.0, 0.0))>>
    : std::true_type {};

/// The norm of u - exact(t) for the problems that have exact() (periodic_exact() for periodic
/// runs, over the period ending at t_end); nothing otherwise.
template <class Problem>
std::function<double(const typename Problem::State&, double)> error_against_exact(
    Problem& problem, bool periodic = false, double t_end = 0) {
  if (periodic) {
    if constexpr (has_periodic_exact<Problem>::value) {
      return [&problem, t_end](const typename Problem::State& u, double t) {
        return std::abs(u - problem.periodic_exact(t, t_end));
      };
    } else {
      return {};
    }
  }
  if constexpr (has_exact<Problem>::value) {
    return [&problem](const typename Problem::State& u, double t) {
      using Ops = AppOps<Problem>;
      typename Problem::State e = problem.exact(t);
      Ops::sum(problem, 1.0, u, -1.0, e);
      return Ops::norm(problem, e);
    };
  } else {
    return {};
  }
}

/// RunSummary::final_error on rank 0: the owner of the last time point measures it.
template <class State, class Solver>
void measure_final_error(const Solver& solver, const RunSettings& s,
                         const std::function<double(const State&, double)>& error, MPI_Comm comm,
                         RunSummary& sum) {
  const bool reverse = s.options.direction() == Direction::Reverse;
  // A periodic run's last point t1 is its point 0; a refined grid has more points.
  const index_t last = reverse || s.options.periodic() ? 0 : solver.fine_grid().intervals();
  sum.final_time = reverse ? s.t0 : s.t1;
  double value = -1;  // -1: not measured here
  if (const State* u = solver.state(last)) value = error(*u, sum.final_time);
  MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MAX, comm);
  if (value >= 0 || std::isnan(value)) sum.final_error = value;
}

/// RunSummary::largest_estimate on rank 0: the largest error estimate over all fine points,
/// at its first point (index_t throughout: grids may exceed 2^31 points).
template <class Solver>
void find_largest_estimate(const Solver& solver, const TimeGrid& grid, MPI_Comm comm,
                           RunSummary& sum) {
  double local = -1, largest = -1;
  for (index_t i = solver.local_begin(); i < solver.local_end(); ++i)
    if (const auto e = solver.error_estimate(i)) local = std::max(local, *e);
  MPI_Allreduce(&local, &largest, 1, MPI_DOUBLE, MPI_MAX, comm);
  if (largest < 0) return;  // one level: no estimates
  std::int64_t first = std::numeric_limits<std::int64_t>::max(), where = first;
  for (index_t i = solver.local_begin(); i < solver.local_end(); ++i)
    if (const auto e = solver.error_estimate(i); e && *e == largest) {
      first = i;
      break;
    }
  MPI_Allreduce(&first, &where, 1, MPI_INT64_T, MPI_MIN, comm);
  sum.largest_estimate = largest;
  sum.largest_estimate_time = grid.times()[static_cast<size_t>(where)];
}

template <class App>
RunSummary run_app(App& app, const std::map<index_t, SolutionPoint>* observed, int width,
                   const RunSettings& s, const Layout& layout,
                   const std::function<double(const typename App::State&, double)>& error = {}) {
  const MPI_Comm comm = layout.time;
  const TimeGrid grid = TimeGrid::uniform(s.t0, s.t1, s.nt);
  std::unique_ptr<Solver<App>> solver =
      s.points.empty() ? std::make_unique<Solver<App>>(app, comm, grid, s.options)
                       : std::make_unique<Solver<App>>(app, comm, grid, s.points, s.options);
  app.check_levels(solver->hierarchy().levels());

  RunSummary sum;
  describe_hierarchy(solver->hierarchy(), solver->options(), sum);
  if (s.on_setup && mpi::rank(comm) == 0) s.on_setup(sum);

  sum.result = solver->solve();
  collect_statistics(solver->statistics(), comm, sum);
  const TimeGrid final_grid = solver->fine_grid();  // refined, with Options::refinement
  if (!sum.result.refinements.empty())
    sum.final_intervals = solver->statistics().intervals_per_level;
  if (error) measure_final_error(*solver, s, error, comm, sum);
  if (s.options.error_estimate_order() > 0) find_largest_estimate(*solver, final_grid, comm, sum);
  if (observed && layout.records)
    gather_solution(*observed, comm, width, final_grid.intervals(), sum);
  return sum;
}

template <class Problem>
RunSummary run_problem(Problem& problem, int width, const RunSettings& s, const Layout& layout) {
  const auto error = error_against_exact(problem, s.options.periodic(), s.t1);
  if (!s.record_solution) return run_app(problem, nullptr, width, s, layout, error);
  Observed<Problem> app(problem);
  return run_app(app, &app.observed(), width, s, layout, error);
}

/// With Delta correction (RunSettings::delta_rank): the problem wrapped in DeltaCorrected (and
/// the observer inside it, so that the recorded values are the solution's); the average
/// Lyapunov exponents on rank 0 when the basis is estimated (DeltaOptions::exponents()).
template <class Problem>
RunSummary run_delta_corrected(Problem& problem, int width, const RunSettings& s,
                               const Layout& layout) {
  const DeltaOptions options{s.delta_rank, s.delta_lyapunov, s.delta_relax};
  auto finish = [&](auto& app, const std::map<index_t, SolutionPoint>* observed) {
    RunSummary sum = run_app(app, observed, width, s, layout);
    std::vector<double> sums = app.local_exponent_sums();
    sums.resize(static_cast<size_t>(s.delta_rank), 0.0);
    MPI_Allreduce(MPI_IN_PLACE, sums.data(), s.delta_rank, MPI_DOUBLE, MPI_SUM, layout.time);
    if (options.exponents())
      for (double x : sums) sum.lyapunov_exponents.push_back(x / (s.t1 - s.t0));
    return sum;
  };
  if (!s.record_solution) {
    DeltaCorrected<Problem> app(problem, options);
    return finish(app, nullptr);
  }
  Observed<Problem> observed(problem);
  DeltaCorrected<Observed<Problem>> app(observed, options);
  return finish(app, &observed.observed());
}

/// The forward solve, then the adjoint solve (mgrit::gradient): the summary holds the forward
/// solve's history, the adjoint's result, J and dJ/dp.
template <class Problem>
RunSummary run_gradient(Problem& problem, const std::string& parameter, const RunSettings& s,
                        MPI_Comm comm) {
  if (!s.points.empty() || s.record_solution || s.options.direction() == Direction::Reverse)
    throw InvalidOption("model problem", "gradient",
                        "is computed on a forward solve over a uniform hierarchy, without a "
                        "recorded solution");
  const TimeGrid grid = TimeGrid::uniform(s.t0, s.t1, s.nt);
  const Hierarchy h = Hierarchy::uniform(grid, s.options);
  problem.check_levels(h.levels());

  RunSummary sum;
  describe_hierarchy(h, s.options, sum);
  if (s.on_setup && mpi::rank(comm) == 0) s.on_setup(sum);

  const GradientResult g = gradient(problem, comm, grid, s.options);
  sum.result = g.forward;
  collect_statistics(g.forward_statistics, comm, sum);
  sum.objective = g.objective;
  sum.gradient = g.gradient;
  sum.parameter = parameter;
  sum.adjoint = g.adjoint;
  return sum;
}

}  // namespace weft::mgrit::problems::detail
