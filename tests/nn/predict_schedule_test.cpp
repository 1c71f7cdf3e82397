// The cost model's batch schedules (weft/nn/cost_model.hpp) against the nn modules:
// - gru/lstm: on every rank, the replayed batch has as many steps per level and direction,
//   solver messages and reductions as a real weft::nn::Recurrent forward and backward reports
//   in its statistics (exact mode and 2 levels, sequences of 7 to 12 steps), plus the boundary
//   exchange the module does;
// - a traced batch of a ResNet (weft/util/trace.hpp) at 1-3 ranks: its step events per level
//   and direction are the solvers' own counts, and the forward steps and the adjoint steps
//   come in the order of predict's schedule for that rank;
// - spatial coarsening: messages on a level coarsened in space carry the coarse states' bytes,
//   transfers and coarse steps are priced at their depth's figures, and the predicted batch is
//   cheaper than the same hierarchy without spatial coarsening.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "weft/mgrit/schedule.hpp"
#include "weft/nn/cost_model.hpp"
#include "weft/nn/layer_parallel.hpp"
#include "weft/nn/recurrent.hpp"
#include "weft/util/error.hpp"
#include "weft/util/trace.hpp"

namespace {

using weft::mgrit::Direction;
using weft::mgrit::Event;
using weft::nn::kAdjointTags;
using weft::nn::kOutsideTag;
using weft::nn::LayerParallelOptions;
using weft::nn::MeasuredCosts;

struct Counts {
  std::vector<std::int64_t> forward_steps, adjoint_steps;  ///< per level
  std::int64_t forward_sent = 0, forward_received = 0, adjoint_sent = 0, adjoint_received = 0;
  std::int64_t solver_reductions = 0, outside_sent = 0, outside_received = 0;
};

Counts count(const std::vector<Event>& events, size_t levels) {
  Counts c;
  c.forward_steps.assign(levels, 0);
  c.adjoint_steps.assign(levels, 0);
  for (const Event& e : events) {
    const bool adjoint = e.tag >= kAdjointTags;
    const bool send = e.kind == Event::Kind::Send;
    switch (e.kind) {
      case Event::Kind::Step:
        ++(e.direction == Direction::Forward ? c.forward_steps : c.adjoint_steps)
              .at(static_cast<size_t>(e.level));
        break;
      case Event::Kind::Send:
      case Event::Kind::Recv:
        if (e.tag == kOutsideTag)
          ++(send ? c.outside_sent : c.outside_received);
        else if (adjoint)
          ++(send ? c.adjoint_sent : c.adjoint_received);
        else
          ++(send ? c.forward_sent : c.forward_received);
        break;
      case Event::Kind::Reduce:
        if (e.tag == 0) ++c.solver_reductions;
        break;
      default:
        break;
    }
  }
  return c;
}

/// Costs of a T-step recurrent model for the schedule (their values only matter to the clock).
MeasuredCosts recurrent_costs(std::int64_t steps) {
  MeasuredCosts m;
  m.recurrent = true;
  m.layers = steps;
  const auto n = static_cast<size_t>(steps);
  m.transition.assign(n, false);
  m.step_size.assign(n, 1.0);
  for (auto* v : {&m.forward, &m.forward_record, &m.adjoint_reuse, &m.adjoint_final,
                  &m.adjoint_build, &m.parameters})
    v->assign(n, 1e-3);
  m.axpy.assign(n + 1, 1e-5);
  m.state_bytes.assign(n + 1, 48);
  m.gradient_bytes = 400;
  return m;
}

TEST(PredictSchedule, ReplaysTheRecurrentModulesStepsMessagesAndReductionsOnEveryRank) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const std::vector<std::pair<LayerParallelOptions, std::string>> solvers = {
      {LayerParallelOptions::exact(), "exact mode"},
      {LayerParallelOptions::multilevel(2, 2, 2, 1), "2 levels, cf 2"},
      {LayerParallelOptions::multilevel(2, 3, 1, 2), "2 levels, cf 3"}};
  for (const auto& [options, label] : solvers)
    for (std::int64_t steps : {7, 12})
      for (auto cell : {weft::nn::CellKind::GRU, weft::nn::CellKind::LSTM}) {
        const std::string what = label + ", " + std::to_string(steps) + " steps, " +
                                 weft::nn::to_string(cell) + ", rank " + std::to_string(rank);
        torch::manual_seed(3);
        weft::nn::Recurrent rnn(
            MPI_COMM_WORLD, weft::nn::RecurrentOptions(cell, 2, 3).num_layers(2).solver(options));
        const torch::Tensor x = torch::randn({steps, 2, 2});
        rnn->forward(x).h_n.sum().backward();
        const auto& real = rnn->statistics();

        const LayerParallelOptions c = options;
        const MeasuredCosts m = recurrent_costs(steps);
        const weft::mgrit::Schedule s = weft::nn::batch_schedule(c, m, ranks);
        ASSERT_EQ(s.size(), static_cast<size_t>(ranks)) << what;
        const auto& fs = real.forward.statistics;
        const auto& bs = real.backward.statistics;
        const Counts replay = count(s[static_cast<size_t>(rank)], fs.steps_per_level.size());
        EXPECT_EQ(replay.forward_steps, fs.steps_per_level) << what;
        ASSERT_EQ(bs.steps_per_level.size(), fs.steps_per_level.size()) << what;
        EXPECT_EQ(replay.adjoint_steps, bs.steps_per_level) << what;
        EXPECT_EQ(replay.forward_sent, fs.messages_sent) << what;
        EXPECT_EQ(replay.forward_received, fs.messages_received) << what;
        EXPECT_EQ(replay.adjoint_sent, bs.messages_sent) << what;
        EXPECT_EQ(replay.adjoint_received, bs.messages_received) << what;
        EXPECT_EQ(replay.solver_reductions, fs.reductions + bs.reductions) << what;
        // The boundary state for the adjoint: to the right neighbour, from the left one.
        EXPECT_EQ(replay.outside_sent, rank + 1 < ranks ? 1 : 0) << what;
        EXPECT_EQ(replay.outside_received, rank > 0 ? 1 : 0) << what;
        EXPECT_GT(fs.total_steps() + bs.total_steps(), 0) << what;

        weft::mgrit::CostModel cost;
        cost.step_seconds = [&](const Event& e) { return weft::nn::step_seconds(m, e, false); };
        EXPECT_GT(weft::mgrit::simulate(s, cost).makespan, 0.0) << what;
      }
}

/// (level, from, to) of each step, in order.
using Steps = std::vector<std::array<std::int64_t, 3>>;

TEST(PredictSchedule, TracedStepsAreTheSolversCountsInTheOrderOfPredictsScheduleOnEveryRank) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  constexpr std::int64_t kLayers = 12;
  weft::nn::Network net;
  net.steps = kLayers;
  net.step = [](std::int64_t n) {
    torch::manual_seed(100 + static_cast<std::uint64_t>(n));
    return weft::nn::Layer(torch::nn::Sequential(torch::nn::Linear(3, 3), torch::nn::Tanh()));
  };
  const std::vector<std::pair<LayerParallelOptions, std::string>> solvers = {
      {LayerParallelOptions::exact(), "exact mode"},
      {LayerParallelOptions::multilevel(2, 2, 2, 1), "2 levels, cf 2"},
      {LayerParallelOptions::multilevel(3, 2, 2, 1), "3 levels, cf 2"}};
  for (const auto& [options, label] : solvers) {
    const std::string what = label + ", rank " + std::to_string(rank);
    weft::nn::LayerParallel model(MPI_COMM_WORLD, net, options);
    weft::trace::Settings settings;
    settings.first_batch = 0;
    settings.batches = 1;
    weft::trace::start(settings);
    weft::trace::batch_begin(0);
    const torch::Tensor x = rank == 0 ? torch::randn({4, 3}) : torch::Tensor();
    const torch::Tensor y = model->forward(x);
    model->loss(y, [](const torch::Tensor& z) { return z.pow(2).sum(); }).backward();
    weft::trace::batch_end(0);
    const auto events = weft::trace::recorded();
    weft::trace::stop();

    Steps traced_forward, traced_adjoint;
    for (const auto& e : events)
      if (std::string(e.name) == "step")
        (std::string(e.category) == "forward" ? traced_forward : traced_adjoint)
            .push_back({e.level, e.from, e.to});
    const auto& fs = model->statistics().forward.statistics;
    const auto& bs = model->statistics().backward.statistics;
    auto per_level = [](const Steps& steps, size_t levels) {
      std::vector<std::int64_t> counts(levels, 0);
      for (const auto& s : steps) ++counts.at(static_cast<size_t>(s[0]));
      return counts;
    };
    EXPECT_EQ(per_level(traced_forward, fs.steps_per_level.size()), fs.steps_per_level) << what;
    EXPECT_EQ(per_level(traced_adjoint, bs.steps_per_level.size()), bs.steps_per_level) << what;
    EXPECT_GT(traced_forward.size(), 0u) << what;

    const LayerParallelOptions c = options;
    MeasuredCosts m = recurrent_costs(kLayers);
    m.recurrent = false;
    const weft::mgrit::Schedule s = weft::nn::batch_schedule(c, m, ranks);
    Steps predicted_forward, predicted_adjoint;
    for (const Event& e : s.at(static_cast<size_t>(rank)))
      if (e.kind == Event::Kind::Step)
        (e.direction == Direction::Forward ? predicted_forward : predicted_adjoint)
            .push_back({e.level, e.from, e.to});
    EXPECT_EQ(traced_forward, predicted_forward) << what;
    EXPECT_EQ(traced_adjoint, predicted_adjoint) << what;
  }
}

/// An 8-layer chain of one stage whose states are 1000 bytes on the fine grid and 250 bytes
/// restricted once; coarse figures a tenth of the fine ones.
MeasuredCosts spatial_costs() {
  MeasuredCosts m;
  m.layers = 8;
  m.transition.assign(8, false);
  m.step_size.assign(8, 0.125);
  m.forward.assign(8, 1.0);
  m.forward_record.assign(8, 1.5);
  m.adjoint_reuse.assign(8, 1.0);
  m.adjoint_final.assign(8, 2.0);
  m.adjoint_build.assign(8, 2.5);
  m.parameters.assign(8, 10.0);
  m.axpy.assign(9, 0.01);
  m.state_bytes.assign(9, 1000);
  weft::nn::SpatialCosts coarse;
  coarse.state_bytes.assign(9, 250);
  coarse.forward.assign(8, 0.1);
  coarse.adjoint_build.assign(8, 0.25);
  coarse.axpy.assign(9, 0.001);
  coarse.restriction.assign(9, 0.02);
  coarse.interpolation.assign(9, 0.03);
  m.spatial.push_back(coarse);
  m.forward_depth = {0, 1};
  m.adjoint_depth = {0, 1};
  return m;
}

TEST(PredictSchedule, LevelsCoarsenedInSpaceSendCoarseStatesAndCostLess) {
  const LayerParallelOptions c =
      LayerParallelOptions::multilevel(2, 2, 2, 1).spatial_levels({0, 1});
  const MeasuredCosts spatial = spatial_costs();
  MeasuredCosts plain = spatial;
  plain.forward_depth.clear();
  plain.adjoint_depth.clear();
  weft::nn::LinkCosts link;
  link.latency = 1e-6;
  link.bandwidth = 1e9;
  for (int ranks : {1, 2, 3}) {
    const weft::mgrit::Schedule s = weft::nn::batch_schedule(c, spatial, ranks);
    int coarse_messages = 0, transfers = 0;
    for (const auto& events : s)
      for (const Event& e : events) {
        if ((e.kind == Event::Kind::Send || e.kind == Event::Kind::Recv) && e.tag != kOutsideTag) {
          const int level = e.tag % kAdjointTags - 100;
          EXPECT_EQ(e.bytes, level == 0 ? 1000u : 250u) << "tag " << e.tag << ", " << ranks;
          if (level == 1) ++coarse_messages;
        }
        if (e.kind == Event::Kind::Step && e.level == 1) {
          EXPECT_LT(weft::nn::step_seconds(spatial, e, true), 0.5) << ranks;
        }
        if (e.kind == Event::Kind::Restrict || e.kind == Event::Kind::Interpolate) {
          ++transfers;
          EXPECT_DOUBLE_EQ(weft::nn::step_seconds(spatial, e, true),
                           e.kind == Event::Kind::Restrict ? 0.02 : 0.03);
          EXPECT_DOUBLE_EQ(weft::nn::step_seconds(plain, e, true), 0.0);
        }
      }
    if (ranks > 1) {
      EXPECT_GT(coarse_messages, 0) << ranks;
    }
    EXPECT_GT(transfers, 0) << ranks;
    const double with = weft::nn::predict_batch(c, spatial, link, ranks).batch_seconds;
    const double without = weft::nn::predict_batch(c, plain, link, ranks).batch_seconds;
    EXPECT_LT(with, 0.8 * without) << ranks << " ranks";
  }
}

// The busy-core slowdown (weft::nn::slowed): every computing figure, those of levels coarsened
// in space and the per-rank fixed costs included, is multiplied; messages and the serial batch
// are not. With free messages the whole batch and each phase scale by the factor at every rank
// count; with priced messages the batch grows, by less than the factor.
TEST(PredictSchedule, SlowedCostsScaleEveryComputingFigureAndNoMessage) {
  const LayerParallelOptions c =
      LayerParallelOptions::multilevel(2, 2, 2, 1).spatial_levels({0, 1});
  MeasuredCosts m = spatial_costs();
  m.open_forward = 0.5;
  m.open_backward = 0.7;
  m.close = 0.3;
  m.optimizer = 0.8;
  m.open_parameters = 5;
  m.open_close_parameters = 20;
  m.fixed_forward = 0.05;
  m.fixed_backward = 0.07;
  m.fixed_optimizer = 0.09;
  m.serial_batch = 9;
  const MeasuredCosts slow = weft::nn::slowed(m, 1.5);
  EXPECT_DOUBLE_EQ(slow.serial_batch, 9.0);
  weft::nn::LinkCosts free_link;
  free_link.latency = 0;
  free_link.bandwidth = 1e300;
  weft::nn::LinkCosts link;
  link.latency = 0.05;
  link.bandwidth = 1e4;  // a state: 0.05 + 0.1 s
  for (int ranks : {1, 2, 3}) {
    const auto base = weft::nn::predict_batch(c, m, free_link, ranks);
    const auto slowed = weft::nn::predict_batch(c, slow, free_link, ranks);
    ASSERT_GT(base.batch_seconds, 1.0) << ranks;
    const double tol = 1e-12 * base.batch_seconds;
    EXPECT_NEAR(slowed.batch_seconds, 1.5 * base.batch_seconds, tol) << ranks;
    EXPECT_NEAR(slowed.forward_seconds, 1.5 * base.forward_seconds, tol) << ranks;
    EXPECT_NEAR(slowed.backward_seconds, 1.5 * base.backward_seconds, tol) << ranks;
    EXPECT_NEAR(slowed.busiest_seconds, 1.5 * base.busiest_seconds, tol) << ranks;
    EXPECT_DOUBLE_EQ(slowed.memory_bytes, base.memory_bytes) << ranks;
    if (ranks > 1) {
      const double priced = weft::nn::predict_batch(c, m, link, ranks).batch_seconds;
      const double priced_slow = weft::nn::predict_batch(c, slow, link, ranks).batch_seconds;
      EXPECT_GT(priced_slow, priced) << ranks;
      // Every path to the batch's end crosses the loss's two reductions (0.1 s each at least).
      EXPECT_LT(priced_slow, 1.5 * priced - 0.05) << ranks;
    }
  }
  EXPECT_THROW(weft::nn::slowed(m, 0.0), weft::InvalidOption);
  EXPECT_THROW(weft::nn::slowed(m, std::nan("")), weft::InvalidOption);
}

// Exact mode (one level both ways) on a 6-layer chain with known costs: the predicted batch and
// its phases equal the critical path worked out by hand from the chains over the ranks.
TEST(PredictSchedule, ExactModeBatchIsItsHandComputedCriticalPath) {
  MeasuredCosts m;
  m.layers = 6;
  m.transition.assign(6, false);
  m.step_size.assign(6, 1.0 / 6);
  std::vector<double> a(6), b(6);  // the final sweeps' steps: forward with graph, adjoint
  for (size_t n = 0; n < 6; ++n) {
    a[n] = 1.0 + 0.1 * static_cast<double>(n);
    b[n] = 2.0 + 0.1 * static_cast<double>(n);
  }
  m.forward_record = a;
  m.adjoint_final = b;
  m.forward.assign(6, 100.0);  // other figures: a schedule that used them would show it
  m.adjoint_reuse.assign(6, 100.0);
  m.adjoint_build.assign(6, 100.0);
  m.axpy.assign(7, 100.0);
  m.state_bytes.assign(7, 1000);
  m.parameters.assign(6, 10.0);
  m.open_forward = 0.5;
  m.open_backward = 0.7;
  m.close = 0.3;
  m.optimizer = 0.8;
  m.open_parameters = 5;
  m.open_close_parameters = 20;  // open 5, close 15: 80 parameters in all
  const LayerParallelOptions c = LayerParallelOptions::exact();
  weft::nn::LinkCosts link;
  link.latency = 0.01;
  link.bandwidth = 1e5;
  const double msg = 0.01 + 1000 / 1e5;  // one state
  const double reduce = 2 * 0.01;        // a reduction of nothing over 2 ranks: 2 log2(2) latencies
  auto sum = [](const std::vector<double>& v, size_t lo, size_t hi) {
    double s = 0;
    for (size_t n = lo; n < hi; ++n) s += v[n];
    return s;
  };

  // One rank: everything in a row; reductions over one rank cost nothing.
  const auto one = weft::nn::predict_batch(c, m, link, 1);
  const double fwd1 = 0.5 + sum(a, 0, 6), bwd1 = 0.3 + sum(b, 0, 6) + 0.7;
  EXPECT_NEAR(one.batch_seconds, fwd1 + bwd1 + 0.8, 1e-12);
  EXPECT_NEAR(one.forward_seconds, fwd1, 1e-12);
  EXPECT_NEAR(one.backward_seconds, bwd1, 1e-12);

  // Two ranks: 7 points split 4 + 3, so rank 0 owns layers 0-2 and rank 1 layers 3-5 (both
  // directions). Forward: rank 0 opens and steps, its last state travels to rank 1, which
  // steps on (the boundary exchange for the adjoint arrives meanwhile).
  const double rank0_forward = 0.5 + sum(a, 0, 3);
  const double forward_end = rank0_forward + msg + sum(a, 3, 6);
  // Close and loss on rank 1, then the loss and λ_N's health reduced over both ranks.
  const double reduced = forward_end + 0.3 + 2 * reduce;
  // Adjoint: rank 1 steps first, its λ travels to rank 0, which steps and runs open's backward.
  const double rank1_adjoint = reduced + sum(b, 3, 6);
  const double rank0_adjoint = rank1_adjoint + msg + sum(b, 0, 3) + 0.7;
  // Each rank steps the optimizer over its own parameters: rank 0 layers 0-2 and open (35 of
  // 80), rank 1 layers 3-5 and close (45 of 80).
  const double end = std::max(rank0_adjoint + 0.8 * 35 / 80, rank1_adjoint + 0.8 * 45 / 80);
  const auto two = weft::nn::predict_batch(c, m, link, 2);
  EXPECT_NEAR(two.forward_seconds, forward_end, 1e-12);
  EXPECT_NEAR(two.backward_seconds, rank0_adjoint - forward_end, 1e-12);
  EXPECT_NEAR(two.batch_seconds, end, 1e-12);
  // The busiest rank's own work (steps and fixed work, no waiting).
  const double busy0 = 0.5 + sum(a, 0, 3) + sum(b, 0, 3) + 0.7 + 0.8 * 35 / 80;
  const double busy1 = sum(a, 3, 6) + 0.3 + sum(b, 3, 6) + 0.8 * 45 / 80;
  EXPECT_NEAR(two.busiest_seconds, std::max(busy0, busy1), 1e-12);

  // Per-rank fixed costs (the one-rank batch's time outside the priced events): every rank
  // pays them at the start of their phase.
  m.fixed_forward = 0.05;
  m.fixed_backward = 0.07;
  m.fixed_optimizer = 0.09;
  const auto one_fixed = weft::nn::predict_batch(c, m, link, 1);
  EXPECT_NEAR(one_fixed.forward_seconds, fwd1 + 0.05, 1e-12);
  EXPECT_NEAR(one_fixed.backward_seconds, bwd1 + 0.07, 1e-12);
  EXPECT_NEAR(one_fixed.batch_seconds, fwd1 + bwd1 + 0.8 + 0.05 + 0.07 + 0.09, 1e-12);
  // Two ranks: rank 1's fixed forward work overlaps rank 0's steps, so the forward ends 0.05
  // later (rank 0's); the backward's fixed work comes after the forward on both ranks, before
  // close on rank 1, so it delays the adjoint chain once; the optimizer's on each rank.
  const auto two_fixed = weft::nn::predict_batch(c, m, link, 2);
  EXPECT_NEAR(two_fixed.forward_seconds, forward_end + 0.05, 1e-12);
  EXPECT_NEAR(two_fixed.backward_seconds, rank0_adjoint - forward_end + 0.07, 1e-12);
  EXPECT_NEAR(
      two_fixed.batch_seconds,
      std::max(rank0_adjoint + 0.8 * 35 / 80, rank1_adjoint + 0.8 * 45 / 80) + 0.05 + 0.07 + 0.09,
      1e-12);
  EXPECT_NEAR(two_fixed.busiest_seconds, std::max(busy0, busy1) + 0.05 + 0.07 + 0.09, 1e-12);
}

}  // namespace
