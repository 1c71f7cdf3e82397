// `weft train --spatial-levels`: layer-parallel runs with coarse levels restricted in space
// iterated to convergence against --serial, and bad input (wrong length or value, a state too small
// to coarsen): one line, exit 2, on every rank count.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <utility>

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

// One cycle each way on a small 3-D network with batch norm (8^3 volumes, two stages of 4
// steps, 2 levels, cf 2), at 2 ranks: the train loss after the first batch of 5 (a forward's
// loss) and after all 4 batches, for extra flags. Each call writes its own metrics.
class ShortRuns {
 public:
  ShortRuns() : dir_(work_dir()), data_(dir_ / "shapes") {
    const Outcome r = weft(
        0, "data shapes3d --size 8 --train-size 20 --test-size 10 --out " + data_.string(), dir_);
    EXPECT_EQ(r.code, 0) << r.err;
  }
  std::pair<double, double> losses(const std::string& extra) {
    const std::string args = "--data " + data_.string() +
                             " --model conv3d --stage-channels 2,4 --stage-steps 4,4 --batch 5 "
                             "--epochs 1 --fwd-levels 2 --bwd-levels 2 --fwd-cf 2 --bwd-cf 2 "
                             "--fwd-iters 1 --bwd-iters 1 --seed 3 " +
                             extra;
    const std::string name = std::to_string(++runs_);
    const auto first = train(2, args + " --train-size 5", dir_, "first" + name);
    const auto all = train(2, args, dir_, "all" + name);
    EXPECT_EQ(first.size(), 1u);
    EXPECT_EQ(all.size(), 1u);
    return {first.empty() ? 0.0 : first[0]["train_loss"].get<double>(),
            all.empty() ? 0.0 : all[0]["train_loss"].get<double>()};
  }
  /// `weft train` at np ranks with a one-stage network and `flags`.
  Outcome refused(int np, const std::string& flags) const {
    return weft(np,
                "train --no-progress --threads 1 --epochs 1 --batch 10 --data " + data_.string() +
                    " --model conv3d --stage-channels 2 --stage-steps 4 --fwd-levels 2 "
                    "--bwd-levels 3 " +
                    flags,
                dir_);
  }

 private:
  fs::path dir_, data_;
  int runs_ = 0;
};

// --fwd-spatial-levels and --bwd-spatial-levels set one solve each: the first batch's loss
// changes with the forward's list only, later ones with either; --spatial-levels L is both
// lists L, and a per-direction list replaces it in its direction.
TEST(SpatialLevelsFlag, PerDirectionListsSetOneSolveEach) {
  ShortRuns runs;
  const auto none = runs.losses("");
  const auto adjoint = runs.losses("--bwd-spatial-levels 0,1");
  const auto forward = runs.losses("--fwd-spatial-levels 0,1");
  const auto both = runs.losses("--spatial-levels 0,1");
  const auto each = runs.losses("--fwd-spatial-levels 0,1 --bwd-spatial-levels 0,1");
  const auto replaced = runs.losses("--spatial-levels 0,1 --fwd-spatial-levels 0,0");
  EXPECT_EQ(adjoint.first, none.first);
  EXPECT_NE(adjoint.second, none.second);
  EXPECT_NE(forward.first, none.first);
  EXPECT_EQ(each, both);
  EXPECT_EQ(replaced, adjoint);
  expect_one_line(runs.refused(2, "--fwd-spatial-levels 0,1,1"), 2,
                  "option --fwd-spatial-levels: '0,1,1' is invalid (3 values for 2 levels)");
  expect_one_line(runs.refused(1, "--bwd-spatial-levels 1,0,0"), 2,
                  "option --bwd-spatial-levels: '1,0,0' is invalid (level 0 is the fine grid");
}

// --spatial-bn-stats reaches the library: the running statistics (the default) and the
// restricted states' own give different losses from the first batch on; the flag's bad input is
// one line, exit 2.
TEST(SpatialBatchNormFlag, ChoosesTheCoarseStepsStatisticsAndRefusesBadInput) {
  ShortRuns runs;
  const auto running = runs.losses("--spatial-levels 0,1");
  const auto given = runs.losses("--spatial-levels 0,1 --spatial-bn-stats running");
  const auto own = runs.losses("--spatial-levels 0,1 --spatial-bn-stats own");
  EXPECT_EQ(given, running);
  EXPECT_GT(std::abs(own.first - running.first), 1e-6 * std::abs(running.first));
  EXPECT_GT(std::abs(own.second - running.second), 1e-6 * std::abs(running.second));
  expect_one_line(runs.refused(2, "--spatial-levels 0,1,1 --spatial-bn-stats fine"), 2,
                  "option --spatial-bn-stats: 'fine' is invalid");
  expect_one_line(runs.refused(1, "--spatial-bn-stats own"), 2,
                  "option --spatial-bn-stats: 'own' is invalid; accepted: a value used with "
                  "--spatial-levels");
}

// --spatial-kernels reaches the library: each choice of coarse kernels gives its own losses
// from the first batch on, `same` is the default; bad input is one line, exit 2.
TEST(SpatialKernelsFlag, ChoosesTheCoarseKernelsAndRefusesBadInput) {
  ShortRuns runs;
  const auto fine = runs.losses("--spatial-levels 0,1");
  const auto same = runs.losses("--spatial-levels 0,1 --spatial-kernels same");
  const auto moments = runs.losses("--spatial-levels 0,1 --spatial-kernels moments");
  const auto galerkin = runs.losses("--spatial-levels 0,1 --spatial-kernels galerkin");
  EXPECT_EQ(same, fine);
  for (const auto& [name, other] : {std::pair{"moments", moments}, {"galerkin", galerkin}}) {
    EXPECT_GT(std::abs(other.first - fine.first), 1e-6 * std::abs(fine.first)) << name;
    EXPECT_GT(std::abs(other.second - fine.second), 1e-6 * std::abs(fine.second)) << name;
  }
  EXPECT_NE(moments, galerkin);
  expect_one_line(runs.refused(2, "--spatial-levels 0,1,1 --spatial-kernels bilinear"), 2,
                  "option --spatial-kernels: 'bilinear' is invalid; accepted: same, moments, "
                  "galerkin");
  expect_one_line(runs.refused(1, "--spatial-kernels galerkin"), 2,
                  "option --spatial-kernels: 'galerkin' is invalid; accepted: a value used with "
                  "--spatial-levels");
}

}  // namespace
