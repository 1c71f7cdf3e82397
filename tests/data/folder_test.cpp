// A data folder read by its layout (weft/data/folder.hpp): each format detected from the files
// the writers put there, read back equal to the format's own reader, and the errors that name
// the folder or file.
#include "weft/data/folder.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "weft/data/cifar.hpp"
#include "weft/data/shapes3d.hpp"
#include "weft/data/shapes3d_cache.hpp"
#include "weft/util/error.hpp"

namespace {

namespace fs = std::filesystem;
using weft::data::FolderFormat;
using weft::data::ImageSet;
using weft::data::Split;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("weft_folder_test_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string error_of(const std::string& dir, Split split) {
  try {
    weft::data::read_folder(dir, split);
  } catch (const weft::BadData& e) {
    return e.what();
  }
  return "no error";
}

TEST(Folder, IdxImagesAreTheDefaultLayout) {
  const fs::path dir = fresh_dir("idx");
  ImageSet set;
  set.count = 3;
  set.rows = 2;
  set.cols = 4;
  set.pixels = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23};
  set.labels = {7, 0, 9};
  for (const Split split : {Split::Train, Split::Test})
    weft::data::write_idx(set, (dir / weft::data::images_file(split)).string(),
                          (dir / weft::data::labels_file(split)).string());
  EXPECT_EQ(weft::data::detect_format(dir.string()), FolderFormat::Idx);
  EXPECT_EQ(weft::data::to_string(FolderFormat::Idx), "idx");
  const ImageSet read = weft::data::read_folder(dir.string(), Split::Test);
  EXPECT_EQ(read.count, 3);
  EXPECT_EQ(read.pixels, set.pixels);
  EXPECT_EQ(read.labels, set.labels);
  weft::data::FolderOptions two;
  two.limit = 2;
  EXPECT_EQ(weft::data::read_folder(dir.string(), Split::Train, two).count, 2);
  EXPECT_EQ(read.classes, 10);
}

TEST(Folder, VolumesAndCifarAreRecognisedByTheirFiles) {
  const fs::path shapes = fresh_dir("shapes3d");
  weft::data::write_shapes3d(shapes.string(), 4, 2, 4, 1);
  EXPECT_EQ(weft::data::detect_format(shapes.string(), Split::Test), FolderFormat::IdxVolumes);
  const ImageSet volumes = weft::data::read_folder(shapes.string(), Split::Test);
  EXPECT_EQ(volumes.spatial_dims, 3);
  EXPECT_EQ(volumes.count, 2);

  const fs::path cifar10 = fresh_dir("cifar10");
  weft::data::write_generated_cifar(cifar10.string(), weft::data::CifarVersion::Cifar10, 2, 1, 3,
                                    5);
  EXPECT_EQ(weft::data::detect_format(cifar10.string()), FolderFormat::Cifar10);
  const ImageSet rgb = weft::data::read_folder(cifar10.string(), Split::Train);
  const ImageSet direct =
      weft::data::read_cifar(cifar10.string(), weft::data::CifarVersion::Cifar10, Split::Train);
  EXPECT_EQ(rgb.channels, 3);
  EXPECT_EQ(rgb.count, 6);
  EXPECT_EQ(rgb.pixels, direct.pixels);
  EXPECT_EQ(rgb.labels, direct.labels);

  const fs::path cifar100 = fresh_dir("cifar100");
  weft::data::write_generated_cifar(cifar100.string(), weft::data::CifarVersion::Cifar100, 1, 1, 4,
                                    5);
  EXPECT_EQ(weft::data::detect_format(cifar100.string()), FolderFormat::Cifar100);
  const ImageSet fine = weft::data::read_folder(cifar100.string(), Split::Train);
  EXPECT_EQ(fine.classes, 100);
  EXPECT_EQ(fine.labels, (std::vector<std::uint8_t>{0, 1, 2, 3}));
  weft::data::FolderOptions coarse;
  coarse.label = weft::data::CifarLabel::Coarse;
  const ImageSet twenty = weft::data::read_folder(cifar100.string(), Split::Train, coarse);
  EXPECT_EQ(twenty.classes, 20);
  EXPECT_EQ(twenty.labels, (std::vector<std::uint8_t>{0, 0, 0, 0})) << "fine / 5";
  EXPECT_EQ(rgb.classes, 10);
}

TEST(Folder, ErrorsNameTheFolderOrTheFile) {
  const fs::path dir = fresh_dir("errors");
  const fs::path file = dir / "not-a-folder";
  std::ofstream(file) << "x";
  EXPECT_NE(error_of(file.string(), Split::Train).find("is a file, not a folder"),
            std::string::npos);
  const std::string missing = error_of((dir / "missing").string(), Split::Train);
  EXPECT_NE(missing.find("train-images-idx3-ubyte"), std::string::npos) << missing;
  // A format given instead of detected: the reader's own files are missing.
  const fs::path cifar = fresh_dir("forced");
  weft::data::write_generated_cifar(cifar.string(), weft::data::CifarVersion::Cifar10, 1, 1, 2, 1);
  weft::data::FolderOptions idx;
  idx.format = weft::data::parse_folder_format("idx");
  try {
    weft::data::read_folder(cifar.string(), Split::Train, idx);
    ADD_FAILURE() << "read IDX files from a CIFAR folder";
  } catch (const weft::BadData& e) {
    EXPECT_NE(std::string(e.what()).find("train-images-idx3-ubyte"), std::string::npos) << e.what();
  }
  EXPECT_THROW(weft::data::parse_folder_format("jpeg"), weft::InvalidOption);
}

// The cached generated set: written once, reused as it is, regenerated when a file is damaged,
// each step told to the caller.
TEST(Shapes3dCache, GeneratesOnceReusesAndRepairs) {
  const fs::path root = fresh_dir("cache");
  const weft::data::Shapes3dSpec spec{4, 2, 4, 3};
  std::vector<std::pair<std::string, bool>> heard;
  auto notice = [&](const std::string& line, bool warning) { heard.emplace_back(line, warning); };
  const std::string dir = weft::data::ensure_shapes3d_cache(root.string(), spec, notice);
  EXPECT_EQ(dir, weft::data::shapes3d_cache_folder(root.string(), spec));
  EXPECT_EQ(fs::path(dir).filename(), "shapes3d-v1-4-4-2-seed3");
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_NE(heard[0].first.find("generating the shapes3d set into"), std::string::npos);
  EXPECT_FALSE(heard[0].second);
  EXPECT_EQ(weft::data::read_folder(dir, Split::Train).count, 4);

  const auto stamp = fs::last_write_time(fs::path(dir) / "train-labels-idx1-ubyte.gz");
  weft::data::ensure_shapes3d_cache(root.string(), spec, notice);
  EXPECT_EQ(heard.size(), 1u) << "a sound set is reused silently";
  EXPECT_EQ(fs::last_write_time(fs::path(dir) / "train-labels-idx1-ubyte.gz"), stamp);

  std::ofstream(fs::path(dir) / "t10k-labels-idx1-ubyte.gz", std::ios::trunc) << "damaged";
  weft::data::ensure_shapes3d_cache(root.string(), spec, notice);
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_NE(heard[1].first.find("damaged"), std::string::npos) << heard[1].first;
  EXPECT_TRUE(heard[1].second);
  EXPECT_EQ(weft::data::read_folder(dir, Split::Test).count, 2);
}

}  // namespace
