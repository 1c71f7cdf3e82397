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
// With reference costs (`weft replay --costs-from`), each compute event is priced instead at
// what the same computation cost in a reference run, the same network traced at one rank: a run
// of P ranks on fewer cores carries contention in every event's CPU time (cores shared, caches
// cold), and this takes it out event by event. The CPU time priced by no reference event (the
// time between events, posting sends) is divided by the contention measured on the matched ones.
//
//   Replay r = replay(events_by_rank, {2e-6, 5e9});
//   r.median_batch;  // seconds
#include <cstdint>
#include <map>
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
  /// Compute events: what was computed, the same in runs at any rank count (the direction,
  /// name, level, points and final sweep of a step), and its family (the same without the
  /// points: layers alike cost alike). Empty where the trace does not say.
  std::string key, family;
};

/// Prices of compute events from a reference run (see above), by key and by the event's
/// occurrence among the same key's events of its batch (a coarse adjoint step records its graph
/// at its first visit in a batch and reuses it after).
class ReferenceCosts {
 public:
  /// `reference[r]`: one rank's events; the ranks of several runs side by side price as one run
  /// whose medians are over them all.
  explicit ReferenceCosts(const std::vector<std::vector<TracedEvent>>& reference);

  enum class Match { Key, Family, None };
  struct Price {
    double seconds = 0;
    Match match = Match::None;
  };
  /// The median CPU seconds of the key's occurrence-th event per batch in the reference (of all
  /// its events where no batch had that many); else the median of the family's first visits
  /// (occurrence 0) or repeats; else Match::None.
  Price price(const TracedEvent& e, int occurrence) const;

 private:
  // Medians by "key#occurrence", by key, by "family/first" or "family/repeat".
  std::map<std::string, double> by_occurrence_, by_key_, by_family_;
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
  /// With reference costs: the matched compute events' traced CPU time over their reference
  /// prices (how much slower this run computed), and the shares of the traced compute events'
  /// CPU time priced by key and by family.
  double contention = 1;
  double priced_by_key = 0, priced_by_family = 0;
};

/// `events[r]`: rank r's events in any order. Throws weft::BadData naming the rank and event
/// when the trace cannot be replayed (a wait without its send, unmatched reductions, a peer
/// outside the ranks, no batches, a reference that prices none of its compute events).
Replay replay(const std::vector<std::vector<TracedEvent>>& events, const ReplayLink& link,
              const ReferenceCosts* reference = nullptr);

}  // namespace weft::mgrit
