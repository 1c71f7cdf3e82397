#include "weft/mgrit/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <string>
#include <tuple>

#include "weft/mgrit/hierarchy.hpp"
#include "weft/mgrit/solver.hpp"
#include "weft/util/error.hpp"

namespace weft::mgrit {
namespace {

/// A state that only knows its fine point and level; its packed size is the real state's.
struct Mark {
  index_t point = 0;
  int level = 0;
};

/// Records each step; does no work.
struct RecordingApp {
  using State = Mark;
  std::vector<Event>* log = nullptr;
  const StateBytes* bytes = nullptr;
  Direction direction = Direction::Forward;

  Mark init(double t) const { return Mark{static_cast<index_t>(std::llround(t)), 0}; }
  void step(const Mark&, Mark& out, double, double, const StepInfo& info) {
    Event e = Event::step(info.level, info.direction, info.from, info.to);
    e.done = info.done;
    log->push_back(e);
    out.point = info.to;
    out.level = info.level;
  }
  void sum(double, const Mark&, double, Mark&) const {}
  double norm(const Mark&) const { return 1.0; }
  void copy(const Mark& src, Mark& dst) const { dst = src; }
  std::size_t buffer_size(const Mark& like) const {
    return std::max((*bytes)(like.point, like.level), sizeof(Mark));
  }
  // "Spatial" to follow each state's level (message sizes per level) and to note each transfer
  // (priced by the cost model: a restriction or interpolation where the App coarsens in space,
  // a copy elsewhere); the solver's steps and messages are the same with or without them.
  void coarsen(const Mark& fine, Mark& coarse, int fine_level) const {
    coarse = Mark{fine.point, fine_level + 1};
    note(Event::Kind::Restrict, fine.point, fine_level + 1);
  }
  void refine(const Mark& coarse, Mark& fine, int coarse_level) const {
    fine = Mark{coarse.point, coarse_level - 1};
    note(Event::Kind::Interpolate, coarse.point, coarse_level);
  }
  void note(Event::Kind kind, index_t point, int coarse_level) const {
    Event e;
    e.kind = kind;
    e.level = coarse_level;
    e.direction = direction;
    e.from = e.to = point;
    log->push_back(e);
  }
  // Nothing travels: a received state keeps its point and level (the solver unpacks into a
  // state like the sender's, the predecessor of the rank's first point on the level).
  void pack(const Mark&, void*) const {}
  void unpack(const void*, Mark&) const {}
};

/// One rank of a virtual communicator: messages and reductions become events.
class RecordingTransport {
 public:
  struct Request {
    bool active = false;
    int peer = -1, tag = 0;
    std::size_t bytes = 0;
  };

  RecordingTransport(int rank, int ranks, std::vector<Event>* log)
      : rank_(rank), ranks_(ranks), log_(log) {}

  static Request null_request() { return Request{}; }
  static bool active(const Request& r) { return r.active; }
  int rank() const { return rank_; }
  int size() const { return ranks_; }
  std::string where() const {
    return "virtual rank " + std::to_string(rank_) + "/" + std::to_string(ranks_);
  }
  void irecv(void*, std::size_t bytes, int source, int tag, Request& r) {
    r = Request{true, source, tag, bytes};
  }
  void isend(const void*, std::size_t bytes, int dest, int tag, Request& r) {
    r = Request{true, dest, tag, bytes};
    log_->push_back(message(Event::Kind::Send, r));
  }
  std::size_t wait_recv(Request& r) {
    log_->push_back(message(Event::Kind::Recv, r));
    r.active = false;
    return r.bytes;
  }
  void wait_send(Request& r) { r.active = false; }
  void progress(Request&, Request&) {}
  double allreduce(double, bool, const char*) {
    log_->push_back(Event::reduce(0, sizeof(double)));
    return 1.0;  // any finite residual: the tolerances are off
  }

 private:
  static Event message(Event::Kind kind, const Request& r) {
    return Event::message(kind, r.peer, r.tag, r.bytes);
  }
  int rank_, ranks_;
  std::vector<Event>* log_;
};

}  // namespace

Schedule record_schedule(index_t intervals, Options options, int ranks, const StateBytes& bytes) {
  if (ranks < 1) throw InvalidOption("schedule: ranks must be >= 1, got " + std::to_string(ranks));
  // A fixed number of iterations: the residuals the recording sees are placeholders.
  options.abs_tol(0).rel_tol(0).collect_timings(false);
  const TimeGrid grid = TimeGrid::uniform(0.0, static_cast<double>(intervals), intervals);
  Schedule schedule(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    std::vector<Event>& log = schedule[static_cast<size_t>(r)];
    RecordingApp app;
    app.log = &log;
    app.bytes = &bytes;
    app.direction = options.direction();
    Solver<RecordingApp, RecordingTransport> solver(app, RecordingTransport(r, ranks, &log), grid,
                                                    options);
    solver.solve();
    std::map<std::tuple<int, index_t, index_t>, int> seen;
    for (Event& e : log)
      if (e.kind == Event::Kind::Step) e.visit = seen[{e.level, e.from, e.to}]++;
  }
  return schedule;
}

void append(Schedule& into, const Schedule& more, int tag_offset) {
  if (into.size() < more.size()) into.resize(more.size());
  for (size_t r = 0; r < more.size(); ++r)
    for (Event e : more[r]) {
      if (e.kind == Event::Kind::Send || e.kind == Event::Kind::Recv) e.tag += tag_offset;
      into[r].push_back(e);
    }
}

double CostModel::reduce_seconds(int ranks, std::size_t bytes) const {
  if (ranks <= 1) return 0.0;
  return 2.0 * std::ceil(std::log2(static_cast<double>(ranks))) * message_seconds(bytes);
}

Timeline simulate(const Schedule& schedule, const CostModel& cost) {
  const int ranks = static_cast<int>(schedule.size());
  Timeline out;
  out.finish.assign(schedule.size(), 0.0);
  out.busy.assign(schedule.size(), 0.0);
  out.marks.assign(schedule.size(), {});
  std::vector<size_t> pos(schedule.size(), 0);
  std::vector<bool> queued(schedule.size(), true);
  using Channel = std::tuple<int, int, int>;  // sender, receiver, tag
  std::map<Channel, std::deque<double>> in_flight;
  // Reductions: every member's k-th reduction of a group is one collective.
  struct Collective {
    int arrived = 0;
    double last_arrival = 0;
    std::size_t bytes = 0;
  };
  std::vector<int> everyone(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) everyone[static_cast<size_t>(r)] = r;
  std::map<std::vector<int>, std::vector<Collective>> collectives;
  std::map<std::pair<int, std::vector<int>>, int> done_by_rank;  // (rank, group) -> count
  std::deque<int> ready;
  for (int r = 0; r < ranks; ++r) ready.push_back(r);
  auto wake = [&](int r) {
    if (!queued[static_cast<size_t>(r)]) {
      queued[static_cast<size_t>(r)] = true;
      ready.push_back(r);
    }
  };
  std::vector<bool> at_reduction(schedule.size(), false);  // arrived, waiting for the others
  while (!ready.empty()) {
    const int r = ready.front();
    ready.pop_front();
    const auto ru = static_cast<size_t>(r);
    queued[ru] = false;
    const auto& events = schedule[ru];
    double& clock = out.finish[ru];
    while (pos[ru] < events.size()) {
      const Event& e = events[pos[ru]];
      bool blocked = false;
      switch (e.kind) {
        case Event::Kind::Step:
        case Event::Kind::Restrict:
        case Event::Kind::Interpolate: {
          const double s = cost.step_seconds(e);
          clock += s;
          out.busy[ru] += s;
          break;
        }
        case Event::Kind::Compute:
          clock += e.seconds;
          out.busy[ru] += e.seconds;
          break;
        case Event::Kind::Mark:
          out.marks[ru].emplace_back(e.tag, clock);
          break;
        case Event::Kind::Send: {
          if (e.peer < 0 || e.peer >= ranks)
            throw Error("schedule replay: rank " + std::to_string(r) + " sends to rank " +
                        std::to_string(e.peer) + " of " + std::to_string(ranks));
          in_flight[Channel{r, e.peer, e.tag}].push_back(clock + cost.message_seconds(e.bytes));
          wake(e.peer);
          break;
        }
        case Event::Kind::Recv: {
          auto it = in_flight.find(Channel{e.peer, r, e.tag});
          if (it == in_flight.end() || it->second.empty()) {
            blocked = true;
            break;
          }
          clock = std::max(clock, it->second.front());
          it->second.pop_front();
          break;
        }
        case Event::Kind::Reduce: {
          if (at_reduction[ru]) {
            blocked = true;
            break;
          }
          const std::vector<int>& members = e.group ? *e.group : everyone;
          if (std::find(members.begin(), members.end(), r) == members.end())
            throw Error("schedule replay: rank " + std::to_string(r) +
                        " takes part in a reduction of a group without it");
          for (int q : members)
            if (q < 0 || q >= ranks)
              throw Error("schedule replay: a reduction's group names rank " + std::to_string(q) +
                          " of " + std::to_string(ranks));
          int& k = done_by_rank[{r, members}];
          auto& list = collectives[members];
          if (list.size() <= static_cast<size_t>(k)) list.resize(static_cast<size_t>(k) + 1);
          Collective& c = list[static_cast<size_t>(k)];
          ++c.arrived;
          c.last_arrival = std::max(c.last_arrival, clock);
          c.bytes = std::max(c.bytes, e.bytes);
          ++k;
          at_reduction[ru] = true;
          if (c.arrived == static_cast<int>(members.size())) {
            // The last to arrive releases every member: all leave at the same time.
            const double leave =
                c.last_arrival + cost.reduce_seconds(static_cast<int>(members.size()), c.bytes);
            for (int q : members) {
              out.finish[static_cast<size_t>(q)] = leave;
              ++pos[static_cast<size_t>(q)];  // every member's k-th reduction is behind it
              at_reduction[static_cast<size_t>(q)] = false;
              if (q != r) wake(q);
            }
            continue;  // pos already advanced
          }
          blocked = true;
          break;
        }
      }
      if (blocked) break;
      ++pos[ru];
    }
  }
  // A stuck schedule: name a blocking receive first (its send never comes: the cause), else a
  // reduction that some member of its group never reaches.
  for (const bool receives : {true, false})
    for (int r = 0; r < ranks; ++r) {
      const auto& events = schedule[static_cast<size_t>(r)];
      const size_t at = pos[static_cast<size_t>(r)];
      if (at >= events.size() || (events[at].kind == Event::Kind::Recv) != receives) continue;
      const Event& e = events[at];
      const std::string what = receives
                                   ? "a receive from rank " + std::to_string(e.peer) + " (tag " +
                                         std::to_string(e.tag) + ") whose send never comes"
                                   : "a reduction that not every rank of its group reaches";
      throw Error("schedule replay: rank " + std::to_string(r) + " cannot go past event " +
                  std::to_string(at) + " of " + std::to_string(events.size()) + ": " + what);
    }
  out.makespan = ranks ? *std::max_element(out.finish.begin(), out.finish.end()) : 0.0;
  return out;
}

}  // namespace weft::mgrit
