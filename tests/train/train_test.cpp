// End-to-end tests of `weft train` and `weft eval` on Fashion-MNIST subsets: accuracy after one
// epoch, exact mode equal to plain LibTorch, checkpoint/resume at another rank count, evaluation
// at any rank count, a short multilevel MGRIT run, and bad input (one clear error, no hang).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "tiny_data.hpp"
#include "train_runner.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using weft::cli_test::Outcome;
using weft::cli_test::slurp;
using weft::cli_test::weft;
using weft::cli_test::work_dir;
using weft::train_test::idx_header;
using weft::train_test::tiny_dataset;
using weft::train_test::write_file;

using weft::train_test::expect_relative;
using weft::train_test::read_metrics;
using weft::train_test::train;

class Train : public weft::train_test::FashionMnistTest {};

TEST_F(Train, OneEpochOnASubsetLearns) {
  const fs::path dir = work_dir();
  const auto m = train(2, "--train-size 5000 --test-size 1000 --epochs 1", dir, "subset");
  ASSERT_EQ(m.size(), 1u);
  const json& e = m[0];
  for (const char* key : {"epoch", "train_loss", "test_loss", "test_accuracy", "epoch_seconds",
                          "forward_ms", "backward_ms", "optimizer_ms", "batch_ms", "fwd_iterations",
                          "fwd_residual", "bwd_iterations", "bwd_residual"})
    EXPECT_TRUE(e.contains(key)) << key;
  // Stated figure: one epoch on 5000 images reaches at least 72 % test accuracy.
  EXPECT_GE(e["test_accuracy"].get<double>(), 0.72) << e.dump();
  EXPECT_LT(e["test_loss"].get<double>(), 1.0) << e.dump();
  EXPECT_EQ(e["fwd_iterations"], 1.0);  // exact mode: one sequential solve
  EXPECT_TRUE(e["fwd_residual"].is_null());
}

// Exact mode at 3 ranks trains the same network as plain sequential LibTorch.
TEST_F(Train, ExactModeEqualsSerialLibTorch) {
  const fs::path dir = work_dir();
  const std::string args = "--train-size 600 --test-size 300 --epochs 2 --steps 6";
  const auto serial = train(1, args + " --serial", dir, "serial");
  const auto parallel = train(3, args, dir, "parallel");
  ASSERT_EQ(serial.size(), 2u);
  ASSERT_EQ(parallel.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    expect_relative(parallel[e]["train_loss"], serial[e]["train_loss"], 1e-4, "train loss");
    expect_relative(parallel[e]["test_loss"], serial[e]["test_loss"], 1e-4, "test loss");
  }
}

// Training 2 epochs straight equals 1 epoch, a checkpoint, and a resumed run at another rank
// count; `weft eval` of the final checkpoint gives the run's test figures at any rank count.
TEST_F(Train, CheckpointResumeAndEvalAtOtherRankCounts) {
  const fs::path dir = work_dir();
  const std::string args = "--train-size 400 --test-size 300 --steps 6 --lr 0.05";
  const std::string sgd = args + " --optimizer sgd";
  const auto straight =
      train(2, sgd + " --epochs 2 --checkpoint " + (dir / "straight").string(), dir, "straight");
  const auto first =
      train(2, sgd + " --epochs 1 --checkpoint " + (dir / "resumed").string(), dir, "resumed");
  // Without --optimizer: the checkpoint's (sgd, not the default adam) continues.
  const auto second = train(3,
                            args + " --epochs 2 --checkpoint " + (dir / "resumed").string() +
                                " --resume " + (dir / "resumed").string(),
                            dir, "resumed");  // appends the second epoch to resumed.jsonl
  ASSERT_EQ(straight.size(), 2u);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[1]["epoch"], 2);
  expect_relative(second[1]["train_loss"], straight[1]["train_loss"], 1e-5, "resumed train loss");
  expect_relative(second[1]["test_loss"], straight[1]["test_loss"], 1e-5, "resumed test loss");
  EXPECT_EQ(second[1]["test_accuracy"], straight[1]["test_accuracy"]);

  for (int np : {1, 4}) {
    const fs::path out = dir / ("eval" + std::to_string(np) + ".json");
    const Outcome r = weft(
        np,
        "eval --test-size 300 --resume " + (dir / "straight").string() + " --json " + out.string(),
        dir);
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("confusion matrix"), std::string::npos);
    const json ev = json::parse(slurp(out));
    expect_relative(ev["test_loss"], straight[1]["test_loss"], 1e-5, "eval loss");
    EXPECT_EQ(ev["test_accuracy"], straight[1]["test_accuracy"]);
    std::int64_t total = 0;
    for (const auto& v : ev["confusion"]) total += v.get<std::int64_t>();
    EXPECT_EQ(total, 300);
  }
}

// Layer-parallel MGRIT with few iterations (3 levels, 2 forward, 1 backward) still trains.
TEST_F(Train, MultilevelFewIterationsStillLearns) {
  const fs::path dir = work_dir();
  const auto m = train(2,
                       "--train-size 1500 --test-size 500 --epochs 1 --steps 16 --fwd-levels 3 "
                       "--fwd-cf 2 --fwd-iters 2 --bwd-levels 3 --bwd-cf 2 --bwd-iters 1",
                       dir, "mgrit");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0]["fwd_iterations"], 2.0);
  EXPECT_EQ(m[0]["bwd_iterations"], 1.0);
  EXPECT_TRUE(m[0]["fwd_residual"].is_number());
  EXPECT_GE(m[0]["test_accuracy"].get<double>(), 0.55) << m[0].dump();
}

// ---------------------------------------------------------------------------------------------
// Bad input: non-zero exit, the problem named, every rank done (no hang: ctest's timeout).

void expect_failure(const Outcome& r, int code, const std::string& mentions) {
  EXPECT_EQ(r.code, code) << r.out << r.err;
  EXPECT_NE(r.err.find(mentions), std::string::npos) << "stderr: " << r.err;
}

TEST(TrainBadInput, MissingDataFolder) {
  const fs::path dir = work_dir();
  expect_failure(weft(2, "train --data " + (dir / "nowhere").string(), dir), 2, "missing file");
}

TEST(TrainBadInput, CorruptIdxFile) {
  const fs::path dir = work_dir();
  const fs::path data = tiny_dataset(dir / "data", 28, 28);
  auto bad = idx_header(0x1234, {20, 28, 28});
  write_file(data / "train-images-idx3-ubyte", bad);
  expect_failure(weft(2, "train --data " + data.string(), dir), 2, "bad magic number");
}

TEST(TrainBadInput, TruncatedIdxFile) {
  const fs::path dir = work_dir();
  const fs::path data = tiny_dataset(dir / "data", 28, 28);
  auto cut = idx_header(0x803, {20, 28, 28});
  cut.resize(cut.size() + 100, 1);
  write_file(data / "train-images-idx3-ubyte", cut);
  expect_failure(weft(2, "train --data " + data.string(), dir), 2, "truncated");
}

TEST(TrainBadInput, TestImagesOfAnotherSize) {
  const fs::path dir = work_dir();
  const fs::path data = tiny_dataset(dir / "data", 28, 28);
  const fs::path other = tiny_dataset(dir / "other", 10, 10);
  fs::copy_file(other / "t10k-images-idx3-ubyte", data / "t10k-images-idx3-ubyte",
                fs::copy_options::overwrite_existing);
  expect_failure(weft(2, "train --data " + data.string(), dir), 2, "wrong image size");
}

TEST(TrainSchedule, CosineScheduleDecaysTheLearningRateToZeroOverTheRun) {
  const fs::path dir = work_dir();
  const fs::path data = tiny_dataset(dir / "data", 28, 28);  // 20 images: 4 batches of 5
  const auto m = train(
      2, "--steps 2 --batch 5 --epochs 2 --lr 0.01 --lr-schedule cosine --data " + data.string(),
      dir, "cosine");
  ASSERT_EQ(m.size(), 2u);
  // The last batch of epoch e is global batch 4e - 1 of K = 8.
  const double pi = std::acos(-1.0);
  EXPECT_NEAR(m[0]["lr_end"].get<double>(), 0.01 * 0.5 * (1 + std::cos(pi * 3 / 8)), 1e-12);
  EXPECT_NEAR(m[1]["lr_end"].get<double>(), 0.01 * 0.5 * (1 + std::cos(pi * 7 / 8)), 1e-12);
  const auto constant =
      train(1, "--steps 2 --batch 5 --epochs 1 --lr 0.01 --data " + data.string(), dir, "constant");
  ASSERT_EQ(constant.size(), 1u);
  EXPECT_EQ(constant[0]["lr_end"].get<double>(), 0.01);
}

TEST(TrainBadInput, EvalOfACheckpointOnImagesOfAnotherSize) {
  const fs::path dir = work_dir();
  const fs::path data = tiny_dataset(dir / "data", 28, 28);
  const fs::path small = tiny_dataset(dir / "small", 10, 10);
  const Outcome trained = weft(1,
                               "train --no-progress --epochs 1 --steps 2 --data " + data.string() +
                                   " --checkpoint " + (dir / "ck").string(),
                               dir);
  ASSERT_EQ(trained.code, 0) << trained.err;
  expect_failure(
      weft(2, "eval --data " + small.string() + " --resume " + (dir / "ck").string(), dir), 2,
      "wrong image size 10x10");
}

TEST(TrainBadInput, FewerStepsThanRanks) {
  const fs::path dir = work_dir();
  const fs::path data = tiny_dataset(dir / "data", 28, 28);
  const Outcome r = weft(3, "train --steps 2 --data " + data.string(), dir);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("2 step layers on 3 ranks"), std::string::npos) << r.err;
}

TEST(TrainBadInput, NaNLossStopsEveryRank) {
  const fs::path dir = work_dir();
  const fs::path data = tiny_dataset(dir / "data", 28, 28);
  expect_failure(
      weft(2, "train --no-progress --steps 4 --optimizer sgd --lr 1e30 --data " + data.string(),
           dir),
      1, "diverged");
}

TEST(TrainBadInput, InvalidOptions) {
  const fs::path dir = work_dir();
  for (const char* args :
       {"--batch 0", "--optimizer rmsprop", "--lr -1", "--open dense", "--fwd-cf 1",
        "--bwd-levels 0", "--fwd-nrelax 1,x", "--momentum 1", "--lr-schedule step"}) {
    const Outcome r = weft(0, std::string("train ") + args, dir);
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    EXPECT_EQ(r.err_lines().size(), 1u) << args << ": " << r.err;
  }
}

}  // namespace
