// `weft predict` end to end on a tiny generated data set: the JSON it writes (a prediction per
// requested rank count, speedups that are serial / batch, the ping-pong on 2 ranks), and bad
// input (more ranks than layers, unknown flags) as one line with exit code 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

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
using weft::train_test::expect_one_line;
using weft::train_test::tiny_dataset;

const std::string kTiny = "predict --threads 1 --steps 4 --channels 2 --batch 4 --repeats 1 ";

TEST(Predict, WritesOnePredictionPerRankCountWithSpeedupsOverSerial) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 12, 12).string();
  const fs::path out = dir / "predict.json";
  const Outcome r = weft(2,
                         kTiny + "--data " + data +
                             " --fwd-levels 2 --bwd-levels 2 --fwd-cf 2 --bwd-cf 2 --ranks 1,2,4"
                             " --json " +
                             out.string(),
                         dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("break-even"), std::string::npos) << r.out;
  const json j = json::parse(slurp(out));
  const double serial = j.at("serial_batch_ms").get<double>();
  EXPECT_GT(serial, 0.0);
  ASSERT_EQ(j.at("predictions").size(), 3u) << j.dump();
  int expected_ranks = 1;
  for (const json& p : j.at("predictions")) {
    EXPECT_EQ(p.at("ranks").get<int>(), expected_ranks);
    expected_ranks *= 2;
    const double batch = p.at("batch_ms").get<double>();
    EXPECT_GT(batch, 0.0);
    EXPECT_NEAR(p.at("speedup_vs_serial").get<double>(), serial / batch, 1e-9 * serial / batch);
  }
  EXPECT_NE(j.at("link_source").get<std::string>().find("ping-pong"), std::string::npos);
  EXPECT_GT(j.at("bandwidth_gbs").get<double>(), 0.0);
}

TEST(Predict, MoreRanksThanLayersIsOneLineAndExitTwo) {
  const fs::path dir = work_dir();
  // np 0: a singleton without a launcher (fast); one run on 2 ranks for the collective path.
  expect_one_line(weft(0, kTiny + "--ranks 8", dir), 2, "--ranks");
  expect_one_line(weft(2, kTiny + "--ranks 2,16", dir), 2, "--ranks");
  expect_one_line(weft(0, kTiny + "--epochs 3", dir), 2, "--epochs");
  expect_one_line(weft(0, kTiny + "--bandwidth-gbs 0", dir), 2, "--bandwidth-gbs");
  const std::string data = tiny_dataset(dir / "data", 12, 12).string();
  expect_one_line(weft(0, "predict --model gru --data " + data, dir), 2, "--model");
}

}  // namespace
