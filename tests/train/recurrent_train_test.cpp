// End-to-end tests of `weft train --model gru|lstm` on a Fashion-MNIST subset: the sequence
// split over 3 ranks trains exactly like one rank, multilevel runs report their levels, a
// checkpoint resumes at another rank count and evaluates, replicas (--data-ranks) train like one
// rank with the global batch, and bad flags exit 2 on every rank.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "cli_runner.hpp"
#include "train_runner.hpp"

namespace {

namespace fs = std::filesystem;
using weft::cli_test::Outcome;
using weft::cli_test::weft;
using weft::cli_test::work_dir;
using weft::train_test::expect_relative;
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
  const Outcome ev = weft(2, "eval --test-size 100 --resume " + ck, dir);
  EXPECT_EQ(ev.code, 0) << ev.out << ev.err;
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
