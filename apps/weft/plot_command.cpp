// `weft plot KIND`: flags → weft::report::plot (weft/report/plot.hpp) on rank 0.
#include "plot_command.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "weft/report/plot.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace weft::cli {
namespace {

// Rank 0 plots; every rank learns the verdict.
int run_plot(const report::PlotRequest& request, MPI_Comm comm) {
  run_on_rank_zero(comm, [&] {
    try {
      report::plot(request);
    } catch (const InvalidOption& e) {  // the library's option, as its flag
      if (e.option() == "output") throw InvalidOption("option --output: " + e.detail());
      if (e.option() == "x_axis") throw InvalidOption("option --x: " + e.detail());
      throw;
    }
    return std::string();
  });
  if (mpi::rank(comm) == 0) std::printf("weft plot: wrote %s\n", request.output.c_str());
  return kExitOk;
}

}  // namespace

Subcommand add_plot_command(CLI::App& weft) {
  CLI::App* cmd = weft.add_subcommand(
      "plot",
      "Draw weft's outputs with gnuplot as PNG or SVG (by the --output extension): "
      "training curves, MGRIT convergence, per-rank batch timing, scaling predictions, timelines "
      "of traced runs.");
  cmd->require_subcommand(1);
  auto request = std::make_shared<report::PlotRequest>();
  for (const report::PlotKindInfo& k : report::plot_kinds()) {
    CLI::App* sub = cmd->add_subcommand(k.name, k.summary);
    sub->add_option("inputs", request->inputs, k.inputs)->required()->type_name("FILE...");
    sub->add_option("-o,--output", request->output, "the picture: a path ending in .png or .svg")
        ->required()
        ->type_name("PATH");
    sub->add_option("--title", request->title, "the picture's title")->type_name("TEXT");
    if (k.kind == report::PlotKind::Training)
      sub->add_option("--x", request->x_axis,
                      "the x axis: epoch, or time (each run's wall time: runs of different "
                      "cost compared at equal time; default epoch)")
          ->type_name("epoch|time");
    sub->callback([request, kind = k.kind] { request->kind = kind; });
  }
  return Subcommand{cmd, [request](MPI_Comm comm) { return run_plot(*request, comm); }, nullptr};
}

}  // namespace weft::cli
