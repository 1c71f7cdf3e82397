#pragma once
// Pictures of weft's own outputs, drawn by gnuplot (Debian's gnuplot-nox) as PNG or SVG (by the
// output's extension):
//   training     loss and accuracy per epoch (JSON lines of `weft train --metrics` or a
//                train::MetricsFile observer; several files side by side)
//   convergence  residual per iteration (`weft mgrit --json`; several runs in one picture)
//   timing       time per batch per rank, split into steps / waiting / bookkeeping / outside
//                the solver (the "per_rank" field of the metrics lines)
//   scaling      batch time and speedup against the rank count (`weft predict --json`:
//                {"predictions": [{"ranks", "batch_ms", "speedup_vs_serial"}], "serial_batch_ms"})
//   timeline     every event of one trace (`weft train --trace`), ranks as rows, time as x:
//                steps coloured by level and direction, transfers, reductions, waits
// Docs: docs/plots.md.
#include <string>
#include <vector>

namespace weft::report {

enum class PlotKind { Training, Convergence, Timing, Scaling, Timeline };

struct PlotKindInfo {
  PlotKind kind;
  const char* name;     ///< "training"
  const char* summary;  ///< one line of help
  const char* inputs;   ///< which files it reads
};

/// Every kind, in the order of the help.
const std::vector<PlotKindInfo>& plot_kinds();

struct PlotRequest {
  PlotKind kind = PlotKind::Training;
  std::vector<std::string> inputs;
  std::string output;  ///< ends in .png or .svg; its folder must be writable
  std::string title;   ///< empty: one that names the kind
  /// training: the x axis, "epoch" or "time" (the run's wall time at the end of each epoch,
  /// the sum of its epoch_seconds: runs of different cost compared at equal time).
  std::string x_axis = "epoch";
};

/// Writes the picture. Throws weft::InvalidOption("plot", "output", ...) for an output that is
/// not a writable .png or .svg path (checked before any input is read), weft::InvalidOption
/// "input 'PATH': ..." naming what is wrong with an input (unreadable, not JSON, a field
/// missing), weft::Error when gnuplot is missing or fails.
void plot(const PlotRequest& request);

}  // namespace weft::report
