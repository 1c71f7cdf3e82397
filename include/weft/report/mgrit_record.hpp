#pragma once
// The JSON record of a catalogue run (weft/mgrit/problems/run_request.hpp), as `weft mgrit
// --json` writes it: the problem and its parameters, the options as given and as built (per
// level), the residual history with its factors, the timings and steps per level, and with a
// gradient J, dJ/dp and the adjoint solve's history. docs/mgrit.md describes the fields.
#include <string>

#include "weft/mgrit/problems/run_request.hpp"

namespace weft::report {

/// The record as JSON text (2-space indented). `points_source` names where explicit coarse
/// levels came from ("" for none); `ranks` is the run's rank count.
std::string mgrit_run_record(const mgrit::problems::RunRequest& run,
                             const mgrit::problems::RunSummary& summary,
                             const std::string& points_source, int ranks);

}  // namespace weft::report
