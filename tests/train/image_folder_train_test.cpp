// Image-file sets end to end: `weft data tiny-imagenet|folder` writes a small generated set in
// the published layout that `weft train --data DIR` recognises, streams from disk and trains on
// at 1-3 ranks (exact mode at 3 ranks equal to --serial, data x layer parallel at 2 equal to it
// too, multilevel MGRIT), with a checkpoint `weft eval` reads at another rank count; bad data is
// one line naming the file.
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

const std::string kTiny = "--model resnet --channels 4 --steps 4 --batch 12 --epochs 1 ";

TEST(ImageFolderTrain, TinyImagenetStreamsAndTrainsLayerParallelExactlyAsSerial) {
  const fs::path dir = work_dir();
  const fs::path data = generated(dir, "tiny-imagenet",
                                  "--classes 3 --per-class 12 --test-per-class 4 --image-size 16");
  const std::string d = "--data " + data.string() + " --image-size 16 ";
  const std::string ck = (dir / "ck").string();
  const auto serial = train(1, kTiny + d + "--serial", dir, "serial");
  ASSERT_EQ(serial.size(), 1u);
  EXPECT_EQ(serial[0]["data_format"], "tiny-imagenet");
  EXPECT_EQ(serial[0]["classes"], 3);
  EXPECT_EQ(serial[0]["streamed"], true);
  EXPECT_EQ(serial[0]["image_size"], "3x16x16");
  EXPECT_EQ(serial[0]["augment"], "crop-flip");  // on by default, as for CIFAR
  const auto exact = train(3, kTiny + d + "--checkpoint " + ck, dir, "exact");
  ASSERT_EQ(exact.size(), 1u);
  const auto replicas = train(2, kTiny + d + "--data-ranks 2", dir, "replicas");
  ASSERT_EQ(replicas.size(), 1u);
  for (const auto* run : {&exact, &replicas}) {
    weft::train_test::expect_relative((*run)[0]["train_loss"], serial[0]["train_loss"], 1e-4,
                                      "train loss against --serial");
    weft::train_test::expect_relative((*run)[0]["test_loss"], serial[0]["test_loss"], 1e-4,
                                      "test loss against --serial");
  }
  const Outcome ev = weft(0, "eval --resume " + ck + " --data " + data.string(), dir);
  EXPECT_EQ(ev.code, 0) << ev.out << ev.err;
  EXPECT_NE(ev.out.find("12 test images"), std::string::npos) << ev.out;
}

TEST(ImageFolderTrain, FolderOfJpegAndPngTrainsMultilevel) {
  const fs::path dir = work_dir();
  const fs::path data =
      generated(dir, "folder", "--classes 2 --per-class 12 --test-per-class 3 --image-size 12");
  const auto multilevel = train(2,
                                "--model stages --stage-channels 4,8 --stage-steps 2,2 --batch 12 "
                                "--epochs 1 --image-size 12 --data " +
                                    data.string(),
                                dir, "multilevel");
  ASSERT_EQ(multilevel.size(), 1u);
  EXPECT_EQ(multilevel[0]["data_format"], "folder");
  EXPECT_EQ(multilevel[0]["fwd_levels"], 2);
}

// The tiny-imagenet preset (TorchBraid's network: the imagenet stem, 4 stages of 3 steps), its
// widths made small: exact mode equals --serial, the checkpoint keeps the stem.
TEST(ImageFolderTrain, TinyImagenetPresetTrainsLayerParallelExactlyAsSerial) {
  const fs::path dir = work_dir();
  const fs::path data = generated(dir, "tiny-imagenet",
                                  "--classes 3 --per-class 8 --test-per-class 2 --image-size 32");
  const std::string net =
      "--model stages --preset tiny-imagenet --stage-channels 4,4,8,8 "
      "--batch 12 --epochs 2 --fwd-levels 1 --bwd-levels 1 --image-size 32 "
      "--data " +
      data.string() + " ";
  const std::string ck = (dir / "ck").string();
  const auto serial = train(1, net + "--serial", dir, "serial");
  const auto exact = train(2, net + "--checkpoint " + ck, dir, "exact");
  ASSERT_EQ(serial.size(), 2u);
  ASSERT_EQ(exact.size(), 2u);
  for (std::size_t e = 0; e < 2; ++e)
    weft::train_test::expect_relative(exact[e]["train_loss"], serial[e]["train_loss"], 1e-4,
                                      "train loss, exact mode against --serial");
  std::ifstream manifest(fs::path(ck) / "manifest.json");
  const nlohmann::json stored = nlohmann::json::parse(manifest)["metadata"]["model"];
  EXPECT_EQ(stored["stem"], "imagenet") << stored.dump();
  EXPECT_EQ(stored["stage_steps"], nlohmann::json({3, 3, 3, 3})) << stored.dump();
  const Outcome ev = weft(2, "eval --resume " + ck + " --data " + data.string(), dir);
  EXPECT_EQ(ev.code, 0) << ev.out << ev.err;
  const Outcome wrong = weft(0, "train --preset tiny-imagenet --model resnet", dir);
  EXPECT_EQ(wrong.code, 2);
  EXPECT_NE(wrong.err.find("option --preset"), std::string::npos) << wrong.err;
}

TEST(ImageFolderTrain, BadDataAndFlagsAreOneLine) {
  const fs::path dir = work_dir();
  const fs::path data = generated(dir, "tiny-imagenet",
                                  "--classes 2 --per-class 4 --test-per-class 2 --image-size 16");
  auto one_line = [&](const std::string& args, int code, const std::string& says) {
    const Outcome r = weft(2, "train --no-progress --threads 1 " + args, dir);
    EXPECT_EQ(r.code, code) << args << "\n" << r.out << r.err;
    const auto lines = r.err_lines();
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_NE(lines[0].find(says), std::string::npos) << lines[0];
  };
  one_line("--image-size 16 --data /usr/share/datasets/fashion-mnist", 2,
           "option --image-size: '16' is invalid");
  one_line("--image-size 4 --data " + data.string(), 2, "option --image-size: '4' is invalid");
  one_line("--check-images --data /usr/share/datasets/fashion-mnist", 2,
           "option --check-images: 'given' is invalid (--data /usr/share/datasets/fashion-mnist "
           "is idx");
  // `weft data --format SET` is the same as `weft data SET`; one of them must be given.
  const Outcome spelled = weft(0,
                               "data --format folder --classes 2 --per-class 1 "
                               "--test-per-class 1 --image-size 8 --out " +
                                   (dir / "f").string(),
                               dir);
  EXPECT_EQ(spelled.code, 0) << spelled.out << spelled.err;
  EXPECT_TRUE(fs::is_directory(dir / "f" / "train" / "class_001"));
  const Outcome none = weft(0, "data --out " + (dir / "g").string(), dir);
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("option --format: '' is invalid (none given)"), std::string::npos)
      << none.err;
  // An image cut short is found before any work (every file's ends are checked when the set is
  // indexed), also with given normalization, which decodes nothing before training: rejected
  // input, one line naming it, exit 2 (docs/errors.md), on every rank.
  std::string wnid;
  std::ifstream(data / "wnids.txt") >> wnid;
  const fs::path image = data / "train" / wnid / "images" / (wnid + "_1.JPEG");
  std::string bytes = weft::cli_test::slurp(image);
  const Outcome intact =
      weft(2,
           "train --no-progress --threads 1 --model resnet --channels 4 --steps 4 "
           "--batch 4 --epochs 1 --check-images --data " +
               data.string(),
           dir);
  EXPECT_EQ(intact.code, 0) << intact.out << intact.err;
  fs::resize_file(image, bytes.size() / 3);
  const std::string given =
      "--model resnet --channels 4 --steps 4 --batch 8 --epochs 1 --normalize 0.5,0.25 "
      "--augment none --data " +
      data.string();
  one_line(given, 2, image.string() + ": a JPEG cut short");
  // Damage inside an image (its ends intact) shows only when it is decoded: with measured
  // normalization before any work (exit 2); with given normalization at the first batch, on the
  // input rank alone (the others load labels only), and every rank ends with that one line
  // (exit 1: the run had started).
  for (std::size_t i = 200; i + 2 < bytes.size(); i += 7) bytes[i] = '\xff';
  std::ofstream(image, std::ios::binary | std::ios::trunc) << bytes;
  one_line("--model resnet --channels 4 --steps 4 --batch 4 --epochs 1 --data " + data.string(), 2,
           image.string());
  one_line(given, 1, image.string());
  // --check-images decodes every file before training (each rank a share): rejected input.
  one_line(given + " --check-images", 2, image.string());
  fs::remove(data / "wnids.txt");
  fs::remove_all(data / "train");
  one_line("--data-format tiny-imagenet --data " + data.string(), 2, "wnids.txt");
}

}  // namespace
