// `weft train --spatial-levels`: layer-parallel runs with coarse levels restricted in space
// iterated to convergence against --serial, and bad input (wrong length or value, a state too small
// to coarsen): one line, exit 2, on every rank count.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli_runner.hpp"
#include "tiny_data.hpp"
#include "train_runner.hpp"

namespace {

namespace fs = std::filesystem;
using weft::cli_test::expect_one_line;
using weft::cli_test::Outcome;
using weft::cli_test::weft;
using weft::cli_test::work_dir;
using weft::train_test::expect_relative;
using weft::train_test::tiny_dataset;
using weft::train_test::train;

const std::string kQuick = "train --no-progress --threads 1 --channels 2 --epochs 1 --batch 10 ";

// The defaults a user gets with --spatial-levels relax the level above a level coarse in space
// with FCF: iterated, the solves converge to the fine network's (F-relaxation stagnates there,
// at a forward residual of about 43 for this run; docs/training.md, "Spatial coarsening").
class SpatialTrain : public weft::train_test::FashionMnistTest {};

TEST_F(SpatialTrain, IteratedSolvesWithCoarseLevelsRestrictedInSpaceEqualSerialTraining) {
  const fs::path dir = work_dir();
  const std::string args =
      "--channels 4 --steps 16 --batch 32 --train-size 64 --test-size 100 --epochs 1 --seed 9 "
      "--fwd-levels 2 --bwd-levels 2 --fwd-cf 2 --bwd-cf 2 --spatial-levels 0,1";
  const auto serial = train(1, args + " --serial", dir, "serial");
  const auto parallel = train(2, args + " --fwd-iters 20 --bwd-iters 20", dir, "parallel");
  ASSERT_EQ(serial.size(), 1u);
  ASSERT_EQ(parallel.size(), 1u);
  EXPECT_LT(parallel[0]["fwd_residual"].get<double>(), 1e-4);
  EXPECT_LT(parallel[0]["bwd_residual"].get<double>(), 1e-4);
  expect_relative(parallel[0]["train_loss"], serial[0]["train_loss"], 1e-4, "train loss");
  expect_relative(parallel[0]["test_loss"], serial[0]["test_loss"], 1e-4, "test loss");
  // F-relaxation chosen by hand above the level coarse in space is refused.
  const Outcome r = weft(2, "train --no-progress " + args + " --fwd-nrelax 0", dir);
  expect_one_line(r, 2, "option --fwd-nrelax: '0' is invalid");
}

TEST(SpatialLevelsFlag, AWrongLengthOrACoarsenedFineLevelIsAUsageError) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 8, 8).string();
  const std::string base = kQuick + "--data " + data + " --steps 4 --fwd-levels 2 --bwd-levels 2 ";
  expect_one_line(weft(2, base + "--spatial-levels 0,1,1", dir), 2, "3 values for 2 levels");
  expect_one_line(weft(1, base + "--spatial-levels 1,1", dir), 2, "--spatial-levels");
}

TEST(SpatialLevelsFlag, AStateTooSmallToCoarsenIsAUsageErrorOnEveryRank) {
  // 6x6 images: level 1 is 3x3, and level 2 cannot halve it.
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 6, 6).string();
  const Outcome r = weft(2,
                         kQuick + "--data " + data +
                             " --fwd-levels 3 --bwd-levels 3 --fwd-cf 2 --bwd-cf 2 --steps 8 "
                             "--spatial-levels 0,1,1",
                         dir);
  expect_one_line(r, 2, "spatial size 3");
}

}  // namespace
