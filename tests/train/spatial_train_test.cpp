// `weft train --spatial-levels`: a short layer-parallel run with coarse levels restricted in
// space, and its bad input (wrong length or value, a state too small to coarsen): one line,
// exit 2, on every rank count.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli_runner.hpp"
#include "tiny_data.hpp"

namespace {

namespace fs = std::filesystem;
using weft::cli_test::Outcome;
using weft::cli_test::weft;
using weft::cli_test::work_dir;
using weft::train_test::tiny_dataset;

const std::string kQuick = "train --no-progress --threads 1 --channels 2 --epochs 1 --batch 10 ";

void expect_usage_error(const Outcome& r, const std::string& mentions) {
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_EQ(r.err_lines().size(), 1u) << r.err;
  EXPECT_NE(r.err.find(mentions), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("MPI_ABORT"), std::string::npos) << r.err;
}

TEST(SpatialLevelsFlag, TrainsLayerParallelWithCoarseLevelsRestrictedInSpace) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 8, 8).string();
  const Outcome r = weft(2,
                         kQuick + "--data " + data +
                             " --steps 4 --fwd-levels 2 --bwd-levels 2 --fwd-cf 2 --bwd-cf 2 "
                             "--spatial-levels 0,1",
                         dir);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
}

TEST(SpatialLevelsFlag, AWrongLengthOrACoarsenedFineLevelIsAUsageError) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 8, 8).string();
  const std::string base = kQuick + "--data " + data + " --steps 4 --fwd-levels 2 --bwd-levels 2 ";
  expect_usage_error(weft(2, base + "--spatial-levels 0,1,1", dir), "3 values for 2 levels");
  expect_usage_error(weft(1, base + "--spatial-levels 1,1", dir), "--spatial-levels");
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
  expect_usage_error(r, "spatial size 3");
}

}  // namespace
