#pragma once
// `weft mgrit`: the command line as text (MgritArgs), handed to the library's catalogue as a
// run described by text (weft/mgrit/problems/run_request.hpp), which checks every value. The
// flags are the library's names spelled as flags ("min_coarse" is --min-coarse); what stays
// here is the command line's own: the flags and their help, the --points file, the output
// files.
#include <mpi.h>

#include <map>
#include <string>

#include "weft/mgrit/problems/run_request.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace weft::cli {

/// The flag that stands for library name `name` ("space_ranks" -> "--space-ranks"; the guess is
/// --init, the recorded solution --output).
std::string flag_of_parameter(const std::string& name);

/// The flags as given: every value is taken as text and converted by the library, so that each
/// bad value gets one message in the same form ("option --X: 'V' is invalid; accepted: ...").
struct MgritArgs {
  std::map<std::string, std::string> text;  ///< flag -> value, for the flags given
  std::map<std::string, CLI::Option*> options;
  bool relax_only_coarsest = false;
  bool no_residual = false;
  bool reverse = false;
  bool richardson = false;
  bool periodic = false;
  bool error_estimates = false;
  bool refine = false;
  bool delta_static = false;
  bool delta_relax = false;
  bool gradient = false;

  bool given(const std::string& flag) const;
};

/// Registers every flag of `weft mgrit` (the shared ones and the union of the problems') on `cmd`.
void add_mgrit_flags(CLI::App& cmd, MgritArgs& args);

struct MgritSettings {
  mgrit::problems::RunRequest run;
  std::string points_path, json_path, output_path;
  int ranks = 1;
};

/// Checks every value (collective: files are read and probed on rank 0, verdicts shared).
/// Throws weft::InvalidOption naming the flag or the library's name for it.
MgritSettings resolve(const MgritArgs& args, MPI_Comm comm);

}  // namespace weft::cli
