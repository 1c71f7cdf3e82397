#pragma once
// `weft plot`: pictures of weft's own outputs, drawn by gnuplot (Debian's gnuplot-nox) as PNG or
// SVG (by the --output extension):
//   training     loss and accuracy per epoch (`weft train --metrics` JSON lines; several files
//                side by side)
//   convergence  residual per iteration (`weft mgrit --json`; several runs in one picture)
//   timing       time per batch per rank, split into steps / waiting / bookkeeping / outside
//                the solver (the "per_rank" field of `weft train --metrics`)
//   scaling      batch time and speedup against the rank count (`weft predict --json`:
//                {"predictions": [{"ranks", "batch_ms", "speedup_vs_serial"}], "serial_batch_ms"})
//   timeline     every event of one trace (`weft train --trace`), ranks as rows, time as x:
//                steps coloured by level and direction, transfers, reductions, waits
// A missing or malformed input: one line naming the file and what is wrong, exit code 2.
// Rank 0 does the work; the other ranks learn the verdict. Docs: docs/plots.md.
#include "cli_support.hpp"

namespace weft::cli {

Subcommand add_plot_command(CLI::App& weft);

}  // namespace weft::cli
