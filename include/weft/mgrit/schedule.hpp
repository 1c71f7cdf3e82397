#pragma once
// The solver's schedule, replayed: what every rank of a P-rank solve does, in order (steps,
// messages, reductions), recorded by running the real Solver once per virtual rank over a
// recording transport (no MPI traffic, no App work); and a virtual clock that prices it.
//
//   Schedule s = record_schedule(intervals, options, ranks, bytes_of_point);
//   Timeline t = simulate(s, cost);   // t.makespan: seconds of the slowest rank
//
// Why recording works one rank at a time: with a fixed iteration count (tolerances off) the
// solver's control flow depends on the rank, the options and the grid only, never on values, so
// each rank's sequence is the one it would follow in a real run. Receives are answered with a
// placeholder; the clock later matches each receive with its send (per sender, receiver and tag,
// in order, as MPI does).
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "weft/mgrit/options.hpp"
#include "weft/mgrit/types.hpp"

namespace weft::mgrit {

struct Event {
  /// Restrict / Interpolate: a state moved between levels `level` - 1 and `level` (App::coarsen,
  /// App::refine; copies for Apps without spatial coarsening).
  /// Mark: costs nothing; the clock's time there is kept (Timeline::marks), e.g. where a
  /// replayed batch or phase begins and ends.
  enum class Kind { Step, Send, Recv, Reduce, Compute, Restrict, Interpolate, Mark };
  Kind kind = Kind::Compute;
  int level = 0;                             ///< Step; Restrict, Interpolate: the coarse level
  Direction direction = Direction::Forward;  ///< Step, Restrict, Interpolate: the solve's
  index_t from = 0, to = 0;                  ///< Step: user numbering (from > to in reverse);
                                             ///< Restrict, Interpolate: the state's fine point
  bool done = false;                         ///< Step: part of the final sweep (StepInfo::done)
  int visit = 0;  ///< Step: how many earlier steps of this rank's solve had the same level,
                  ///< from and to (record_schedule): Apps that keep per-step data price repeats
  int peer = -1;  ///< Send: receiver; Recv: sender
  int tag = 0;    ///< Send, Recv; Reduce: 0 inside a solve; Mark: id
  std::size_t bytes = 0;  ///< Send, Recv; Reduce: the data reduced
  double seconds = 0;     ///< Compute: fixed work (open, close, optimizer)
  /// Reduce: the ranks taking part, ascending (null: every rank). The k-th reduction of a group
  /// on one rank matches the k-th of the same group on the others.
  std::shared_ptr<const std::vector<int>> group;

  static Event step(int level, Direction direction, index_t from, index_t to) {
    Event e;
    e.kind = Kind::Step;
    e.level = level;
    e.direction = direction;
    e.from = from;
    e.to = to;
    return e;
  }
  /// kind: Send (peer: the receiver) or Recv (peer: the sender).
  static Event message(Kind kind, int peer, int tag, std::size_t bytes) {
    Event e;
    e.kind = kind;
    e.peer = peer;
    e.tag = tag;
    e.bytes = bytes;
    return e;
  }
  static Event reduce(int tag, std::size_t bytes = 0) {
    Event e;
    e.kind = Kind::Reduce;
    e.tag = tag;
    e.bytes = bytes;
    return e;
  }
  static Event compute(double seconds) {
    Event e;
    e.kind = Kind::Compute;
    e.seconds = seconds;
    return e;
  }
  static Event mark(int id) {
    Event e;
    e.kind = Kind::Mark;
    e.tag = id;
    return e;
  }
};

/// One event list per rank.
using Schedule = std::vector<std::vector<Event>>;

/// Bytes of the state at fine point p (user numbering) on `level`, as App::buffer_size would
/// pack it: the level matters for Apps that coarsen in space (smaller coarse states).
using StateBytes = std::function<std::size_t(index_t point, int level)>;

/// Every rank's events of one solve of the uniform grid 0..intervals (as the nn layer builds
/// it) with `options` (direction, levels, cf, relaxation, cycle, rank blocks, ...) on `ranks`
/// ranks. Exactly options.max_iterations() iterations run (tolerances are ignored: the schedule
/// must not depend on values). Throws InvalidOption as the Solver would.
Schedule record_schedule(index_t intervals, Options options, int ranks, const StateBytes& bytes);

/// Appends `more[r]` to `into[r]` for every rank, adding `tag_offset` to its message tags so
/// that phases never match each other's messages.
void append(Schedule& into, const Schedule& more, int tag_offset);

struct CostModel {
  /// The price of one Step, Restrict or Interpolate event.
  std::function<double(const Event&)> step_seconds;
  double latency = 1e-6;    ///< seconds per message
  double bandwidth = 1e10;  ///< bytes per second
  /// A reduction of `bytes` over P ranks: 2 ceil(log2 P) messages of latency + bytes/bandwidth
  /// (recursive doubling), after the last rank arrives.
  double reduce_seconds(int ranks, std::size_t bytes = 0) const;
  double message_seconds(std::size_t bytes) const {
    return latency + static_cast<double>(bytes) / bandwidth;
  }
};

struct Timeline {
  std::vector<double> finish;  ///< per rank: when its last event ends
  double makespan = 0;         ///< max of finish
  std::vector<double> busy;    ///< per rank: seconds in Step and Compute events
  /// per rank: (id, time) of every Mark event, in the rank's order
  std::vector<std::vector<std::pair<int, double>>> marks;
};

/// Runs every rank's events on its own virtual clock from 0: a step, transfer or compute advances
/// it, a send leaves at the sender's time and arrives latency + bytes/bandwidth later, a receive
/// waits for its message, a reduction waits for every rank of its group. Throws Error on a
/// schedule that cannot finish, naming the blocked event (a receive without its send, ranks
/// reducing a different number of times, a group naming a rank that is not in the schedule or not
/// this one).
Timeline simulate(const Schedule& schedule, const CostModel& cost);

}  // namespace weft::mgrit
