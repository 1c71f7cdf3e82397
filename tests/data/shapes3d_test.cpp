// The shapes3d generator: determinism (bytes depend on the seed and split only), balanced
// classes, shapes that are non-empty and inside the grid, the noise fraction, bad options; and
// the IDX round trip of volumes (idx4), with the reader's checks staying strict.
#include "weft/data/shapes3d.hpp"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "weft/data/idx.hpp"
#include "weft/util/error.hpp"

namespace fs = std::filesystem;
using weft::data::ImageSet;
using weft::data::Shapes3dOptions;
using weft::data::Split;

namespace {

ImageSet generate(std::int64_t count, std::int64_t size, std::uint64_t seed,
                  Split split = Split::Train, double noise = 0.005) {
  Shapes3dOptions o;
  o.count = count;
  o.size = size;
  o.seed = seed;
  o.split = split;
  o.noise_voxels = noise;
  return weft::data::generate_shapes3d(o);
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("weft-shapes3d-test-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(Shapes3d, TheSameSeedGivesIdenticalBytesAndAnotherSeedOrSplitDiffers) {
  const ImageSet a = generate(20, 12, 7), b = generate(20, 12, 7);
  EXPECT_EQ(a.pixels, b.pixels);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(generate(20, 12, 8).pixels, a.pixels);
  EXPECT_NE(generate(20, 12, 7, Split::Test).pixels, a.pixels);
}

// FNV-1a of the bytes: a pinned fingerprint of the generator's output.
std::uint64_t fingerprint(const std::vector<std::uint8_t>& bytes) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::uint8_t b : bytes) h = (h ^ b) * 0x100000001b3ULL;
  return h;
}

// The bytes are pinned, so a compiler, standard library or platform that generated other data
// fails here. A deliberate change of the generator must change this value together with
// kGeneratorVersion in src/data/shapes3d_cache.cpp (the cache folder's name).
TEST(Shapes3d, TheBytesOfASmallSetArePinned) {
  const ImageSet s = generate(20, 12, 1);
  EXPECT_EQ(fingerprint(s.pixels), 0x857caaaf712ab1c5ULL) << std::hex << fingerprint(s.pixels);
  EXPECT_EQ(fingerprint(generate(20, 12, 1, Split::Test).pixels), 0x6f3a8b9ed059987cULL)
      << std::hex << fingerprint(generate(20, 12, 1, Split::Test).pixels);
}

TEST(Shapes3d, AShorterSetIsAPrefixOfALongerOne) {
  const ImageSet shorter = generate(7, 10, 3), longer = generate(23, 10, 3);
  ASSERT_EQ(shorter.pixels.size(), 7u * 1000u);
  EXPECT_TRUE(std::equal(shorter.pixels.begin(), shorter.pixels.end(), longer.pixels.begin()));
}

TEST(Shapes3d, ClassesAreBalancedAndEveryPrefixIsWithinOne) {
  const ImageSet s = generate(53, 8, 1);
  ASSERT_EQ(s.count, 53);
  EXPECT_EQ(s.spatial_dims, 3);
  EXPECT_EQ(s.depth, 8);
  EXPECT_EQ(s.rows, 8);
  EXPECT_EQ(s.cols, 8);
  ASSERT_EQ(s.labels.size(), 53u);
  const auto classes = weft::data::shapes3d_classes().size();
  ASSERT_GE(classes, 8u);
  std::vector<int> per_class(classes, 0);
  for (std::uint8_t l : s.labels) {
    ASSERT_LT(l, classes);
    ++per_class[l];
  }
  const auto [lo, hi] = std::minmax_element(per_class.begin(), per_class.end());
  EXPECT_LE(*hi - *lo, 1);
}

// Without noise voxels: every sample has covered voxels, and the outermost layer of the grid
// stays empty (the shape lies inside the grid, whatever its pose and scale).
TEST(Shapes3d, EveryShapeIsNonEmptyAndInsideTheGrid) {
  for (const std::int64_t size : {8, 16}) {
    const ImageSet s = generate(40, size, 5, Split::Train, 0.0);
    const std::int64_t voxels = size * size * size;
    for (std::int64_t n = 0; n < s.count; ++n) {
      const std::uint8_t* v = s.pixels.data() + n * voxels;
      std::int64_t covered = 0, border = 0;
      for (std::int64_t k = 0; k < size; ++k)
        for (std::int64_t j = 0; j < size; ++j)
          for (std::int64_t i = 0; i < size; ++i) {
            const std::uint8_t x = v[(k * size + j) * size + i];
            if (x > 0) ++covered;
            const bool edge = std::min({i, j, k}) == 0 || std::max({i, j, k}) == size - 1;
            if (edge && x != 0) ++border;
          }
      EXPECT_GT(covered, size / 2)
          << "sample " << n << " (class " << int{s.labels[n]} << ") at size " << size;
      EXPECT_EQ(border, 0) << "sample " << n << " touches the border at size " << size;
    }
  }
}

// The noise voxels are the only difference between a set with and without them (the other
// random draws come first), and their share is the requested fraction.
TEST(Shapes3d, NoiseVoxelsReplaceTheRequestedFraction) {
  const ImageSet clean = generate(10, 16, 2, Split::Train, 0.0);
  const ImageSet noisy = generate(10, 16, 2, Split::Train, 0.02);
  std::int64_t changed = 0;
  for (size_t i = 0; i < clean.pixels.size(); ++i) changed += clean.pixels[i] != noisy.pixels[i];
  const double fraction = static_cast<double>(changed) / static_cast<double>(clean.pixels.size());
  EXPECT_GT(fraction, 0.015);
  EXPECT_LT(fraction, 0.025);
}

TEST(Shapes3d, BadOptionsThrowNamingTheField) {
  EXPECT_THROW(generate(-1, 8, 1), weft::InvalidOption);
  EXPECT_THROW(generate(1, 3, 1), weft::InvalidOption);
  EXPECT_THROW(generate(1, 257, 1), weft::InvalidOption);
  try {
    generate(1, 8, 1, Split::Train, 1.5);
    FAIL() << "no exception";
  } catch (const weft::InvalidOption& e) {
    EXPECT_EQ(e.option(), "noise_voxels");
  }
}

TEST(IdxVolumes, WrittenVolumesReadBackIdenticallyPlainAndGzip) {
  const fs::path dir = fresh_dir("roundtrip");
  const ImageSet s = generate(11, 9, 4);
  for (const std::string ext : {"", ".gz"}) {
    const std::string images = (dir / ("v-idx4" + ext)).string();
    const std::string labels = (dir / ("l-idx1" + ext)).string();
    weft::data::write_idx(s, images, labels);
    weft::data::IdxOptions o;
    o.spatial_dims = 3;
    const ImageSet back = weft::data::load_idx(images, labels, o);
    EXPECT_EQ(back.count, 11);
    EXPECT_EQ(back.spatial_dims, 3);
    EXPECT_EQ(back.depth, 9);
    EXPECT_EQ(back.rows, 9);
    EXPECT_EQ(back.cols, 9);
    EXPECT_EQ(back.pixels, s.pixels);
    EXPECT_EQ(back.labels, s.labels);
    o.limit = 4;
    EXPECT_EQ(weft::data::load_idx(images, labels, o).pixels.size(), 4u * 729u);
  }
}

TEST(IdxVolumes, TheReaderInsistsOnTheKindAndSizeItWasAskedFor) {
  const fs::path dir = fresh_dir("strict");
  const ImageSet volumes = generate(3, 8, 4);
  const std::string v = (dir / "v").string(), l = (dir / "l").string();
  weft::data::write_idx(volumes, v, l);
  // A volume file read as images, an image file read as volumes: wrong number of dimensions.
  EXPECT_THROW(weft::data::load_idx(v, l), weft::BadData);
  ImageSet images;
  images.count = 2;
  images.rows = 3;
  images.cols = 4;
  images.pixels.assign(24, 9);
  images.labels = {1, 2};
  const std::string i2 = (dir / "i2").string(), l2 = (dir / "l2").string();
  weft::data::write_idx(images, i2, l2);
  EXPECT_EQ(weft::data::load_idx(i2, l2).pixels, images.pixels);
  weft::data::IdxOptions o;
  o.spatial_dims = 3;
  try {
    weft::data::load_idx(i2, l2, o);
    FAIL() << "no exception";
  } catch (const weft::BadData& e) {
    EXPECT_NE(std::string(e.what()).find("wrong number of dimensions"), std::string::npos)
        << e.what();
  }
  o.depth = 7;
  EXPECT_THROW(weft::data::load_idx(v, l, o), weft::BadData);  // depth 8, not 7
  // Truncated body.
  fs::resize_file(v, fs::file_size(v) - 5);
  o.depth = 0;
  EXPECT_THROW(weft::data::load_idx(v, l, o), weft::BadData);
  o.spatial_dims = 4;
  EXPECT_THROW(weft::data::load_idx(v, l, o), weft::InvalidOption);
  // Pixels that do not match the counts are refused by the writer.
  images.pixels.pop_back();
  EXPECT_THROW(weft::data::write_idx(images, i2, l2), weft::InvalidOption);
}

TEST(IdxVolumes, WriteShapes3dWritesBothSplitsUnderTheStandardNames) {
  const fs::path dir = fresh_dir("split");
  weft::data::write_shapes3d(dir.string(), 12, 6, 8, 9);
  weft::data::IdxOptions o;
  o.spatial_dims = 3;
  o.depth = o.rows = o.cols = 8;
  const ImageSet train = weft::data::load_idx((dir / "train-images-idx4-ubyte.gz").string(),
                                              (dir / "train-labels-idx1-ubyte.gz").string(), o);
  const ImageSet test = weft::data::load_idx((dir / "t10k-images-idx4-ubyte").string(),
                                             (dir / "t10k-labels-idx1-ubyte").string(), o);
  EXPECT_EQ(train.pixels, generate(12, 8, 9, Split::Train).pixels);
  EXPECT_EQ(test.pixels, generate(6, 8, 9, Split::Test).pixels);
}

}  // namespace
