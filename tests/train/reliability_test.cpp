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
