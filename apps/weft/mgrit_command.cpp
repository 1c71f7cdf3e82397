// `weft mgrit`: parse (mgrit_settings), run the problem of the library's catalogue
// (weft/mgrit/problems/catalogue.hpp) and report (mgrit_report). Library errors name library
// options ("Heat1DSpaceTime: nx ..."); here they become errors naming the flag ("option --nx:
// ...").
#include "mgrit_command.hpp"

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "mgrit_report.hpp"
#include "mgrit_settings.hpp"
#include "programs.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace weft::cli {
namespace {

namespace pr = mgrit::problems;

// Whether library name `option` is one a flag sets (a problem's parameter, a shared setting).
bool has_flag(const std::string& option) {
  for (const char* special :
       {"guess", "problem", "points", "gradient", "reverse", "record_solution", "richardson",
        "periodic", "error_estimates", "refine", "delta_static", "delta_relax"})
    if (option == special) return true;
  for (const auto& [name, fallback] : pr::run_setting_defaults())
    if (option == name) return true;
  for (const pr::CatalogueEntry& e : pr::catalogue())
    for (const pr::Parameter& p : e.parameters)
      if (option == p.name) return true;
  return false;
}

// Runs `body`; a library InvalidOption about a value that a flag sets is rethrown naming the
// flag, in the CLI's form "option --FLAG: DETAIL".
template <class Body>
auto in_flag_vocabulary(Body body) {
  try {
    return body();
  } catch (const InvalidOption& e) {
    if (e.option().empty() || !has_flag(e.option())) throw;
    throw InvalidOption("option " + flag_of_parameter(e.option()) + ": " + e.detail());
  }
}

int run_mgrit(const MgritArgs& args, MPI_Comm comm) {
  const MgritSettings s = in_flag_vocabulary([&] { return resolve(args, comm); });
  // World rank 0 prints and writes (with PETSc's space ranks, each time group has a rank 0).
  const bool leader = mpi::rank(comm) == 0;
  pr::RunSettings run = s.run.settings;
  run.on_setup = [&](const Summary& setup) {
    if (leader) print_header(s, setup);
  };
  const Summary sum = in_flag_vocabulary([&] { return s.run.instance->run(run, comm); });
  if (leader) {
    if (!s.output_path.empty()) write_csv(s, sum);
    print_report(sum);
    if (!s.json_path.empty()) write_json(s, sum);
  }
  return kExitOk;
}

}  // namespace

Subcommand add_mgrit_command(CLI::App& weft) {
  std::string problems;
  for (const pr::CatalogueEntry& e : pr::catalogue())
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
