// MG/Opt over depth (weft/train/mgopt.hpp): the coherence correction makes the coarse gradient
// the transposed fine gradient at every layout of ranks, one level is plain training bit for
// bit, the line search keeps a full-batch objective decreasing, layer-parallel MG/Opt trains
// like the sequential one, resume, and what is refused.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "classifier.hpp"
#include "expect.hpp"
#include "multilevel_optimizer.hpp"
#include "named_exchange.hpp"
#include "trainer_support.hpp"
#include "weft/train/depth_growth.hpp"
#include "weft/train/mgopt.hpp"
#include "weft/train/trainer.hpp"

namespace {

namespace train = weft::train;
using weft::test::bands;
using weft::test::expect_invalid_field;
using weft::test::fit;
using weft::test::resume_after_first_epoch;
using weft::test::small_options;
using weft::test::world_rank;
using weft::test::world_size;
using weft::test_support::expect_relative;

std::map<std::string, torch::Tensor> named(torch::nn::Module& module, bool gradients) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : module.named_parameters())
    out[item.key()] = gradients ? item.value().grad().clone() : item.value().detach().clone();
  return out;
}

/// "step_<n>.rest" -> n, or -1 for open/close.
int step_of(const std::string& key) {
  if (key.rfind("step_", 0) != 0) return -1;
  return std::stoi(key.substr(5, key.find('.') - 5));
}
std::string rest_of(const std::string& key) {
  return key.substr(key.find('.'));
}

// (a) Restricted to the coarse network, with the coherence term v = Pᵀg − ∇f_H(Rθ), the coarse
// objective's gradient at Rθ is Pᵀg: for piecewise-constant prolongation the sum of the fine
// steps' gradients a coarse step spans. Layer-parallel (exact mode, the fine and the coarse
// network each in their own layout over the ranks) against the sequential network's gradients.
TEST(MGOpt, CoherenceMakesTheCoarseGradientTheTransposedFineGradient) {
  for (const auto restriction :
       {weft::nn::DepthRestriction::Injection, weft::nn::DepthRestriction::Averaging}) {
    SCOPED_TRACE(weft::nn::to_string(restriction));
    train::ModelConfig model = small_options().model;
    model.steps = 8;
    train::MGOpt mgopt;
    mgopt.levels = 2;
    mgopt.restriction = restriction;
    const auto data = bands(16, 3);
    const train::Batch batch = data->range(0, 16);
    const std::vector<std::int64_t> shape = data->example_shape();
    const auto exact = weft::nn::LayerParallelOptions::exact();
    auto sgd = [](torch::nn::Module& m) {
      return std::make_unique<torch::optim::SGD>(m.parameters(), torch::optim::SGDOptions(0.1));
    };
    // The sequential network's parameters and gradients, on every rank.
    train::Classifier reference(model, shape, MPI_COMM_SELF, MPI_COMM_NULL, true, exact);
    auto reference_optimizer = sgd(reference.module());
    train::PhaseTimes t;
    reference_optimizer->zero_grad();
    reference.gradients(batch.inputs, batch.labels, t);
    const auto theta = named(reference.module(), false);
    const auto g = named(reference.module(), true);

    train::Classifier fine(model, shape, MPI_COMM_WORLD, MPI_COMM_NULL, false, exact);
    auto fine_optimizer = sgd(fine.module());
    train::MultilevelOptimizer levels(mgopt, model, shape, MPI_COMM_WORLD, MPI_COMM_NULL,
                                      MPI_COMM_WORLD, false, exact, sgd);
    levels.bind_fine(fine, *fine_optimizer);
    std::vector<torch::Tensor> transposed;
    const double f0 = levels.coarse_problem(0, batch, 1.0, 0, &transposed);
    EXPECT_GT(f0, 0);
    // Each rank received the fine tensors its coarse layers read, less than the other ranks'
    // parameters and gradients (what gathering the whole level would move).
    std::int64_t held = 0, everyone = 0;
    for (const auto& p : fine.module().parameters())
      held += 2 * p.numel() * static_cast<std::int64_t>(p.element_size());
    MPI_Allreduce(&held, &everyone, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_LT(levels.tally().received_bytes, std::max<std::int64_t>(everyone - held, 1));
    const double coarse_objective = levels.gradient(1, batch, 1.0, 0);
    EXPECT_TRUE(std::isfinite(coarse_objective));
    train::Classifier& coarse = levels.level_model(1);
    const auto params = coarse.module().named_parameters();
    ASSERT_EQ(params.size(), transposed.size());
    ASSERT_EQ(levels.coherence(1).size(), params.size());
    for (std::size_t i = 0; i < params.size(); ++i) {
      const std::string key = params[i].key();
      SCOPED_TRACE(key);
      const int n = step_of(key);
      const std::string first = n < 0 ? key : "step_" + std::to_string(2 * n) + rest_of(key);
      const std::string second = n < 0 ? key : "step_" + std::to_string(2 * n + 1) + rest_of(key);
      // Rθ: the fine step at the coarse step's time, or the mean of the two it spans.
      const torch::Tensor restricted = n < 0 || restriction == weft::nn::DepthRestriction::Injection
                                           ? theta.at(first)
                                           : (theta.at(first) + theta.at(second)) / 2;
      EXPECT_TRUE(torch::allclose(params[i].value(), restricted, 1e-6, 1e-7));
      // Pᵀg from the sequential gradients, and the coherent coarse gradient.
      const torch::Tensor expected = n < 0 ? g.at(key) : g.at(first) + g.at(second);
      EXPECT_TRUE(torch::allclose(transposed[i], expected, 1e-4, 1e-6))
          << (transposed[i] - expected).abs().max().item<double>();
      const torch::Tensor coherent = params[i].value().grad();
      ASSERT_TRUE(coherent.defined());
      const double scale = expected.abs().max().item<double>();
      EXPECT_LE((coherent - transposed[i]).abs().max().item<double>(), 1e-5 * scale + 1e-7);
    }
  }
}

// The transfers between levels: of the other ranks' tensors, each rank receives exactly those it
// reads (a key its holder lacks stays absent).
TEST(MGOpt, TransfersCarryOnlyWhatEachRankReads) {
  const int rank = world_rank(), size = world_size(), next = (rank + 1) % size;
  auto key = [](int r, const std::string& what) { return "r" + std::to_string(r) + "." + what; };
  const train::NamedTensors mine = {{key(rank, "read"), torch::full({4}, double(rank))},
                                    {key(rank, "unread"), torch::ones({1000})}};
  const train::NamedExchange exchange(
      MPI_COMM_WORLD, {key(next, "read"), key(next, "absent"), key(next, "read")},
      [&](const std::string& k) { return k.rfind(key(rank, ""), 0) == 0; });
  std::int64_t bytes = 0;
  for (int round = 0; round < 2; ++round) {  // the plan serves every transfer
    const auto got = exchange(mine, bytes);
    EXPECT_EQ(got.size(), size == 1 ? 2u : 3u);
    ASSERT_EQ(got.count(key(next, "read")), 1u);
    EXPECT_TRUE(torch::equal(got.at(key(next, "read")), torch::full({4}, double(next))));
    EXPECT_EQ(got.count(key(next, "absent")), 0u);
    EXPECT_EQ(got.count(key(next, "unread")), size == 1 ? 1u : 0u);
  }
  if (size == 1)
    EXPECT_EQ(bytes, 0);
  else
    EXPECT_TRUE(bytes > 0 && bytes < 2 * 1000 * 4) << bytes;  // not the unread tensor
}

// (b) With one level, MG/Opt is plain training, bit for bit: every batch's loss and every
// epoch's figures, layer-parallel and sequential.
TEST(MGOpt, OneLevelIsPlainTrainingBitForBit) {
  for (const bool serial : {false, true}) {
    train::TrainerOptions plain = small_options();
    plain.serial = serial;
    train::TrainerOptions one = plain;
    one.mgopt.levels = 1;
    const auto a = fit(plain), b = fit(one);
    if (serial && world_rank() != 0) continue;
    ASSERT_EQ(a->batches.size(), b->batches.size());
    ASSERT_FALSE(a->batches.empty());
    for (std::size_t k = 0; k < a->batches.size(); ++k)
      EXPECT_EQ(a->batches[k].loss, b->batches[k].loss);
    ASSERT_EQ(a->epochs.size(), b->epochs.size());
    for (std::size_t e = 0; e < a->epochs.size(); ++e) {
      EXPECT_EQ(a->epochs[e].train_loss, b->epochs[e].train_loss);
      EXPECT_EQ(a->epochs[e].test_loss, b->epochs[e].test_loss);
      EXPECT_EQ(b->epochs[e].mgopt_levels, 1);
      EXPECT_EQ(b->epochs[e].mgopt_corrections, 0);
    }
  }
}

/// Full-batch MG/Opt over 12, 6 and 3 steps: one V-cycle per epoch on one objective. Plain SGD
/// with a small step is a descent method, so the smoothing lowers the objective; four Adam steps
/// on the coarsest level (`adam`) overshoot at times instead.
train::TrainerOptions full_batch_options(bool adam) {
  train::TrainerOptions o = small_options();
  o.model.steps = 12;
  o.batch = 64;  // the whole training set
  o.optimizer = adam ? "adam" : "sgd";
  o.momentum = 0;
  o.lr = adam ? 0.02 : 0.05;
  o.lr_schedule = "constant";
  o.epochs = 8;
  o.mgopt.levels = 3;
  o.mgopt.coarse = 4;
  return o;
}

// (c) The line search accepts a coarse correction only where it lowers the objective, and the
// SGD smoothing steps lower it too: the full-batch loss falls at every cycle. Layer-parallel
// (exact mode) and sequential MG/Opt take the same steps.
TEST(MGOpt, FullBatchObjectiveDecreasesAtEveryCycle) {
  const train::TrainerOptions o = full_batch_options(false);
  const auto parallel = fit(o);
  train::TrainerOptions serial_options = o;
  serial_options.serial = true;
  const auto serial = fit(serial_options);
  if (world_rank() != 0) return;
  ASSERT_EQ(parallel->batches.size(), 8u);
  for (std::size_t k = 1; k < parallel->batches.size(); ++k)
    EXPECT_LT(parallel->batches[k].loss, parallel->batches[k - 1].loss) << "cycle " << k;
  std::int64_t accepted = 0;
  for (const auto& m : parallel->epochs) {
    EXPECT_EQ(m.mgopt_levels, 3);
    EXPECT_EQ(m.mgopt_corrections, 2);  // levels 0 and 1 each take one per cycle
    accepted += *m.mgopt_corrections - *m.mgopt_rejected;
    ASSERT_TRUE(m.step_evaluations);
    EXPECT_GT(*m.step_evaluations, 0);
  }
  EXPECT_GT(accepted, 0) << "no coarse correction was ever taken";
  ASSERT_EQ(serial->batches.size(), parallel->batches.size());
  for (std::size_t k = 0; k < serial->batches.size(); ++k)
    expect_relative(parallel->batches[k].loss, serial->batches[k].loss, 1e-4, "cycle loss");
}

// Where the coarse steps overshoot (Adam), the line search shortens the correction or rejects
// it: some epoch reports a rejection or a mean step length below 1, and every accepted step
// length lies in (0, 1].
TEST(MGOpt, LineSearchShortensOrRejectsOvershootingCorrections) {
  const auto run = fit(full_batch_options(true));
  if (world_rank() != 0) return;
  std::int64_t acted = 0;
  for (const auto& m : run->epochs) {
    if (*m.mgopt_rejected > 0 || (m.mgopt_step_mean && *m.mgopt_step_mean < 1)) ++acted;
    if (m.mgopt_step_mean) {
      EXPECT_GT(*m.mgopt_step_mean, 0);
      EXPECT_LE(*m.mgopt_step_mean, 1);
    }
  }
  EXPECT_GT(acted, 0) << "the line search never acted";
}

// Stages with batch norm, Adam (its moments restricted to every level), averaging and linear
// prolongation: layer-parallel MG/Opt trains like the sequential one.
TEST(MGOpt, StagesWithAdamTrainLikeTheSequentialReference) {
  train::TrainerOptions o = small_options();
  o.model.kind = "stages";
  o.model.stage_channels = {2, 4};
  o.model.stage_steps = {4, 4};
  o.mgopt.levels = 2;
  o.mgopt.restriction = weft::nn::DepthRestriction::Averaging;
  o.mgopt.interpolation = weft::nn::DepthInterpolation::Linear;
  const auto parallel = fit(o);
  o.serial = true;
  const auto serial = fit(o);
  if (world_rank() != 0) return;
  ASSERT_EQ(parallel->epochs.size(), 2u);
  for (std::size_t e = 0; e < 2; ++e) {
    expect_relative(parallel->epochs[e].train_loss, serial->epochs[e].train_loss, 1e-4, "train");
    expect_relative(parallel->epochs[e].test_loss, serial->epochs[e].test_loss, 1e-4, "test");
  }
  EXPECT_LT(parallel->epochs[1].train_loss, parallel->epochs[0].train_loss);
}

// SGD with momentum: its momenta are restricted at every cycle and the fine ones checkpointed.
TEST(MGOpt, ResumedRunFollowsTheUninterruptedOne) {
  train::TrainerOptions o = small_options();
  o.optimizer = "sgd";
  o.momentum = 0.9;
  o.model.steps = 8;
  o.mgopt.levels = 2;
  resume_after_first_epoch(o, "mgopt");
}

TEST(MGOpt, RefusesWhatItCannotCoarsen) {
  train::TrainerOptions o = small_options();  // 6 steps
  o.mgopt.levels = 3;                         // 6 / 4 steps on the coarsest level
  expect_invalid_field(o, "mgopt_levels");
  o.mgopt.levels = 2;
  o.mgopt.coarse = 0;
  expect_invalid_field(o, "mgopt_relax");
  o.mgopt.coarse = 1;
  o.mgopt.line_search = -1;
  expect_invalid_field(o, "mgopt_line_search");
  o.mgopt.line_search = 4;
  o.mgopt.factor = 1;
  expect_invalid_field(o, "mgopt_factor");
  o = small_options();
  o.mgopt.levels = 2;
  o.model.kind = "gru";
  expect_invalid_field(o, "mgopt_levels");
  o = small_options();
  o.mgopt.levels = 2;
  o.model.steps = 12;
  o.growth.refinements = 1;
  expect_invalid_field(o, "mgopt_levels");
  o = small_options();
  o.mgopt.levels = 2;
  o.parallel = weft::nn::LayerParallelOptions::multilevel(2, 2, 1, 1);
  o.iterations.forward = true;
  expect_invalid_field(o, "mgopt_levels");
  if (world_size() > 1) {  // 16 / 2^4 = 1 step for several ranks
    o = small_options();
    o.model.steps = 16;
    o.mgopt.levels = 5;
    expect_invalid_field(o, "mgopt_levels");
  }
}

}  // namespace
