// End-to-end tests of `weft train --model stages` (batch norm, dropout) and --data-ranks on
// Fashion-MNIST subsets: exact mode equals plain LibTorch (--serial uses the same dropout
// streams), D replicas equal training with the global batch, one checkpoint that resumes at
// another (D, P/D), the metrics keys, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "train_runner.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using weft::cli_test::Outcome;
using weft::cli_test::weft;
using weft::cli_test::work_dir;

const std::string kSmall =
    "--model stages --stage-channels 4,6 --stage-steps 2,3 --train-size 300 --test-size 200 "
    "--batch 20 ";

using weft::train_test::expect_relative;
using weft::train_test::train;

class StagesTrain : public weft::train_test::FashionMnistTest {};

// Batch norm in the open layer, the steps and the transitions, dropout in the steps, Adam: the
// layer-parallel runs and --serial agree in training and in evaluation (running statistics) to
// float32 round-off, and a checkpoint evaluated by `weft eval` at another rank count gives the
// figure its run printed. (Before the stages network dropped the convolution biases that feed
// batch norm, Adam turned their round-off gradients into steps: test losses differed by 2e-3.)
TEST_F(StagesTrain, ExactModeWithBatchNormAndDropoutEqualsSerialLibTorchInTrainingAndEvaluation) {
  const fs::path dir = work_dir();
  const std::string args = kSmall + "--epochs 2 --dropout 0.2 --exact";
  const std::string serial_ck = (dir / "serial_ck").string(), parallel_ck = (dir / "ck3").string();
  const auto serial = train(1, args + " --serial --checkpoint " + serial_ck, dir, "serial");
  const auto one = train(1, args, dir, "parallel1");
  const auto three = train(3, args + " --checkpoint " + parallel_ck, dir, "parallel3");
  ASSERT_EQ(serial.size(), 2u);
  for (const auto* parallel : {&one, &three}) {
    ASSERT_EQ(parallel->size(), 2u);
    for (size_t e = 0; e < 2; ++e) {
      const std::string at = " (epoch " + std::to_string(e + 1) + ", " +
                             std::to_string((*parallel)[e]["ranks"].get<int>()) + " ranks)";
      expect_relative((*parallel)[e]["train_loss"], serial[e]["train_loss"], 1e-4,
                      "train loss" + at);
      expect_relative((*parallel)[e]["test_loss"], serial[e]["test_loss"], 1e-4, "test loss" + at);
    }
  }
  for (const auto& [ck, run] :
       {std::make_pair(serial_ck, &serial), std::make_pair(parallel_ck, &three)}) {
    const fs::path json_path = dir / "eval.json";
    const Outcome ev =
        weft(2, "eval --test-size 200 --resume " + ck + " --json " + json_path.string(), dir);
    ASSERT_EQ(ev.code, 0) << ev.out << ev.err;
    std::ifstream in(json_path);
    const json j = json::parse(in);
    expect_relative(j["test_loss"], (*run)[1]["test_loss"], 1e-5, "weft eval of " + ck);
  }
  for (const char* key : {"fwd_levels", "bwd_levels", "data_ranks"})
    EXPECT_TRUE(three[0].contains(key)) << key;
  EXPECT_EQ(three[0]["fwd_levels"], 1);
  EXPECT_EQ(three[0]["data_ranks"], 1);
  EXPECT_EQ(three[0]["model"], "stages");
}

// The recipe's forward (2 levels, cf 2, one iteration without skip) is the network's own forward
// for 2 steps per stage, the default: its MGRIT test loss equals the exact one, and it trains
// as two iterations with skip do (the recipe before 7 Dec 2026). One iteration with skip is
// another function (docs/training.md §4a).
TEST_F(StagesTrain, TheRecipesOneForwardIterationIsTheNetworksForwardForTwoStepsPerStage) {
  const fs::path dir = work_dir();
  const std::string args =
      "--model stages --stage-channels 4,4,4 --train-size 200 --test-size 200 --batch 20 "
      "--epochs 1 --lr-schedule constant";
  const auto recipe = train(2, args, dir, "recipe");
  const auto two_skipping = train(2, args + " --fwd-iters 2 --fwd-skip 1", dir, "two");
  const auto one_skipping = train(2, args + " --fwd-iters 1 --fwd-skip 1", dir, "one");
  for (const auto* run : {&recipe, &two_skipping, &one_skipping}) {
    ASSERT_EQ(run->size(), 1u);
    ASSERT_TRUE((*run)[0].contains("mgrit_test_loss")) << (*run)[0].dump();
  }
  EXPECT_EQ(recipe[0]["fwd_levels"], 2);
  expect_relative(recipe[0]["mgrit_test_loss"], recipe[0]["test_loss"], 1e-5,
                  "the recipe's MGRIT forward against the network's");
  expect_relative(recipe[0]["train_loss"], two_skipping[0]["train_loss"], 1e-4,
                  "train loss against two iterations with skip");
  expect_relative(recipe[0]["test_loss"], two_skipping[0]["test_loss"], 1e-4,
                  "test loss against two iterations with skip");
  const double gap = std::abs(one_skipping[0]["mgrit_test_loss"].get<double>() -
                              one_skipping[0]["test_loss"].get<double>());
  // Outside the tolerance the recipe is within (6e-5 relative here, after 10 batches).
  EXPECT_GT(gap, 1e-5 * one_skipping[0]["test_loss"].get<double>())
      << "one iteration with skip evaluated like the network";
  // Where a stage has more steps, or the forward is told to skip, the recipe's forward is two
  // iterations with skip (the closer of the two there; docs/training.md §4a).
  const std::string tiny =
      "train --model stages --stage-channels 4,4,4 --train-size 20 --test-size 20 --batch 20 "
      "--epochs 1 --no-progress";
  for (const auto& [flags, forward] :
       {std::make_pair(std::string(""), "initial phase none, max_iterations 1,"),
        std::make_pair(std::string(" --stage-steps 2,3,2"),
                       "initial phase skip, max_iterations 2,"),
        std::make_pair(std::string(" --fwd-skip 1"), "initial phase skip, max_iterations 2,")}) {
    const Outcome run = weft(2, tiny + flags, dir);
    ASSERT_EQ(run.code, 0) << flags << run.out << run.err;
    const auto line = run.out.find("forward:  ");
    ASSERT_NE(line, std::string::npos) << run.out;
    EXPECT_NE(run.out.substr(line, run.out.find('\n', line) - line).find(forward),
              std::string::npos)
        << "'" << flags << "': " << run.out;
  }
}

TEST_F(StagesTrain, ReplicasEqualSerialTrainingWithTheGlobalBatch) {
  const fs::path dir = work_dir();
  const std::string args = kSmall + "--epochs 1 --batchnorm 0 --exact";
  const auto serial = train(1, args + " --serial", dir, "serial");
  const auto two = train(2, args + " --data-ranks 2", dir, "d2");
  const auto four = train(4, args + " --data-ranks 2", dir, "d2p2");
  ASSERT_EQ(serial.size(), 1u);
  ASSERT_EQ(two.size(), 1u);
  ASSERT_EQ(four.size(), 1u);
  for (const auto* run : {&two, &four}) {
    expect_relative((*run)[0]["train_loss"], serial[0]["train_loss"], 1e-4, "train loss");
    expect_relative((*run)[0]["test_loss"], serial[0]["test_loss"], 1e-4, "test loss");
    EXPECT_EQ((*run)[0]["data_ranks"], 2);
  }
}

TEST_F(StagesTrain, OneCheckpointResumesAtAnotherSplitAndMultilevelReportsItsLevels) {
  const fs::path dir = work_dir();
  const std::string ck = (dir / "ck").string();
  // The stages recipe (2 levels, cf 2, both directions) with a constant learning rate: the
  // cosine decay runs over --epochs, so a 1-epoch run's epoch 1 is not a 2-epoch run's; one
  // forward iteration that skips, whose forward is not the network's (docs/training.md §4a;
  // the recipe's one iteration without skip is).
  const std::string ml = " --lr-schedule constant --fwd-iters 1 --fwd-skip 1";
  const auto first =
      train(4, kSmall + "--epochs 1 --data-ranks 2 --checkpoint " + ck + ml, dir, "a");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0]["fwd_levels"], 2);
  EXPECT_EQ(first[0]["bwd_levels"], 2);
  EXPECT_TRUE(fs::exists(fs::path(ck) / "manifest.json"));
  // Resumed with the same replica split at another layer-rank count (2 x 1), epoch 2 is the
  // uninterrupted run's (2 x 2) to round-off.
  const auto resumed = train(2, kSmall + "--epochs 2 --data-ranks 2 --resume " + ck + ml, dir, "r");
  const auto whole = train(4, kSmall + "--epochs 2 --data-ranks 2" + ml, dir, "uninterrupted");
  ASSERT_EQ(resumed.size(), 1u);
  ASSERT_EQ(whole.size(), 2u);
  EXPECT_EQ(resumed[0]["epoch"], 2);
  expect_relative(resumed[0]["train_loss"], whole[1]["train_loss"], 1e-5, "resumed train loss");
  expect_relative(resumed[0]["test_loss"], whole[1]["test_loss"], 1e-5, "resumed test loss");
  // At another split (one replica of 2 ranks) it resumes too.
  const auto second =
      train(2, kSmall + "--epochs 2 --resume " + ck + ml, dir, "a");  // appends epoch 2
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[1]["epoch"], 2);
  EXPECT_EQ(second[1]["data_ranks"], 1);
  // The test figures after each epoch are the network's own forward's, not the one-iteration
  // MGRIT forward's it trains with (--eval-forward both, the default, reports those beside
  // them): `weft eval` of the checkpoint at another rank count gives the test loss of its run
  // (2 x 2 ranks); with --eval-forward mgrit the same training evaluates to the MGRIT figures.
  EXPECT_EQ(first[0]["eval_forward"], "both");
  ASSERT_TRUE(second[1].contains("mgrit_test_loss")) << second[1].dump();
  const fs::path ev_json = dir / "eval3.json";
  const Outcome ev =
      weft(3, "eval --test-size 200 --resume " + ck + " --json " + ev_json.string(), dir);
  ASSERT_EQ(ev.code, 0) << ev.out << ev.err;
  std::ifstream in(ev_json);
  const json stored = json::parse(in);
  expect_relative(stored["test_loss"], first[0]["test_loss"], 1e-5, "weft eval of " + ck);
  const auto mgrit =
      train(2, kSmall + "--epochs 2 --resume " + ck + ml + " --eval-forward mgrit", dir, "mgrit");
  ASSERT_EQ(mgrit.size(), 1u);
  EXPECT_EQ(mgrit[0]["eval_forward"], "solver");
  expect_relative(mgrit[0]["train_loss"], second[1]["train_loss"], 1e-5, "train loss");
  expect_relative(mgrit[0]["test_loss"], second[1]["mgrit_test_loss"], 1e-5, "mgrit test loss");
  EXPECT_GT(std::abs(mgrit[0]["test_loss"].get<double>() - second[1]["test_loss"].get<double>()),
            1e-5)
      << "the MGRIT forward evaluated like the network";
}

// A checkpoint of the stages network from before the convolutions lost their bias before batch
// norm (its metadata lacks "conv_bias_before_bn") would load without those biases: refused.
TEST_F(StagesTrain, ACheckpointFromTheNetworkWithBiasesBeforeBatchNormIsRefusedInOneLine) {
  const fs::path dir = work_dir();
  const fs::path ck = dir / "ck";
  const auto run = train(1,
                         "--model stages --stage-channels 4 --stage-steps 1 --train-size 20 "
                         "--test-size 20 --batch 10 --epochs 1 --exact --checkpoint " +
                             ck.string(),
                         dir, "old");
  ASSERT_EQ(run.size(), 1u);
  const fs::path manifest = ck / "manifest.json";
  json m = json::parse(weft::cli_test::slurp(manifest));
  ASSERT_TRUE(m["metadata"]["model"].contains("conv_bias_before_bn")) << m.dump();
  m["metadata"]["model"].erase("conv_bias_before_bn");
  std::ofstream(manifest) << m.dump(1) << "\n";
  weft::train_test::expect_one_line(weft(2, "eval --test-size 20 --resume " + ck.string(), dir), 1,
                                    "convolution biases before batch norm");
}

// --balance cost: rank 0 times every layer, each rank gets a block of equal measured cost (the
// first stage's layers are dearer), and the run prints where the layers went. With multilevel
// solves of one iteration (inexact gradients) the training is that of equal numbers of layers:
// only where the layers run changes.
TEST_F(StagesTrain, LayersPlacedByCostTrainLikeEqualNumbersAndSayWhere) {
  const fs::path dir = work_dir();
  const std::string args = kSmall + "--epochs 1 --dropout 0.1";
  for (const int np : {2, 3}) {
    const std::string at = " (" + std::to_string(np) + " ranks)";
    const fs::path equal_metrics = dir / ("equal" + std::to_string(np) + ".jsonl");
    const fs::path cost_metrics = dir / ("cost" + std::to_string(np) + ".jsonl");
    const std::string run = "train --no-progress --threads 1 " + args + " --metrics ";
    const Outcome equal = weft(np, run + equal_metrics.string() + " --balance layers", dir);
    const Outcome cost = weft(np, run + cost_metrics.string() + " --balance cost", dir);
    ASSERT_EQ(equal.code, 0) << equal.err;
    ASSERT_EQ(cost.code, 0) << cost.err;
    EXPECT_NE(equal.out.find("layers per rank: "), std::string::npos) << equal.out;
    EXPECT_NE(equal.out.find("(equal numbers)"), std::string::npos) << equal.out;
    EXPECT_NE(cost.out.find("(--balance cost: "), std::string::npos) << cost.out;
    const auto e = weft::train_test::read_metrics(equal_metrics);
    const auto c = weft::train_test::read_metrics(cost_metrics);
    ASSERT_EQ(e.size(), 1u);
    ASSERT_EQ(c.size(), 1u);
    expect_relative(c[0]["train_loss"], e[0]["train_loss"], 1e-6, "train loss" + at);
    expect_relative(c[0]["test_loss"], e[0]["test_loss"], 1e-6, "test loss" + at);
    EXPECT_EQ(c[0]["test_accuracy"], e[0]["test_accuracy"]) << at;
  }
  // Nested iteration: the layers are timed and placed again for the refined network.
  const std::string grow =
      "--model stages --stage-channels 4,6 --stage-steps 2,4 --train-size 200 --test-size 100 "
      "--batch 20 --epochs 2 --grow-depth 2,1 --grow-epochs 1 --exact";
  const auto e = weft::train_test::train(2, grow + " --balance layers", dir, "grow_equal");
  const auto c = weft::train_test::train(2, grow + " --balance cost", dir, "grow_cost");
  ASSERT_EQ(e.size(), 2u);
  ASSERT_EQ(c.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(c[k]["depth"], e[k]["depth"]);
    expect_relative(c[k]["train_loss"], e[k]["train_loss"], 1e-6, "grown, train loss");
    expect_relative(c[k]["test_loss"], e[k]["test_loss"], 1e-6, "grown, test loss");
  }
  for (const std::string& bad :
       {std::string("--balance weight"), std::string("--balance cost --serial"),
        std::string("--model gru --balance cost")}) {
    const Outcome r = weft(2, "train --no-progress --train-size 100 --test-size 100 " + bad, dir);
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.err;
    EXPECT_EQ(r.err_lines().size(), 1u) << bad << "\n" << r.err;
    EXPECT_NE(r.err.find("--balance"), std::string::npos) << bad << "\n" << r.err;
  }
}

TEST_F(StagesTrain, BadFlagsAreOneLineAndExitTwoOnEveryRank) {
  const fs::path dir = work_dir();
  const std::vector<std::pair<int, std::string>> cases = {
      {2, "--model stages --stage-channels 8,16 --stage-steps 2"},
      {2, "--model stages --data-ranks 3"},
      {2, "--model stages --data-ranks 2 --batch 51"},
      {2, "--model stages --serial --data-ranks 2"},
      {2, "--model resnet --dropout 0.1"},
      {2, "--model stages --dropout 1"},
      {4, "--model stages --stage-channels 8 --stage-steps 2"},
      {2, "--model mlp"},
      {2, "--model stages --steps 4"},
      {2, "--model stages --exact --fwd-levels 2"},
      {2, "--model stages --eval-forward fast"}};
  for (const auto& [np, args] : cases) {
    const Outcome r = weft(np, "train --no-progress --train-size 100 --test-size 100 " + args, dir);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_EQ(r.err_lines().size(), 1u) << args << "\n" << r.err;
  }
}

}  // namespace
