// `weft predict` end to end on a tiny generated data set: the JSON it writes (a prediction per
// requested rank count, speedups that are serial / batch, the ping-pong on 2 ranks), the
// recurrent models (the sequence steps are the layers; the implicit cell priced as it runs),
// conv3d on the cached 3-D set's shape without generating it, the per-depth figures of levels
// coarsened in space, and bad input (more ranks than layers or steps, unknown flags, a state too
// small to coarsen) as one line with exit code 2.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
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
using weft::train_test::expect_one_line;
using weft::train_test::tiny_dataset;

const std::string kTiny = "predict --threads 1 --steps 4 --channels 2 --batch 4 --repeats 3 ";

TEST(Predict, FlagsThatDoNotChangeTheTimePerBatchAreNamedInOneWarningLine) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 12, 12).string();
  const Outcome r = weft(1,
                         kTiny + "--data " + data +
                             " --fwd-levels 2 --bwd-levels 2 --fwd-cf 2 --bwd-cf 2 --ranks 1"
                             " --fwd-tol 1e-6 --lr 0.5",
                         dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
  EXPECT_NE(r.err.find("warning: ignoring --fwd-tol, --lr"), std::string::npos) << r.err;
  const Outcome quiet =
      weft(1, kTiny + "--data " + data + " --fwd-levels 2 --bwd-levels 2 --ranks 1", dir);
  ASSERT_EQ(quiet.code, 0) << quiet.out << quiet.err;
  EXPECT_EQ(quiet.err.find("warning"), std::string::npos) << quiet.err;
}

/// `weft predict` of the tiny 2-level network on `np` ranks with `flags`: its JSON (and output).
json predict_json(int np, const std::string& flags, const fs::path& dir, Outcome* outcome) {
  const std::string data = tiny_dataset(dir / "data", 12, 12).string();
  const fs::path out = dir / "predict.json";
  *outcome =
      weft(np,
           kTiny + "--data " + data + " --fwd-levels 2 --bwd-levels 2 --fwd-cf 2 --bwd-cf 2 " +
               flags + " --json " + out.string(),
           dir);
  EXPECT_EQ(outcome->code, 0) << outcome->out << outcome->err;
  return outcome->code == 0 ? json::parse(slurp(out)) : json();
}

TEST(Predict, WeakScalingGrowsTheNetworkWithTheRanks) {
  const fs::path dir = work_dir();
  Outcome r;
  const json j = predict_json(1, "--weak 4 --ranks 1,2,4", dir, &r);
  ASSERT_TRUE(j.is_object()) << r.err;
  EXPECT_EQ(j.at("weak_layers_per_rank").get<int>(), 4);
  ASSERT_EQ(j.at("predictions").size(), 3u) << j.dump();
  std::vector<double> exact;
  for (const json& p : j.at("predictions")) {
    const int ranks = p.at("ranks").get<int>();
    EXPECT_EQ(p.at("layers").get<int>(), 4 * ranks);
    exact.push_back(p.at("exact_one_rank_ms").get<double>());
    EXPECT_GT(p.at("batch_ms").get<double>(), 0.0);
  }
  // The layers added (4, then 8) cost alike: one rank's exact mode grows linearly with them.
  const double first = exact[1] - exact[0], second = exact[2] - exact[1];
  EXPECT_GT(first, 0.0) << j.dump();
  EXPECT_NEAR(second, 2 * first, 1e-6 * second) << j.dump();
  EXPECT_DOUBLE_EQ(j.at("predictions")[0].at("weak_efficiency").get<double>(), 1.0);
  const std::string data = (dir / "data").string();
  expect_one_line(
      weft(1, "predict --threads 1 --model stages --batch 4 --repeats 1 --weak 4 --data " + data,
           dir),
      2, "--weak");
}

TEST(Predict, WritesOnePredictionPerRankCountWithSpeedupsOverSerial) {
  const fs::path dir = work_dir();
  Outcome r;
  const json j = predict_json(2, "--ranks 1,2,4", dir, &r);
  ASSERT_TRUE(j.is_object()) << r.err;
  EXPECT_NE(r.out.find("break-even"), std::string::npos) << r.out;
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
    // The phases split the batch where its slowest rank ends each.
    const double fwd = p.at("forward_ms").get<double>(), bwd = p.at("backward_ms").get<double>(),
                 rest = p.at("optimizer_ms").get<double>();
    EXPECT_GT(fwd, 0.0);
    EXPECT_GT(bwd, 0.0);
    EXPECT_GE(rest, 0.0);
    EXPECT_NEAR(fwd + bwd + rest, batch, 1e-9 * batch);
  }
  // The solvers' own time at one rank over the isolated figures: one factor per level, each a
  // ratio of two timings of the same steps. The bounds only catch what is not such a ratio (0,
  // or orders of magnitude off): on this tiny network a step takes microseconds, and a loaded
  // machine has measured a factor of 21.7 in one pass (hence the median of 3 passes here).
  const json& costs = j.at("costs");
  for (const char* key : {"forward_in_situ_per_level", "adjoint_in_situ_per_level"}) {
    ASSERT_EQ(costs.at(key).size(), 2u) << key << costs.dump();
    for (const json& f : costs.at(key)) {
      EXPECT_GT(f.get<double>(), 0.2) << key;
      EXPECT_LT(f.get<double>(), 100.0) << key;
    }
  }
  EXPECT_NE(r.out.find("in situ, per level"), std::string::npos) << r.out;
  // The per-rank fixed costs: the one-rank batch's phases less their prediction, never negative
  // and far below the batch (a phase timed wrongly, e.g. twice, would show here).
  const double one_rank = j.at("predictions").at(0).at("batch_ms").get<double>();
  for (const char* key : {"fixed_forward_ms", "fixed_backward_ms", "fixed_optimizer_ms"}) {
    EXPECT_GE(costs.at(key).get<double>(), 0.0) << key;
    EXPECT_LT(costs.at(key).get<double>(), one_rank) << key;
  }
  EXPECT_NE(r.out.find("outside the priced events"), std::string::npos) << r.out;
  // Busy cores, measured by default: 1 at one rank; at P ranks the slowdown measured with
  // min(P, cores) cores busy (this process's cores; the tests' machine has at least 2).
  const json& contention = j.at("contention");
  EXPECT_EQ(contention.at("source").get<std::string>(), "measured");
  const int cores = contention.at("cores").get<int>();
  ASSERT_GE(cores, 1);
  for (const json& p : j.at("predictions")) {
    const int ranks = p.at("ranks").get<int>(), busy = p.at("busy_cores").get<int>();
    EXPECT_EQ(busy, std::min(ranks, cores)) << ranks;
    const double slowdown = p.at("slowdown").get<double>();
    if (busy == 1) {
      EXPECT_DOUBLE_EQ(slowdown, 1.0) << ranks;
    } else {
      EXPECT_DOUBLE_EQ(
          slowdown, contention.at("slowdown_by_busy_cores").at(std::to_string(busy)).get<double>());
      EXPECT_GT(slowdown, 0.2) << ranks;
      EXPECT_LT(slowdown, 50.0) << ranks;
    }
  }
  EXPECT_NE(r.out.find("busy cores: "), std::string::npos) << r.out;
  EXPECT_NE(j.at("link_source").get<std::string>().find("ping-pong"), std::string::npos);
  EXPECT_GT(j.at("bandwidth_gbs").get<double>(), 0.0);
}

json predict_json(const std::string& args, const fs::path& dir, const std::string& name) {
  const fs::path out = dir / (name + ".json");
  const Outcome r = weft(0, args + " --json " + out.string(), dir);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.out << r.err;
  if (r.code != 0) return json();
  return json::parse(slurp(out));
}

// --contention X prices every P > 1 at X (off: 1) without measuring; bad values are one line.
TEST(Predict, ContentionFlagFixesOrSwitchesOffTheBusyCoreSlowdown) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 12, 12).string();
  const std::string base = kTiny + "--data " + data + " --ranks 1,2,4";
  for (const auto& [flag, expected] :
       std::vector<std::pair<std::string, double>>{{"1.5", 1.5}, {"off", 1.0}}) {
    const json j = predict_json(base + " --contention " + flag, dir, "contention");
    ASSERT_TRUE(j.is_object()) << flag;
    EXPECT_EQ(j.at("contention").at("source").get<std::string>(),
              flag == "off" ? "off" : "--contention");
    for (const json& p : j.at("predictions"))
      EXPECT_DOUBLE_EQ(p.at("slowdown").get<double>(),
                       p.at("ranks").get<int>() == 1 ? 1.0 : expected)
          << flag;
  }
  for (const char* bad : {"0.5", "fast", "nan"})
    expect_one_line(weft(0, base + " --contention " + bad, dir), 2, "--contention");
}

TEST(Predict, RecurrentModelsPredictOverTheirSequenceSteps) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 12, 8).string();
  const std::string base = "predict --threads 1 --repeats 1 --hidden 3 --batch 4 --data " + data;
  for (const auto& [flags, steps] :
       std::vector<std::pair<std::string, int>>{{"--model gru --sequence rows", 12},
                                                {"--model gru --sequence pixels", 96},
                                                {"--model lstm --sequence rows --fwd-levels 2 "
                                                 "--bwd-levels 2 --fwd-cf 2 --bwd-cf 2",
                                                 12}}) {
    const json j = predict_json(base + " " + flags + " --ranks 1,2,8", dir, "rnn");
    ASSERT_TRUE(j.is_object()) << flags;
    EXPECT_EQ(j.at("costs").at("layers").get<int>(), steps) << flags;
    ASSERT_EQ(j.at("predictions").size(), 3u) << flags;
    for (const json& p : j.at("predictions")) EXPECT_GT(p.at("batch_ms").get<double>(), 0.0);
    EXPECT_GT(j.at("serial_batch_ms").get<double>(), 0.0) << flags;
  }
  expect_one_line(weft(0, base + " --model gru --sequence rows --ranks 16", dir), 2, "--ranks");
}

// The implicit cell's step is its fixed-point iterations, each a cell evaluation: predict times
// the real cell, so 8 iterations cost several explicit steps (the bound leaves room for noise).
TEST(Predict, TheImplicitCellIsPricedWithItsIterations) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 12, 8).string();
  const std::string base =
      "predict --threads 1 --repeats 5 --hidden 3 --batch 4 --model gru --ranks 1,2 --data " + data;
  const json torch_cell = predict_json(base, dir, "torch");
  const json implicit =
      predict_json(base + " --implicit-step 0.5 --implicit-iterations 8", dir, "implicit");
  ASSERT_TRUE(torch_cell.is_object());
  ASSERT_TRUE(implicit.is_object());
  for (const char* figure : {"forward_ms", "adjoint_build_ms"}) {
    const double one = torch_cell.at("costs").at(figure)[0].get<double>();
    EXPECT_GT(implicit.at("costs").at(figure)[0].get<double>(), 2 * one) << figure;
  }
  EXPECT_GT(implicit.at("serial_batch_ms").get<double>(),
            2 * torch_cell.at("serial_batch_ms").get<double>());
}

TEST(Predict, LevelsCoarsenedInSpaceHaveTheirOwnStateSizesAndCosts) {
  const fs::path dir = work_dir();
  // --data shapes3d: the volume's shape (32^3) without generating the set into the cache.
  const fs::path cache = dir / "cache";
  setenv("XDG_CACHE_HOME", cache.c_str(), 1);
  const std::string levels = " --fwd-levels 2 --bwd-levels 2 --fwd-cf 2 --bwd-cf 2 --ranks 1,2";
  const json j = predict_json(
      "predict --threads 1 --repeats 1 --model conv3d --data shapes3d --stage-channels 2,2 "
      "--stage-steps 2,1 --batch 2 --spatial-levels 0,1" +
          levels,
      dir, "conv3d");
  EXPECT_FALSE(fs::exists(cache)) << "weft predict generated the 3-D set";
  const std::string data = tiny_dataset(dir / "data", 12, 12).string();
  const json k =
      predict_json(kTiny + "--data " + data + " --spatial-levels 0,1" + levels, dir, "resnet");
  for (const auto& [out, ratio] : {std::make_pair(&j, 8u), std::make_pair(&k, 4u)}) {
    ASSERT_TRUE(out->is_object());
    const json& costs = out->at("costs");
    EXPECT_EQ(costs.at("forward_depth_per_level"), json::array({0, 1}));
    EXPECT_EQ(costs.at("adjoint_depth_per_level"), json::array({0, 1}));
    ASSERT_EQ(costs.at("spatial").size(), 1u);
    const json& depth1 = costs.at("spatial")[0];
    const auto fine = costs.at("state_bytes").get<std::vector<std::size_t>>();
    const auto coarse = depth1.at("state_bytes").get<std::vector<std::size_t>>();
    ASSERT_EQ(fine.size(), coarse.size());
    for (size_t p = 0; p < fine.size(); ++p) EXPECT_EQ(coarse[p] * ratio, fine[p]) << p;
    for (const char* figure : {"forward_ms", "adjoint_build_ms", "restriction_ms"})
      for (const json& ms : depth1.at(figure)) EXPECT_GT(ms.get<double>(), 0.0) << figure;
  }
  // 10 -> 5: a second restriction has an odd side. The error names the flag that was given.
  const std::string odd = tiny_dataset(dir / "odd", 10, 10).string();
  for (const std::string flag : {"--spatial-levels", "--bwd-spatial-levels"}) {
    const Outcome r =
        weft(0,
             "predict --threads 1 --steps 8 --channels 2 --batch 4 --repeats 1 --data " + odd +
                 " --fwd-levels 3 --bwd-levels 3 --fwd-cf 2 --bwd-cf 2 " + flag + " 0,1,1",
             dir);
    expect_one_line(r, 2, "option " + flag + ": depth 2");
    if (flag != "--spatial-levels") {
      EXPECT_EQ(r.err.find("--spatial-levels"), std::string::npos) << r.err;
    }
  }
}

// --balance cost prices the layers placed as `weft train --balance cost` places them, and from
// the same figures equal numbers of layers: the stages network's first stage is the dearer, so
// cost blocks are never slower (they minimize the largest rank's fine work) and one rank is the
// same batch either way.
TEST(Predict, BalanceCostPricesBlocksOfEqualCostBesideEqualNumbers) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 28, 28).string();
  const json j = predict_json(
      "predict --threads 1 --repeats 1 --model stages --stage-channels 2,4 --stage-steps 3,3 "
      "--batch 4 --exact --balance cost --ranks 1,2,4 --data " +
          data,
      dir, "balanced");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.at("balance"), "cost");
  const json& list = j.at("predictions");
  ASSERT_EQ(list.size(), 3u);
  for (const json& q : list) ASSERT_TRUE(q.contains("equal_layers_batch_ms")) << q;
  EXPECT_DOUBLE_EQ(list[0].at("batch_ms").get<double>(),
                   list[0].at("equal_layers_batch_ms").get<double>());
  const json plain = predict_json(kTiny + "--data " + data + " --ranks 1,2", dir, "plain");
  EXPECT_EQ(plain.at("balance"), "layers");
  EXPECT_FALSE(plain.at("predictions")[0].contains("equal_layers_batch_ms"));
  expect_one_line(weft(0, kTiny + "--data " + data + " --balance cost --weak 2", dir), 2,
                  "--balance");
}

TEST(Predict, MoreRanksThanLayersIsOneLineAndExitTwo) {
  const fs::path dir = work_dir();
  // np 0: a singleton without a launcher (fast); one run on 2 ranks for the collective path.
  expect_one_line(weft(0, kTiny + "--ranks 8", dir), 2, "--ranks");
  expect_one_line(weft(2, kTiny + "--ranks 2,16", dir), 2, "--ranks");
  expect_one_line(weft(0, kTiny + "--epochs 3", dir), 2, "--epochs");
  expect_one_line(weft(0, kTiny + "--bandwidth-gbs 0", dir), 2, "--bandwidth-gbs");
}

}  // namespace
