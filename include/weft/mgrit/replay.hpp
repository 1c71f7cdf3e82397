#pragma once
// Critical-path replay of a traced run (weft/util/trace.hpp): the time each traced batch would
// take with one core per rank. Every rank's events become a schedule (schedule.hpp) priced by
// the events' own CPU time:
//   - a compute event (a step, a transfer, the open and close layers, the loss) costs its CPU
//     time, and so does the CPU time between events (bookkeeping the trace does not name);
//   - a send leaves when its rank reaches it and arrives latency + bytes / bandwidth later;
//   - a wait completes no earlier than its message's arrival (its own CPU time, spinning in
//     MPI, is not counted);
//   - a reduction waits for every rank of its group; a broadcast's root sends to every other
//     member.
// So waiting is recomputed from the dependencies, not taken from the run, which on a machine
// with fewer cores than ranks waited for the core as well as for its neighbours.
//
//   Replay r = replay(events_by_rank, {2e-6, 5e9});
//   r.median_batch;  // seconds
#include <cstdint>
#include <string>
#include <vector>

#include "weft/util/trace.hpp"

namespace weft::mgrit {

/// One event of a trace as read back (times in seconds).
struct TracedEvent {
  trace::Kind kind = trace::Kind::Compute;
  std::string name;  ///< Phase events: "batch", "forward", "backward", "optimizer"
  double wall_start = 0, wall_duration = 0;
  double cpu_start = 0, cpu_duration = 0;
  std::int64_t batch = -1;
  int peer = -1;  ///< world rank (Send: receiver; Wait: sender; broadcast: the root)
  int tag = -1;
  std::int64_t bytes = 0;
  std::vector<int> group;  ///< Reduce and broadcasts: the world ranks taking part
};

struct ReplayLink {
  double latency = 2e-6;   ///< seconds per message
  double bandwidth = 5e9;  ///< bytes per second
};

struct ReplayedBatch {
  std::int64_t index = 0;
  double batch = 0;  ///< replayed seconds: from the previous batch's end (slowest rank) to this
  double forward = 0, backward = 0, optimizer = 0;  ///< the slowest rank's phase
  double measured = 0;  ///< the run's wall time of this batch (slowest rank)
};

struct Replay {
  int ranks = 0;
  std::vector<ReplayedBatch> batches;
  double median_batch = 0, median_forward = 0, median_backward = 0, median_optimizer = 0;
  double measured_median_batch = 0;
  /// Per rank: CPU seconds priced (compute events and the time between them) over all batches.
  std::vector<double> busy;
};

/// `events[r]`: rank r's events in any order. Throws weft::BadData naming the rank and event
/// when the trace cannot be replayed (a wait without its send, unmatched reductions, a peer
/// outside the ranks, no batches).
Replay replay(const std::vector<std::vector<TracedEvent>>& events, const ReplayLink& link);

}  // namespace weft::mgrit
