#pragma once
// Reads a trace written by `weft train --trace` (weft/util/trace.hpp; docs/tracing.md) back into
// events per rank, for `weft replay` and `weft plot timeline`.
#include <string>
#include <vector>

#include "weft/mgrit/replay.hpp"

namespace weft::report {

struct TraceFile {
  int ranks = 0;
  std::string model;  ///< otherData.model ("resnet", "gru", ...); empty where not recorded
  std::vector<std::vector<mgrit::TracedEvent>> events;  ///< per world rank
  std::vector<std::vector<std::string>> categories;     ///< per rank, per event: "forward", ...
  std::vector<std::vector<int>> levels;                 ///< per rank, per event: level or -1
};

/// Throws weft::InvalidOption "input 'PATH': ..." naming what is wrong: an unreadable file,
/// text that is not JSON (a truncated file), not a weft trace, an event without its fields.
TraceFile read_trace(const std::string& path);

}  // namespace weft::report
