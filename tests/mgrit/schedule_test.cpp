// mgrit::record_schedule against the solver itself: on every rank, the recorded schedule has as
// many steps per level, sends, receives and reductions as a real Solver over MPI_COMM_WORLD
// reports in its statistics (forward and reverse with the nn layer's rank blocks, 1 to 3
// levels, F and FCF relaxation, V and F cycles, both conventions). And the virtual clock prices
// hand-made schedules as its rules say.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "weft/mgrit/schedule.hpp"
#include "weft/mgrit/solver.hpp"
#include "weft/util/error.hpp"

namespace weft::mgrit {
namespace {

/// u' = -u with backward Euler.
struct Decay {
  using State = double;
  double init(double t) const { return t == 0.0 ? 1.0 : 0.0; }
  void step(const double& in, double& out, double t0, double t1, const StepInfo&) const {
    out = in / (1.0 + (t1 > t0 ? t1 - t0 : t0 - t1));
  }
};

struct Counts {
  std::vector<index_t> steps_per_level;
  index_t sent = 0, received = 0, reductions = 0;
};

Counts count(const std::vector<Event>& events, int levels) {
  Counts c;
  c.steps_per_level.assign(static_cast<size_t>(levels), 0);
  for (const Event& e : events) switch (e.kind) {
      case Event::Kind::Step:
        ++c.steps_per_level.at(static_cast<size_t>(e.level));
        break;
      case Event::Kind::Send:
        ++c.sent;
        break;
      case Event::Kind::Recv:
        ++c.received;
        break;
      case Event::Kind::Reduce:
        ++c.reductions;
        break;
      case Event::Kind::Compute:
      case Event::Kind::Restrict:
      case Event::Kind::Interpolate:
      case Event::Kind::Mark:
        break;
    }
  return c;
}

void expect_same_counts(const Options& options, index_t intervals, const std::string& what) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  Decay app;
  Solver<Decay> solver(app, MPI_COMM_WORLD, TimeGrid::uniform(0.0, 1.0, intervals), options);
  const Result result = solver.solve();
  ASSERT_EQ(result.iterations, options.max_iterations() > 0 && solver.hierarchy().levels() > 1
                                   ? options.max_iterations()
                                   : 1)
      << what << ": the real solve must run a fixed number of iterations";
  const Statistics& real = solver.statistics();
  const Schedule schedule =
      record_schedule(intervals, options, ranks, [](index_t, int) { return sizeof(double); });
  ASSERT_EQ(schedule.size(), static_cast<size_t>(ranks)) << what;
  const Counts replay =
      count(schedule[static_cast<size_t>(rank)], static_cast<int>(real.steps_per_level.size()));
  EXPECT_EQ(replay.steps_per_level, real.steps_per_level) << what << " (rank " << rank << ")";
  EXPECT_EQ(replay.sent, real.messages_sent) << what << " (rank " << rank << ")";
  EXPECT_EQ(replay.received, real.messages_received) << what << " (rank " << rank << ")";
  EXPECT_EQ(replay.reductions, real.reductions) << what << " (rank " << rank << ")";
  EXPECT_GT(real.total_steps(), 0) << what;
  if (ranks > 1 && solver.hierarchy().levels() > 1) {
    EXPECT_GT(real.messages_sent + real.messages_received, 0) << what << " (rank " << rank << ")";
  }
  // Every recorded message finds its partner: the clock replays the whole schedule.
  CostModel cost;
  cost.step_seconds = [](const Event&) { return 1e-3; };
  EXPECT_GT(simulate(schedule, cost).makespan, 0.0) << what;
}

/// The adjoint's rank blocks in the nn layer: each boundary one point left of the forward's.
std::vector<index_t> adjoint_blocks(index_t intervals, int ranks) {
  std::vector<index_t> blocks;
  for (int r = 0; r < ranks; ++r)
    blocks.push_back(r == 0 ? 0 : Distribution::block_begin(intervals + 1, ranks, r) - 1);
  return blocks;
}

TEST(Schedule, CountsTheRealSolversStepsMessagesAndReductionsOnEveryRank) {
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  auto base = [] { return Options().abs_tol(0).max_iterations(2); };
  expect_same_counts(base().max_levels(1), 12, "exact mode (one level)");
  expect_same_counts(base().max_levels(2).cfactor(4).nrelax(0), 16, "2 levels, F-relaxation");
  expect_same_counts(base().max_levels(2).cfactor(2).nrelax(1), 13, "2 levels, FCF");
  expect_same_counts(base().max_levels(3).cfactor(2).nrelax(0, 0).initial_phase(InitialPhase::Skip),
                     17, "3 levels, F fine, FCF coarse, skip (weft train's defaults)");
  expect_same_counts(base().max_levels(3).cfactor(2).cycle(Cycle::F), 19, "3 levels, F-cycle");
  expect_same_counts(base().max_levels(3).cfactor(2).convention(Convention::PyMGRIT), 15,
                     "3 levels, PyMGRIT convention");
  expect_same_counts(base().max_levels(2).cfactor(4).max_iterations(3).compute_residual(true), 16,
                     "residual measured every iteration");
  for (int levels : {1, 2, 3})
    for (int nrelax : {0, 1})
      expect_same_counts(base()
                             .max_levels(levels)
                             .cfactor(2)
                             .nrelax(nrelax, 0)
                             .direction(Direction::Reverse)
                             .rank_blocks(adjoint_blocks(14, ranks))
                             .final_sweep(levels > 1 ? FinalSweep::CF : FinalSweep::Default),
                         14,
                         "reverse with the adjoint's rank blocks, " + std::to_string(levels) +
                             " levels, nrelax " + std::to_string(nrelax));
}

TEST(Schedule, EachStepCountsTheEarlierVisitsOfTheSameStepOnItsRank) {
  // 3 iterations of a 2-level reverse solve: every step (level, from, to) of a rank is numbered
  // 0, 1, 2, ... in the order the rank takes it, so a coarse step taken once per iteration has
  // visits 0..2 and the first visits are exactly the distinct steps.
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const Schedule s =
      record_schedule(16,
                      Options()
                          .abs_tol(0)
                          .max_levels(2)
                          .cfactor(4)
                          .max_iterations(3)
                          .direction(Direction::Reverse)
                          .rank_blocks(adjoint_blocks(16, std::max(ranks, 2))),
                      std::max(ranks, 2), [](index_t, int) { return std::size_t{8}; });
  int coarse_repeats = 0;
  for (const auto& events : s) {
    std::map<std::tuple<int, index_t, index_t>, int> seen;
    for (const Event& e : events) {
      if (e.kind != Event::Kind::Step) continue;
      const int earlier = seen[{e.level, e.from, e.to}]++;
      EXPECT_EQ(e.visit, earlier) << "level " << e.level << " step " << e.from << " -> " << e.to;
      if (e.level == 1 && e.visit > 0) ++coarse_repeats;
    }
  }
  EXPECT_GT(coarse_repeats, 0);
}

Event step_event(int level) {
  return Event::step(level, Direction::Forward, 0, 1);
}
Event message(Event::Kind kind, int peer, std::size_t bytes) {
  return Event::message(kind, peer, 7, bytes);
}

TEST(Schedule, MessagesCarryTheSizeOfTheirLevelsStates) {
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  // A state of point p on level l packs into 1000 (l + 1) + p bytes; tag 100 + l is level l.
  const Schedule s = record_schedule(
      19, Options().abs_tol(0).max_levels(3).cfactor(2).max_iterations(2), std::max(ranks, 3),
      [](index_t p, int level) { return static_cast<std::size_t>(1000 * (level + 1) + p); });
  int messages = 0;
  for (const auto& events : s)
    for (const Event& e : events)
      if (e.kind == Event::Kind::Send || e.kind == Event::Kind::Recv) {
        ++messages;
        const int level = e.tag - 100;
        EXPECT_GE(e.bytes, 1000u * static_cast<std::size_t>(level + 1)) << "tag " << e.tag;
        EXPECT_LT(e.bytes, 1000u * static_cast<std::size_t>(level + 1) + 20) << "tag " << e.tag;
      }
  EXPECT_GT(messages, 0);
}

TEST(Schedule, TheClockWaitsForMessagesAndReductions) {
  CostModel cost;
  cost.latency = 0.5;
  cost.bandwidth = 100.0;  // bytes per second
  cost.step_seconds = [](const Event& e) { return e.level == 0 ? 1.0 : 0.25; };
  const Event reduce = Event::reduce(0);
  // Rank 0: fine step, send 100 bytes (arrives at 1 + 0.5 + 1 = 2.5), coarse step, reduce.
  // Rank 1: receive (waits until 2.5), fine step (3.5), reduce: both leave at 3.5 + 2 * 0.5.
  Schedule s(2);
  s[0] = {step_event(0), message(Event::Kind::Send, 1, 100), step_event(1), reduce};
  s[1] = {message(Event::Kind::Recv, 0, 100), step_event(0), reduce};
  const Timeline t = simulate(s, cost);
  EXPECT_DOUBLE_EQ(t.finish[0], 4.5);
  EXPECT_DOUBLE_EQ(t.finish[1], 4.5);
  EXPECT_DOUBLE_EQ(t.makespan, 4.5);
  EXPECT_DOUBLE_EQ(t.busy[0], 1.25);
  EXPECT_DOUBLE_EQ(t.busy[1], 1.0);
  // The receive posted first on the other side, in reverse rank order, is still matched.
  Schedule r(2);
  r[0] = {message(Event::Kind::Recv, 1, 0), step_event(1)};
  r[1] = {step_event(0), step_event(0), message(Event::Kind::Send, 0, 0)};
  EXPECT_DOUBLE_EQ(simulate(r, cost).makespan, 2.0 + 0.5 + 0.25);
}

TEST(Schedule, AReceiveWithoutItsSendIsAnError) {
  CostModel cost;
  cost.step_seconds = [](const Event&) { return 1.0; };
  Schedule s(2);
  s[1] = {message(Event::Kind::Recv, 0, 8)};
  EXPECT_THROW(simulate(s, cost), Error);
}

}  // namespace
}  // namespace weft::mgrit
