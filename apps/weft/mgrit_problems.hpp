#pragma once
// The model problems of `weft mgrit`, registered in one table (mgrit_problems.cpp): each entry
// names the problem, its flags with their defaults, its --help line, and how its flag values
// become a library object that describes itself (report line, JSON options) and runs. Adding
// a problem is one entry there; flags, --help, the "only with --problem" checks, the report,
// the JSON summary and the translation of library errors to flag names follow from it.
#include <mpi.h>

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace weft::cli {

class ProblemValues;
struct MgritSettings;

/// A flag a problem reads.
struct ProblemFlag {
  const char* flag;      ///< "--nx"
  const char* type;      ///< "INT[,INT...]" (--help)
  const char* fallback;  ///< the default text ("" when there is none: the problem derives it)
  const char* help;      ///< what the flag means for this problem (--help)
  const char* library;   ///< the library option it sets ("nx"): errors naming it name the flag
};

/// One problem with its parameters parsed: what the report and the JSON summary say about it,
/// and the solve.
class MgritProblem {
 public:
  virtual ~MgritProblem() = default;
  /// The report's "problem" line, e.g. "dahlquist: u' = lambda u, lambda -1, integrator be".
  virtual std::string describe(const MgritSettings& s) const = 0;
  /// Adds the problem's parameters to the JSON summary's "options".
  virtual void add_json(nlohmann::json& options) const = 0;
  /// Solves (collective over `comm`), prints the report, writes the files; returns the exit code.
  virtual int run(const MgritSettings& s, MPI_Comm comm) = 0;
};

struct ProblemEntry {
  const char* name;                ///< --problem NAME
  const char* summary;             ///< one line for --help
  std::vector<ProblemFlag> flags;  ///< every problem reads --integrator
  const char* gradient_parameter;  ///< p of dJ/dp with --gradient; nullptr: not available
  /// Parses and checks the flag values (throws weft::InvalidOption naming a flag or a library
  /// option of one of `flags`).
  /// The library objects are built by run(), which knows the time grid and the initial guess.
  std::unique_ptr<MgritProblem> (*make)(const ProblemValues& values);
};

/// The registry, in --help order (the first entry is the default problem).
const std::vector<ProblemEntry>& mgrit_problems();

/// The entry named `name`, or nullptr.
const ProblemEntry* find_mgrit_problem(const std::string& name);

}  // namespace weft::cli
