// Critical-path replay of traces (weft/mgrit/replay.hpp): synthetic traces with known costs
// against their hand-computed critical paths.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "weft/mgrit/replay.hpp"
#include "weft/util/error.hpp"

namespace {

using weft::mgrit::ReplayLink;
using weft::mgrit::TracedEvent;
using weft::trace::Kind;

constexpr double kMs = 1e-3;

/// Builds one rank's events of one batch; times in ms, wall time following the CPU clock (a
/// rank alone on its core) plus what it waited.
class RankTrace {
 public:
  explicit RankTrace(std::int64_t batch) : batch_(batch) {}

  RankTrace& compute(const char* name, double ms, double gap_before_ms = 0) {
    cpu_ += gap_before_ms;
    add(Kind::Compute, name, ms);
    cpu_ += ms;
    return *this;
  }
  /// A forward step between the points `points` ("3>4") on level 0: keyed for ReferenceCosts.
  RankTrace& step(const std::string& points, double ms, double gap_before_ms = 0) {
    compute("step", ms, gap_before_ms);
    events_.back().family = "forward/step/level 0/done 0";
    events_.back().key = events_.back().family + "/" + points;
    return *this;
  }
  RankTrace& send(int peer, int tag, std::int64_t bytes) {
    TracedEvent& e = add(Kind::Send, "send", 0);
    e.peer = peer;
    e.tag = tag;
    e.bytes = bytes;
    return *this;
  }
  RankTrace& wait(int peer, int tag, std::int64_t bytes, double spin_ms = 0) {
    TracedEvent& e = add(Kind::Wait, "wait", spin_ms);
    e.peer = peer;
    e.tag = tag;
    e.bytes = bytes;
    cpu_ += spin_ms;  // spinning in MPI: CPU time the replay must not count
    return *this;
  }
  RankTrace& reduce(std::vector<int> group, std::int64_t bytes) {
    TracedEvent& e = add(Kind::Reduce, "allreduce", 0);
    e.group = std::move(group);
    e.bytes = bytes;
    return *this;
  }
  RankTrace& broadcast(int root, bool is_root, std::vector<int> group) {
    TracedEvent& e = add(is_root ? Kind::Send : Kind::Wait, "broadcast", 0);
    e.peer = root;
    e.group = std::move(group);
    e.bytes = 16;
    return *this;
  }
  RankTrace& phase_begin(const char* name) {
    open_.push_back(events_.size());
    add(Kind::Phase, name, 0);
    return *this;
  }
  RankTrace& phase_end() {
    TracedEvent& e = events_[open_.back()];
    open_.pop_back();
    e.wall_duration = wall() - e.wall_start;
    e.cpu_duration = cpu_ * kMs - e.cpu_start;
    return *this;
  }
  std::vector<TracedEvent> events() const { return events_; }
  std::vector<TracedEvent>& append_to(std::vector<TracedEvent>& all) const {
    all.insert(all.end(), events_.begin(), events_.end());
    return all;
  }
  /// The next batch starts where this one ended.
  RankTrace next(std::int64_t batch) const {
    RankTrace t(batch);
    t.cpu_ = cpu_;
    return t;
  }

 private:
  double wall() const { return cpu_ * kMs; }
  TracedEvent& add(Kind kind, const char* name, double ms) {
    TracedEvent e;
    e.kind = kind;
    e.name = name;
    e.batch = batch_;
    e.cpu_start = cpu_ * kMs;
    e.cpu_duration = ms * kMs;
    e.wall_start = wall();
    e.wall_duration = ms * kMs;
    events_.push_back(e);
    return events_.back();
  }
  std::int64_t batch_;
  double cpu_ = 0;  // ms
  std::vector<TracedEvent> events_;
  std::vector<size_t> open_;
};

ReplayLink link() {
  ReplayLink l;
  l.latency = 10e-6;
  l.bandwidth = 1e9;
  return l;
}

double message_ms(std::int64_t bytes) {
  return 1e3 * (link().latency + static_cast<double>(bytes) / link().bandwidth);
}

// A forward chain over P ranks (exact mode): rank r waits for r-1, steps, sends to r+1.
TEST(Replay, AChainOverRanksTakesEveryStepAndEveryMessageInTurn) {
  for (int ranks : {1, 2, 3, 5}) {
    std::vector<std::vector<TracedEvent>> trace(static_cast<size_t>(ranks));
    const std::int64_t bytes = 4000;
    for (int r = 0; r < ranks; ++r) {
      RankTrace t(2);
      t.phase_begin("batch").phase_begin("forward");
      if (r > 0) t.wait(r - 1, 101, bytes, /*spin_ms=*/3.0);
      t.compute("step", 1.0).compute("step", 2.0, /*gap_before_ms=*/0.25);
      if (r + 1 < ranks) t.send(r + 1, 101, bytes);
      t.phase_end().phase_end();
      trace[static_cast<size_t>(r)] = t.events();
    }
    const auto replay = weft::mgrit::replay(trace, link());
    ASSERT_EQ(replay.batches.size(), 1u);
    const double expected_ms = ranks * 3.25 + (ranks - 1) * message_ms(bytes);
    EXPECT_NEAR(1e3 * replay.batches[0].batch, expected_ms, 1e-9) << ranks << " ranks";
    // The slowest rank's forward phase: the last rank's, from the start, as it waited.
    EXPECT_NEAR(1e3 * replay.batches[0].forward, expected_ms, 1e-9);
    // Busy: 3.25 ms per rank (the spin of the waits is not work).
    for (double b : replay.busy) EXPECT_NEAR(1e3 * b, 3.25, 1e-9);
  }
}

// Two ranks, two batches of a two-level F-relaxation cycle with cf 2 (fine points 0..4, rank 0
// owns 0-2, rank 1 owns 3-4): F-relaxation steps each rank's F-points; rank 1's first F-point
// needs rank 0's last C-point; the coarse level (C-points 0, 2, 4) is solved sequentially on
// rank 1 after restriction; the residual is reduced over both ranks.
TEST(Replay, ATwoLevelFRelaxationCycleOverTwoRanksMatchesItsHandComputedCriticalPath) {
  const std::int64_t bytes = 1000;
  const double m = message_ms(bytes);
  const double reduce_ms = 1e3 * 2 * (link().latency + 8.0 / link().bandwidth);  // 2 ranks
  std::vector<TracedEvent> rank0, rank1;
  RankTrace r0(2), r1(2);
  for (int batch = 2; batch <= 3; ++batch) {
    // rank 0: F-point 1 from C-point 0 (1 ms), send C-point 2 to rank 1, restrict (0.5 ms).
    r0.phase_begin("batch").phase_begin("forward");
    r0.compute("step", 1.0).send(1, 100, bytes).compute("restrict", 0.5);
    r0.send(1, 101, bytes).reduce({0, 1}, 8).phase_end().phase_end();
    // rank 1: F-point 3 from rank 0's C-point 2 (1 ms), restrict (0.5 ms), coarse solve: waits
    // for rank 0's restricted C-point 2, two coarse steps of 2 ms, reduce.
    r1.phase_begin("batch").phase_begin("forward");
    r1.wait(0, 100, bytes).compute("step", 1.0).compute("restrict", 0.5);
    r1.wait(0, 101, bytes).compute("step", 2.0).compute("step", 2.0);
    r1.reduce({0, 1}, 8).phase_end().phase_end();
    r0.append_to(rank0);
    r1.append_to(rank1);
    r0 = r0.next(batch + 1);
    r1 = r1.next(batch + 1);
  }
  const auto replay = weft::mgrit::replay({rank0, rank1}, link());
  ASSERT_EQ(replay.batches.size(), 2u);
  // rank 1: message 0->1 arrives at 1 + m; step to 2 + m, restrict to 2.5 + m; the second
  // message left rank 0 at 1.5 ms, arrived at 1.5 + m < 2.5 + m; coarse steps to 6.5 + m;
  // the reduction releases both at 6.5 + m + reduce. Batch 3 repeats from there.
  const double batch_ms = 6.5 + m + reduce_ms;
  EXPECT_NEAR(1e3 * replay.batches[0].batch, batch_ms, 1e-9);
  EXPECT_NEAR(1e3 * replay.batches[1].batch, batch_ms, 1e-9);
  EXPECT_NEAR(1e3 * replay.median_batch, batch_ms, 1e-9);
  EXPECT_EQ(replay.batches[0].index, 2);
  EXPECT_EQ(replay.batches[1].index, 3);
  EXPECT_NEAR(1e3 * replay.busy[0], 2 * 1.5, 1e-9);
  EXPECT_NEAR(1e3 * replay.busy[1], 2 * 5.5, 1e-9);
}

TEST(Replay, ABroadcastReleasesTheOthersWhenTheRootSendsAndAGroupReductionWaitsOnlyForItsGroup) {
  // Rank 2 computes 5 ms and broadcasts; ranks 0 and 1 reduce among themselves (1 ms of work
  // each), then wait for the broadcast.
  std::vector<std::vector<TracedEvent>> trace(3);
  for (int r = 0; r < 3; ++r) {
    RankTrace t(2);
    t.phase_begin("batch");
    if (r == 2) {
      t.compute("loss", 5.0).broadcast(2, true, {0, 1, 2});
    } else {
      t.compute("step", 1.0 + r).reduce({0, 1}, 8).broadcast(2, false, {0, 1, 2});
    }
    t.phase_end();
    trace[static_cast<size_t>(r)] = t.events();
  }
  const auto replay = weft::mgrit::replay(trace, link());
  // Ranks 0 and 1 reduce at 2 ms without waiting for rank 2, whose broadcast ends the batch.
  EXPECT_NEAR(1e3 * replay.batches[0].batch, 5.0 + message_ms(16), 1e-9);
  // A root whose broadcast misses rank 1 leaves rank 1 waiting: refused.
  for (auto& e : trace[2])
    if (e.kind == Kind::Send) e.group = {0, 2};
  EXPECT_THROW(weft::mgrit::replay(trace, link()), weft::BadData);
}

TEST(Replay, TracesThatCannotBeReplayedAreRefusedNamingTheProblem) {
  RankTrace a(2), b(2);
  a.phase_begin("batch").compute("step", 1.0).phase_end();
  b.phase_begin("batch").wait(0, 7, 100).phase_end();  // no rank sends it
  try {
    weft::mgrit::replay({a.events(), b.events()}, link());
    FAIL() << "a wait without its send was replayed";
  } catch (const weft::BadData& e) {
    EXPECT_NE(std::string(e.what()).find("do not match"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 1 cannot go past event 1 of 3: a receive from "
                                         "rank 0 (tag 7) whose send never comes"),
              std::string::npos)
        << e.what();
  }
  RankTrace c(2);
  c.phase_begin("batch").send(5, 1, 10).phase_end();
  try {
    weft::mgrit::replay({c.events(), a.events()}, link());
    FAIL() << "a send to rank 5 of 2 was replayed";
  } catch (const weft::BadData& e) {
    EXPECT_NE(std::string(e.what()).find("names rank 5"), std::string::npos) << e.what();
  }
  RankTrace d(2);
  d.compute("step", 1.0);  // no batch
  EXPECT_THROW(weft::mgrit::replay({d.events()}, link()), weft::BadData);
  // Rank 1 holds one batch fewer than rank 0 (a merged or truncated trace).
  std::vector<TracedEvent> two = a.events();
  a.next(3).phase_begin("batch").compute("step", 1.0).phase_end().append_to(two);
  EXPECT_THROW(weft::mgrit::replay({two, a.events()}, link()), weft::BadData);
}

// Reference costs (`weft replay --costs-from`): a two-rank chain whose events all ran 1.5x
// their cost in a one-rank reference is replayed as if they had not: each step at its
// reference price, the CPU time between events divided by the contention measured on the steps.
TEST(Replay, ReferenceCostsTakeTheContentionOutEventByEvent) {
  // The reference, two batches: step 0>1 costs 1 ms, step 1>2 2 ms at its first visit in a
  // batch and 0.5 ms at its second (a kept graph), 0.25 ms of bookkeeping before each.
  RankTrace ref(2);
  ref.phase_begin("batch").step("0>1", 1.0).step("1>2", 2.0, 0.25).step("1>2", 0.5, 0.25);
  ref.phase_end();
  std::vector<TracedEvent> reference = ref.events();
  ref.next(3)
      .phase_begin("batch")
      .step("0>1", 1.0)
      .step("1>2", 2.0, 0.25)
      .step("1>2", 0.5, 0.25)
      .phase_end()
      .append_to(reference);
  const weft::mgrit::ReferenceCosts costs({reference});

  const std::int64_t bytes = 4000;
  RankTrace r0(2), r1(2);
  r0.phase_begin("batch").step("0>1", 1.5).send(1, 101, bytes).phase_end();
  r1.phase_begin("batch").wait(0, 101, bytes, /*spin_ms=*/2.0);
  r1.step("1>2", 3.0, 0.375).step("1>2", 0.75, 0.375).phase_end();
  const auto plain = weft::mgrit::replay({r0.events(), r1.events()}, link());
  EXPECT_NEAR(1e3 * plain.median_batch, 1.5 + message_ms(bytes) + 0.375 + 3.0 + 0.375 + 0.75, 1e-9);
  EXPECT_EQ(plain.contention, 1.0);
  const auto repriced = weft::mgrit::replay({r0.events(), r1.events()}, link(), &costs);
  EXPECT_NEAR(repriced.contention, 1.5, 1e-12);
  EXPECT_NEAR(repriced.priced_by_key, 1.0, 1e-12);
  EXPECT_EQ(repriced.priced_by_family, 0.0);
  EXPECT_NEAR(1e3 * repriced.median_batch, 1.0 + message_ms(bytes) + 0.25 + 2.0 + 0.25 + 0.5, 1e-9);

  // A step the reference never took is priced by its family (a first visit: 1 and 2 ms, median
  // 1.5); one of another family keeps its traced time, divided by the contention.
  RankTrace other(2);
  other.phase_begin("batch").step("0>1", 3.0).step("7>8", 9.0).compute("loss", 4.5).phase_end();
  const auto mixed = weft::mgrit::replay({other.events()}, link(), &costs);
  EXPECT_NEAR(mixed.contention, (3.0 + 9.0) / (1.0 + 1.5), 1e-12);
  EXPECT_NEAR(mixed.priced_by_key, 3.0 / 12.0, 1e-12);
  EXPECT_NEAR(mixed.priced_by_family, 9.0 / 12.0, 1e-12);
  EXPECT_NEAR(1e3 * mixed.median_batch, 1.0 + 1.5 + 4.5 / mixed.contention, 1e-9);

  // Several reference runs price at their medians: step 0>1 at 1, 1.5 and 4 ms -> 1.5 ms.
  RankTrace slow(2), slower(2);
  slow.phase_begin("batch").step("0>1", 1.5).phase_end();
  slower.phase_begin("batch").step("0>1", 4.0).phase_end();
  const weft::mgrit::ReferenceCosts runs({ref.events(), slow.events(), slower.events()});
  RankTrace one(2);
  one.phase_begin("batch").step("0>1", 3.0).phase_end();
  EXPECT_NEAR(1e3 * weft::mgrit::replay({one.events()}, link(), &runs).median_batch, 1.5, 1e-9);

  // A reference that prices nothing of the trace: refused, not a replay without contention.
  RankTrace unkeyed(2);
  unkeyed.phase_begin("batch").compute("loss", 1.0).phase_end();
  try {
    weft::mgrit::replay({unkeyed.events()}, link(), &costs);
    FAIL() << "a reference pricing no event was accepted";
  } catch (const weft::BadData& e) {
    EXPECT_NE(std::string(e.what()).find("prices none"), std::string::npos) << e.what();
  }
}

}  // namespace
