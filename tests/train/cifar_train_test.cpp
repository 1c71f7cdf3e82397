// End-to-end on CIFAR-10's published binary layout: `weft data cifar10` writes a small
// generated set that `weft train --data DIR` recognises by its files and trains on (RGB: the
// open layer takes 3 channels) at 1-3 ranks: exact mode at 3 ranks and 2 replicas equal to
// --serial, multilevel at 2, with a checkpoint `weft eval` reads at one rank; CIFAR-100 on its fine
// or coarse labels (the model's classes follow the data and its checkpoint keeps them); models that
// cannot take the data, flags that do not fit it and a damaged file are one line each.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "train_runner.hpp"

namespace {

namespace fs = std::filesystem;
using weft::cli_test::Outcome;
using weft::cli_test::weft;
using weft::cli_test::work_dir;
using weft::train_test::generated;
using weft::train_test::train;

const std::string kTiny = "--model resnet --channels 4 --steps 4 --batch 20 --epochs 1 ";

TEST(CifarTrain, Cifar10TrainsLayerParallelExactlyAsSerialAndEvaluatesItsCheckpoint) {
  const fs::path dir = work_dir();
  const fs::path data = generated(dir, "cifar10", "--classes 4 --per-class 20 --test-per-class 5");
  for (const char* file : {"data_batch_1.bin", "data_batch_5.bin", "test_batch.bin"})
    EXPECT_TRUE(fs::exists(data / file)) << file;
  const std::string d = "--data " + data.string() + " ";
  const std::string ck = (dir / "ck").string();
  const auto exact = train(3, kTiny + d + "--checkpoint " + ck, dir, "exact");
  ASSERT_EQ(exact.size(), 1u);
  const auto serial = train(1, kTiny + d + "--serial", dir, "serial");
  ASSERT_EQ(serial.size(), 1u);
  // CIFAR is augmented by default: the same draws at every rank count and replica split.
  EXPECT_EQ(serial[0]["augment"], "crop-flip");
  EXPECT_EQ(serial[0]["crop_padding"], 4);
  const auto replicas = train(2, kTiny + d + "--data-ranks 2", dir, "replicas");
  ASSERT_EQ(replicas.size(), 1u);
  weft::train_test::expect_relative(replicas[0]["train_loss"], serial[0]["train_loss"], 1e-4,
                                    "train loss, 2 replicas against --serial");
  weft::train_test::expect_relative(exact[0]["train_loss"], serial[0]["train_loss"], 1e-4,
                                    "train loss, exact mode against --serial");
  weft::train_test::expect_relative(exact[0]["test_loss"], serial[0]["test_loss"], 1e-4,
                                    "test loss, exact mode against --serial");
  const auto multilevel = train(2,
                                "--model stages --stage-channels 4,8 --stage-steps 2,2 --batch 20 "
                                "--epochs 1 " +
                                    d,
                                dir, "multilevel");
  ASSERT_EQ(multilevel.size(), 1u);
  EXPECT_EQ(multilevel[0]["fwd_levels"], 2);
  const Outcome ev = weft(0, "eval --resume " + ck + " " + d, dir);
  EXPECT_EQ(ev.code, 0) << ev.out << ev.err;
  EXPECT_NE(ev.out.find("20 test images"), std::string::npos) << ev.out;
}

TEST(CifarTrain, DataTheModelsCannotTakeIsOneLineNamingTheProblem) {
  const fs::path dir = work_dir();
  const fs::path c10 = generated(dir, "cifar10", "--classes 2 --per-class 5 --test-per-class 2");
  auto one_line = [&](const std::string& args, int code, const std::string& says) {
    const Outcome r = weft(2, "train --no-progress " + args, dir);
    EXPECT_EQ(r.code, code) << args << "\n" << r.out << r.err;
    const auto lines = r.err_lines();
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_NE(lines[0].find(says), std::string::npos) << lines[0];
  };
  one_line("--model gru --data " + c10.string(), 2, "reads one-channel images");
  one_line("--open copy --data " + c10.string(), 2, "option --open: 'copy' repeats one channel");
  one_line("--label coarse --data " + c10.string(), 2, "option --label: 'coarse' is invalid");
  one_line("--data-format idx --data " + c10.string(), 2, "train-images-idx3-ubyte");
  one_line("--data-format png --data " + c10.string(), 2, "option --data-format");
  one_line("--crop-padding 32 --data " + c10.string(), 2, "an integer in [0, 31]");
  one_line("--normalize 0.5,0.5,0.25 --data " + c10.string(), 2, "an odd count of values");
  one_line("--normalize 0.5,0.5,0.25,0.25 --data " + c10.string(), 2,
           "2 channels given; the images have 3");
  one_line("--normalize 0.5,0 --data " + c10.string(), 2, "option --normalize");
  one_line("--normalize none --resume " + (dir / "nothing").string() + " --data " + c10.string(), 2,
           "the checkpoint's normalization is used");
  // A test file cut short inside a record: named, with the record size.
  fs::resize_file(c10 / "test_batch.bin", fs::file_size(c10 / "test_batch.bin") - 100);
  one_line("--data " + c10.string(), 2, "test_batch.bin: holds");
}

TEST(CifarTrain, Cifar100TrainsOnFineOrCoarseLabelsAndItsCheckpointKeepsTheClasses) {
  const fs::path dir = work_dir();
  const fs::path c100 = generated(dir, "cifar100", "--classes 10 --per-class 4 --test-per-class 1");
  const std::string d = "--data " + c100.string() + " ";
  const std::string ck = (dir / "ck100").string();
  const auto coarse = train(2, kTiny + d + "--label coarse --checkpoint " + ck, dir, "coarse");
  ASSERT_EQ(coarse.size(), 1u);
  EXPECT_EQ(coarse[0]["data_format"], "cifar100");
  EXPECT_EQ(coarse[0]["classes"], 20);
  const auto fine = train(2, kTiny + d + "--normalize 0.5,0.45,0.4,0.25,0.25,0.3", dir, "fine");
  ASSERT_EQ(fine.size(), 1u);
  EXPECT_EQ(fine[0]["classes"], 100);
  const Outcome ev = weft(0, "eval --resume " + ck + " --label coarse " + d, dir);
  EXPECT_EQ(ev.code, 0) << ev.out << ev.err;
  EXPECT_NE(ev.out.find("10 test images"), std::string::npos) << ev.out;
  const Outcome other = weft(0, "eval --resume " + ck + " " + d, dir);
  EXPECT_EQ(other.code, 2) << other.out << other.err;
  EXPECT_NE(other.err.find("has 100 classes; the model of checkpoint"), std::string::npos)
      << other.err;
}

}  // namespace
