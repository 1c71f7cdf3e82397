// The `weft` command-line tool: a small dispatcher over subcommands, one file per subcommand.
// The command line is parsed before MPI starts, so that --help and flag errors cost no MPI
// start-up; every rank parses the same argv and reaches the same verdict, and only the
// launcher's rank 0 prints it (see cli_support.hpp for the exit codes). A subcommand that
// another of weft's programs runs is handed to it, still before MPI starts (programs.hpp).
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli_support.hpp"
#include "data_command.hpp"
#include "mgrit_command.hpp"
#include "plot_command.hpp"
#include "programs.hpp"
#include "replay_command.hpp"
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
    weft::cli::add_replay_command,
#ifdef WEFT_HAVE_TORCH
    weft::cli::add_train_command,
    weft::cli::add_eval_command,
    weft::cli::add_predict_command,
#endif
};
// clang-format on

int dispatch(int argc, char** argv) {
  using weft::cli::report_error;
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
      report_error("weft",
                   "unknown subcommand '" + std::string(argv[1]) +
                       "'; accepted: " + weft::cli::join(names) + " (see 'weft --help')",
                   MPI_COMM_NULL);
      return weft::cli::kExitUsage;
    }
  }
  try {
    weft.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      if (weft::cli::launcher_rank() == 0) weft.exit(e);  // --help: prints the help text
      return weft::cli::kExitOk;
    }
    const std::string name = prefix();
    report_error(name, std::string(e.what()) + " (see '" + name + " --help')", MPI_COMM_NULL);
    return weft::cli::kExitUsage;
  }
  for (const auto& c : commands) {
    if (!c.app->parsed()) continue;
    if (const char* other = c.program ? c.program() : nullptr)
      return weft::cli::run_program(other, argv);
    try {
      weft::mpi::Environment env(&argc, &argv);
      return weft::cli::run_guarded(prefix(), MPI_COMM_WORLD,
                                    [&]() { return c.run(MPI_COMM_WORLD); });
    } catch (const std::exception& e) {  // MPI did not start as weft needs it
      report_error(prefix(), e.what(), MPI_COMM_NULL);
      return weft::cli::kExitFailure;
    }
  }
  return weft::cli::kExitUsage;  // unreachable: require_subcommand(1)
}

}  // namespace

int main(int argc, char** argv) {
  // Training frees and reallocates the same states every batch: keep that memory in the process
  // (docs/benchmarks.md, "Fifth session"; WEFT_KEEP_FREED_MEMORY=0 keeps glibc's defaults).
  weft::keep_freed_memory();
  try {
    return dispatch(argc, argv);
  } catch (const std::exception& e) {  // what escapes parsing (e.g. std::bad_alloc)
    weft::cli::report_error("weft", e.what(), MPI_COMM_NULL);
    return weft::cli::kExitFailure;
  }
}
