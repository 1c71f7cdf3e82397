#pragma once
// Timelines of a run: every step evaluation, message, reduction and phase of the traced batches,
// per rank, written as one Chrome trace-event JSON file (Perfetto and chrome://tracing open it;
// `weft replay` prices it; docs/tracing.md describes the fields).
//
//   weft::trace::Settings s;
//   s.batches = 4;                                      // batches 2..5 of the run
//   weft::trace::start(s);                              // on every rank
//   for (batch ...) { weft::trace::batch_begin(k); ... weft::trace::batch_end(k); }
//   weft::trace::write("run.trace.json", MPI_COMM_WORLD);  // collective; rank 0 writes
//
// Off by default and then free: every hook is one test of a global pointer. When on, each
// event costs two clock reads of wall time and two of the thread's own CPU time
// (CLOCK_THREAD_CPUTIME_ID), so the replay can price a rank by its CPU time, not by its wall
// time (which, on an oversubscribed machine, includes the time other ranks held the core).
// Peers and reduction groups are recorded as ranks of MPI_COMM_WORLD, whatever communicator
// carried them. MPI and the standard library only: the MGRIT core uses it.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::trace {

/// What an event is, for the replay: Compute costs its CPU time; Send leaves at its start;
/// Wait completes no earlier than the matching send's arrival; Reduce waits for its group.
/// Phase events (a batch, its forward, backward, optimizer step) enclose others and cost
/// nothing themselves: they say which part of a batch the events inside belong to.
enum class Kind : std::uint8_t { Compute, Send, Wait, Reduce, Phase };

struct Event {
  const char* name = "";      ///< "step", "send", "wait", "allreduce", "open", ... (static text)
  const char* category = "";  ///< "forward", "adjoint", "mpi", "train", "transfer", ...
  Kind kind = Kind::Compute;
  std::int64_t wall_ns = 0, wall_duration_ns = 0;  ///< since the trace started (steady clock)
  std::int64_t cpu_ns = 0, cpu_duration_ns = 0;    ///< the thread's CPU clock
  std::int64_t batch = -1;                         ///< the batch it belongs to (-1: none)
  // Step: level, from, to, done, iteration; Send/Wait: peer, tag, bytes; Reduce: bytes, group.
  int level = -1;
  std::int64_t from = -1, to = -1;
  int done = -1;
  int iteration = -1;
  int peer = -1;
  int tag = -1;
  std::int64_t bytes = -1;
  int group = -1;  ///< index into the recorder's groups (lists of world ranks)
};

struct Settings {
  std::int64_t first_batch = 2;  ///< the first batches carry one-time costs (allocations)
  std::int64_t batches = 4;      ///< how many batches to record from first_batch on
};

class Recorder;
/// The active recorder, or null when tracing is off.
extern Recorder* active_recorder;
inline bool on() {
  return active_recorder != nullptr;
}

/// Starts recording on this rank (replaces an earlier recorder's events).
void start(const Settings& settings);
/// Stops recording and discards the events (no file).
void stop();
/// Whether events of the current batch are being kept (on() and inside the window).
bool recording();

/// This rank's events kept so far (empty when tracing is off), in the order they ended.
std::vector<Event> recorded();

/// Marks the start and end of training batch `index` (0-based, counted by the caller). Events
/// outside [first_batch, first_batch + batches) are not kept; the batch's own wall time is.
void batch_begin(std::int64_t index);
void batch_end(std::int64_t index);
/// The MGRIT iteration the solver is in (step events carry it); -1 outside iterations.
void set_iteration(int iteration);

/// Collective over `comm`: gathers every rank's events to rank 0 of `comm`, which writes the
/// JSON file; then stops recording. Throws weft::Error (on every rank) when the file cannot be
/// written. `metadata` is a JSON object's members ("\"key\": value, ...") added to otherData.
void write(const std::string& path, MPI_Comm comm, const std::string& metadata = "");

/// A timed event: records from construction to destruction when recording() (else nothing).
class Span {
 public:
  Span(const char* name, const char* category, Kind kind = Kind::Compute) {
    if (on()) begin(name, category, kind);
  }
  /// A broadcast of `bytes` from `root` (a rank of `comm`): on the root a Send to every other
  /// rank of `comm`, elsewhere a Wait for the root (the event carries the group and the root).
  Span(const char* name, MPI_Comm comm, int root, std::size_t bytes);
  ~Span() {
    if (live_) end();
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

  bool live() const { return live_; }
  /// Step arguments (user numbering of the points; done: the final sweep).
  Span& step(int level, std::int64_t from, std::int64_t to, bool done) {
    if (live_) {
      event_.level = level;
      event_.from = from;
      event_.to = to;
      event_.done = done ? 1 : 0;
    }
    return *this;
  }
  Span& level(int l) {
    if (live_) event_.level = l;
    return *this;
  }
  /// The peer (a rank of `comm`), tag and size of a message.
  Span& message(MPI_Comm comm, int peer, int tag, std::size_t bytes) {
    if (live_) set_message(comm, peer, tag, bytes);
    return *this;
  }
  /// The communicator whose ranks take part in a reduction, and the bytes reduced.
  Span& reduction(MPI_Comm comm, std::size_t bytes) {
    if (live_) set_reduction(comm, bytes);
    return *this;
  }

 private:
  void begin(const char* name, const char* category, Kind kind);
  void end();
  void set_message(MPI_Comm comm, int peer, int tag, std::size_t bytes);
  void set_reduction(MPI_Comm comm, std::size_t bytes);
  Event event_;
  bool live_ = false;
};

/// A send posted to `peer` (a rank of `comm`): a zero-length Send event.
inline void sent(MPI_Comm comm, int peer, int tag, std::size_t bytes) {
  if (on()) Span("send", "mpi", Kind::Send).message(comm, peer, tag, bytes);
}
/// A message from `peer` completed by the Wait span just before (a wait for several messages
/// at once: one Wait span around it, this for each further message).
inline void also_received(MPI_Comm comm, int peer, int tag, std::size_t bytes) {
  if (on()) Span("wait", "mpi", Kind::Wait).message(comm, peer, tag, bytes);
}

}  // namespace weft::trace
