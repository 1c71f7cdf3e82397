// `weft train --trace` and `weft replay` end to end on a tiny generated data set: the trace's
// events (steps per rank and level, every message's send matched by a wait on its receiver),
// its replay against the ranks' own work and the run's wall time at 1 and 2 ranks, bad input (an
// unreadable, truncated or inconsistent trace; --trace-batches without --trace) as one line
// with exit code 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

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

/// 64 images of 12x12, 16 batches of 4; 8 steps of 2 channels, 2 levels cf 2 both ways.
std::string tiny_run(const fs::path& dir) {
  return "train --no-progress --threads 1 --data " +
         tiny_dataset(dir / "data", 12, 12, 64).string() +
         " --steps 8 --channels 2 --batch 4 --epochs 1 --fwd-levels 2 --bwd-levels 2"
         " --fwd-cf 2 --bwd-cf 2 ";
}

TEST(Trace, ATracedRunHoldsEveryStepAndMessageAndReplaysToItsMeasuredBatchTime) {
  const fs::path dir = work_dir();
  for (int np : {1, 2}) {
    const fs::path trace = dir / ("run" + std::to_string(np) + ".json");
    const Outcome r =
        weft(np, tiny_run(dir) + "--trace " + trace.string() + " --trace-batches 5", dir);
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("wrote the trace to"), std::string::npos) << r.out;
    const json t = json::parse(slurp(trace));
    ASSERT_EQ(t.at("otherData").at("ranks").get<int>(), np);
    EXPECT_EQ(t.at("otherData").at("first_batch").get<int>(), 2);
    // Per rank: batches 2..6; step events on both levels in both directions, each with its CPU
    // time; sends and waits matched per (sender, receiver, tag).
    std::map<int, std::map<std::string, int>> per_rank;
    std::map<std::tuple<int, int, int>, int> sent, waited;
    // Per batch and rank: the CPU time of the batch less its waits (spinning in MPI): the work
    // the replay prices on that rank.
    std::map<int, std::map<int, double>> work_ms;
    for (const json& e : t.at("traceEvents")) {
      if (e.at("ph") != "X") continue;
      const int rank = e.at("pid").get<int>();
      const json& a = e.at("args");
      const std::string name = e.at("name");
      if (name == "batch") {
        const int b = a.at("batch").get<int>();
        EXPECT_GE(b, 2);
        EXPECT_LE(b, 6);
        work_ms[b][rank] += a.at("cpu_us").get<double>() / 1e3;
      }
      if (a.at("kind") == "wait" || a.at("kind") == "reduce")
        work_ms[a.at("batch").get<int>()][rank] -= a.at("cpu_us").get<double>() / 1e3;
      if (name == "step") {
        ++per_rank[rank][e.at("cat").get<std::string>() + " level " +
                         std::to_string(a.at("level").get<int>())];
        EXPECT_GE(a.at("cpu_us").get<double>(), 0.0);
        EXPECT_GE(a.at("to").get<int>(), 0);
      }
      if (a.at("kind") == "send" && !a.contains("group"))
        ++sent[{rank, a.at("peer").get<int>(), a.at("tag").get<int>()}];
      if (a.at("kind") == "wait" && a.contains("peer") && !a.contains("group"))
        ++waited[{a.at("peer").get<int>(), rank, a.at("tag").get<int>()}];
      ++per_rank[rank][name];
    }
    for (int rank = 0; rank < np; ++rank) {
      auto& c = per_rank[rank];
      EXPECT_EQ(c["batch"], 5) << rank;
      EXPECT_EQ(c["forward"], 5) << rank;
      EXPECT_EQ(c["backward"], 5) << rank;
      EXPECT_EQ(c["optimizer"], 5) << rank;
      for (const char* level :
           {"forward level 0", "forward level 1", "reverse level 0", "reverse level 1"})
        EXPECT_GT(c[level], 0) << "rank " << rank << ", " << level;
    }
    EXPECT_EQ(per_rank[0]["open"], 5);
    EXPECT_EQ(per_rank[np - 1]["close"], 5);
    EXPECT_EQ(sent, waited);
    if (np == 2) {
      EXPECT_FALSE(sent.empty());
    }

    const fs::path replay = dir / ("replay" + std::to_string(np) + ".json");
    const Outcome p = weft(0, "replay " + trace.string() + " --json " + replay.string(), dir);
    ASSERT_EQ(p.code, 0) << p.out << p.err;
    EXPECT_NE(p.out.find("replayed / measured"), std::string::npos) << p.out;
    const json j = json::parse(slurp(replay));
    EXPECT_EQ(j.at("ranks").get<int>(), np);
    ASSERT_EQ(j.at("batches").size(), 5u);
    // The replay's batch is at least every rank's own work (at 1 rank exactly that: nothing to
    // wait for), and, with waiting recomputed from the messages, no longer than the run's wall
    // time (which a busy machine only lengthens; docs/tracing.md has the quiet machine's ratio).
    const double replayed = j.at("median_batch_ms").get<double>();
    const double measured = j.at("measured_median_batch_ms").get<double>();
    EXPECT_LT(replayed, 1.1 * measured + 0.5) << p.out;
    for (const json& b : j.at("batches")) {
      const int index = b.at("index").get<int>();
      double busiest = 0;
      for (const auto& [rank, ms] : work_ms.at(index)) busiest = std::max(busiest, ms);
      const double batch_ms = b.at("batch_ms").get<double>();
      if (np == 1)
        EXPECT_NEAR(batch_ms, busiest, 0.01 + 1e-3 * busiest) << "batch " << index << p.out;
      else
        EXPECT_GE(batch_ms, 0.999 * busiest - 0.01) << "batch " << index << p.out;
    }
    for (const json& b : j.at("batches")) {
      // Each phase is the slowest rank's (in a chain over ranks, one rank's forward overlaps
      // another's backward, so the two need not add up to the batch).
      const double forward = b.at("forward_ms"), backward = b.at("backward_ms");
      const double batch = b.at("batch_ms");
      EXPECT_GT(forward, 0.0);
      EXPECT_GT(backward, 0.0);
      EXPECT_LE(forward, batch * 1.0001) << p.out;
      EXPECT_LE(backward, batch * 1.0001) << p.out;
    }
  }
  // Replayed at the 1-rank run's costs (--costs-from): every computation of the 2-rank run is
  // found by its own key in the 1-rank trace (the same steps, transfers and layers at any rank
  // count), and the 1-rank run replayed at its own costs has no contention to take out.
  const std::string reference = (dir / "run1.json").string();
  for (int np : {1, 2}) {
    const fs::path out = dir / ("repriced" + std::to_string(np) + ".json");
    const Outcome p = weft(0,
                           "replay " + (dir / ("run" + std::to_string(np) + ".json")).string() +
                               " --costs-from " + reference + " --json " + out.string(),
                           dir);
    ASSERT_EQ(p.code, 0) << p.out << p.err;
    EXPECT_NE(p.out.find("(contention)"), std::string::npos) << p.out;
    const json j = json::parse(slurp(out));
    EXPECT_EQ(j.at("costs_from"), json::array({reference}));
    EXPECT_GT(j.at("priced_by_key").get<double>(), 0.9999) << p.out;
    EXPECT_EQ(j.at("priced_by_family").get<double>(), 0.0) << p.out;
    const double contention = j.at("contention").get<double>();
    EXPECT_GT(contention, np == 1 ? 0.8 : 0.5) << p.out;
    EXPECT_LT(contention, np == 1 ? 1.25 : 2.0) << p.out;
    if (np == 2) {
      // The flag repeated: medians over both runs (here the same run twice: the same prices).
      const fs::path twice = dir / "repriced_twice.json";
      ASSERT_EQ(weft(0,
                     "replay " + (dir / "run2.json").string() + " --costs-from " + reference +
                         " --costs-from " + reference + " --json " + twice.string(),
                     dir)
                    .code,
                0);
      const json t = json::parse(slurp(twice));
      EXPECT_EQ(t.at("costs_from"), json::array({reference, reference}));
      EXPECT_NEAR(t.at("median_batch_ms").get<double>(), j.at("median_batch_ms").get<double>(),
                  1e-9);
    }
    if (np == 1) {
      const json plain = json::parse(slurp(dir / "replay1.json"));
      EXPECT_NEAR(j.at("median_batch_ms").get<double>(), plain.at("median_batch_ms").get<double>(),
                  0.25 * plain.at("median_batch_ms").get<double>())
          << p.out;
    }
  }
}

TEST(Trace, BadTracesAndTraceFlagsAreRefusedInOneLine) {
  const fs::path dir = work_dir();
  const fs::path trace = dir / "run.json";
  ASSERT_EQ(weft(2, tiny_run(dir) + "--trace " + trace.string() + " --trace-batches 2", dir).code,
            0);
  expect_one_line(weft(0, "replay " + (dir / "missing.json").string(), dir), 2, "cannot read");
  const std::string text = slurp(trace);
  const fs::path truncated = dir / "truncated.json";
  std::ofstream(truncated) << text.substr(0, text.size() / 2);
  expect_one_line(weft(0, "replay " + truncated.string(), dir), 2, "not valid JSON");
  // Without the first send of rank 0 its receiver's wait cannot complete.
  json t = json::parse(text);
  auto& events = t.at("traceEvents");
  for (auto it = events.begin(); it != events.end(); ++it)
    if (it->value("ph", "") == "X" && it->at("args").value("kind", "") == "send" &&
        it->at("pid") == 0 && !it->at("args").contains("group")) {
      events.erase(it);
      break;
    }
  const fs::path broken = dir / "broken.json";
  std::ofstream(broken) << t.dump();
  expect_one_line(weft(0, "replay " + broken.string(), dir), 2, "do not match");
  std::ofstream(dir / "other.json") << R"({"traceEvents": []})";
  expect_one_line(weft(0, "replay " + (dir / "other.json").string(), dir), 2, "not a weft trace");
  expect_one_line(weft(0, "replay " + trace.string() + " --bandwidth-gbs 0", dir), 2,
                  "--bandwidth-gbs");
  // Reference costs from a missing file, from another network's run, from a run that computed
  // nothing the trace did.
  expect_one_line(
      weft(0, "replay " + trace.string() + " --costs-from " + (dir / "missing.json").string(), dir),
      2, "cannot read");
  json gru = json::parse(text);
  gru.at("otherData")["model"] = "gru";
  std::ofstream(dir / "gru.json") << gru.dump();
  expect_one_line(
      weft(0, "replay " + trace.string() + " --costs-from " + (dir / "gru.json").string(), dir), 2,
      "same network");
  json idle = json::parse(text);
  json kept = json::array();
  for (const json& e : idle.at("traceEvents"))
    if (e.value("ph", "") != "X" || e.at("args").value("kind", "") != "compute") kept.push_back(e);
  idle["traceEvents"] = kept;
  std::ofstream(dir / "idle.json") << idle.dump();
  expect_one_line(
      weft(0, "replay " + trace.string() + " --costs-from " + (dir / "idle.json").string(), dir), 2,
      "prices none");
  expect_one_line(weft(0, tiny_run(dir) + "--trace-batches 3", dir), 2, "--trace-batches");
  expect_one_line(weft(0, tiny_run(dir) + "--trace " + trace.string() + " --trace-batches 0", dir),
                  2, "--trace-batches");
  expect_one_line(weft(0, tiny_run(dir) + "--trace /nonexistent/dir/t.json", dir), 2, "--trace");
}

}  // namespace
