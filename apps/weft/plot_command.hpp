#pragma once
// `weft plot KIND INPUTS... -o PICTURE`: the pictures of weft/report/plot.hpp. A missing or
// malformed input: one line naming the file and what is wrong, exit code 2. Rank 0 does the
// work; the other ranks learn the verdict. Docs: docs/plots.md.
#include "cli_support.hpp"

namespace weft::cli {

Subcommand add_plot_command(CLI::App& weft);

}  // namespace weft::cli
