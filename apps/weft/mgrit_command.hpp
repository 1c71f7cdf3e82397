#pragma once
// `weft mgrit`: runs a model problem of the registry (mgrit_problems.hpp) with weft::mgrit::Solver
// and prints an XBraid-like report; optionally writes a JSON summary (--json) and the fine-grid
// solution as CSV (--output). Flags and defaults: docs/mgrit.md.
#include "cli_support.hpp"

namespace weft::cli {

Subcommand add_mgrit_command(CLI::App& weft);

}  // namespace weft::cli
