// Faults and bad input of `weft train` / `weft eval` on tiny generated data sets: crash-safe
// checkpoints, outputs checked before any work, a consistent --resume, resource guards, and
// errors that every rank learns ending the job with one line (no MPI_Abort banner).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
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
using weft::train_test::idx_header;
using weft::train_test::tiny_dataset;
using weft::train_test::write_file;

const std::string kQuick = "train --no-progress --threads 1 --steps 4 --channels 2 ";

// --- 1. crash-safe checkpoints --------------------------------------------------------------

TEST(Checkpoint, AFailedSaveLeavesThePreviousCheckpointLoadable) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 28, 28).string();
  const std::string ck = (dir / "ck").string(), metrics = (dir / "m.jsonl").string();
  const std::string args =
      kQuick + "--data " + data + " --checkpoint " + ck + " --metrics " + metrics;
  ASSERT_EQ(weft(2, args + " --epochs 1", dir).code, 0);
  // The manifest cannot be written (its temporary name is taken by a folder): the save of
  // epoch 2 fails after every part is written.
  fs::create_directories(fs::path(ck) / "manifest.json.tmp");
  const Outcome failed = weft(2, args + " --epochs 2 --resume " + ck, dir);
  expect_one_line(failed, 1, "unchanged");
  const auto epochs = weft::train_test::read_metrics(metrics);
  ASSERT_EQ(epochs.size(), 2u);
  const fs::path out = dir / "eval.json";
  const Outcome ev = weft(
      2, "eval --threads 1 --data " + data + " --resume " + ck + " --json " + out.string(), dir);
  ASSERT_EQ(ev.code, 0) << ev.err;
  const json e = json::parse(slurp(out));
  EXPECT_EQ(e["epoch"], 1);
  EXPECT_NEAR(e["test_loss"].get<double>(), epochs[0]["test_loss"].get<double>(), 1e-6);
  EXPECT_GT(std::abs(epochs[1]["test_loss"].get<double>() - epochs[0]["test_loss"].get<double>()),
            1e-5)
      << "the two epochs must be told apart";
}

TEST(Checkpoint, ACorruptPartFileIsNamedInOneLine) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 28, 28).string();
  const fs::path ck = dir / "ck";
  ASSERT_EQ(
      weft(2, kQuick + "--epochs 1 --data " + data + " --checkpoint " + ck.string(), dir).code, 0);
  std::string part;
  for (const auto& entry : fs::directory_iterator(ck))
    if (entry.path().extension() == ".pt") part = entry.path().filename().string();
  ASSERT_FALSE(part.empty());
  write_file(ck / part, {'n', 'o', 't', ' ', 'a', ' ', 'z', 'i', 'p'});
  for (int np : {1, 2})
    expect_one_line(weft(np, "eval --data " + data + " --resume " + ck.string(), dir), 1, part);
}

// --- 2. outputs checked before any work -----------------------------------------------------

TEST(Outputs, AreCheckedBeforeAnyWork) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 28, 28).string();
  write_file(dir / "file", {'x'});
  const std::string file = (dir / "file").string();
  for (const std::string& bad :
       {"--checkpoint " + file, "--checkpoint " + file + "/ck",
        "--metrics " + (dir / "nowhere" / "m.jsonl").string(), "--metrics " + dir.string()}) {
    const Outcome r = weft(2, kQuick + "--data " + data + " " + bad, dir);
    expect_one_line(r, 2, bad.substr(0, bad.find(' ')));
    EXPECT_EQ(r.out.find("epoch"), std::string::npos) << bad << ": trained before failing";
  }
  const fs::path ck = dir / "ck";
  ASSERT_EQ(
      weft(1, kQuick + "--epochs 1 --data " + data + " --checkpoint " + ck.string(), dir).code, 0);
  const Outcome r =
      weft(2, "eval --data " + data + " --resume " + ck.string() + " --json " + dir.string(), dir);
  expect_one_line(r, 2, "is a folder");
  EXPECT_EQ(r.out.find("test loss"), std::string::npos) << "evaluated before failing";
}

// A write that fails later (a full disk) on the one rank that writes is still one line.
TEST(Outputs, AWriteThatFailsOnTheWritingRankEndsTheJobInOneLine) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 28, 28).string();
  expect_one_line(weft(2, kQuick + "--epochs 1 --data " + data + " --metrics /dev/full", dir), 1,
                  "cannot write --metrics file /dev/full");
  const fs::path ck = dir / "ck";
  ASSERT_EQ(
      weft(1, kQuick + "--epochs 1 --data " + data + " --checkpoint " + ck.string(), dir).code, 0);
  expect_one_line(
      weft(2, "eval --data " + data + " --resume " + ck.string() + " --json /dev/full", dir), 1,
      "cannot write --json file /dev/full");
}

// --- 3. resume is consistent ----------------------------------------------------------------

TEST(Resume, RefusesFlagsThatDifferFromTheCheckpointAndEpochsWithNothingToTrain) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 28, 28).string();
  const std::string ck = (dir / "ck").string();
  ASSERT_EQ(weft(1, kQuick + "--epochs 1 --data " + data + " --checkpoint " + ck, dir).code, 0);
  const std::string resume = "train --no-progress --threads 1 --data " + data + " --resume " + ck;
  for (const std::string flag :
       {"--steps 6", "--channels 3", "--T 2", "--open copy", "--seed 5", "--optimizer sgd"})
    expect_one_line(weft(2, resume + " --epochs 2 " + flag, dir), 2,
                    "option " + flag.substr(0, flag.find(' ')));
  expect_one_line(weft(2, resume + " --epochs 1", dir), 2, "leaves nothing to train");
  // The same values as the checkpoint's are accepted.
  EXPECT_EQ(weft(2, resume + " --epochs 2 --steps 4 --channels 2 --optimizer adam", dir).code, 0);
}

// --- 3b. nested iteration over depth: --grow-depth --------------------------------------------

// 2, 4, then 8 steps: layer-parallel as --serial, each refinement announced, the depth in the
// metrics; stopped at the shallowest depth and resumed, the run continues the schedule.
TEST(Growth, GrowsLikeTheSerialRunAndResumesMidSchedule) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 28, 28).string();
  const std::string grow =
      "--steps 8 --channels 2 --grow-depth 2,2 --grow-epochs 1,1 --data " + data;
  const auto parallel = weft::train_test::train(2, grow + " --epochs 3", dir, "parallel");
  const auto serial = weft::train_test::train(1, grow + " --epochs 3 --serial", dir, "serial");
  ASSERT_EQ(parallel.size(), 3u);
  ASSERT_EQ(serial.size(), 3u);
  for (size_t e = 0; e < 3; ++e) {
    EXPECT_EQ(parallel[e]["depth"], 2 << e);
    EXPECT_EQ(serial[e]["depth"], 2 << e);
    weft::train_test::expect_relative(parallel[e]["test_loss"].get<double>(),
                                      serial[e]["test_loss"].get<double>(), 1e-4, "test loss");
  }
  const std::string ck = (dir / "ck").string();
  const Outcome first =
      weft(2,
           kQuick.substr(0, kQuick.find("--steps")) + grow + " --epochs 1 --checkpoint " + ck +
               " --metrics " + (dir / "resumed.jsonl").string(),
           dir);
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.out.find("depth grows: 2 -> 4 -> 8 steps"), std::string::npos) << first.out;
  const std::string resume =
      "train --no-progress --threads 1 --epochs 3 --data " + data + " --resume " + ck;
  const Outcome rest = weft(2, resume + " --metrics " + (dir / "resumed.jsonl").string(), dir);
  ASSERT_EQ(rest.code, 0) << rest.err;
  EXPECT_NE(rest.out.find("depth refined before epoch 2: 2 -> 4 steps"), std::string::npos)
      << rest.out;
  EXPECT_NE(rest.out.find("depth refined before epoch 3: 4 -> 8 steps"), std::string::npos);
  const auto resumed = weft::train_test::read_metrics(dir / "resumed.jsonl");
  ASSERT_EQ(resumed.size(), 3u);
  for (size_t e = 0; e < 3; ++e)
    EXPECT_NEAR(resumed[e]["test_loss"].get<double>(), parallel[e]["test_loss"].get<double>(),
                1e-6);
  expect_one_line(weft(2, resume + " --grow-depth 4,1", dir), 2,
                  "option --grow-depth: '4,1' differs");
}

TEST(Growth, BadCombinationsGetOneLineAndExitTwo) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 28, 28).string();
  const std::string train = kQuick + "--data " + data + " ";
  expect_one_line(weft(0, train + "--grow-depth 3,1", dir), 2,
                  "option --grow-depth: 3^1 = 3 does not divide the 4 steps");
  for (const char* bad : {"2", "1,1", "2,0", "2,x"})
    expect_one_line(weft(0, train + "--grow-depth " + bad, dir), 2, "option --grow-depth");
  expect_one_line(weft(0, train + "--grow-epochs 1", dir), 2,
                  "option --grow-epochs: '1' is invalid; accepted: a value used with --grow-depth");
  expect_one_line(weft(0, train + "--grow-depth 2,1 --grow-epochs 2 --epochs 2", dir), 2,
                  "leaves none of the 2 epochs to the full depth");
  expect_one_line(weft(0, train + "--grow-depth 2,1 --grow-epochs 1,1 --epochs 3", dir), 2,
                  "option --grow-epochs: has 2 entries for 1 refinements");
  expect_one_line(weft(0, train + "--grow-depth 2,1 --grow-interpolation cubic", dir), 2,
                  "option --grow-interpolation");
  expect_one_line(weft(2, train + "--grow-depth 2,2 --epochs 3", dir), 2,
                  "leave the shallowest network 1 chain layers, fewer than the 2");
  expect_one_line(
      weft(0, "train --no-progress --model gru --data " + data + " --grow-depth 2,1", dir), 2,
      "option --grow-depth: the gru model has no depth to grow");
}

// --- 3c. MGRIT iterations chosen by the training: --fwd-iters auto ----------------------------

TEST(AutoIterations, AreChosenByTheTrainingAndReported) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 28, 28).string();
  const auto epochs = weft::train_test::train(
      2,
      "--steps 8 --channels 2 --fwd-levels 2 --bwd-levels 2 --fwd-cf 2 --bwd-cf 2 --fwd-iters "
      "auto --bwd-iters auto --auto-check 1 --auto-max 3 --epochs 1 --batch 5 --fwd-skip 0 "
      "--data " +
          data,
      dir, "auto");
  ASSERT_EQ(epochs.size(), 1u);
  const json& m = epochs[0];
  // Half steps (the default) in the adjoint, which skips; none in the forward, which does not.
  EXPECT_FALSE(m.contains("fwd_unskipped_fraction"));
  ASSERT_TRUE(m["bwd_unskipped_fraction"].is_number());
  EXPECT_GE(m["bwd_unskipped_fraction"].get<double>(), 0.0);
  EXPECT_LE(m["bwd_unskipped_fraction"].get<double>(), 1.0);
  EXPECT_EQ(m["gradient_checks"], 4);  // 20 images, batches of 5, each checked
  EXPECT_TRUE(m["gradient_error"].is_number());
  EXPECT_TRUE(m["gradient_error_layers"].is_number());
  ASSERT_TRUE(m["forward_error"].is_number());
  EXPECT_GE(m["forward_error"].get<double>(), 0.0);
  EXPECT_TRUE(m["fallbacks"].is_number_integer());
  EXPECT_LE(m["fwd_iterations_max"].get<double>(), 3.0);
  EXPECT_LE(m["bwd_iterations_max"].get<double>(), 3.0);
  EXPECT_GT(m["step_evaluations"].get<double>(), 0.0);
  EXPECT_GT(m["control_ms"].get<double>(), 0.0);
}

// --auto-min = --auto-max holds the count; --auto-diagnostics 1 reports the checks' sampling
// noise (the tiny data's images are equal, its labels not: the halves differ) and the error's
// persistence (every batch checked at the same setting: a cosine, half steps off).
TEST(AutoIterations, HeldCountsReportTheCheckDiagnostics) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 28, 28).string();
  const auto epochs = weft::train_test::train(
      2,
      "--steps 8 --channels 2 --fwd-levels 2 --bwd-levels 2 --fwd-cf 2 --bwd-cf 2 --fwd-iters "
      "auto --bwd-iters auto --auto-check 1 --auto-min 2 --auto-max 2 --auto-diagnostics 1 "
      "--epochs 1 --batch 5 --auto-half-steps 0 --data " +
          data,
      dir, "diagnostics");
  ASSERT_EQ(epochs.size(), 1u);
  const json& m = epochs[0];
  EXPECT_EQ(m["fwd_iterations_mean"].get<double>(), 2.0);
  EXPECT_EQ(m["bwd_iterations_max"].get<double>(), 2.0);
  EXPECT_EQ(m["gradient_checks"], 4);
  // Half steps turned off: no shares of unskipped batches.
  EXPECT_FALSE(m.contains("fwd_unskipped_fraction"));
  EXPECT_FALSE(m.contains("bwd_unskipped_fraction"));
  ASSERT_TRUE(m["gradient_noise"].is_number());
  EXPECT_GT(m["gradient_noise"].get<double>(), 0.0);
  ASSERT_TRUE(m["gradient_error_persistence"].is_number());
  EXPECT_GE(m["gradient_error_persistence"].get<double>(), -1.0);
  EXPECT_LE(m["gradient_error_persistence"].get<double>(), 1.0);
}

TEST(AutoIterations, BadCombinationsGetOneLineAndExitTwo) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 28, 28).string();
  const std::string train = kQuick + "--data " + data + " ";
  const std::string two = "--fwd-levels 2 --bwd-levels 2 ";
  expect_one_line(weft(0, train + two + "--fwd-iters auto --serial", dir), 2,
                  "option --fwd-iters: 'auto' is invalid (--serial trains without MGRIT)");
  expect_one_line(weft(0, train + "--bwd-iters auto --bwd-levels 1", dir), 2,
                  "one level solves exactly");
  expect_one_line(weft(0, train + "--auto-tol 0.1", dir), 2,
                  "option --auto-tol: '0.1' is invalid; accepted: a value used with");
  expect_one_line(weft(0, train + two + "--fwd-iters auto --auto-tol 2", dir), 2,
                  "option --auto-tol");
  expect_one_line(weft(0, train + two + "--fwd-iters auto --auto-fwd-tol 0", dir), 2,
                  "option --auto-fwd-tol: '0' is invalid; accepted: a number in (0, 1)");
  expect_one_line(weft(0, train + "--auto-fwd-tol 0.1", dir), 2,
                  "option --auto-fwd-tol: '0.1' is invalid; accepted: a value used with");
  expect_one_line(weft(0, train + two + "--fwd-iters sometimes", dir), 2, "option --fwd-iters");
  expect_one_line(weft(0, train + "--auto-half-steps 1", dir), 2,
                  "option --auto-half-steps: '1' is invalid; accepted: a value used with");
  expect_one_line(weft(0, train + two + "--bwd-iters auto --auto-half-steps on", dir), 2,
                  "option --auto-half-steps: 'on' is invalid");
  expect_one_line(
      weft(0, train + two + "--bwd-iters auto --bwd-skip 0 --auto-half-steps 1", dir), 2,
      "option --auto-half-steps: '1' is invalid (half steps lie between k iterations with and "
      "without --fwd-skip/--bwd-skip); accepted: 0 when no automatic solve skips");
  // Not asked for, half steps (the default) are not refused where no solve skips.
  const auto unskipped = weft(0, train + two + "--bwd-iters auto --bwd-skip 0 --epochs 1", dir);
  EXPECT_EQ(unskipped.code, 0) << unskipped.err;
  expect_one_line(weft(0, train + two + "--fwd-iters auto --auto-min 4 --auto-max 3", dir), 2,
                  "option --auto-min: '4' is invalid; accepted: an integer <= --auto-max 3");
  expect_one_line(weft(0, train + "--auto-diagnostics 1", dir), 2,
                  "option --auto-diagnostics: '1' is invalid; accepted: a value used with");
  expect_one_line(weft(0, train + two + "--fwd-iters auto --auto-diagnostics yes", dir), 2,
                  "option --auto-diagnostics: 'yes' is invalid");
  expect_one_line(weft(0, "predict --data " + data + " " + two + "--fwd-iters auto", dir), 2,
                  "weft predict prices a fixed count");
}

// --- 3d. MG/Opt over depth: --mgopt LEVELS ------------------------------------------------------

TEST(MGOpt, TrainsLikeTheSerialRunAndResumes) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 28, 28).string();
  const std::string mgopt = "--steps 8 --channels 2 --mgopt 3 --mgopt-relax 1,0,2 --data " + data;
  const auto parallel = weft::train_test::train(2, mgopt + " --epochs 2", dir, "parallel");
  const auto serial = weft::train_test::train(1, mgopt + " --epochs 2 --serial", dir, "serial");
  ASSERT_EQ(parallel.size(), 2u);
  ASSERT_EQ(serial.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(parallel[e]["mgopt_levels"], 3);
    EXPECT_EQ(parallel[e]["mgopt_corrections"], 2);  // one batch: levels 0 and 1 correct once
    EXPECT_EQ(parallel[e]["mgopt_rejected"], serial[e]["mgopt_rejected"]);
    weft::train_test::expect_relative(parallel[e]["test_loss"].get<double>(),
                                      serial[e]["test_loss"].get<double>(), 1e-4, "test loss");
  }
  const std::string ck = (dir / "ck").string();
  const std::string base = "train --no-progress --threads 1 " + mgopt;
  const Outcome first = weft(2, base + " --epochs 1 --checkpoint " + ck, dir);
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.out.find("MG/Opt: V-cycles over 8 -> 4 -> 2 steps"), std::string::npos)
      << first.out;
  // Resumed without --mgopt: the checkpoint's MG/Opt settings continue; --mgopt 0 switches it
  // off.
  const std::string resume =
      "train --no-progress --threads 1 --epochs 2 --data " + data + " --resume " + ck;
  const Outcome rest = weft(2, resume + " --metrics " + (dir / "resumed.jsonl").string(), dir);
  ASSERT_EQ(rest.code, 0) << rest.err;
  EXPECT_NE(rest.out.find("MG/Opt: V-cycles over 8 -> 4 -> 2 steps, 1,0 optimizer steps"),
            std::string::npos)
      << rest.out;
  const auto resumed = weft::train_test::read_metrics(dir / "resumed.jsonl");
  ASSERT_EQ(resumed.size(), 1u);
  EXPECT_EQ(resumed[0]["mgopt_levels"], 3);
  EXPECT_NEAR(resumed[0]["test_loss"].get<double>(), parallel[1]["test_loss"].get<double>(), 1e-6);
  const Outcome plain =
      weft(2, resume + " --mgopt 0 --metrics " + (dir / "plain.jsonl").string(), dir);
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(plain.out.find("MG/Opt"), std::string::npos) << plain.out;
  EXPECT_FALSE(weft::train_test::read_metrics(dir / "plain.jsonl")[0].contains("mgopt_levels"));
  expect_one_line(weft(2, resume + " --fwd-levels 2 --fwd-iters auto", dir), 2,
                  "auto is not used with MG/Opt, which checkpoint");
}

TEST(MGOpt, BadCombinationsGetOneLineAndExitTwo) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 28, 28).string();
  const std::string train = kQuick + "--data " + data + " ";
  expect_one_line(
      weft(0, train + "--mgopt 4", dir), 2,
      "option --mgopt: level 3 would have 4/8 steps in the network, not a whole number");
  for (const char* bad : {"-1", "17", "x"})
    expect_one_line(weft(0, train + "--mgopt " + bad, dir), 2, "option --mgopt");
  expect_one_line(weft(0, train + "--mgopt 0 --mgopt-factor 2", dir), 2,
                  "option --mgopt-factor: '2' is invalid; accepted: a value used with --mgopt "
                  "LEVELS >= 1");
  for (const char* bad : {"1,1", "1,1,0", "-1,1,1"})
    expect_one_line(weft(0, train + "--mgopt 2 --mgopt-relax " + bad, dir), 2,
                    "option --mgopt-relax");
  expect_one_line(weft(0, train + "--mgopt-factor 2", dir), 2,
                  "option --mgopt-factor: '2' is invalid; accepted: a value used with --mgopt");
  expect_one_line(weft(0, train + "--mgopt 2 --mgopt-restriction cubic", dir), 2,
                  "option --mgopt-restriction");
  expect_one_line(weft(0, train + "--mgopt 2 --mgopt-line-search 31", dir), 2,
                  "option --mgopt-line-search");
  expect_one_line(weft(0, train + "--mgopt 2 --grow-depth 2,1 --epochs 2", dir), 2,
                  "no --mgopt with --grow-depth");
  expect_one_line(weft(2, train + "--mgopt 3", dir), 2,
                  "leave the coarsest network 1 chain layers, fewer than the 2");
  expect_one_line(weft(0, "train --no-progress --model gru --data " + data + " --mgopt 2", dir), 2,
                  "option --mgopt: the gru model has no depth hierarchy");
}

// --- 4. resource guards ---------------------------------------------------------------------

TEST(Resources, HugeSizesAreRefusedAtOnceWithTheEstimate) {
  const fs::path dir = work_dir();
  const std::string data = tiny_dataset(dir / "data", 28, 28).string();
  const auto start = std::chrono::steady_clock::now();
  expect_one_line(weft(2, "train --data " + data + " --channels 20000", dir), 2, "GB per rank");
  expect_one_line(weft(2, "train --data " + data + " --batch 20 --steps 900000 --channels 64", dir),
                  2, "--steps 900000");
  expect_one_line(weft(0, "train --data " + data + " --steps 99999999999", dir), 2, "--steps");
  expect_one_line(weft(0, "train --data " + data + " --channels 100000", dir), 2, "--channels");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30);
  // Other models name their own size flags, and every run names the evaluation batch.
  const Outcome staged = weft(
      2, "train --data " + data + " --model stages --stage-channels 4096,4096 --stage-steps 50,50",
      dir);
  expect_one_line(staged, 2, "--model stages --stage-channels 4096,4096 --stage-steps 50,50");
  EXPECT_NE(staged.err.find("(evaluation batches of "), std::string::npos) << staged.err;
  EXPECT_NE(staged.err.find("--eval-batch"), std::string::npos) << staged.err;
  // --eval-batch reaches the estimate (the tiny test set has more than 7 images).
  const Outcome seven = weft(0,
                             "train --data " + data +
                                 " --model stages --stage-channels 4096,4096 --stage-steps 50,50 "
                                 "--eval-batch 7",
                             dir);
  expect_one_line(seven, 2, "(evaluation batches of 7)");
  expect_one_line(weft(0, "train --data " + data + " --eval-batch 0", dir), 2, "--eval-batch");
}

// --- 5. collective errors: one line, no MPI_Abort --------------------------------------------

TEST(Errors, EveryRankKnowsThemSoOneLineAndNoAbortBanner) {
  const fs::path dir = work_dir();
  const fs::path data = tiny_dataset(dir / "data", 28, 28);
  const fs::path empty = tiny_dataset(dir / "empty", 28, 28, 0);
  write_file(dir / "file", {'x'});
  for (int np : {1, 2}) {
    // A data set found bad before any work is rejected input (exit 2); a missing checkpoint
    // is a failure to resume (exit 1).
    expect_one_line(weft(np, "train --data " + (dir / "nowhere").string(), dir), 2, "missing file");
    expect_one_line(weft(np, "train --data " + (dir / "file").string(), dir), 2,
                    "is a file, not a folder");
    expect_one_line(weft(np, "train --data " + empty.string(), dir), 2, "training set is empty");
    expect_one_line(weft(np, "eval --resume " + (dir / "none").string(), dir), 1,
                    (dir / "none").string());
  }
  expect_one_line(weft(0, "frobnicate", dir), 2, "unknown subcommand 'frobnicate'");
  expect_one_line(weft(0, "train --threads -1", dir), 2, "--threads");
  EXPECT_NE(weft(0, "train --help", dir).out.find("0 = cores / ranks"), std::string::npos);
}

}  // namespace
