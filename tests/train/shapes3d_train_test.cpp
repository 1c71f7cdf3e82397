// End-to-end tests of the 3-D benchmark: `weft data shapes3d` writes small sets that
// `weft train --model conv3d` trains on at 2 ranks (exact mode equal to --serial, and
// multilevel) with metrics and a checkpoint that `weft eval` reads; `--data shapes3d` generates
// the cached set once, reuses it and regenerates it when damaged; a model that does not take
// the data is one line, exit 2.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli_runner.hpp"
#include "tiny_data.hpp"
#include "train_runner.hpp"

namespace {

namespace fs = std::filesystem;
using weft::cli_test::Outcome;
using weft::cli_test::weft;
using weft::cli_test::work_dir;
using weft::train_test::train;

// Two stages of 2 and 4 channels on 8^3 volumes: a few seconds per run.
const std::string kTiny =
    "--model conv3d --stage-channels 2,4 --stage-steps 2,2 --batch 10 --epochs 1 ";

fs::path tiny_volumes(const fs::path& dir) {
  const fs::path data = dir / "volumes";
  const Outcome r =
      weft(0, "data shapes3d --size 8 --train-size 40 --test-size 20 --out " + data.string(), dir);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  return data;
}

TEST(Shapes3dTrain, Conv3dTrainsOnGeneratedVolumesExactAndMultilevelWithMetricsAndCheckpoint) {
  const fs::path dir = work_dir();
  const std::string data = "--data " + tiny_volumes(dir).string() + " ";
  const std::string ck = (dir / "ck").string();
  const auto exact = train(2, kTiny + data + "--checkpoint " + ck, dir, "exact");
  ASSERT_EQ(exact.size(), 1u);
  EXPECT_EQ(exact[0]["model"], "conv3d");
  EXPECT_EQ(exact[0]["ranks"], 2);
  EXPECT_TRUE(std::isfinite(exact[0]["train_loss"].get<double>()));
  // Exact mode is plain LibTorch training of the same 3-D network, layer-parallel.
  const auto serial = train(1, kTiny + data + "--serial", dir, "serial");
  ASSERT_EQ(serial.size(), 1u);
  weft::train_test::expect_relative(exact[0]["train_loss"], serial[0]["train_loss"], 1e-4,
                                    "train loss, exact mode against --serial");
  const auto multilevel = train(
      2, kTiny + data + "--fwd-levels 2 --fwd-cf 2 --bwd-levels 2 --bwd-cf 2", dir, "multilevel");
  ASSERT_EQ(multilevel.size(), 1u);
  EXPECT_EQ(multilevel[0]["fwd_levels"], 2);
  EXPECT_TRUE(std::isfinite(multilevel[0]["train_loss"].get<double>()));
  // The evaluation batch changes nothing in the results (batch norm evaluates with its
  // running statistics): 20 test volumes in batches of 3 against one batch of 20.
  const auto small_batches = train(2, kTiny + data + "--eval-batch 3", dir, "eval-batch");
  ASSERT_EQ(small_batches.size(), 1u);
  weft::train_test::expect_relative(small_batches[0]["test_loss"], exact[0]["test_loss"], 1e-5,
                                    "test loss, --eval-batch 3 against the default");
  EXPECT_EQ(small_batches[0]["test_accuracy"], exact[0]["test_accuracy"]);
  const Outcome ev = weft(0, "eval --resume " + ck + " " + data, dir);
  EXPECT_EQ(ev.code, 0) << ev.out << ev.err;
  EXPECT_NE(ev.out.find("20 test images"), std::string::npos) << ev.out;
}

// Learning, not only running: 1000 generated 8^3 volumes of 10 classes, 6 epochs at 2 ranks
// reach 52-56 % test accuracy (seeds 1-3, 3 Dec 2026); chance is 10 %, the bound 35 %.
TEST(Shapes3dTrain, Conv3dLearnsTheShapesWellAboveChance) {
  const fs::path dir = work_dir();
  const fs::path data = dir / "volumes";
  const Outcome made = weft(
      0, "data shapes3d --size 8 --train-size 1000 --test-size 200 --out " + data.string(), dir);
  ASSERT_EQ(made.code, 0) << made.out << made.err;
  const auto run = train(2,
                         "--model conv3d --stage-channels 4,8 --stage-steps 2,2 --batch 20 "
                         "--epochs 6 --lr 0.01 --lr-schedule cosine --data " +
                             data.string(),
                         dir, "learn");
  ASSERT_EQ(run.size(), 6u);
  EXPECT_GE(run[5]["test_accuracy"].get<double>(), 0.35);
  EXPECT_LT(run[5]["train_loss"].get<double>(), run[0]["train_loss"].get<double>());
}

TEST(Shapes3dTrain, DataShapes3dIsGeneratedOnceIntoTheCacheAndRegeneratedWhenDamaged) {
  const fs::path dir = work_dir();
  setenv("XDG_CACHE_HOME", (dir / "cache").c_str(), 1);
  const std::string args =
      "train --no-progress --threads 1 --data shapes3d --model conv3d "
      "--stage-channels 2 --stage-steps 1 --batch 10 --epochs 1 "
      "--train-size 10 --test-size 10";
  // One rank (an MPI singleton): the cache logic is the same at any rank count.
  const Outcome first = weft(0, args, dir);
  ASSERT_EQ(first.code, 0) << first.out << first.err;
  EXPECT_NE(first.out.find("generating the shapes3d set"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("32x32x32"), std::string::npos) << first.out;
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir / "cache" / "weft")) sets.push_back(e.path());
  ASSERT_EQ(sets.size(), 1u);
  const fs::path labels = sets[0] / "t10k-labels-idx1-ubyte.gz";
  const auto stamp = fs::last_write_time(labels);
  const Outcome second = weft(0, args, dir);
  ASSERT_EQ(second.code, 0) << second.out << second.err;
  EXPECT_EQ(second.out.find("generating"), std::string::npos) << second.out;
  EXPECT_EQ(fs::last_write_time(labels), stamp);  // reused, not rewritten
  fs::resize_file(labels, fs::file_size(labels) / 2);
  const Outcome third = weft(0, args, dir);
  EXPECT_EQ(third.code, 0) << third.out << third.err;
  EXPECT_NE(third.err.find("damaged"), std::string::npos) << third.err;
  unsetenv("XDG_CACHE_HOME");
}

TEST(Shapes3dTrain, AModelThatDoesNotTakeTheDataIsOneLineAndExitTwo) {
  const fs::path dir = work_dir();
  const std::string volumes = tiny_volumes(dir).string();
  const std::string images = weft::train_test::tiny_dataset(dir / "images", 8, 8).string();
  const std::vector<std::pair<int, std::string>> cases = {{2, "--model conv3d --data " + images},
                                                          {0, "--model resnet --data " + volumes},
                                                          {0, "--model stages --data " + volumes}};
  for (const auto& [np, args] : cases) {
    const Outcome r = weft(np, "train --no-progress " + args, dir);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    ASSERT_EQ(r.err_lines().size(), 1u) << args << "\n" << r.err;
    EXPECT_NE(r.err_lines()[0].find("--model"), std::string::npos) << r.err;
  }
  const Outcome bad = weft(0, "data shapes3d --size 2 --out " + (dir / "x").string(), dir);
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--size"), std::string::npos) << bad.err;
}

}  // namespace
