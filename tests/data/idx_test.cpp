// IDX reader: small files written by the test (plain and gzip) for parsing and every error
// case, plus the real Fashion-MNIST when the Debian package is installed.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "weft/data/idx.hpp"
#include "weft/util/error.hpp"

namespace fs = std::filesystem;
using weft::data::IdxOptions;
using weft::data::ImageSet;
using weft::data::Split;
using Bytes = std::vector<std::uint8_t>;

namespace {

constexpr std::uint32_t kImagesMagic = 0x00000803;
constexpr std::uint32_t kLabelsMagic = 0x00000801;

void put_be32(Bytes& b, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<std::uint8_t>(v >> shift));
}

Bytes idx(std::uint32_t magic, const std::vector<std::uint32_t>& dims, const Bytes& data) {
  Bytes b;
  put_be32(b, magic);
  for (auto d : dims) put_be32(b, d);
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

void write_plain(const fs::path& p, const Bytes& b) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  ASSERT_TRUE(out.good()) << p;
}

void write_gz(const fs::path& p, const Bytes& b) {
  gzFile f = gzopen(p.c_str(), "wb");
  ASSERT_NE(f, nullptr) << p;
  if (!b.empty()) {
    ASSERT_EQ(gzwrite(f, b.data(), static_cast<unsigned>(b.size())), static_cast<int>(b.size()));
  }
  ASSERT_EQ(gzclose(f), Z_OK);
}

Bytes read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs f, expects weft::BadData and returns its message ("" after recording a failure).
template <class F>
std::string bad_data(F&& f) {
  try {
    f();
  } catch (const weft::BadData& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected weft::BadData, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected weft::BadData, nothing was thrown";
  return "";
}

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "message: " << (text)

// 3 images of 2x4 pixels and their labels.
constexpr std::uint32_t kCount = 3, kRows = 2, kCols = 4;
Bytes sample_pixels() {
  Bytes px(kCount * kRows * kCols);
  for (std::size_t i = 0; i < px.size(); ++i) px[i] = static_cast<std::uint8_t>(i * 37 % 256);
  return px;
}
const Bytes kLabels = {0, 9, 3};

class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "weft_data_test_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path path(const std::string& name) const { return dir_ / name; }
  // Writes the sample set as <stem>-images / <stem>-labels, gzipped when gz is set.
  void write_sample(const std::string& stem, bool gz) {
    const auto write = gz ? write_gz : write_plain;
    const std::string ext = gz ? ".gz" : "";
    write(path(stem + "-images" + ext), idx(kImagesMagic, {kCount, kRows, kCols}, sample_pixels()));
    write(path(stem + "-labels" + ext), idx(kLabelsMagic, {kCount}, kLabels));
  }
  ImageSet load(const std::string& stem, const IdxOptions& o = {}) const {
    return weft::data::load_idx(path(stem + "-images").string(), path(stem + "-labels").string(),
                                o);
  }

  fs::path dir_;
};

TEST_F(IdxTest, ParsesHeaderPixelsAndLabels) {
  write_sample("s", false);
  const ImageSet s = load("s");
  EXPECT_EQ(s.count, 3);
  EXPECT_EQ(s.rows, 2);
  EXPECT_EQ(s.cols, 4);
  EXPECT_EQ(s.pixels, sample_pixels());
  EXPECT_EQ(s.labels, kLabels);
  EXPECT_EQ(weft::data::labels_as_int64(s), (std::vector<std::int64_t>{0, 9, 3}));

  const ImageSet images = weft::data::read_idx_images(path("s-images").string());
  EXPECT_EQ(images.count, 3);
  EXPECT_EQ(images.pixels, sample_pixels());
  EXPECT_TRUE(images.labels.empty());
  EXPECT_EQ(weft::data::read_idx_labels(path("s-labels").string()), kLabels);
}

TEST_F(IdxTest, BigEndianSizes) {
  // 258 = 0x00000102: a little-endian reader would see 0x02010000.
  Bytes px(258 * 1 * 1);
  std::iota(px.begin(), px.end(), std::uint8_t{0});
  write_plain(path("big"), idx(kImagesMagic, {258, 1, 1}, px));
  const ImageSet s = weft::data::read_idx_images(path("big").string());
  EXPECT_EQ(s.count, 258);
  EXPECT_EQ(s.pixels, px);
}

TEST_F(IdxTest, PlainAndGzipGiveIdenticalResults) {
  write_sample("plain", false);
  write_sample("gz", true);
  // "gz-images" does not exist: the reader falls back to "gz-images.gz".
  const ImageSet a = load("plain");
  const ImageSet b = load("gz");
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.cols, b.cols);
  EXPECT_EQ(a.pixels, b.pixels);
  EXPECT_EQ(a.labels, b.labels);
  // An explicit .gz name, and gzip content under a plain name, work too.
  EXPECT_EQ(weft::data::read_idx_images(path("gz-images.gz").string()).pixels, a.pixels);
  fs::copy_file(path("gz-labels.gz"), path("renamed"));
  EXPECT_EQ(weft::data::read_idx_labels(path("renamed").string()), kLabels);
}

TEST_F(IdxTest, PlainFileWinsOverGz) {
  write_sample("s", false);
  write_gz(path("s-labels.gz"), idx(kLabelsMagic, {3}, {1, 1, 1}));
  EXPECT_EQ(load("s").labels, kLabels);
}

TEST_F(IdxTest, LimitReadsAPrefix) {
  for (bool gz : {false, true}) {
    write_sample(gz ? "gz" : "plain", gz);
    IdxOptions o;
    o.limit = 2;
    ImageSet s = load(gz ? "gz" : "plain", o);
    EXPECT_EQ(s.count, 2);
    const Bytes all = sample_pixels();
    EXPECT_EQ(s.pixels, Bytes(all.begin(), all.begin() + 2 * 8));
    EXPECT_EQ(s.labels, Bytes({0, 9}));
    o.limit = 0;
    s = load(gz ? "gz" : "plain", o);
    EXPECT_EQ(s.count, 0);
    EXPECT_TRUE(s.pixels.empty());
    EXPECT_TRUE(s.labels.empty());
    o.limit = 100;  // more than there is: everything
    EXPECT_EQ(load(gz ? "gz" : "plain", o).count, 3);
  }
}

TEST_F(IdxTest, MissingFile) {
  const std::string p = path("nothing-here").string();
  const std::string msg = bad_data([&] { weft::data::read_idx_images(p); });
  EXPECT_CONTAINS(msg, "missing file");
  EXPECT_CONTAINS(msg, p);
  EXPECT_CONTAINS(msg, p + ".gz");
  write_sample("s", false);
  fs::remove(path("s-labels"));
  EXPECT_CONTAINS(bad_data([&] { load("s"); }), "s-labels: missing file");
}

TEST_F(IdxTest, BadMagicNumber) {
  write_plain(path("img"), idx(0x00000903, {1, 1, 1}, {0}));  // signed-byte type code
  std::string msg = bad_data([&] { weft::data::read_idx_images(path("img").string()); });
  EXPECT_CONTAINS(msg, "bad magic number 0x00000903");
  EXPECT_CONTAINS(msg, "0x00000803");
  EXPECT_CONTAINS(msg, path("img").string());

  write_gz(path("lab.gz"), idx(0x12345678, {1}, {0}));
  msg = bad_data([&] { weft::data::read_idx_labels(path("lab").string()); });
  EXPECT_CONTAINS(msg, "bad magic number 0x12345678");
  EXPECT_CONTAINS(msg, "0x00000801");
  EXPECT_CONTAINS(msg, path("lab.gz").string());
}

TEST_F(IdxTest, WrongNumberOfDimensions) {
  // Label and image files swapped: valid IDX, wrong rank.
  write_sample("s", false);
  std::string msg = bad_data([&] { weft::data::read_idx_images(path("s-labels").string()); });
  EXPECT_CONTAINS(msg, "wrong number of dimensions: 1");
  EXPECT_CONTAINS(msg, "s-labels");
  msg = bad_data([&] { weft::data::read_idx_labels(path("s-images").string()); });
  EXPECT_CONTAINS(msg, "wrong number of dimensions: 3");
}

// Found by fuzz/idx_fuzz.cpp: rows * cols of two sizes near 2^32 overflowed 63 bits.
TEST_F(IdxTest, ImageSizesWhoseProductOverflowsAreTooLarge) {
  write_plain(path("huge"), idx(kImagesMagic, {1, 0xffffffffu, 0xffffffffu}, Bytes{1, 2, 3}));
  EXPECT_CONTAINS(bad_data([&] { weft::data::read_idx_images(path("huge").string()); }),
                  "header sizes too large");
}

TEST_F(IdxTest, TruncatedData) {
  for (bool gz : {false, true}) {
    const auto write = gz ? write_gz : write_plain;
    Bytes px = sample_pixels();
    px.resize(px.size() - 5);
    write(path("img"), idx(kImagesMagic, {kCount, kRows, kCols}, px));
    std::string msg = bad_data([&] { weft::data::read_idx_images(path("img").string()); });
    EXPECT_CONTAINS(msg, "truncated data");
    EXPECT_CONTAINS(msg, "header promises 24 bytes of data");
    EXPECT_CONTAINS(msg, "only 19 follow the header");

    write(path("lab"), idx(kLabelsMagic, {5}, kLabels));
    msg = bad_data([&] { weft::data::read_idx_labels(path("lab").string()); });
    EXPECT_CONTAINS(msg, "truncated data");

    // Header cut inside the dimension sizes, and an empty file.
    write(path("hdr"), Bytes{0, 0, 8, 3, 0, 0, 0, 1, 0, 0});
    EXPECT_CONTAINS(bad_data([&] { weft::data::read_idx_images(path("hdr").string()); }),
                    "truncated header");
    write(path("empty"), Bytes{});
    EXPECT_CONTAINS(bad_data([&] { weft::data::read_idx_labels(path("empty").string()); }),
                    "truncated header");
  }
}

TEST_F(IdxTest, TruncatedGzipStream) {
  write_sample("s", true);
  Bytes gz = read_file(path("s-images.gz"));
  gz.resize(gz.size() / 2);
  write_plain(path("cut-images.gz"), gz);
  const std::string msg =
      bad_data([&] { weft::data::read_idx_images(path("cut-images").string()); });
  EXPECT_CONTAINS(msg, "cut-images.gz");
  EXPECT_CONTAINS(msg, "gzip");
}

TEST_F(IdxTest, CorruptGzipStream) {
  write_sample("s", true);
  const Bytes good = read_file(path("s-images.gz"));
  ASSERT_GT(good.size(), 18u);

  // The first deflate byte right after the 10-byte gzip header: block type 3 is reserved.
  Bytes bad = good;
  bad[10] = 0xff;
  write_plain(path("bad-block.gz"), bad);
  std::string msg = bad_data([&] { weft::data::read_idx_images(path("bad-block.gz").string()); });
  EXPECT_CONTAINS(msg, "corrupt gzip stream");
  EXPECT_CONTAINS(msg, "bad-block.gz");

  // A wrong CRC in the trailer: the data inflate fine, the check at the end of the stream fails.
  bad = good;
  bad[bad.size() - 8] ^= 0x01;
  write_plain(path("bad-crc.gz"), bad);
  msg = bad_data([&] { weft::data::read_idx_images(path("bad-crc.gz").string()); });
  EXPECT_CONTAINS(msg, "corrupt gzip stream");
}

TEST_F(IdxTest, ImageLabelCountMismatch) {
  write_plain(path("s-images"), idx(kImagesMagic, {kCount, kRows, kCols}, sample_pixels()));
  write_plain(path("s-labels"), idx(kLabelsMagic, {2}, {0, 1}));
  const std::string msg = bad_data([&] { load("s"); });
  EXPECT_CONTAINS(msg, "image/label count mismatch");
  EXPECT_CONTAINS(msg, "3 images");
  EXPECT_CONTAINS(msg, "2 labels");
  // Also when only a prefix is wanted: the files disagree either way.
  IdxOptions o;
  o.limit = 1;
  EXPECT_CONTAINS(bad_data([&] { load("s", o); }), "count mismatch");
}

TEST_F(IdxTest, LabelOutOfRange) {
  write_plain(path("lab"), idx(kLabelsMagic, {4}, {0, 9, 10, 3}));
  std::string msg = bad_data([&] { weft::data::read_idx_labels(path("lab").string()); });
  EXPECT_CONTAINS(msg, "label value 10 at index 2 out of range");
  EXPECT_CONTAINS(msg, "0..9");
  EXPECT_CONTAINS(msg, path("lab").string());

  write_plain(path("lab3"), idx(kLabelsMagic, {3}, {0, 2, 1}));
  IdxOptions o;
  o.num_classes = 3;
  EXPECT_EQ(weft::data::read_idx_labels(path("lab3").string(), o), Bytes({0, 2, 1}));
  o.num_classes = 2;
  msg = bad_data([&] { weft::data::read_idx_labels(path("lab3").string(), o); });
  EXPECT_CONTAINS(msg, "label value 2 at index 1");
  EXPECT_CONTAINS(msg, "0..1");

  o.num_classes = 0;
  EXPECT_THROW(weft::data::read_idx_labels(path("lab3").string(), o), weft::InvalidOption);
}

TEST_F(IdxTest, WrongImageSize) {
  write_sample("s", false);
  IdxOptions o;
  o.rows = 2;
  o.cols = 4;
  EXPECT_EQ(load("s", o).count, 3);
  o.cols = 5;
  std::string msg = bad_data([&] { load("s", o); });
  EXPECT_CONTAINS(msg, "wrong image size 2x4 (expected 2x5)");
  EXPECT_CONTAINS(msg, "s-images");

  // load_mnist_split insists on 28x28.
  write_sample("train", false);
  fs::rename(path("train-images"), path("train-images-idx3-ubyte"));
  fs::rename(path("train-labels"), path("train-labels-idx1-ubyte"));
  msg = bad_data([&] { weft::data::load_mnist_split(dir_.string(), Split::Train); });
  EXPECT_CONTAINS(msg, "wrong image size 2x4 (expected 28x28)");

  write_plain(path("zero"), idx(kImagesMagic, {1, 0, 3}, {}));
  EXPECT_CONTAINS(bad_data([&] { weft::data::read_idx_images(path("zero").string()); }),
                  "wrong image size 0x3");
}

TEST_F(IdxTest, LoadMnistSplitUsesStandardNames) {
  Bytes px(5 * 28 * 28);
  for (std::size_t i = 0; i < px.size(); ++i) px[i] = static_cast<std::uint8_t>(i % 251);
  write_gz(path("train-images-idx3-ubyte.gz"), idx(kImagesMagic, {5, 28, 28}, px));
  write_gz(path("train-labels-idx1-ubyte.gz"), idx(kLabelsMagic, {5}, {4, 3, 2, 1, 0}));
  write_plain(path("t10k-images-idx3-ubyte"), idx(kImagesMagic, {2, 28, 28}, Bytes(2 * 784, 7)));
  write_plain(path("t10k-labels-idx1-ubyte"), idx(kLabelsMagic, {2}, {8, 9}));

  const ImageSet train = weft::data::load_mnist_split(dir_.string(), Split::Train);
  EXPECT_EQ(train.count, 5);
  EXPECT_EQ(train.pixels, px);
  EXPECT_EQ(train.labels, Bytes({4, 3, 2, 1, 0}));
  const ImageSet some = weft::data::load_mnist_split(dir_.string(), Split::Train, 3);
  EXPECT_EQ(some.count, 3);
  EXPECT_EQ(some.labels, Bytes({4, 3, 2}));
  const ImageSet test = weft::data::load_mnist_split(dir_.string(), Split::Test);
  EXPECT_EQ(test.count, 2);
  EXPECT_EQ(test.labels, Bytes({8, 9}));
  EXPECT_EQ(weft::data::images_file(Split::Test), "t10k-images-idx3-ubyte");
  EXPECT_EQ(weft::data::labels_file(Split::Train), "train-labels-idx1-ubyte");
}

TEST(IdxToFloat, Normalises) {
  ImageSet s;
  s.count = 1;
  s.rows = 1;
  s.cols = 3;
  s.pixels = {0, 51, 255};
  const std::vector<float> f = weft::data::to_float(s, 0.5f, 0.25f);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_FLOAT_EQ(f[0], -2.0f);
  EXPECT_FLOAT_EQ(f[1], (0.2f - 0.5f) / 0.25f);
  EXPECT_FLOAT_EQ(f[2], 2.0f);
  EXPECT_FLOAT_EQ(weft::data::to_float(s, 0.0f, 1.0f)[1], 0.2f);
  EXPECT_THROW(weft::data::to_float(s, 0.0f, 0.0f), weft::InvalidOption);
}

// The real data set (Debian package dataset-fashion-mnist).
TEST(FashionMnist, RealFiles) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::is_directory(dir)) GTEST_SKIP() << dir << " not installed";

  const ImageSet train = weft::data::load_mnist_split(dir, Split::Train);
  const ImageSet test = weft::data::load_mnist_split(dir, Split::Test);
  for (const auto* s : {&train, &test}) {
    EXPECT_EQ(s->rows, 28);
    EXPECT_EQ(s->cols, 28);
    EXPECT_EQ(s->pixels.size(), static_cast<std::size_t>(s->count * 28 * 28));
    ASSERT_EQ(s->labels.size(), static_cast<std::size_t>(s->count));
    // Fashion-MNIST is exactly balanced.
    std::vector<std::int64_t> per_class(10, 0);
    for (auto l : s->labels) ++per_class.at(l);
    for (auto n : per_class) EXPECT_EQ(n, s->count / 10);
  }
  EXPECT_EQ(train.count, 60000);
  EXPECT_EQ(test.count, 10000);

  // Checksums computed once with Python's gzip module from the same files.
  const auto sum = [](auto first, auto last) { return std::accumulate(first, last, 0LL); };
  EXPECT_EQ(sum(train.labels.begin(), train.labels.begin() + 100), 412);
  EXPECT_EQ(sum(test.labels.begin(), test.labels.begin() + 100), 428);
  EXPECT_EQ(sum(train.pixels.begin(), train.pixels.begin() + 784), 76247);  // first image
  EXPECT_EQ(sum(test.pixels.begin(), test.pixels.begin() + 784), 33456);
  EXPECT_EQ(sum(train.pixels.begin(), train.pixels.end()), 3431114169LL);
  EXPECT_EQ(sum(test.pixels.begin(), test.pixels.end()), 573469082LL);

  // The published normalisation constants match the training pixels.
  double s1 = 0, s2 = 0;
  for (auto p : train.pixels) {
    const double v = p / 255.0;
    s1 += v;
    s2 += v * v;
  }
  const double n = static_cast<double>(train.pixels.size());
  const double mean = s1 / n;
  EXPECT_NEAR(mean, weft::data::kFashionMnistMean, 1e-4);
  EXPECT_NEAR(std::sqrt(s2 / n - mean * mean), weft::data::kFashionMnistStd, 1e-4);

  const ImageSet few = weft::data::load_mnist_split(dir, Split::Train, 100);
  EXPECT_EQ(few.count, 100);
  EXPECT_TRUE(std::equal(few.pixels.begin(), few.pixels.end(), train.pixels.begin()));
}

}  // namespace
