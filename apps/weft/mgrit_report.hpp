#pragma once
// `weft mgrit` output: the XBraid-like report on stdout, the JSON summary (--json) and the
// fine-grid solution as CSV (--output).
#include <mpi.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mgrit_settings.hpp"
#include "weft/mgrit/hierarchy.hpp"
#include "weft/mgrit/options.hpp"
#include "weft/mgrit/result.hpp"

namespace weft::cli {

/// What a run produced, gathered for the report.
struct Summary {
  std::vector<mgrit::index_t> intervals;  ///< per level
  std::vector<int> cf_built;              ///< the hierarchy's cf per level (0: explicit lists)
  mgrit::Result result;
  double setup = 0, solve = 0, step = 0, comm = 0, other = 0;  ///< max over ranks
  std::vector<long long> steps;                                ///< per level, summed over ranks
  /// --gradient: J, dJ/dp (p named by `parameter`) and the adjoint solve's result.
  std::optional<double> objective, gradient;
  std::string parameter;
  mgrit::Result adjoint;
};

/// One observed fine point: its time and values.
struct Record {
  double t = 0;
  std::vector<double> values;
};

/// Timings (max over the ranks of `comm`) and steps per level (summed) of one solve, on rank 0.
void collect_statistics(const mgrit::Statistics& st, MPI_Comm comm, Summary& sum);
void describe_hierarchy(const mgrit::Hierarchy& h, Summary& sum);

void print_header(const MgritSettings& s, const mgrit::Options& o, const Summary& sum);
void print_report(const Summary& sum);
void write_json(const MgritSettings& s, const mgrit::Options& o, const Summary& sum);
/// Collective over `comm`: gathers every rank's observed points on rank 0, which writes them.
void write_csv(const MgritSettings& s, const std::map<mgrit::index_t, Record>& observed,
               MPI_Comm comm, int width);

/// "1", "0.5", "1e-10": numbers as the report prints them.
std::string number(double x);

}  // namespace weft::cli
