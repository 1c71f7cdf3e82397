#pragma once
// `weft replay FILE`: the time each batch of a traced run (`weft train --trace`) would take with
// one core per rank, from the trace's own CPU times and message dependencies (critical-path
// replay, weft/mgrit/replay.hpp). A bad trace: one line, exit code 2. Docs: docs/tracing.md.
#include "cli_support.hpp"

namespace weft::cli {

Subcommand add_replay_command(CLI::App& weft);

}  // namespace weft::cli
