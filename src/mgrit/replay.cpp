#include "weft/mgrit/replay.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <string>

#include "weft/mgrit/schedule.hpp"
#include "weft/util/error.hpp"

namespace weft::mgrit {

namespace {

// Mark ids: 8 per batch, one per boundary of the batch and of its three phases.
enum Boundary {
  kBatchBegin,
  kBatchEnd,
  kForwardBegin,
  kForwardEnd,
  kBackwardBegin,
  kBackwardEnd,
  kOptimizerBegin,
  kOptimizerEnd
};
constexpr int kBroadcastTag = -100;  // MPI tags are >= 0: no real message uses it

int phase_code(const std::string& name) {
  if (name == "batch") return kBatchBegin;
  if (name == "forward") return kForwardBegin;
  if (name == "backward") return kBackwardBegin;
  if (name == "optimizer") return kOptimizerBegin;
  return -1;
}

int mark_id(std::int64_t batch, int boundary) {
  return static_cast<int>(batch * 8 + boundary);
}

/// A point of a rank's timeline: an event's start, or a phase's begin or end. Points are ordered
/// by batch, then by wall time; at equal times a phase begins before the events that start
/// then, and ends after them (zero-length events at a phase's end belong to it).
struct Point {
  std::int64_t batch = 0;
  double wall = 0;
  int order = 0;  ///< 0 phase begin, 1 event, 2 phase end
  const TracedEvent* event = nullptr;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Repricing from a reference run (ReferenceCosts): the sums that give the contention, and per
/// rank the compute events (indices into its schedule) whose traced CPU time it divides.
struct Repricing {
  const ReferenceCosts* reference = nullptr;
  double traced_matched = 0, reference_matched = 0;  // CPU seconds of the matched events
  double keyed = 0, by_key = 0, by_family = 0;       // traced CPU seconds of keyed events
  std::vector<std::vector<size_t>> unpriced;         // per rank
};

std::string where(int rank, const TracedEvent& e) {
  return "rank " + std::to_string(rank) + ", event '" + e.name + "' at " +
         std::to_string(e.wall_start * 1e3) + " ms";
}

/// Rank r's schedule: its events in wall order, the CPU time between them as compute.
std::vector<Event> rank_schedule(
    int r, const std::vector<TracedEvent>& events, int ranks,
    std::map<std::vector<int>, std::shared_ptr<const std::vector<int>>>& groups,
    Repricing& repricing) {
  std::vector<Point> points;
  for (const TracedEvent& e : events) {
    if (e.batch < 0) continue;
    if (e.kind == trace::Kind::Phase) {
      if (phase_code(e.name) < 0) continue;
      points.push_back({e.batch, e.wall_start, 0, &e});
      points.push_back({e.batch, e.wall_start + e.wall_duration, 2, &e});
    } else {
      points.push_back({e.batch, e.wall_start, 1, &e});
    }
  }
  std::stable_sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
    if (a.batch != b.batch) return a.batch < b.batch;
    if (a.wall != b.wall) return a.wall < b.wall;
    if (a.order != b.order) return a.order < b.order;
    // Nested phases: the enclosing one begins first and ends last.
    const double da = a.event->wall_duration, db = b.event->wall_duration;
    return a.order == 0 ? da > db : da < db;
  });
  std::vector<Event> out;
  std::vector<size_t>& unpriced = repricing.unpriced[static_cast<size_t>(r)];
  // CPU time the reference does not price: a run's own, divided by the contention later.
  auto traced = [&](double seconds) {
    if (repricing.reference) unpriced.push_back(out.size());
    out.push_back(Event::compute(seconds));
  };
  std::map<std::string, int> occurrences;  // per key, in this batch
  std::int64_t batch = -1;
  // A nested event's time is its enclosing event's; it still counts as a visit of its key, as
  // in the reference.
  auto compute = [&](const TracedEvent& e, bool nested) {
    if (!repricing.reference || e.key.empty()) {
      if (!nested) traced(e.cpu_duration);
      return;
    }
    if (e.batch != batch) {
      occurrences.clear();
      batch = e.batch;
    }
    const int visit = occurrences[e.key]++;
    if (nested) return;
    const ReferenceCosts::Price p = repricing.reference->price(e, visit);
    repricing.keyed += e.cpu_duration;
    if (p.match == ReferenceCosts::Match::None) return traced(e.cpu_duration);
    (p.match == ReferenceCosts::Match::Key ? repricing.by_key : repricing.by_family) +=
        e.cpu_duration;
    repricing.traced_matched += e.cpu_duration;
    repricing.reference_matched += p.seconds;
    out.push_back(Event::compute(p.seconds));
  };
  double cursor = -1;  // CPU time accounted up to here (-1: before the first batch)
  auto account = [&](double cpu) {
    if (cursor >= 0 && cpu > cursor) traced(cpu - cursor);
    cursor = std::max(cursor, cpu);
  };
  auto check_peer = [&](const TracedEvent& e, int peer) {
    if (peer < 0 || peer >= ranks)
      throw BadData("trace replay: " + where(r, e) + " names rank " + std::to_string(peer) +
                    "; the trace has ranks 0 to " + std::to_string(ranks - 1));
  };
  for (const Point& p : points) {
    const TracedEvent& e = *p.event;
    if (e.kind == trace::Kind::Phase) {
      const bool end = p.order == 2;
      const int code = phase_code(e.name) + (end ? 1 : 0);
      if (code == kBatchBegin) {
        cursor = e.cpu_start;
      } else {
        account(end ? e.cpu_start + e.cpu_duration : e.cpu_start);
      }
      out.push_back(Event::mark(mark_id(e.batch, code)));
      continue;
    }
    const bool nested = cursor >= 0 && e.cpu_start < cursor - 1e-9;
    account(e.cpu_start);
    switch (e.kind) {
      case trace::Kind::Compute:
        compute(e, nested);
        break;
      case trace::Kind::Send:
        if (!nested) traced(e.cpu_duration);
        if (!e.group.empty()) {  // a broadcast from this rank
          for (int q : e.group) {
            check_peer(e, q);
            if (q != r)
              out.push_back(Event::message(Event::Kind::Send, q, kBroadcastTag,
                                           static_cast<std::size_t>(e.bytes)));
          }
        } else {
          check_peer(e, e.peer);
          out.push_back(
              Event::message(Event::Kind::Send, e.peer, e.tag, static_cast<std::size_t>(e.bytes)));
        }
        break;
      case trace::Kind::Wait:
        if (e.peer >= 0) {
          check_peer(e, e.peer);
          out.push_back(Event::message(Event::Kind::Recv, e.peer,
                                       e.group.empty() ? e.tag : kBroadcastTag,
                                       static_cast<std::size_t>(e.bytes)));
        }
        break;
      case trace::Kind::Reduce: {
        Event reduce =
            Event::reduce(1, static_cast<std::size_t>(std::max<std::int64_t>(0, e.bytes)));
        if (!e.group.empty()) {
          for (int q : e.group) check_peer(e, q);
          auto& shared = groups[e.group];
          if (!shared) shared = std::make_shared<const std::vector<int>>(e.group);
          reduce.group = shared;
        }
        out.push_back(reduce);
        break;
      }
      case trace::Kind::Phase:
        break;
    }
    if (!nested) cursor = std::max(cursor, e.cpu_start + e.cpu_duration);
    if (e.kind == trace::Kind::Wait || e.kind == trace::Kind::Reduce)
      cursor = std::max(cursor, e.cpu_start + e.cpu_duration);  // spinning is not work
  }
  return out;
}

}  // namespace

ReferenceCosts::ReferenceCosts(const std::vector<std::vector<TracedEvent>>& reference) {
  std::map<std::string, std::vector<double>> occurrence, key, family;
  for (const auto& rank : reference) {
    std::vector<const TracedEvent*> computed;
    for (const TracedEvent& e : rank)
      if (e.kind == trace::Kind::Compute && !e.key.empty() && e.batch >= 0) computed.push_back(&e);
    std::stable_sort(computed.begin(), computed.end(), [](const auto* a, const auto* b) {
      return a->batch != b->batch ? a->batch < b->batch : a->wall_start < b->wall_start;
    });
    std::map<std::string, int> seen;  // per key, in the current batch
    std::int64_t batch = -1;
    for (const TracedEvent* e : computed) {
      if (e->batch != batch) {
        seen.clear();
        batch = e->batch;
      }
      const int k = seen[e->key]++;
      occurrence[e->key + "#" + std::to_string(k)].push_back(e->cpu_duration);
      key[e->key].push_back(e->cpu_duration);
      family[e->family + (k == 0 ? "/first" : "/repeat")].push_back(e->cpu_duration);
    }
  }
  for (auto& [k, v] : occurrence) by_occurrence_[k] = median(v);
  for (auto& [k, v] : key) by_key_[k] = median(v);
  for (auto& [k, v] : family) by_family_[k] = median(v);
}

ReferenceCosts::Price ReferenceCosts::price(const TracedEvent& e, int occurrence) const {
  if (auto it = by_occurrence_.find(e.key + "#" + std::to_string(occurrence));
      it != by_occurrence_.end())
    return {it->second, Match::Key};
  if (auto it = by_key_.find(e.key); it != by_key_.end()) return {it->second, Match::Key};
  if (auto it = by_family_.find(e.family + (occurrence == 0 ? "/first" : "/repeat"));
      it != by_family_.end())
    return {it->second, Match::Family};
  return {};
}

Replay replay(const std::vector<std::vector<TracedEvent>>& events, const ReplayLink& link,
              const ReferenceCosts* reference) {
  const int ranks = static_cast<int>(events.size());
  if (ranks == 0) throw BadData("trace replay: the trace has no ranks");
  std::map<std::vector<int>, std::shared_ptr<const std::vector<int>>> groups;
  Schedule schedule(static_cast<size_t>(ranks));
  std::map<std::int64_t, double> measured;  // batch -> slowest rank's wall time
  Repricing repricing;
  repricing.reference = reference;
  repricing.unpriced.resize(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    schedule[static_cast<size_t>(r)] =
        rank_schedule(r, events[static_cast<size_t>(r)], ranks, groups, repricing);
    for (const TracedEvent& e : events[static_cast<size_t>(r)])
      if (e.kind == trace::Kind::Phase && e.name == "batch" && e.batch >= 0)
        measured[e.batch] = std::max(measured[e.batch], e.wall_duration);
  }
  if (measured.empty()) throw BadData("trace replay: the trace holds no batches");
  for (int r = 0; r < ranks; ++r) {
    std::int64_t batches = 0;
    for (const TracedEvent& e : events[static_cast<size_t>(r)])
      if (e.kind == trace::Kind::Phase && e.name == "batch") ++batches;
    if (batches != static_cast<std::int64_t>(measured.size()))
      throw BadData("trace replay: rank " + std::to_string(r) + " has " + std::to_string(batches) +
                    " batches, the trace " + std::to_string(measured.size()) +
                    " (a truncated or merged trace?)");
  }
  double contention = 1;
  if (reference) {
    if (!(repricing.reference_matched > 0))
      throw BadData(
          "trace replay: the reference run prices none of the trace's compute events (a trace "
          "of another network?)");
    contention = repricing.traced_matched / repricing.reference_matched;
    for (int r = 0; r < ranks; ++r)
      for (size_t i : repricing.unpriced[static_cast<size_t>(r)])
        schedule[static_cast<size_t>(r)][i].seconds /= contention;
  }
  CostModel cost;
  cost.latency = link.latency;
  cost.bandwidth = link.bandwidth;
  cost.step_seconds = [](const Event&) { return 0.0; };  // traced steps are compute events
  Timeline t;
  try {
    t = simulate(schedule, cost);
  } catch (const Error& e) {
    throw BadData(std::string("trace replay: the messages or reductions do not match (") +
                  e.what() + ")");
  }
  // Per batch and boundary: the latest rank's time, and each rank's phase durations.
  std::map<int, double> latest;
  std::map<std::int64_t, std::array<double, 3>> slowest_phase;
  for (int r = 0; r < ranks; ++r) {
    std::map<int, double> at;
    for (const auto& [id, time] : t.marks[static_cast<size_t>(r)]) {
      at[id] = time;
      latest[id] = std::max(latest.count(id) ? latest[id] : 0.0, time);
    }
    for (const auto& [b, wall] : measured) {
      (void)wall;
      auto& s = slowest_phase[b];
      for (int k = 0; k < 3; ++k) {
        const int begin = mark_id(b, kForwardBegin + 2 * k), end = begin + 1;
        if (at.count(begin) && at.count(end))
          s[static_cast<size_t>(k)] = std::max(s[static_cast<size_t>(k)], at[end] - at[begin]);
      }
    }
  }
  Replay out;
  out.ranks = ranks;
  out.busy = t.busy;
  out.contention = contention;
  if (repricing.keyed > 0) {
    out.priced_by_key = repricing.by_key / repricing.keyed;
    out.priced_by_family = repricing.by_family / repricing.keyed;
  }
  double previous_end = 0;
  std::vector<double> b_all, f_all, bw_all, o_all, m_all;
  for (const auto& [b, wall] : measured) {
    ReplayedBatch rb;
    rb.index = b;
    const double end = latest[mark_id(b, kBatchEnd)];
    rb.batch = end - previous_end;
    previous_end = end;
    const auto& s = slowest_phase[b];
    rb.forward = s[0];
    rb.backward = s[1];
    rb.optimizer = s[2];
    rb.measured = wall;
    out.batches.push_back(rb);
    b_all.push_back(rb.batch);
    f_all.push_back(rb.forward);
    bw_all.push_back(rb.backward);
    o_all.push_back(rb.optimizer);
    m_all.push_back(rb.measured);
  }
  out.median_batch = median(b_all);
  out.median_forward = median(f_all);
  out.median_backward = median(bw_all);
  out.median_optimizer = median(o_all);
  out.measured_median_batch = median(m_all);
  return out;
}

}  // namespace weft::mgrit
