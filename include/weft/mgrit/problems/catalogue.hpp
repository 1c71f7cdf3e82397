#pragma once
// The model problems by name: each catalogue entry lists its parameters (name, default, help),
// builds the problem from parameter values given as text, describes it, and runs it with MGRIT
// (the solve, or the forward + adjoint solve of a gradient) returning a summary of the run:
// hierarchy, residual history, timings, steps per level and, when asked, the fine-grid
// solution gathered on rank 0. `weft mgrit` is a front end to this catalogue; a C++ user gets
// the same runs without the command line:
//
//   auto heat = problems::make_problem("heat1d", {{"nx", "17"}, {"kappa", "0.5"}});
//   problems::RunSettings run;
//   run.nt = 64;
//   run.options.max_levels(3).cfactor(4);
//   problems::RunSummary summary = heat->run(run, MPI_COMM_WORLD);
//
// Errors are weft::InvalidOption naming the parameter (option() is its name: "nx").
#include <mpi.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "weft/mgrit/options.hpp"
#include "weft/mgrit/problems/initial_guess.hpp"
#include "weft/mgrit/result.hpp"
#include "weft/mgrit/types.hpp"
#include "weft/util/text_values.hpp"

namespace weft::mgrit::problems {

/// One parameter of a model problem.
struct Parameter {
  const char* name;      ///< "nx" (a front end may spell it --nx; '_' as '-')
  const char* type;      ///< "INT[,INT...]" (help text)
  const char* fallback;  ///< the default as text ("": the problem derives it)
  const char* help;      ///< what the parameter means for this problem
};

struct CatalogueEntry;

/// One problem's parameter values as text (given, else the defaults), with strict conversions
/// whose errors name the parameter.
class ParameterValues : public TextValues {
 public:
  /// Throws InvalidOption for a name the problem does not have.
  ParameterValues(const CatalogueEntry& entry, const std::map<std::string, std::string>& given,
                  Spelling spell = {});
};

/// A parameter's value as the run summary reports it.
using ParameterValue = std::variant<bool, long long, double, std::string, std::vector<long long>>;

struct RunSummary;

/// What every problem's run shares: the time grid, the solver options, the guess.
struct RunSettings {
  double t0 = 0, t1 = 2;
  index_t nt = 64;
  /// The solver's options (Direction::Reverse solves from t1 down to t0).
  Options options;
  /// Explicit coarse levels (fine indices per coarse level, as Solver takes them); empty: the
  /// uniform hierarchy of `options`.
  std::vector<std::vector<index_t>> points;
  /// The guess at the points away from the initial one.
  InitialGuess guess;
  /// Also J = |u_N|^2/2 and dJ/dp by an adjoint solve (entries with a gradient parameter).
  bool gradient = false;
  /// With Options::refinement: the fraction of the largest error estimate above which a model
  /// problem that refines (linear) splits a step in two.
  double refine_fraction = 0.02;
  /// Delta correction (weft/mgrit/delta.hpp) with this many basis vectors; 0: off. Problems
  /// with delta_dimension() > 0 only.
  int delta_rank = 0;
  /// With Delta correction: Lyapunov estimation (off, with delta_relax off: a static basis).
  bool delta_lyapunov = true;
  /// With Delta correction: the basis also propagated in relaxation.
  bool delta_relax = false;
  /// Gather the final fine-grid values on rank 0 (RunSummary::solution).
  bool record_solution = false;
  /// Called on rank 0 once the hierarchy is built, before the solve (a front end prints its
  /// header there) with the summary's hierarchy fields and effective options filled in.
  std::function<void(const RunSummary&)> on_setup;

  double t_start() const { return options.direction() == Direction::Reverse ? t1 : t0; }
};

/// One fine point of the recorded solution.
struct SolutionPoint {
  double t = 0;
  std::vector<double> values;
};

/// What a run produced; complete on rank 0 of the run's communicator.
struct RunSummary {
  std::vector<index_t> intervals;  ///< per level
  std::vector<int> cf_built;       ///< the hierarchy's cf per level (0: explicit lists)
  Options options;                 ///< the solver's effective options
  Result result;
  double setup = 0, solve = 0, step = 0, comm = 0, other = 0;  ///< seconds, max over ranks
  std::vector<long long> steps;                                ///< per level, summed over ranks
  /// After temporal refinements (result.refinements): the final hierarchy's intervals per level.
  std::vector<index_t> final_intervals;
  /// With a gradient: J, dJ/dp (p named by `parameter`) and the adjoint solve's result.
  std::optional<double> objective, gradient;
  std::string parameter;
  Result adjoint;
  /// For problems with a closed-form solution: the problem's spatial norm of u - u_exact at the
  /// solve's last time point (t1; t0 in reverse solves), the discretization error of the result.
  std::optional<double> final_error;
  double final_time = 0;
  /// With Options::error_estimates: the largest fine-point estimate after the solve, and where.
  std::optional<double> largest_estimate;
  double largest_estimate_time = 0;
  /// With Delta correction and an estimated basis: the average Lyapunov exponents (the local
  /// exponents of the final sweep's fine C-points summed, over t1 - t0), one per basis vector.
  std::vector<double> lyapunov_exponents;
  /// With record_solution: every fine point by index (rank 0), `width` values each.
  std::map<index_t, SolutionPoint> solution;
  int width = 0;
};

/// A model problem with its parameters parsed.
class ModelProblem {
 public:
  virtual ~ModelProblem() = default;
  /// "dahlquist: u' = lambda u, lambda -1, integrator be".
  virtual std::string describe() const = 0;
  /// The parameters' values, in the catalogue's order (derived values too: "nx_per_level").
  virtual std::vector<std::pair<std::string, ParameterValue>> parameters() const = 0;
  /// Collective over `comm`. Throws InvalidOption naming a parameter or a RunSettings field.
  virtual RunSummary run(const RunSettings& settings, MPI_Comm comm) = 0;
  /// The fine integrator's local order p (local error O(dt^p)), for Richardson extrapolation;
  /// 0 where the problem declares none.
  virtual int local_order() const { return 0; }
  /// The state's dimension for problems whose App supports Delta correction; 0 otherwise.
  virtual int delta_dimension() const { return 0; }
};

struct CatalogueEntry {
  const char* name;                   ///< "heat1d"
  const char* summary;                ///< one line
  std::vector<Parameter> parameters;  ///< every problem has "integrator"
  const char* gradient_parameter;     ///< p of dJ/dp with a gradient; nullptr: not available
  std::unique_ptr<ModelProblem> (*make)(const ParameterValues& values);
};

/// The catalogue; the first entry is the default problem (PyMGRIT's heat1d reference run).
const std::vector<CatalogueEntry>& catalogue();
/// The entry named `name`, or nullptr.
const CatalogueEntry* find_problem(const std::string& name);
/// The problem `name` with the given parameter values (the others default). Throws
/// InvalidOption for an unknown problem or parameter, or a bad value.
std::unique_ptr<ModelProblem> make_problem(const std::string& name,
                                           const std::map<std::string, std::string>& given = {});
/// Whether this build's heat2d runs over PETSc (space ranks, KSP choice).
bool catalogue_has_petsc();

}  // namespace weft::mgrit::problems
