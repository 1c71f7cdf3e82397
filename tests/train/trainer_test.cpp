// weft::train::Trainer as a library: layer-parallel exact mode against the sequential
// reference, the events observers receive, resume, evaluation of a checkpoint at another rank
// count, and the errors (bad options, divergence, an observer that throws on one rank).
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "expect.hpp"
#include "trainer_support.hpp"
#include "weft/data/image_folder.hpp"
#include "weft/train/augmentation.hpp"
#include "weft/train/checkpoint_info.hpp"
#include "weft/train/cost_measurement.hpp"
#include "weft/train/data_source.hpp"
#include "weft/train/memory_estimate.hpp"
#include "weft/train/model_registry.hpp"
#include "weft/train/model_zoo.hpp"
#include "weft/train/trainer.hpp"
#include "weft/util/error.hpp"
#include "world.hpp"

namespace {

namespace train = weft::train;
using weft::test::bands;
using weft::test::expect_invalid_field;
using weft::test::expect_resumed_follows;
using weft::test::fit;
using weft::test::Recorder;
using weft::test::resume_after_first_epoch;
using weft::test::shared_folder;
using weft::test::small_options;
using weft::test::world_rank;
using weft::test::world_size;
using weft::test_support::expect_relative;

TEST(Trainer, ExactLayerParallelMatchesTheSequentialReference) {
  const auto parallel = fit(small_options());
  train::TrainerOptions serial_options = small_options();
  serial_options.serial = true;
  const auto serial = fit(serial_options);
  if (world_rank() != 0) {
    EXPECT_TRUE(serial->log.empty());  // serial: rank 0 trains alone
    return;
  }
  ASSERT_EQ(parallel->epochs.size(), 2u);
  ASSERT_EQ(serial->epochs.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    expect_relative(parallel->epochs[e].train_loss, serial->epochs[e].train_loss, 1e-4, "train");
    expect_relative(parallel->epochs[e].test_loss, serial->epochs[e].test_loss, 1e-4, "test");
    EXPECT_EQ(parallel->epochs[e].ranks, world_size());
    EXPECT_EQ(serial->epochs[e].ranks, 1);
  }
  // The bands are easy: training must have learnt them.
  EXPECT_GT(parallel->epochs[1].test_accuracy, 0.6);
  EXPECT_LT(parallel->epochs[1].train_loss, parallel->epochs[0].train_loss);
}

/// Nested iteration over depth: 3, 6, then 12 steps, one epoch each (>= 3 layers per rank at
/// the shallowest).
train::TrainerOptions growing_options() {
  train::TrainerOptions o = small_options();
  o.model.steps = 12;
  o.growth.factor = 2;
  o.growth.refinements = 2;
  o.growth.epochs = {1, 1};
  o.epochs = 3;
  return o;
}

std::vector<std::string> refinements_of(const Recorder& r) {
  std::vector<std::string> seen;
  for (const std::string& event : r.log)
    if (event.rfind("refined", 0) == 0 || event.rfind("epoch ", 0) == 0) seen.push_back(event);
  return seen;
}

// The growing network trains alike layer-parallel (exact mode) and sequentially, for the resnet
// and for stages with batch norm (running statistics carried into the deeper network), with
// linear interpolation too; each refinement comes before its epoch and the metrics give the
// depth trained.
TEST(Trainer, GrowingDepthLayerParallelMatchesTheSequentialReference) {
  train::TrainerOptions stages = growing_options();
  stages.model.kind = "stages";
  stages.model.stage_channels = {2, 4};
  stages.model.stage_steps = {4, 4};  // 1 + 1 + 1 layers at the shallowest
  stages.growth.interpolation = weft::nn::DepthInterpolation::Linear;
  for (const train::TrainerOptions& o : {growing_options(), stages}) {
    SCOPED_TRACE(o.model.kind);
    const auto parallel = fit(o);
    train::TrainerOptions serial_options = o;
    serial_options.serial = true;
    const auto serial = fit(serial_options);
    if (world_rank() != 0) continue;
    const std::int64_t full = train::step_layers(o.model);
    const std::vector<std::string> want{
        "epoch 1",
        "refined " + std::to_string(full / 4) + "->" + std::to_string(full / 2) + " level 1",
        "epoch 2", "refined " + std::to_string(full / 2) + "->" + std::to_string(full) + " level 2",
        "epoch 3"};
    EXPECT_EQ(refinements_of(*parallel), want);
    EXPECT_EQ(refinements_of(*serial), want);
    ASSERT_EQ(parallel->epochs.size(), 3u);
    ASSERT_EQ(serial->epochs.size(), 3u);
    for (size_t e = 0; e < 3; ++e) {
      EXPECT_EQ(parallel->epochs[e].depth, full >> (2 - e));
      expect_relative(parallel->epochs[e].train_loss, serial->epochs[e].train_loss, 1e-4, "train");
      expect_relative(parallel->epochs[e].test_loss, serial->epochs[e].test_loss, 1e-4, "test");
    }
  }
}

// A run stopped at the shallowest depth (its checkpoint holds the 3-step network) resumes the
// schedule: refined twice, it trains like the uninterrupted run; the checkpoint evaluates as it
// is, at any rank count.
TEST(Trainer, ResumedMidScheduleFollowsTheUninterruptedGrowth) {
  train::TrainerOptions o = growing_options();
  o.lr_schedule = "constant";
  const auto straight = fit(o);
  o.epochs = 1;
  o.checkpoint_dir = shared_folder("grow");
  fit(o);
  const train::CheckpointInfo info = train::read_checkpoint_info(o.checkpoint_dir);
  EXPECT_EQ(info.model.steps, 3);
  EXPECT_EQ(info.growth_level, 0);
  EXPECT_EQ(info.growth.refinements, 2);
  auto test = bands(32, 2);
  const train::Evaluation stored =
      train::evaluate_checkpoint(o.checkpoint_dir, *test, 500, MPI_COMM_WORLD);
  EXPECT_EQ(stored.classes, 10);
  o.epochs = 3;
  o.resume_dir = o.checkpoint_dir;
  o.checkpoint_dir.clear();
  o.growth = train::DepthGrowth{};  // the checkpoint's schedule replaces the options' one
  o.model.steps = 99;
  const auto resumed = fit(o);
  expect_resumed_follows(*resumed, *straight);
}

TEST(Trainer, DepthGrowthRefusesWhatItCannotGrow) {
  train::TrainerOptions o = growing_options();
  o.growth.factor = 4;  // 16 does not divide 12
  expect_invalid_field(o, "grow_factor");
  o = growing_options();
  o.growth.epochs = {1};  // two refinements
  expect_invalid_field(o, "grow_epochs");
  o = growing_options();
  o.growth.epochs = {2, 1};  // nothing left for the full depth
  expect_invalid_field(o, "grow_epochs");
  o = growing_options();
  o.growth.refinements = 0;  // epochs without refinements
  expect_invalid_field(o, "grow_epochs");
  o = growing_options();
  o.model.kind = "gru";
  expect_invalid_field(o, "grow_refinements");
  o = growing_options();
  o.model.kind = "custom";  // a network of the user's own: the Trainer cannot rebuild it deeper
  try {
    train::validate_growth(o.growth, o.model, o.epochs, 1);
    ADD_FAILURE() << "growing a custom network accepted";
  } catch (const weft::InvalidOption& e) {
    EXPECT_EQ(e.option(), "grow_refinements") << e.what();
  }
  if (world_size() > 1) {  // 12 / 2^3 is not whole; 16 / 2^4 = 1 layer for several ranks
    o = growing_options();
    o.model.steps = 16;
    o.growth.refinements = 4;
    o.growth.epochs = {1, 1, 1, 1};
    o.epochs = 5;
    expect_invalid_field(o, "grow_refinements");
  }
}

/// Two-level MGRIT both ways, one iteration each, iterations chosen by the training.
train::TrainerOptions automatic_options() {
  train::TrainerOptions o = small_options();
  o.model.steps = 8;
  o.parallel = weft::nn::LayerParallelOptions::multilevel(2, 2, 1, 1);
  o.iterations.forward = o.iterations.backward = true;
  o.iterations.max_iterations = 4;
  return o;
}

// Checked at every batch, automatic iterations step with the exact gradient every time: the
// run trains exactly like exact mode (batch norm's statistics and dropout's masks restored for
// the recomputation), and reports its checks, their gradient errors and the recomputation time.
TEST(Trainer, AutomaticIterationsCheckedEveryBatchTrainLikeExactMode) {
  train::TrainerOptions stages = automatic_options();
  stages.model.kind = "stages";
  stages.model.stage_channels = {2, 4};
  stages.model.stage_steps = {4, 4};
  stages.model.dropout = 0.1;
  for (train::TrainerOptions o : {automatic_options(), stages}) {
    SCOPED_TRACE(o.model.kind);
    o.iterations.check_every = 1;
    const auto automatic = fit(o);
    o.iterations = train::IterationControl{};
    o.parallel = weft::nn::LayerParallelOptions::exact();
    const auto exact = fit(o);
    ASSERT_EQ(automatic->epochs.size(), 2u);
    for (size_t e = 0; e < 2; ++e) {
      const train::EpochMetrics& m = automatic->epochs[e];
      // The training (every step with the exact gradient) is exact mode's. The test loss is not
      // compared: the evaluation runs the MGRIT forward with the counts the controller ended
      // at, which round-off decides where a check's error sits at a threshold.
      expect_relative(m.train_loss, exact->epochs[e].train_loss, 1e-5, "train");
      EXPECT_TRUE(m.iteration_control);
      EXPECT_EQ(m.gradient_checks.value_or(-1), 4);  // every batch
      ASSERT_TRUE(m.gradient_error.has_value());
      EXPECT_GE(*m.gradient_error, 0.0);
      EXPECT_LT(*m.gradient_error, 1.0);
      EXPECT_GT(*m.control_ms, 0.0);
      EXPECT_LE(*m.fwd_iterations_max, 4.0);
      EXPECT_GT(*m.step_evaluations, 0.0);
      EXPECT_FALSE(exact->epochs[e].iteration_control);
    }
  }
}

// The checks' error over the chain layers alone (EpochMetrics::gradient_error_layers) is summed
// over the ranks that hold them: a run at 2 or 3 ranks reports what the same training reports
// on one rank (MPI_COMM_SELF). With one iteration it is not zero, and it is not the whole
// gradient's error, which the open and close layers (the recurrent model's head) enter too.
TEST(Trainer, ChecksReportTheChainLayersErrorOverEveryRank) {
  train::TrainerOptions stages = automatic_options();
  stages.model.kind = "stages";
  stages.model.stage_channels = {2, 4};
  stages.model.stage_steps = {4, 4};
  train::TrainerOptions gru = automatic_options();
  gru.model.kind = "gru";
  gru.model.hidden = 4;
  for (train::TrainerOptions o : {stages, gru}) {
    SCOPED_TRACE(o.model.kind);
    o.iterations.min_iterations = o.iterations.max_iterations = 1;
    o.iterations.check_every = 1;
    const auto world = fit(o);
    const auto alone = fit(o, MPI_COMM_SELF);
    ASSERT_EQ(world->epochs.size(), 2u);
    for (size_t e = 0; e < 2; ++e) {
      const train::EpochMetrics& m = world->epochs[e];
      const train::EpochMetrics& a = alone->epochs[e];
      ASSERT_TRUE(m.gradient_error && m.gradient_error_layers && a.gradient_error_layers);
      expect_relative(*m.gradient_error_layers, *a.gradient_error_layers, 1e-6, "chain layers");
      expect_relative(*m.gradient_error, *a.gradient_error, 1e-6, "all parameters");
      EXPECT_GT(*m.gradient_error_layers, 1e-3);
      EXPECT_GT(std::abs(*m.gradient_error_layers - *m.gradient_error), 1e-3 * *m.gradient_error);
    }
  }
}

// A tolerance the first iterations miss: the checks raise the counts (within their bound) until
// the gradient is exact to round-off or nearly so, and more iterations cost more evaluations.
// With half steps (the solver skips, the default) the raises go by half an iteration.
TEST(Trainer, AutomaticIterationsRaiseTheCountsWithinTheirBound) {
  train::TrainerOptions fixed = automatic_options();
  fixed.iterations = train::IterationControl{};
  const auto one = fit(fixed);  // one iteration each way throughout
  EXPECT_EQ(*one->epochs[1].fwd_iterations_max, 1.0);
  for (const bool half_steps : {true, false}) {
    SCOPED_TRACE(half_steps ? "half steps" : "whole iterations");
    train::TrainerOptions o = automatic_options();
    o.iterations.gradient_tolerance = 1e-6;
    o.iterations.forward_tolerance = 1e-6;  // both errors fail: both counts rise
    o.iterations.check_every = 2;
    o.iterations.half_steps = half_steps;
    const auto r = fit(o);
    ASSERT_EQ(r->epochs.size(), 2u);
    for (const train::EpochMetrics& m : r->epochs) {
      EXPECT_LE(*m.fwd_iterations_max, 4.0);
      EXPECT_LE(*m.bwd_iterations_max, 4.0);
      EXPECT_GE(m.gradient_checks.value_or(0), 2);
      EXPECT_EQ(m.fwd_unskipped.has_value(), half_steps);
      EXPECT_EQ(m.bwd_unskipped.has_value(), half_steps);
    }
    // The counts rise by one at each check: 1 -> 2 -> 3 iterations at least, or by half steps
    // 1 -> 1 not skipping -> 2.
    EXPECT_GE(*r->epochs[0].fwd_iterations_max, half_steps ? 2.0 : 3.0);
    if (half_steps) {
      EXPECT_GT(*r->epochs[0].fwd_unskipped, 0.0);
    }
    EXPECT_LT(*r->epochs[1].gradient_error, 0.05);
    EXPECT_LT(*r->epochs[1].forward_error, 0.05);
    EXPECT_GT(*r->epochs[1].step_evaluations, *one->epochs[1].step_evaluations);
  }
  // A forward within a quarter of its tolerance keeps its count while the adjoint's can rise:
  // the gradient's error is the adjoint's to answer.
  train::TrainerOptions o = automatic_options();
  o.iterations.gradient_tolerance = 1e-6;
  o.iterations.forward_tolerance = 0.9;
  o.iterations.check_every = 2;
  o.iterations.half_steps = false;
  const auto r = fit(o);
  const train::EpochMetrics& m = r->epochs[0];
  ASSERT_TRUE(m.forward_error.has_value());
  EXPECT_LE(*m.forward_error, 0.9 / 4);
  EXPECT_EQ(*m.bwd_iterations_max, 4.0);
  EXPECT_LT(*m.fwd_iterations + 1, *m.bwd_iterations);
}

// The forward error is the MGRIT logits' distance from the network's own: it falls with the
// forward's iterations, to round-off where two-level MGRIT is exact, and the adjoint's
// iterations do not change it (checked at every batch, every step takes the exact gradient:
// the same training whatever the adjoint's count).
TEST(Trainer, TheForwardErrorMeasuresTheMgritLogitsAgainstTheNetworks) {
  auto held = [](int forward, int backward) {
    train::TrainerOptions o = automatic_options();
    o.parallel = weft::nn::LayerParallelOptions::multilevel(2, 2, forward, backward);
    o.iterations.forward = true;
    o.iterations.backward = false;
    o.iterations.min_iterations = o.iterations.max_iterations = forward;
    o.iterations.check_every = 1;
    const auto r = fit(o);
    return *r->epochs[1].forward_error;
  };
  const double one = held(1, 1), two = held(2, 1), four = held(4, 1);
  EXPECT_GT(one, 1e-3);
  EXPECT_LT(two, one / 20);
  EXPECT_LT(four, 1e-6);
  EXPECT_DOUBLE_EQ(held(1, 3), one);
}

// With data replicas the forward error is the global batch's: each replica's output rank adds
// its rows, so two replicas of a one-rank chain measure what one two-rank chain measures
// (every batch checked: both step with the exact gradient of the same global batch).
TEST(Trainer, TheForwardErrorOfDataReplicasIsTheGlobalBatchs) {
  if (world_size() != 2) GTEST_SKIP() << "two ranks: one chain of 2 or 2 replicas of 1";
  auto forward_error = [](int data_ranks) {
    train::TrainerOptions o = automatic_options();
    o.data_ranks = data_ranks;
    o.iterations.forward = true;
    o.iterations.backward = false;
    o.iterations.min_iterations = o.iterations.max_iterations = 1;
    o.iterations.check_every = 1;
    return *fit(o)->epochs[1].forward_error;
  };
  const double chain = forward_error(1), replicas = forward_error(2);
  EXPECT_GT(chain, 1e-3);
  EXPECT_NEAR(replicas, chain, 1e-5 * chain);
}

TEST(Trainer, AutomaticIterationsRefuseExactModeAndTheSequentialReference) {
  train::TrainerOptions o = automatic_options();
  o.serial = true;
  expect_invalid_field(o, "iteration_control");
  o = automatic_options();
  o.parallel = weft::nn::LayerParallelOptions::exact();
  expect_invalid_field(o, "iteration_control");
  o = automatic_options();
  o.iterations.gradient_tolerance = 2;
  expect_invalid_field(o, "iteration_control");
}

// Diagnostics at the checks (IterationControl::diagnostics), with the count held (min = max):
// - on a batch of identical examples the two halves' exact gradients are equal, so the
//   sampling noise is 0; with identical batches and a learning rate too small to move the
//   parameters, consecutive checks see the same error: persistence 1;
// - on the usual data (stages with batch norm and dropout) the noise is positive, the
//   persistence a cosine, and the training is the run's without diagnostics: the extra exact
//   passes put back the gradient and batch norm's statistics.
TEST(Trainer, CheckDiagnosticsMeasureSamplingNoiseAndErrorPersistence) {
  train::TrainerOptions held = automatic_options();
  held.iterations.min_iterations = held.iterations.max_iterations = 1;
  held.iterations.check_every = 1;
  held.iterations.diagnostics = true;
  {
    torch::manual_seed(3);
    const torch::Tensor image = torch::rand({1, 1, 8, 8});
    auto same = std::make_shared<train::TensorSource>(image.expand({64, 1, 8, 8}).contiguous(),
                                                      torch::full({64}, 2, torch::kInt64));
    train::TrainerOptions o = held;
    o.lr = 1e-12;
    o.model.batchnorm = false;  // a batch of equal examples has no variance to normalise by
    train::Trainer trainer(o, same, bands(32, 2), MPI_COMM_WORLD);
    auto r = std::make_shared<Recorder>();
    trainer.add_observer(r);
    trainer.fit();
    for (const train::EpochMetrics& m : r->epochs) {
      EXPECT_TRUE(m.gradient_diagnostics);
      EXPECT_EQ(*m.fwd_iterations_max, 1.0);
      ASSERT_TRUE(m.gradient_error && m.gradient_noise && m.gradient_error_persistence);
      EXPECT_GT(*m.gradient_error, 1e-3);  // one iteration is not exact: an error to compare
      EXPECT_LT(*m.gradient_noise, 1e-6);
      EXPECT_GT(*m.gradient_error_persistence, 0.999);
    }
  }
  train::TrainerOptions stages = held;
  stages.model.kind = "stages";
  stages.model.stage_channels = {2, 4};
  stages.model.stage_steps = {4, 4};
  stages.model.batchnorm = true;
  stages.model.dropout = 0.1;
  stages.iterations.check_every = 2;
  const auto with = fit(stages);
  stages.iterations.diagnostics = false;
  const auto without = fit(stages);
  ASSERT_EQ(with->epochs.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    const train::EpochMetrics& m = with->epochs[e];
    ASSERT_TRUE(m.gradient_noise && m.gradient_error_persistence);
    EXPECT_GT(*m.gradient_noise, 1e-3);
    EXPECT_GE(*m.gradient_error_persistence, -1.0);
    EXPECT_LE(*m.gradient_error_persistence, 1.0);
    EXPECT_DOUBLE_EQ(m.train_loss, without->epochs[e].train_loss);
    EXPECT_DOUBLE_EQ(m.test_loss, without->epochs[e].test_loss);
    EXPECT_DOUBLE_EQ(*m.gradient_error, *without->epochs[e].gradient_error);
    EXPECT_GT(*m.step_evaluations, *without->epochs[e].step_evaluations);  // the halves' passes
    EXPECT_FALSE(without->epochs[e].gradient_diagnostics);
    EXPECT_FALSE(without->epochs[e].gradient_noise.has_value());
  }
}

// The controller's state travels in the checkpoint: resumed after epoch 1, the run takes the
// uninterrupted run's decisions (counts, checks, lowerings, with half steps their skips) and so
// its losses. A checkpoint of another optimizer is refused by name.
TEST(Trainer, AutomaticIterationsResumeLikeTheUninterruptedRun) {
  train::TrainerOptions o = automatic_options();
  o.iterations.check_every = 3;
  o.iterations.gradient_tolerance = 0.2;
  for (const bool half_steps : {false, true}) {
    SCOPED_TRACE(half_steps ? "half steps" : "whole iterations");
    o.iterations.half_steps = half_steps;
    auto r = resume_after_first_epoch(o, half_steps ? "resume-auto-half" : "resume-auto");
    for (size_t e = 0; e < 2; ++e) {
      const train::EpochMetrics& m = r.resumed->epochs[e];
      const train::EpochMetrics& want = r.straight->epochs[e + 1];
      EXPECT_EQ(m.gradient_checks.value_or(-1), want.gradient_checks.value_or(-2));
      EXPECT_EQ(m.fwd_iterations.value_or(-1), want.fwd_iterations.value_or(-2));
      EXPECT_EQ(m.bwd_iterations.value_or(-1), want.bwd_iterations.value_or(-2));
      EXPECT_EQ(m.fwd_unskipped.has_value(), half_steps);
      EXPECT_EQ(m.fwd_unskipped.value_or(-1), want.fwd_unskipped.value_or(-1));
      EXPECT_EQ(m.bwd_unskipped.value_or(-1), want.bwd_unskipped.value_or(-1));
    }
    r.resume.optimizer = "sgd";
    expect_invalid_field(r.resume, "optimizer");
  }
}

TEST(Trainer, ObserversSeeEveryEventInOrder) {
  train::TrainerOptions o = small_options();
  o.checkpoint_dir = shared_folder("events");
  const auto r = fit(o);
  std::vector<std::string> want{"run"};
  for (int epoch = 1; epoch <= 2; ++epoch) {
    want.push_back("epoch " + std::to_string(epoch));
    for (int b = 0; b < 4; ++b) want.push_back("batch");
    for (const char* e : {"evaluation", "done", "checkpoint"}) want.push_back(e);
  }
  EXPECT_EQ(r->log, want);
  EXPECT_EQ(r->started.train_examples, 64);
  EXPECT_EQ(r->started.batches_per_epoch, 4);
  EXPECT_EQ(r->started.ranks, world_size());
  ASSERT_EQ(r->batches.size(), 8u);
  for (size_t k = 0; k < 8; ++k) {
    const train::BatchDone& b = r->batches[k];
    EXPECT_EQ(b.global_batch, static_cast<std::int64_t>(k));
    EXPECT_EQ(b.seen, 16 * static_cast<std::int64_t>(k % 4 + 1));
    EXPECT_DOUBLE_EQ(b.learning_rate, train::learning_rate(o, b.global_batch, 4));
  }
  EXPECT_DOUBLE_EQ(r->batches.back().mean_loss, r->epochs.back().train_loss);
  // The evaluation event and the epoch's metrics agree, and the confusion matrix counts every
  // test example once.
  ASSERT_EQ(r->evaluations.size(), 2u);
  EXPECT_DOUBLE_EQ(r->evaluations[1].accuracy, r->epochs[1].test_accuracy);
  std::int64_t counted = 0;
  for (std::int64_t n : r->evaluations[1].confusion) counted += n;
  EXPECT_EQ(counted, 32);
  EXPECT_EQ(r->epochs[1].per_rank.size(), static_cast<size_t>(world_size()));
}

TEST(Trainer, ResumedRunFollowsTheUninterruptedOne) {
  resume_after_first_epoch(small_options(), "resume", [](train::TrainerOptions& o) {
    o.model.channels = 99;  // the checkpoint's model replaces the options' one
  });
}

TEST(Trainer, CheckpointEvaluatesAlikeAtAnotherRankCount) {
  train::TrainerOptions o = small_options();
  o.epochs = 1;
  o.checkpoint_dir = shared_folder("evaluate");
  auto test = bands(32, 2);
  train::Trainer trainer(o, bands(64, 1), test, MPI_COMM_WORLD);
  trainer.fit();
  const train::Evaluation here = trainer.evaluate(*test);
  const train::Evaluation all =
      train::evaluate_checkpoint(o.checkpoint_dir, *test, 500, MPI_COMM_WORLD);
  expect_relative(all.loss, here.loss, 1e-6, "loss over every rank");
  EXPECT_EQ(all.confusion, here.confusion);
  if (world_rank() == 0) {  // one rank alone
    const train::Evaluation one =
        train::evaluate_checkpoint(o.checkpoint_dir, *test, 7, MPI_COMM_SELF);
    expect_relative(one.loss, here.loss, 1e-5, "loss on one rank");
    EXPECT_EQ(one.confusion, here.confusion);
  }
}

// The evaluation after each epoch reports the network's own forward (pipelined over the ranks):
// what `weft eval` of the checkpoint reports, whatever the MGRIT settings; by default (both) the
// training's one-iteration forward solve beside it, which differs, and which is what the
// evaluation reports when asked for alone. Neither changes the training.
TEST(Trainer, EvaluationReportsTheNetworksForwardAndTheSolvesBesideIt) {
  train::TrainerOptions o = small_options();
  o.epochs = 1;
  o.parallel = weft::nn::LayerParallelOptions::multilevel(2, 2, 1, 1);
  o.checkpoint_dir = shared_folder("evaluation_forward");
  auto test = bands(40, 2);
  auto exact = std::make_shared<Recorder>(), solver = std::make_shared<Recorder>();
  {
    train::Trainer trainer(o, bands(64, 1), test, MPI_COMM_WORLD);
    trainer.add_observer(exact);
    trainer.fit();
  }
  const train::Evaluation stored =
      train::evaluate_checkpoint(o.checkpoint_dir, *test, 500, MPI_COMM_WORLD);
  o.checkpoint_dir.clear();
  o.evaluation_forward = train::EvaluationForward::solver;
  {
    train::Trainer trainer(o, bands(64, 1), test, MPI_COMM_WORLD);
    trainer.add_observer(solver);
    trainer.fit();
  }
  if (world_rank() != 0) return;
  ASSERT_EQ(exact->epochs.size(), 1u);
  ASSERT_EQ(solver->epochs.size(), 1u);
  const train::EpochMetrics &e = exact->epochs[0], &s = solver->epochs[0];
  EXPECT_EQ(e.eval_forward, "both");
  EXPECT_EQ(s.eval_forward, "solver");
  EXPECT_FALSE(s.mgrit_test_loss.has_value());
  ASSERT_TRUE(e.mgrit_test_loss.has_value());
  expect_relative(*e.mgrit_test_loss, s.test_loss, 1e-6, "the solve's figures beside the exact");
  expect_relative(*e.mgrit_test_accuracy, s.test_accuracy, 1e-9, "the solve's accuracy");
  EXPECT_GT(e.eval_seconds, 0.0);
  EXPECT_LE(e.eval_seconds, e.epoch_seconds);
  expect_relative(e.test_loss, stored.loss, 1e-6, "exact evaluation against weft eval");
  EXPECT_EQ(exact->evaluations[0].confusion, stored.confusion);
  expect_relative(s.train_loss, e.train_loss, 1e-6, "training unchanged by the evaluation");
  EXPECT_GT(std::abs(s.test_loss - e.test_loss), 1e-5 * std::abs(e.test_loss))
      << "the one-iteration forward solve evaluated like the network";
}

// Colour images normalized per channel: each channel of the examples has mean 0 and standard
// deviation 1 (one pair for all channels leaves the channels apart), and the checkpoint keeps
// the per-channel figures.
TEST(DataSource, PerChannelNormalizationIsMeasuredAppliedAndStored) {
  weft::data::ImageSet set;
  set.count = 16;
  set.channels = 3;
  set.rows = set.cols = 4;
  set.classes = 3;
  for (std::int64_t n = 0; n < set.count; ++n) {
    for (std::int64_t c = 0; c < 3; ++c)
      for (std::int64_t p = 0; p < 16; ++p)  // channel c: values around 40 + 80 c
        set.pixels.push_back(
            static_cast<std::uint8_t>(40 + 80 * c + (n * 7 + p * 3) % (20 + 10 * c)));
    set.labels.push_back(static_cast<std::uint8_t>(n % 3));
  }
  const train::Normalization per = train::measure_normalization(set, true);
  ASSERT_TRUE(per.per_channel());
  ASSERT_EQ(per.channel_mean.size(), 3u);
  EXPECT_LT(per.channel_mean[0], per.channel_mean[1]);
  EXPECT_LT(per.channel_mean[1], per.channel_mean[2]);
  const torch::Tensor x = train::TensorSource::from_images(set, per)->range(0, 16).inputs;
  for (std::int64_t c = 0; c < 3; ++c) {
    const torch::Tensor channel = x.select(1, c).to(torch::kFloat64);
    EXPECT_NEAR(channel.mean().item<double>(), 0.0, 1e-5) << "channel " << c;
    EXPECT_NEAR(channel.std(/*unbiased=*/false).item<double>(), 1.0, 1e-4) << "channel " << c;
  }
  const train::Normalization one = train::measure_normalization(set, false);
  EXPECT_FALSE(one.per_channel());
  const torch::Tensor y = train::TensorSource::from_images(set, one)->range(0, 16).inputs;
  EXPECT_NEAR(y.mean().item<double>(), 0.0, 1e-5);
  EXPECT_LT(y.select(1, 0).mean().item<double>(), -0.5) << "the channels stay apart";

  train::TrainerOptions o = small_options();
  o.epochs = 1;
  o.model.classes = 3;
  o.checkpoint_dir = shared_folder("per_channel");
  auto data = train::TensorSource::from_images(set, per);
  train::Trainer(o, data, data, MPI_COMM_WORLD).fit();
  const train::CheckpointInfo info = train::read_checkpoint_info(o.checkpoint_dir);
  EXPECT_EQ(info.normalization.channel_mean, per.channel_mean);
  EXPECT_EQ(info.normalization.channel_std, per.channel_std);
  EXPECT_EQ(info.model.classes, 3);
  EXPECT_EQ(info.example.channels, 3);
}

// Crop and flip: each example's draw depends on (seed, epoch, index) only, not on the batch it
// is in; the result is the crop of the black-padded image, flipped; evaluation is untouched.
TEST(Augmentation, EachExampleIsTheCropOfItsPaddedImageDrawnFromSeedEpochAndIndex) {
  const torch::Tensor x = torch::arange(16 * 2 * 6 * 6, torch::kFloat32).view({16, 2, 6, 6}) + 1;
  auto base = std::make_shared<train::TensorSource>(x, torch::arange(16, torch::kInt64) % 3);
  train::Augmentation a;
  a.padding = 2;
  a.seed = 7;
  const train::AugmentedSource source(base, a);
  const torch::Tensor all = torch::arange(16, torch::kInt64);
  const torch::Tensor batch = source.examples(all, 3).inputs;
  int flips = 0, shifts = 0, changed_by_epoch = 0;
  for (std::int64_t i = 0; i < 16; ++i) {
    const auto d = source.draw(i, 3);
    EXPECT_LE(std::abs(d.dy), 2);
    EXPECT_LE(std::abs(d.dx), 2);
    flips += d.flip;
    shifts += d.dy != 0 || d.dx != 0;
    const auto e = source.draw(i, 4);
    changed_by_epoch += e.dy != d.dy || e.dx != d.dx || e.flip != d.flip;
    // The expected image: pad with black (0: the source is not normalized), crop, flip.
    const torch::Tensor padded = torch::constant_pad_nd(x[i], {2, 2, 2, 2}, 0.0);
    torch::Tensor want = padded.slice(1, 2 + d.dy, 2 + d.dy + 6).slice(2, 2 + d.dx, 2 + d.dx + 6);
    if (d.flip) want = want.flip({2});
    EXPECT_TRUE(torch::equal(batch[i], want)) << "example " << i;
    // The same example alone, or in another batch, is drawn alike.
    const torch::Tensor alone = source.examples(torch::tensor({i}, torch::kInt64), 3).inputs;
    EXPECT_TRUE(torch::equal(alone[0], batch[i])) << "example " << i;
  }
  EXPECT_GT(flips, 2);
  EXPECT_GT(shifts, 8);
  EXPECT_GT(changed_by_epoch, 8);
  EXPECT_TRUE(torch::equal(source.range(0, 16).inputs, x)) << "evaluation is not augmented";
  a.padding = 6;
  EXPECT_THROW(train::AugmentedSource(base, a), weft::InvalidOption);
}

TEST(Trainer, NetworkOfTheUsersOwnTrainsLikeTheZoosModel) {
  train::TrainerOptions o = small_options();
  o.epochs = 1;
  o.checkpoint_dir = shared_folder("custom");
  const auto zoo = fit(o);
  const weft::nn::Network network = train::build_network(o.model, {1, 8, 8});
  auto test = bands(32, 2);
  train::Trainer trainer(o, network, bands(64, 1), test, MPI_COMM_WORLD);
  auto custom = std::make_shared<Recorder>();
  trainer.add_observer(custom);
  trainer.fit();
  EXPECT_EQ(trainer.options().model.kind, "custom");
  ASSERT_EQ(custom->epochs.size(), 1u);
  EXPECT_DOUBLE_EQ(custom->epochs[0].train_loss, zoo->epochs[0].train_loss);
  EXPECT_DOUBLE_EQ(custom->epochs[0].test_loss, zoo->epochs[0].test_loss);
  // Its checkpoint is evaluated with the network, and refused without it.
  const train::Evaluation stored =
      train::evaluate_checkpoint(o.checkpoint_dir, network, *test, 500, MPI_COMM_WORLD);
  expect_relative(stored.loss, custom->epochs[0].test_loss, 1e-6, "custom checkpoint");
  // Refused on every rank alike (an agreed error: the CLI ends with one line, no abort).
  try {
    train::evaluate_checkpoint(o.checkpoint_dir, *test, 500, MPI_COMM_WORLD);
    ADD_FAILURE() << "a custom checkpoint was evaluated without its network";
  } catch (const weft::BadData& e) {
    EXPECT_NE(dynamic_cast<const weft::Collective*>(&e), nullptr) << e.what();
    EXPECT_NE(std::string(e.what()).find("network of the user's own"), std::string::npos);
  }
  train::TrainerOptions resume = o;
  resume.epochs = 2;
  resume.resume_dir = o.checkpoint_dir;
  resume.checkpoint_dir.clear();
  try {
    train::Trainer zoo_resume(resume, bands(64, 1), test, MPI_COMM_WORLD);
    ADD_FAILURE() << "a custom checkpoint was resumed without its network";
  } catch (const weft::BadData& e) {
    EXPECT_NE(dynamic_cast<const weft::Collective*>(&e), nullptr) << e.what();
  }
}

TEST(ModelRegistry, EveryKindBuildsTheChainItAnnounces) {
  for (const train::ModelKind& kind : train::model_kinds()) {
    train::ModelConfig m;
    m.kind = kind.name;
    const std::vector<std::int64_t> shape = kind.spatial_dims == 3
                                                ? std::vector<std::int64_t>{1, 8, 8, 8}
                                                : std::vector<std::int64_t>{1, 8, 8};
    const std::int64_t layers = kind.chain_layers(m);
    if (layers < 0) {  // recurrent or custom: no chain to build
      EXPECT_THROW(train::build_network(m, shape), weft::InvalidOption) << kind.name;
      continue;
    }
    EXPECT_EQ(train::build_network(m, shape).layers(), layers) << kind.name;
    EXPECT_TRUE(kind.convolutional()) << kind.name;
  }
  EXPECT_EQ(train::model_kind_names(),
            (std::vector<std::string>{"resnet", "stages", "conv3d", "gru", "lstm"}));
  EXPECT_EQ(train::model_kind_names(3), std::vector<std::string>{"conv3d"});
  EXPECT_EQ(train::model_kinds_with("dropout"), (std::vector<std::string>{"stages", "conv3d"}));
  // The stages recipe's forward skips (two iterations) where a stage is longer than 2 steps.
  train::ModelConfig staged;
  staged.kind = "stages";
  EXPECT_FALSE(train::recipe_for(staged).forward_skip);
  EXPECT_EQ(train::recipe_for(staged).forward_iterations, 1);
  staged.stage_steps = {2, 3, 2};
  EXPECT_TRUE(train::recipe_for(staged).forward_skip);
  EXPECT_EQ(train::recipe_for(staged).forward_iterations_skipping, 2);
  staged.kind = "resnet";
  EXPECT_TRUE(train::recipe_for(staged).forward_skip);
  try {
    train::model_kind("transformer");
    ADD_FAILURE() << "an unknown kind was accepted";
  } catch (const weft::InvalidOption& e) {
    EXPECT_EQ(e.option(), "kind");
    EXPECT_NE(std::string(e.what()).find("accepted: resnet, stages, conv3d, gru, lstm"),
              std::string::npos)
        << e.what();
  }
}

// The registry counts each kind's parameters without building it; the built modules agree to
// the parameter, for variants of each kind, and the memory estimate follows the counts.
TEST(ModelRegistry, ParameterCountsEqualTheBuiltModels) {
  auto count = [](const std::vector<torch::Tensor>& params) {
    std::int64_t n = 0;
    for (const torch::Tensor& p : params) n += p.numel();
    return n;
  };
  std::vector<train::ModelConfig> configs;
  for (const train::ModelKind& kind : train::model_kinds()) {
    if (!kind.selectable) continue;
    train::ModelConfig m;
    m.kind = kind.name;
    configs.push_back(m);
  }
  train::ModelConfig copy_open;
  copy_open.open = "copy";
  copy_open.channels = 3;
  train::ModelConfig no_bn;
  no_bn.kind = "stages";
  no_bn.batchnorm = false;
  no_bn.stage_channels = {2, 5};
  no_bn.stage_steps = {1, 3};
  train::ModelConfig deep_lstm;
  deep_lstm.kind = "lstm";
  deep_lstm.rnn_layers = 2;
  deep_lstm.hidden = 7;
  deep_lstm.sequence = "pixels";
  configs.insert(configs.end(), {copy_open, no_bn, deep_lstm});
  for (const train::ModelConfig& m : configs) {
    const train::ModelKind& kind = train::model_kind(m);
    const std::vector<std::int64_t> shape = kind.spatial_dims == 3
                                                ? std::vector<std::int64_t>{1, 8, 8, 8}
                                                : std::vector<std::int64_t>{1, 12, 8};
    const train::ParameterCount p = kind.parameters(m, shape, 10);
    if (kind.recurrent()) {
      torch::manual_seed(1);
      weft::models::SequenceClassifier model(
          MPI_COMM_SELF,
          train::sequence_classifier_spec(m, shape, weft::nn::LayerParallelOptions(), true));
      EXPECT_EQ(p.total(), count(model->parameters())) << m.kind;
      continue;
    }
    const weft::nn::Network net = train::build_network(m, shape);
    weft::nn::SequentialNetwork built(net);
    std::int64_t chain = 0;
    for (std::int64_t n = 0; n < built->steps(); ++n)
      chain += count(built->step(n).module().parameters());
    EXPECT_EQ(p.chain, chain) << m.kind;
    EXPECT_EQ(p.open, built->open().is_empty() ? 0 : count(built->open().module().parameters()))
        << m.kind;
    EXPECT_EQ(p.close, count(built->close().module().parameters())) << m.kind;
  }
  // The busiest rank's share: at 4 ranks a quarter of resnet's 8 equal layers with both ends.
  train::TrainerOptions o;
  o.optimizer = "sgd";
  const train::ParameterCount p = train::model_kind(o.model).parameters(o.model, {1, 28, 28}, 10);
  const train::MemoryEstimate e = train::estimate_memory(o, {1, 28, 28}, 100, 50, 4);
  EXPECT_DOUBLE_EQ(
      e.parameters,
      4.0 * 3 * (static_cast<double>(p.chain) / 4 + static_cast<double>(p.open + p.close)));
  EXPECT_DOUBLE_EQ(e.data, 4.0 * 28 * 28 * 150);
  EXPECT_GT(e.states, 0);
  o.serial = true;
  EXPECT_GT(train::estimate_memory(o, {1, 28, 28}, 100, 50, 4).parameters, e.parameters);

  // States at each layer's own size: conv3d 2,4 channels, 2,2 steps on 8^3 volumes has three
  // layers at 2 x 8^3 floats (two steps and the transition) and two at 4 x 4^3.
  train::TrainerOptions v;
  v.model.kind = "conv3d";
  v.model.stage_channels = {2, 4};
  v.model.stage_steps = {2, 2};
  v.batch = 10;
  const double big = 4.0 * 2 * 512, small = 4.0 * 4 * 64;  // bytes per example
  const auto states = [&](int ranks) {
    const train::MemoryEstimate m = train::estimate_memory(v, {1, 8, 8, 8}, 40, 20, ranks);
    EXPECT_EQ(m.eval_batch, 20) << "max(batch, 500), at most the test set";
    return m.states / (3 * 10 + 20);
  };
  EXPECT_DOUBLE_EQ(states(1), 3 * big + 2 * small + small);  // every layer and the last point
  EXPECT_DOUBLE_EQ(states(2), 2 * big + big);                // the first rank's two layers
  v.balance_cost = true;                                     // any placement: the average
  EXPECT_DOUBLE_EQ(states(2), (3 * big + 2 * small) / 2);
  v.eval_batch = 3;
  EXPECT_EQ(train::evaluation_batch(v), 3);
  EXPECT_DOUBLE_EQ(train::estimate_memory(v, {1, 8, 8, 8}, 40, 20, 2).states,
                   (3 * big + 2 * small) / 2 * (3 * 10 + 3));
  v.serial = true;  // all layers for training, the input and output for evaluation
  EXPECT_DOUBLE_EQ(train::estimate_memory(v, {1, 8, 8, 8}, 40, 20, 2).states,
                   (3 * big + 3 * small) * 3 * 10 + 2 * big * 3);
  v.eval_batch = 0;
  v.batch = 600;
  EXPECT_EQ(train::evaluation_batch(v), 600);
}

TEST(Trainer, InvalidOptionsNameTheirField) {
  train::TrainerOptions o = small_options();
  o.batch = 0;
  expect_invalid_field(o, "batch");
  o = small_options();
  o.optimizer = "rmsprop";
  expect_invalid_field(o, "optimizer");
  o = small_options();
  o.lr_schedule = "step";
  expect_invalid_field(o, "lr_schedule");
  o = small_options();
  o.data_ranks = world_size() + 1;
  expect_invalid_field(o, "data_ranks");
  EXPECT_THROW(train::TensorSource(torch::zeros({4, 1, 8, 8}), torch::zeros({3}, torch::kInt64)),
               weft::BadData);
}

TEST(Trainer, DivergenceStopsEveryRank) {
  train::TrainerOptions o = small_options();
  o.optimizer = "sgd";
  o.lr = 1e8;
  train::Trainer trainer(o, bands(64, 1), bands(32, 2), MPI_COMM_WORLD);
  auto r = std::make_shared<Recorder>();
  trainer.add_observer(r);
  EXPECT_THROW(trainer.fit(), train::Diverged);
  ASSERT_FALSE(r->log.empty());
  EXPECT_EQ(r->log.back(), "divergence");
  EXPECT_FALSE(std::isfinite(r->diverged_loss));
}

/// Throws on rank 0 only: every rank must end with the error, none may wait.
class FailingObserver : public train::Observer {
 public:
  void epoch_done(const train::EpochDone& e) override {
    if (e.rank == 0) throw weft::BadData("the metrics disk is full");
  }
};

TEST(Trainer, AnObserverFailingOnOneRankEndsEveryRank) {
  train::Trainer trainer(small_options(), bands(64, 1), bands(32, 2), MPI_COMM_WORLD);
  trainer.add_observer(std::make_shared<FailingObserver>());
  try {
    trainer.fit();
    ADD_FAILURE() << "no error";
  } catch (const weft::BadData& e) {
    EXPECT_NE(std::string(e.what()).find("the metrics disk is full"), std::string::npos);
  }
}

TEST(ImageFileSource, StreamsExactlyTheExamplesOfTheSetDecodedIntoMemory) {
  namespace data = weft::data;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("weft-image-source-" + std::to_string(::getpid()) + "-" + std::to_string(world_rank()));
  std::filesystem::remove_all(dir);
  data::write_generated_images(dir.string(), data::ImageLayout::Folder, 3, 4, 1, 16, 2);
  const data::ImageFiles files =
      data::index_images(dir.string(), data::ImageLayout::Folder, data::Split::Train);
  const data::ImageSet held = data::read_images(files, 12);
  const train::Normalization measured = train::measure_normalization(files, 12);
  const train::Normalization reference = train::measure_normalization(held, true);
  EXPECT_EQ(measured.channel_mean, reference.channel_mean);
  EXPECT_EQ(measured.channel_std, reference.channel_std);
  EXPECT_EQ(measured.mean, reference.mean);
  const train::ImageFileSource streamed(files, 12, measured);
  const auto in_memory = train::TensorSource::from_images(held, reference);
  EXPECT_EQ(streamed.size(), 12);
  EXPECT_EQ(streamed.example_shape(), in_memory->example_shape());
  const torch::Tensor idx = torch::tensor({7, 0, 11, 3}, torch::kInt64);
  const train::Batch a = streamed.examples(idx, 1), b = in_memory->examples(idx, 1);
  EXPECT_TRUE(torch::equal(a.inputs, b.inputs));
  EXPECT_TRUE(torch::equal(a.labels, b.labels));
  const train::Batch r = streamed.range(2, 9), q = in_memory->range(2, 9);
  EXPECT_TRUE(torch::equal(r.inputs, q.inputs));
  EXPECT_TRUE(torch::equal(r.labels, q.labels));
  // A sample of the set measures nearly the same.
  const train::Normalization sampled = train::measure_normalization(files, 12, 6);
  for (std::size_t c = 0; c < 3; ++c)
    EXPECT_NEAR(sampled.channel_mean[c], measured.channel_mean[c], 0.05) << c;
  EXPECT_THROW(streamed.examples(torch::tensor({12}, torch::kInt64), 1), weft::InvalidOption);
  std::filesystem::remove_all(dir);
}

// The busy-core slowdown `weft predict` prices P ranks with: exactly 1 with one core busy (no
// other thread runs), a ratio of two timings with two, and counts beyond this machine's cores
// (or below 1) refused in the library's vocabulary.
TEST(CostMeasurement, BusySlowdownIsOneAloneAndRefusesMoreCoresThanThisMachineHas) {
  const train::TrainerOptions o = small_options();
  const int cores = train::available_cores();
  ASSERT_GE(cores, 1);
  const std::vector<double> alone = train::measure_busy_slowdown(o, {1, 8, 8}, {1}, 1);
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_DOUBLE_EQ(alone[0], 1.0);
  if (cores >= 2) {
    const std::vector<double> two = train::measure_busy_slowdown(o, {1, 8, 8}, {2, 1}, 1);
    ASSERT_EQ(two.size(), 2u);
    EXPECT_DOUBLE_EQ(two[1], 1.0);
    // Bounds for noise (a step of microseconds on a loaded machine), where the two timed
    // threads of every rank have cores: with more ranks than that the ratio times the others.
    if (2 * world_size() <= cores) {
      EXPECT_GT(two[0], 0.2);
      EXPECT_LT(two[0], 50.0);
    }
  }
  for (int busy : {cores + 1, 0}) try {
      train::measure_busy_slowdown(o, {1, 8, 8}, {busy}, 1);
      ADD_FAILURE() << busy << " busy cores accepted on " << cores;
    } catch (const weft::InvalidOption& e) {
      EXPECT_EQ(e.option(), "busy_cores");
      EXPECT_NE(std::string(e.what()).find(std::to_string(busy)), std::string::npos) << e.what();
    }
}

}  // namespace
