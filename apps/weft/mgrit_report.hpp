#pragma once
// `weft mgrit` output: the XBraid-like report on stdout, the JSON summary (--json) and the
// fine-grid solution as CSV (--output).
#include <string>

#include "mgrit_settings.hpp"
#include "weft/mgrit/problems/catalogue.hpp"

namespace weft::cli {

using Summary = mgrit::problems::RunSummary;

/// The header (before the solve: the summary's hierarchy and options), then the report.
void print_header(const MgritSettings& s, const Summary& sum);
void print_report(const Summary& sum);
void write_json(const MgritSettings& s, const Summary& sum);
/// The recorded fine-grid solution as CSV (--output).
void write_csv(const MgritSettings& s, const Summary& sum);

/// "1", "0.5", "1e-10": numbers as the report prints them.
std::string number(double x);

}  // namespace weft::cli
