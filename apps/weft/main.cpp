// The `weft` command-line tool: a small dispatcher over subcommands, one file per subcommand.
// Every rank parses the same argv, so every rank reaches the same verdict on bad input; errors
// are printed once, by rank 0 (see cli_support.hpp for the exit codes).
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cli_support.hpp"
#include "data_command.hpp"
#include "mgrit_command.hpp"
#include "plot_command.hpp"
#ifdef WEFT_HAVE_TORCH
#include "predict_command.hpp"
#include "train_command.hpp"
#endif
#include "weft/util/memory.hpp"
#include "weft/util/mpi.hpp"

namespace {

// Adding a subcommand is one line here (plus its own file), one per line.
// clang-format off
constexpr weft::cli::SubcommandFactory kSubcommands[] = {
    weft::cli::add_mgrit_command,
    weft::cli::add_plot_command,
    weft::cli::add_data_command,
#ifdef WEFT_HAVE_TORCH
    weft::cli::add_train_command,
    weft::cli::add_eval_command,
    weft::cli::add_predict_command,
#endif
};
// clang-format on

int dispatch(int argc, char** argv) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  CLI::App weft{"weft: layer-parallel training and multigrid-reduction-in-time (MGRIT) over MPI",
                "weft"};
  weft.require_subcommand(1);
  std::vector<weft::cli::Subcommand> commands;
  for (const auto factory : kSubcommands) commands.push_back(factory(weft));

  auto prefix = [&]() -> std::string {
    for (const auto& c : commands)
      if (c.app->parsed()) return "weft " + c.app->get_name();
    return "weft";
  };
  // A first word that is no subcommand is named as such (CLI11 would call it an extra argument).
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const auto& c : commands) names.push_back(c.app->get_name());
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      weft::cli::report_error("weft",
                              "unknown subcommand '" + std::string(argv[1]) +
                                  "'; accepted: " + weft::cli::join(names) + " (see 'weft --help')",
                              MPI_COMM_WORLD);
      return weft::cli::kExitUsage;
    }
  }
  try {
    weft.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      if (rank == 0) weft.exit(e);  // --help: prints the help text
      return weft::cli::kExitOk;
    }
    const std::string name = prefix();
    weft::cli::report_error(name, std::string(e.what()) + " (see '" + name + " --help')",
                            MPI_COMM_WORLD);
    return weft::cli::kExitUsage;
  }
  for (const auto& c : commands)
    if (c.app->parsed())
      return weft::cli::run_guarded(prefix(), MPI_COMM_WORLD,
                                    [&]() { return c.run(MPI_COMM_WORLD); });
  return weft::cli::kExitUsage;  // unreachable: require_subcommand(1)
}

}  // namespace

int main(int argc, char** argv) {
  // Training frees and reallocates the same states every batch: keep that memory in the process
  // (docs/benchmarks.md, "Fifth session"; WEFT_KEEP_FREED_MEMORY=0 keeps glibc's defaults).
  weft::keep_freed_memory();
  weft::mpi::Environment env(&argc, &argv);
  // The outer guard catches what escapes parsing (e.g. std::bad_alloc); subcommands have their own.
  return weft::cli::run_guarded("weft", MPI_COMM_WORLD, [&]() { return dispatch(argc, argv); });
}
