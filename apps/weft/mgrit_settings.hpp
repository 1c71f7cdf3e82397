#pragma once
// `weft mgrit`: the command line as text (MgritArgs), resolved into checked settings
// (MgritSettings) and the library's run settings. The problem-specific flags are the parameters
// of the library's catalogue (weft/mgrit/problems/catalogue.hpp), spelled as flags: "space_ranks"
// is --space-ranks.
#include <mpi.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "weft/mgrit/options.hpp"
#include "weft/mgrit/problems/catalogue.hpp"
#include "weft/mgrit/problems/initial_guess.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace weft::cli {

/// The flag that sets catalogue parameter `name` ("space_ranks" -> "--space-ranks").
std::string flag_of_parameter(const std::string& name);

/// The flags as given: every value is taken as text and converted by resolve(), so that each bad
/// value gets one message in the same form ("option --X: 'V' is invalid; accepted: ...").
struct MgritArgs {
  std::map<std::string, std::string> text;  ///< flag -> value, for the flags given
  std::map<std::string, CLI::Option*> options;
  bool relax_only_coarsest = false;
  bool no_residual = false;
  bool reverse = false;
  bool gradient = false;

  bool given(const std::string& flag) const;
  /// The given value, or `fallback` (the documented default).
  std::string get(const std::string& flag, const std::string& fallback) const;
};

/// Registers every flag of `weft mgrit` (the shared ones and the union of the problems') on `cmd`.
void add_mgrit_flags(CLI::App& cmd, MgritArgs& args);

struct MgritSettings {
  std::string problem;
  const mgrit::problems::CatalogueEntry* entry = nullptr;
  std::shared_ptr<mgrit::problems::ModelProblem> instance;  ///< its parameters parsed
  std::string integrator;  ///< the --integrator list as given (or defaulted)
  bool gradient = false;
  double t0 = 0, t1 = 2;
  mgrit::index_t nt = 64;
  int levels = 3;
  bool levels_given = false;
  std::vector<int> cf, nrelax;
  std::vector<double> cwt;
  mgrit::index_t min_coarse = 2;
  std::optional<int> nrelax_coarsest;
  bool relax_only_coarsest = false;
  std::optional<bool> skip, nested;
  mgrit::Cycle cycle = mgrit::Cycle::V;
  double tol = 0, rtol = 0;
  mgrit::TemporalNorm tnorm = mgrit::TemporalNorm::Two;
  int max_iter = 2;
  bool residual = true;
  std::string init;
  mgrit::problems::InitialGuess guess;
  bool sequential_guess = false;
  mgrit::Storage storage = mgrit::Storage::All;
  mgrit::Convention convention = mgrit::Convention::PyMGRIT;
  std::string points_path;
  std::vector<std::vector<mgrit::index_t>> points;  ///< explicit coarse levels (user numbering)
  bool reverse = false;
  std::string json_path, output_path;
  int ranks = 1;

  /// Reverse solves start from the value at t1.
  double t_start() const { return reverse ? t1 : t0; }
};

/// Checks every value (collective: files are read and probed on rank 0, verdicts shared).
/// Throws weft::InvalidOption naming the flag.
MgritSettings resolve(const MgritArgs& args, MPI_Comm comm);

/// The solver options the settings describe.
mgrit::Options make_options(const MgritSettings& s);

/// The library's settings of the run (without on_setup).
mgrit::problems::RunSettings run_settings(const MgritSettings& s);

}  // namespace weft::cli
