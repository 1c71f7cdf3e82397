// `weft mgrit`: parse (mgrit_settings), pick the problem from the registry (mgrit_problems),
// run it (mgrit_run) and report (mgrit_report). Library errors name library options
// ("Heat1DSpaceTime: nx ..."); here they become errors naming the flag ("option --nx: ...").
#include "mgrit_command.hpp"

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "mgrit_problems.hpp"
#include "mgrit_settings.hpp"
#include "programs.hpp"
#include "weft/util/error.hpp"

namespace weft::cli {
namespace {

// The flag of `problem` (or a shared flag) that sets library option `option`, or "".
std::string flag_of(const std::string& option, const ProblemEntry* problem) {
  if (option == "guess") return "--init";  // mgrit::problems::InitialGuess::parse
  if (problem)
    for (const ProblemFlag& f : problem->flags)
      if (option == f.library) return f.flag;
  return "";
}

// Runs `body`; a library InvalidOption about an option that a flag sets is rethrown naming the
// flag, in the CLI's form "option --FLAG: DETAIL".
template <class Body>
auto in_flag_vocabulary(const ProblemEntry* problem, Body body) {
  try {
    return body();
  } catch (const InvalidOption& e) {
    const std::string flag = e.option().empty() ? "" : flag_of(e.option(), problem);
    if (flag.empty()) throw;
    throw InvalidOption("option " + flag + ": " + e.detail());
  }
}

int run_mgrit(const MgritArgs& args, MPI_Comm comm) {
  const ProblemEntry* named =
      args.given("--problem") ? find_mgrit_problem(args.text.at("--problem")) : nullptr;
  const MgritSettings s = in_flag_vocabulary(named ? named : &mgrit_problems().front(),
                                             [&] { return resolve(args, comm); });
  return in_flag_vocabulary(s.entry, [&] { return s.instance->run(s, comm); });
}

}  // namespace

Subcommand add_mgrit_command(CLI::App& weft) {
  std::string problems;
  for (const ProblemEntry& e : mgrit_problems())
    problems += "\n  " + std::string(e.name) + ": " + e.summary;
  CLI::App* cmd = weft.add_subcommand(
      "mgrit",
      "Solve a model problem with MGRIT and print the residual history. Without flags: the "
      "PyMGRIT heat reference run (docs/mgrit.md, §4). Problems (--problem):" +
          problems);
  auto args = std::make_shared<MgritArgs>();
  add_mgrit_flags(*cmd, *args);
  return Subcommand{cmd, [args](MPI_Comm comm) { return run_mgrit(*args, comm); },
                    [args]() -> const char* {
                      const bool heat2d =
                          args->given("--problem") && args->text.at("--problem") == "heat2d";
                      return heat2d ? heat2d_program() : nullptr;
                    }};
}

}  // namespace weft::cli
