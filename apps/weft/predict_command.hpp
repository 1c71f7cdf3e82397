#pragma once
// `weft predict`: time per training batch at P = 1, 2, 4, ... ranks for the network and MGRIT
// settings of `weft train` (the same flags), from costs measured on this machine and the
// solvers' replayed schedule (predict.hpp).
#include "cli_support.hpp"

namespace weft::cli {

Subcommand add_predict_command(CLI::App& weft);

}  // namespace weft::cli
