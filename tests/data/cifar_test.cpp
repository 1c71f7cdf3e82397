// CIFAR-10 / CIFAR-100 binary files: records written byte by byte in the published layout
// (label byte(s), then 1024 red, 1024 green, 1024 blue bytes), read back; the writer's bytes;
// short files; every bad-data case names the file; the generated sets.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "weft/data/cifar.hpp"
#include "weft/util/error.hpp"

namespace fs = std::filesystem;
using weft::data::CifarLabel;
using weft::data::CifarOptions;
using weft::data::CifarVersion;
using weft::data::ImageSet;
using weft::data::Split;
using Bytes = std::vector<std::uint8_t>;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("weft_cifar_test_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write_file(const fs::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

Bytes read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// Record n: its label byte(s), then pixel (c, y, x) = (n + 7c + 3y + x) mod 256.
Bytes record(int n, const Bytes& labels) {
  Bytes r = labels;
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x)
        r.push_back(static_cast<std::uint8_t>((n + 7 * c + 3 * y + x) % 256));
  return r;
}

std::uint8_t pixel(const ImageSet& s, int n, int c, int y, int x) {
  return s.pixels[static_cast<size_t>(((n * 3 + c) * 32 + y) * 32 + x)];
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const weft::BadData& e) {
    return e.what();
  }
  return "";
}

TEST(Cifar, ReadsTheCifar10BatchesInOrderAsChannelMajorImages) {
  const fs::path dir = fresh_dir("c10");
  // Batch b holds b records (fewer than published: read as they are), labels n % 10.
  int n = 0;
  for (int b = 1; b <= 5; ++b) {
    Bytes bytes;
    for (int k = 0; k < b; ++k, ++n) {
      const Bytes r = record(n, {static_cast<std::uint8_t>(n % 10)});
      bytes.insert(bytes.end(), r.begin(), r.end());
    }
    write_file(dir / ("data_batch_" + std::to_string(b) + ".bin"), bytes);
  }
  write_file(dir / "test_batch.bin", record(99, {4}));
  EXPECT_TRUE(weft::data::holds_cifar(dir.string(), CifarVersion::Cifar10));
  EXPECT_FALSE(weft::data::holds_cifar(dir.string(), CifarVersion::Cifar100));

  const ImageSet train = weft::data::read_cifar(dir.string(), CifarVersion::Cifar10, Split::Train);
  ASSERT_EQ(train.count, 15);
  EXPECT_EQ(train.channels, 3);
  EXPECT_EQ(train.rows, 32);
  EXPECT_EQ(train.cols, 32);
  EXPECT_EQ(train.image_size(), 3072);
  ASSERT_EQ(train.pixels.size(), 15u * 3072u);
  for (int i = 0; i < 15; ++i) {
    EXPECT_EQ(train.labels[static_cast<size_t>(i)], i % 10);
    EXPECT_EQ(pixel(train, i, 0, 0, 0), i % 256);
    EXPECT_EQ(pixel(train, i, 2, 5, 9), (i + 14 + 15 + 9) % 256);  // blue, row 5, column 9
  }
  const ImageSet test = weft::data::read_cifar(dir.string(), CifarVersion::Cifar10, Split::Test);
  ASSERT_EQ(test.count, 1);
  EXPECT_EQ(test.labels[0], 4);
  EXPECT_EQ(pixel(test, 0, 1, 31, 31), (99 + 7 + 93 + 31) % 256);

  CifarOptions limited;
  limited.limit = 4;  // across the first two batches
  const ImageSet four =
      weft::data::read_cifar(dir.string(), CifarVersion::Cifar10, Split::Train, limited);
  EXPECT_EQ(four.count, 4);
  EXPECT_EQ(four.labels, Bytes({0, 1, 2, 3}));

  // The writer produces the same bytes, spreading the records over the five batches.
  const fs::path copy = fresh_dir("c10_copy");
  weft::data::write_cifar(copy.string(), CifarVersion::Cifar10, Split::Test, test);
  EXPECT_EQ(read_file(copy / "test_batch.bin"), read_file(dir / "test_batch.bin"));
  weft::data::write_cifar(copy.string(), CifarVersion::Cifar10, Split::Train, train);
  Bytes all, again;
  for (int b = 1; b <= 5; ++b) {
    const std::string name = "data_batch_" + std::to_string(b) + ".bin";
    const Bytes original = read_file(dir / name), written = read_file(copy / name);
    all.insert(all.end(), original.begin(), original.end());
    again.insert(again.end(), written.begin(), written.end());
    EXPECT_EQ(written.size(), 3u * 3073u) << name;  // 15 records, 3 per batch
  }
  EXPECT_EQ(again, all);
}

TEST(Cifar, ReadsCifar100WithFineOrCoarseLabels) {
  const fs::path dir = fresh_dir("c100");
  Bytes train;
  for (int n = 0; n < 3; ++n) {
    const Bytes r =
        record(n, {static_cast<std::uint8_t>(19 - n), static_cast<std::uint8_t>(90 + n)});
    train.insert(train.end(), r.begin(), r.end());
  }
  write_file(dir / "train.bin", train);
  write_file(dir / "test.bin", record(5, {2, 11}));
  EXPECT_TRUE(weft::data::holds_cifar(dir.string(), CifarVersion::Cifar100));
  const ImageSet fine = weft::data::read_cifar(dir.string(), CifarVersion::Cifar100, Split::Train);
  EXPECT_EQ(fine.labels, Bytes({90, 91, 92}));
  EXPECT_EQ(pixel(fine, 2, 0, 0, 1), 3);
  CifarOptions coarse;
  coarse.label = CifarLabel::Coarse;
  EXPECT_EQ(
      weft::data::read_cifar(dir.string(), CifarVersion::Cifar100, Split::Train, coarse).labels,
      Bytes({19, 18, 17}));
  EXPECT_EQ(weft::data::cifar_classes(CifarVersion::Cifar100, CifarLabel::Coarse), 20);

  const fs::path copy = fresh_dir("c100_copy");
  weft::data::write_cifar(copy.string(), CifarVersion::Cifar100, Split::Train, fine, {19, 18, 17});
  EXPECT_EQ(read_file(copy / "train.bin"), train);
}

TEST(Cifar, BadFilesAreNamedWithWhatIsWrong) {
  const fs::path dir = fresh_dir("bad");
  write_file(dir / "train.bin", record(0, {1, 2}));
  std::string m = message_of(
      [&] { weft::data::read_cifar(dir.string(), CifarVersion::Cifar100, Split::Test); });
  EXPECT_NE(m.find("test.bin"), std::string::npos) << m;
  EXPECT_NE(m.find("cannot open"), std::string::npos) << m;

  Bytes truncated = record(0, {1, 2});
  truncated.pop_back();
  write_file(dir / "test.bin", truncated);
  m = message_of(
      [&] { weft::data::read_cifar(dir.string(), CifarVersion::Cifar100, Split::Test); });
  EXPECT_NE(m.find("test.bin: holds 3073 bytes, not a whole number of 3074-byte cifar100 records"),
            std::string::npos)
      << m;

  write_file(dir / "test.bin", record(0, {20, 5}));  // coarse label 20 of 0..19
  CifarOptions coarse;
  coarse.label = CifarLabel::Coarse;
  m = message_of(
      [&] { weft::data::read_cifar(dir.string(), CifarVersion::Cifar100, Split::Test, coarse); });
  EXPECT_NE(m.find("record 0 has label 20; accepted: 0..19"), std::string::npos) << m;
  EXPECT_NO_THROW(weft::data::read_cifar(dir.string(), CifarVersion::Cifar100, Split::Test));

  write_file(dir / "test_batch.bin", record(0, {10}));  // CIFAR-10 labels are 0..9
  m = message_of([&] { weft::data::read_cifar(dir.string(), CifarVersion::Cifar10, Split::Test); });
  EXPECT_NE(m.find("test_batch.bin: record 0 has label 10"), std::string::npos) << m;
  m = message_of(
      [&] { weft::data::read_cifar(dir.string(), CifarVersion::Cifar10, Split::Train); });
  EXPECT_NE(m.find("data_batch_1.bin"), std::string::npos) << m;

  ImageSet wrong;
  wrong.count = 1;
  wrong.rows = wrong.cols = 28;
  wrong.pixels.resize(784);
  wrong.labels = {0};
  EXPECT_THROW(weft::data::write_cifar(dir.string(), CifarVersion::Cifar10, Split::Test, wrong),
               weft::InvalidOption);
}

TEST(Cifar, GeneratedSetsHaveThePublishedLayoutBalancedClassesAndDependOnTheSeedAlone) {
  for (const CifarVersion version : {CifarVersion::Cifar10, CifarVersion::Cifar100}) {
    const std::string name = weft::data::to_string(version);
    const fs::path a = fresh_dir(name + "_a"), b = fresh_dir(name + "_b");
    const int classes = version == CifarVersion::Cifar10 ? 10 : 25;
    weft::data::write_generated_cifar(a.string(), version, 3, 2, classes, 5);
    weft::data::write_generated_cifar(b.string(), version, 3, 2, classes, 5);
    ASSERT_TRUE(weft::data::holds_cifar(a.string(), version)) << name;
    const ImageSet train = weft::data::read_cifar(a.string(), version, Split::Train);
    const ImageSet test = weft::data::read_cifar(a.string(), version, Split::Test);
    EXPECT_EQ(train.count, 3 * classes) << name;
    EXPECT_EQ(test.count, 2 * classes) << name;
    std::vector<int> per_class(static_cast<size_t>(classes));
    for (std::uint8_t l : train.labels) ++per_class.at(l);
    for (int c : per_class) EXPECT_EQ(c, 3) << name;
    for (const Split split : {Split::Train, Split::Test})
      for (const std::string& file : weft::data::cifar_files(version, split))
        EXPECT_EQ(read_file(a / file), read_file(b / file)) << name << " " << file;
    if (version == CifarVersion::Cifar100) {
      CifarOptions coarse;
      coarse.label = CifarLabel::Coarse;
      const ImageSet c = weft::data::read_cifar(a.string(), version, Split::Train, coarse);
      for (std::int64_t n = 0; n < c.count; ++n)
        EXPECT_EQ(c.labels[static_cast<size_t>(n)], train.labels[static_cast<size_t>(n)] / 5);
    }
  }
  EXPECT_THROW(weft::data::write_generated_cifar(fresh_dir("x").string(), CifarVersion::Cifar10, 1,
                                                 1, 11, 1),
               weft::InvalidOption);
}

}  // namespace
