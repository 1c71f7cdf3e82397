#pragma once
// How `weft mgrit` runs a problem's App: the solve with the report (run_problem), the
// forward + adjoint solve of --gradient (run_gradient), and the observer that records the final
// fine-grid values for --output. Templates over the App, used by the problem registry.
#include <mpi.h>

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "cli_support.hpp"
#include "mgrit_report.hpp"
#include "mgrit_settings.hpp"
#include "weft/mgrit/app.hpp"
#include "weft/mgrit/gradient.hpp"
#include "weft/mgrit/solver.hpp"
#include "weft/util/mpi.hpp"

#ifdef WEFT_HAVE_PETSC
#include "weft/mgrit/problems/petsc_heat2d.hpp"
#endif

namespace weft::cli {

using mgrit::index_t;

// The App the solver runs: the model problem, plus an observer that records the final values.

inline std::vector<double> values_of(double u) {
  return {u};
}
inline std::vector<double> values_of(const std::vector<double>& u) {
  return u;
}
inline std::vector<double> values_of(const std::array<double, 2>& u) {
  return {u[0], u[1]};
}

// The values to record for the observed state `u`, or nothing on the ranks that do not record.
template <class Problem>
std::optional<std::vector<double>> record_values(Problem&, const typename Problem::State& u) {
  return values_of(u);
}
#ifdef WEFT_HAVE_PETSC
// Collective over the space ranks (which all observe the same points); space rank 0 records.
inline std::optional<std::vector<double>> record_values(mgrit::problems::PetscHeat2D& problem,
                                                        const mgrit::problems::PetscVector& u) {
  std::vector<double> all = problem.gather(u);
  if (mpi::rank(problem.space()) != 0) return std::nullopt;
  return all;
}
#endif

template <class Problem>
class Observed {
  using Ops = mgrit::AppOps<Problem>;

 public:
  using State = typename Problem::State;

  explicit Observed(Problem& problem) : problem_(problem) {}

  State init(double t) { return problem_.init(t); }
  void step(const State& in, State& out, double t0, double t1, const mgrit::StepInfo& info) {
    problem_.step(in, out, t0, t1, info);
  }
  void sum(double a, const State& x, double b, State& y) { Ops::sum(problem_, a, x, b, y); }
  double norm(const State& u) { return Ops::norm(problem_, u); }
  void copy(const State& src, State& dst) { Ops::copy(problem_, src, dst); }
  std::size_t buffer_size(const State& like) { return Ops::buffer_size(problem_, like); }
  void pack(const State& u, void* buffer) { Ops::pack(problem_, u, buffer); }
  void unpack(const void* buffer, State& u) { Ops::unpack(problem_, buffer, u); }
  // Spatial transfers only where the problem has them (AppOps detects these members).
  template <class P = Problem, std::enable_if_t<mgrit::AppOps<P>::spatial, int> = 0>
  void coarsen(const State& fine, State& coarse, int fine_level) {
    Ops::coarsen(problem_, fine, coarse, fine_level);
  }
  template <class P = Problem, std::enable_if_t<mgrit::AppOps<P>::spatial, int> = 0>
  void refine(const State& coarse, State& fine, int coarse_level) {
    Ops::refine(problem_, coarse, fine, coarse_level);
  }
  void observe(const State& u, double t, index_t index) {
    if (auto values = record_values(problem_, u)) observed_[index] = Record{t, std::move(*values)};
  }
  void check_levels(int levels) const { problem_.check_levels(levels); }

  const std::map<index_t, Record>& observed() const { return observed_; }

 private:
  Problem& problem_;
  std::map<index_t, Record> observed_;
};

// Where a run happens: the solver's (time) communicator; whether this rank prints and writes
// the JSON file (world rank 0 only) and whether it takes part in writing the CSV solution (the
// ranks that record observed states: all of them, or space rank 0 of each time group).
struct Layout {
  MPI_Comm time = MPI_COMM_WORLD;
  bool leader = false;
  bool writer = true;
};

inline Layout world_layout(MPI_Comm comm) {
  return Layout{comm, mpi::rank(comm) == 0, true};
}

// Solves with `app` (the problem itself, or the problem wrapped in Observed when --output asks
// for the solution: an observer costs an extra fine sweep in some configurations, so it is only
// there when needed).
template <class App>
int run_app(App& app, const std::map<index_t, Record>* observed, int width, const MgritSettings& s,
            const Layout& layout) {
  const MPI_Comm comm = layout.time;
  const mgrit::Options options = make_options(s);
  const mgrit::TimeGrid grid = mgrit::TimeGrid::uniform(s.t0, s.t1, s.nt);
  std::unique_ptr<mgrit::Solver<App>> solver =
      s.points.empty() ? std::make_unique<mgrit::Solver<App>>(app, comm, grid, options)
                       : std::make_unique<mgrit::Solver<App>>(app, comm, grid, s.points, options);
  app.check_levels(solver->hierarchy().levels());

  Summary sum;
  describe_hierarchy(solver->hierarchy(), sum);
  if (layout.leader) print_header(s, solver->options(), sum);

  sum.result = solver->solve();
  collect_statistics(solver->statistics(), comm, sum);

  if (observed && layout.writer) write_csv(s, *observed, comm, width);
  if (layout.leader) {
    print_report(sum);
    if (!s.json_path.empty()) write_json(s, solver->options(), sum);
  }
  return kExitOk;
}

template <class Problem>
int run_problem(Problem& problem, int width, const MgritSettings& s, const Layout& layout) {
  if (s.output_path.empty()) return run_app(problem, nullptr, width, s, layout);
  Observed<Problem> app(problem);
  return run_app(app, &app.observed(), width, s, layout);
}

// --gradient: the forward solve, then the adjoint solve (mgrit::gradient); the report shows
// the forward solve's residuals, then the adjoint's summary, J and dJ/dp.
template <class Problem>
int run_gradient(Problem& problem, const std::string& parameter, const MgritSettings& s,
                 MPI_Comm comm) {
  const mgrit::Options options = make_options(s);
  const mgrit::TimeGrid grid = mgrit::TimeGrid::uniform(s.t0, s.t1, s.nt);
  const mgrit::Hierarchy h = mgrit::Hierarchy::uniform(grid, options);
  problem.check_levels(h.levels());

  Summary sum;
  describe_hierarchy(h, sum);
  const bool leader = mpi::rank(comm) == 0;
  if (leader) print_header(s, options, sum);

  const mgrit::GradientResult g = mgrit::gradient(problem, comm, grid, options);
  sum.result = g.forward;
  collect_statistics(g.forward_statistics, comm, sum);
  sum.objective = g.objective;
  sum.gradient = g.gradient;
  sum.parameter = parameter;
  sum.adjoint = g.adjoint;
  if (leader) {
    print_report(sum);
    if (!s.json_path.empty()) write_json(s, options, sum);
  }
  return kExitOk;
}

}  // namespace weft::cli
