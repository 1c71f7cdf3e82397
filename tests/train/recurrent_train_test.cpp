// End-to-end tests of `weft train --model gru|lstm` on a Fashion-MNIST subset: the sequence
// split over 3 ranks trains exactly like one rank, multilevel runs report their levels, a
// checkpoint resumes at another rank count and evaluates, replicas (--data-ranks) train like one
// rank with the global batch, and bad flags exit 2 on every rank. The recurrent options
// (--coarse-input, --implicit-step, --implicit-iterations): multilevel runs with them, their
// checkpoints resume with them (and older checkpoints without them with the defaults), --serial
// with the implicit cell, and their bad values and use with other models.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli_runner.hpp"
#include "train_runner.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using weft::cli_test::Outcome;
using weft::cli_test::slurp;
using weft::cli_test::weft;
using weft::cli_test::work_dir;
using weft::train_test::expect_one_line;
using weft::train_test::expect_relative;
using weft::train_test::read_metrics;
using weft::train_test::train;

const std::string kSmall = "--hidden 8 --train-size 200 --test-size 100 --batch 40 ";

class RecurrentTrain : public weft::train_test::FashionMnistTest {};

TEST_F(RecurrentTrain, GruOverThreeRanksTrainsLikeOneRank) {
  const fs::path dir = work_dir();
  const std::string args = kSmall + "--model gru --rnn-layers 2 --epochs 1";
  const auto one = train(1, args, dir, "one");
  const auto three = train(3, args, dir, "three");
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(three.size(), 1u);
  expect_relative(three[0]["train_loss"], one[0]["train_loss"], 1e-5, "train loss");
  expect_relative(three[0]["test_loss"], one[0]["test_loss"], 1e-5, "test loss");
  EXPECT_EQ(three[0]["model"], "gru");
}

TEST_F(RecurrentTrain, LstmCheckpointResumesAtAnotherRankCountAndMultilevelReportsLevels) {
  const fs::path dir = work_dir();
  const std::string ck = (dir / "ck").string();
  const std::string ml = " --fwd-levels 2 --fwd-cf 2 --bwd-levels 2 --bwd-cf 2";
  const auto first = train(2, kSmall + "--model lstm --epochs 1 --checkpoint " + ck + ml, dir, "a");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0]["fwd_levels"], 2);
  EXPECT_EQ(first[0]["bwd_levels"], 2);
  const auto second = train(3, kSmall + "--model lstm --epochs 2 --resume " + ck + ml, dir, "a");
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[1]["epoch"], 2);
  // Resumed at another rank count, epoch 2 is the uninterrupted run's to round-off.
  const auto whole = train(3, kSmall + "--model lstm --epochs 2" + ml, dir, "uninterrupted");
  ASSERT_EQ(whole.size(), 2u);
  expect_relative(second[1]["train_loss"], whole[1]["train_loss"], 1e-5, "resumed train loss");
  expect_relative(second[1]["test_loss"], whole[1]["test_loss"], 1e-5, "resumed test loss");
  // The run's test figures are exact mode's, not its two-iteration forward's (those are
  // beside them): `weft eval` of its checkpoint gives its test loss.
  EXPECT_EQ(first[0]["eval_forward"], "both");
  EXPECT_TRUE(first[0]["mgrit_test_loss"].is_number()) << first[0].dump();
  const fs::path ev_json = dir / "eval.json";
  const Outcome ev =
      weft(2, "eval --test-size 100 --resume " + ck + " --json " + ev_json.string(), dir);
  ASSERT_EQ(ev.code, 0) << ev.out << ev.err;
  std::ifstream in(ev_json);
  expect_relative(json::parse(in)["test_loss"], first[0]["test_loss"], 1e-5, "weft eval");
}

TEST_F(RecurrentTrain, TwoReplicasOfTwoRanksTrainLikeOneRankWithTheGlobalBatch) {
  const fs::path dir = work_dir();
  const std::string args = kSmall + "--model gru --epochs 1";
  const auto one = train(1, args, dir, "one");
  const auto four = train(4, args + " --data-ranks 2", dir, "d2p2");
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(four.size(), 1u);
  expect_relative(four[0]["train_loss"], one[0]["train_loss"], 1e-4, "train loss");
  expect_relative(four[0]["test_loss"], one[0]["test_loss"], 1e-4, "test loss");
  expect_relative(four[0]["test_accuracy"], one[0]["test_accuracy"], 1e-9, "test accuracy");
  EXPECT_EQ(four[0]["data_ranks"], 2);
}

TEST_F(RecurrentTrain, SerialTorchCellsTrainLikeExactModeOverTwoRanks) {
  const fs::path dir = work_dir();
  for (const std::string model : {"gru --rnn-layers 2", "lstm"}) {
    const std::string args = kSmall + "--model " + model + " --epochs 1";
    const std::string name = model.substr(0, model.find(' '));
    const auto exact = train(2, args, dir, name + "-exact");
    const auto serial = train(2, args + " --serial", dir, name + "-serial");
    ASSERT_EQ(exact.size(), 1u) << model;
    ASSERT_EQ(serial.size(), 1u) << model;
    // Same initial parameters (same seed stream) and the same equations: float rounding only.
    expect_relative(serial[0]["train_loss"], exact[0]["train_loss"], 1e-6, model + " train loss");
    expect_relative(serial[0]["test_loss"], exact[0]["test_loss"], 1e-6, model + " test loss");
    expect_relative(serial[0]["train_accuracy"], exact[0]["train_accuracy"], 1e-9,
                    model + " train accuracy");
    expect_relative(serial[0]["test_accuracy"], exact[0]["test_accuracy"], 1e-9,
                    model + " test accuracy");
    // It ran LibTorch's cells, not weft's module on one rank: no MGRIT solve reported.
    EXPECT_EQ(serial[0]["serial"], true) << model;
    EXPECT_EQ(serial[0]["ranks"], 1) << model;
    EXPECT_TRUE(serial[0]["fwd_iterations"].is_null()) << model << ": " << serial[0].dump();
    EXPECT_FALSE(serial[0].contains("per_rank")) << model;
    EXPECT_FALSE(exact[0]["fwd_iterations"].is_null()) << model;
  }
}

// `weft train ARGS --metrics DIR/NAME.jsonl` at `np` ranks: the outcome (for its stdout).
Outcome train_run(int np, const std::string& args, const fs::path& dir, const std::string& name) {
  return weft(np,
              "train --no-progress --threads 1 " + args + " --metrics " +
                  (dir / (name + ".jsonl")).string(),
              dir);
}

const std::string kTwoLevels = " --fwd-levels 2 --fwd-cf 2 --bwd-levels 2 --bwd-cf 2";
const std::string kImplicitLine =
    "implicit cell (backward Euler, step 0.5, 2 fixed-point iteration(s))";

TEST_F(RecurrentTrain, CoarseInputMeanAndTheImplicitCellTrainAtTwoLevelsAndResumeWithThem) {
  const fs::path dir = work_dir();
  const auto mean =
      train(2, kSmall + "--model gru --epochs 1 --coarse-input mean" + kTwoLevels, dir, "mean");
  ASSERT_EQ(mean.size(), 1u);
  EXPECT_EQ(mean[0]["fwd_levels"], 2);
  EXPECT_GT(mean[0]["train_loss"].get<double>(), 0.0);

  // Two epochs at once, and one epoch saved then resumed without the flags: the checkpoint
  // brings them back, so the second epoch is the same to rounding.
  const std::string implicit =
      kSmall + "--model gru --implicit-step 0.5 --implicit-iterations 2 --coarse-input mean" +
      kTwoLevels;
  const auto whole = train(2, implicit + " --epochs 2", dir, "whole");
  ASSERT_EQ(whole.size(), 2u);
  const std::string ck = (dir / "ck").string();
  const Outcome first = train_run(2, implicit + " --epochs 1 --checkpoint " + ck, dir, "resumed");
  ASSERT_EQ(first.code, 0) << first.out << first.err;
  EXPECT_NE(first.out.find(kImplicitLine), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("coarse input mean"), std::string::npos) << first.out;
  const json manifest = json::parse(slurp(fs::path(ck) / "manifest.json"));
  const json& model = manifest.at("metadata").at("model");
  EXPECT_EQ(model.at("implicit_step"), 0.5) << model.dump();
  EXPECT_EQ(model.at("implicit_iterations"), 2) << model.dump();
  EXPECT_EQ(model.at("coarse_input"), "mean") << model.dump();
  const Outcome second =
      train_run(2, kSmall + "--model gru --epochs 2 --resume " + ck + kTwoLevels, dir, "resumed");
  ASSERT_EQ(second.code, 0) << second.out << second.err;
  EXPECT_NE(second.out.find(kImplicitLine), std::string::npos) << second.out;
  EXPECT_NE(second.out.find("coarse input mean"), std::string::npos) << second.out;
  const auto resumed = read_metrics(dir / "resumed.jsonl");
  ASSERT_EQ(resumed.size(), 2u);
  expect_relative(resumed[1]["train_loss"], whole[1]["train_loss"], 1e-6, "epoch 2 train loss");
  expect_relative(resumed[1]["test_loss"], whole[1]["test_loss"], 1e-6, "epoch 2 test loss");

  // A checkpoint may not change them; one from before they existed reads as the defaults.
  expect_one_line(
      train_run(2, kSmall + "--model gru --epochs 3 --implicit-step 0.25 --resume " + ck, dir,
                "changed"),
      2, "--implicit-step");
  json old = manifest;
  for (const char* key : {"implicit_step", "implicit_iterations", "coarse_input"})
    old["metadata"]["model"].erase(key);
  std::ofstream(fs::path(ck) / "manifest.json") << old.dump(1) << "\n";
  const Outcome defaults =
      train_run(2, kSmall + "--model gru --epochs 2 --resume " + ck, dir, "old");
  ASSERT_EQ(defaults.code, 0) << defaults.out << defaults.err;
  EXPECT_NE(defaults.out.find("torch's cell"), std::string::npos) << defaults.out;
  EXPECT_NE(defaults.out.find("coarse input start"), std::string::npos) << defaults.out;
}

TEST_F(RecurrentTrain, SerialImplicitCellIsWeftsCellOnOneRankAndTrainsLikeExactModeOverTwoRanks) {
  const fs::path dir = work_dir();
  const std::string args =
      kSmall + "--model gru --rnn-layers 2 --epochs 1 --implicit-step 0.5 --implicit-iterations 2";
  const auto exact = train(2, args, dir, "exact");
  const Outcome serial_run = train_run(2, args + " --serial", dir, "serial");
  ASSERT_EQ(serial_run.code, 0) << serial_run.out << serial_run.err;
  EXPECT_NE(serial_run.out.find("weft's implicit cell on one rank"), std::string::npos)
      << serial_run.out;
  const auto serial = read_metrics(dir / "serial.jsonl");
  const auto torch_cell = train(1, kSmall + "--model gru --rnn-layers 2 --epochs 1", dir, "torch");
  ASSERT_EQ(exact.size(), 1u);
  ASSERT_EQ(serial.size(), 1u);
  ASSERT_EQ(torch_cell.size(), 1u);
  expect_relative(serial[0]["train_loss"], exact[0]["train_loss"], 1e-6, "train loss");
  expect_relative(serial[0]["test_loss"], exact[0]["test_loss"], 1e-6, "test loss");
  EXPECT_EQ(serial[0]["ranks"], 1);
  // The implicit cell is another recurrence: were the flags dropped, the losses would agree.
  EXPECT_GT(
      std::abs(exact[0]["train_loss"].get<double>() - torch_cell[0]["train_loss"].get<double>()),
      1e-4 * torch_cell[0]["train_loss"].get<double>());
}

// No data is read: the flags are checked first. One case per flag runs on 2 ranks (every rank
// exits 2, one line), the others as a singleton to keep the test short.
TEST(RecurrentFlags, BadValuesAndOtherModelsExitTwoWithOneLineNamingTheFlagOnEveryRank) {
  const fs::path dir = work_dir();
  struct Case {
    int np;
    std::string args, flag;
  };
  const std::vector<Case> cases = {
      {2, "--model gru --coarse-input middle", "--coarse-input"},
      {2, "--model gru --implicit-step -0.5", "--implicit-step"},
      {0, "--model gru --implicit-step nan", "--implicit-step"},
      {2, "--model gru --implicit-iterations 0", "--implicit-iterations"},
      {0, "--model lstm --implicit-iterations 1.5", "--implicit-iterations"},
      {2, "--model resnet --coarse-input mean", "--coarse-input"},
      {0, "--model resnet --implicit-step 0.5", "--implicit-step"},
      {0, "--implicit-iterations 2", "--implicit-iterations"},  // the default model: resnet
      {0, "--model stages --implicit-step 0.5", "--implicit-step"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    expect_one_line(weft(c.np, "train --no-progress " + c.args, dir), 2, c.flag);
  }
  expect_one_line(weft(0, "predict --model resnet --implicit-step 0.5", dir), 2, "--implicit-step");
  for (const char* command : {"train", "predict"}) {
    const Outcome help = weft(0, std::string(command) + " --help", dir);
    for (const char* flag : {"--coarse-input", "--implicit-step", "--implicit-iterations"})
      EXPECT_NE(help.out.find(flag), std::string::npos) << command << " --help: " << flag;
  }
}

TEST_F(RecurrentTrain, BadFlagsAreOneLineAndExitTwoOnEveryRank) {
  const fs::path dir = work_dir();
  const std::vector<std::pair<int, std::string>> cases = {{2, "--model gru --hidden 0"},
                                                          {2, "--model resnet --sequence pixels"},
                                                          {2, "--model gru --rnn-layers 0"}};
  for (const auto& [np, args] : cases) {
    const Outcome r = weft(np, "train --no-progress --train-size 100 --test-size 100 " + args, dir);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_EQ(r.err_lines().size(), 1u) << args << "\n" << r.err;
  }
}

}  // namespace
