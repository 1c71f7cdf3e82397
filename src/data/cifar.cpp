// CIFAR-10 / CIFAR-100 binary files (weft/data/cifar.hpp).
#include "weft/data/cifar.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "generated_patterns.hpp"
#include "weft/util/error.hpp"

namespace weft::data {

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kPixels = kCifarChannels * kCifarSide * kCifarSide;

[[noreturn]] void bad(const std::string& path, const std::string& why) {
  throw BadData(path + ": " + why);
}

std::int64_t label_bytes(CifarVersion v) {
  return v == CifarVersion::Cifar10 ? 1 : 2;
}

}  // namespace

std::string to_string(CifarVersion version) {
  return version == CifarVersion::Cifar10 ? "cifar10" : "cifar100";
}

int cifar_classes(CifarVersion version, CifarLabel label) {
  if (version == CifarVersion::Cifar10) return 10;
  return label == CifarLabel::Fine ? 100 : 20;
}

std::int64_t cifar_record_bytes(CifarVersion version) {
  return label_bytes(version) + kPixels;
}

std::vector<std::string> cifar_files(CifarVersion version, Split split) {
  if (version == CifarVersion::Cifar100) return {split == Split::Train ? "train.bin" : "test.bin"};
  if (split == Split::Test) return {"test_batch.bin"};
  std::vector<std::string> files;
  for (int b = 1; b <= 5; ++b) files.push_back("data_batch_" + std::to_string(b) + ".bin");
  return files;
}

bool holds_cifar(const std::string& dir, CifarVersion version) {
  std::error_code ec;
  for (const Split split : {Split::Train, Split::Test})
    if (!fs::is_regular_file(fs::path(dir) / cifar_files(version, split).front(), ec)) return false;
  return true;
}

ImageSet read_cifar(const std::string& dir, CifarVersion version, Split split,
                    const CifarOptions& options) {
  ImageSet set;
  set.channels = kCifarChannels;
  set.rows = set.cols = kCifarSide;
  const std::int64_t record = cifar_record_bytes(version);
  const int classes = cifar_classes(version, options.label);
  set.classes = classes;
  // CIFAR-100: byte 0 is the coarse label, byte 1 the fine one.
  const std::int64_t label_at =
      version == CifarVersion::Cifar100 && options.label == CifarLabel::Fine ? 1 : 0;
  std::vector<char> buffer(static_cast<std::size_t>(record));
  for (const std::string& name : cifar_files(version, split)) {
    if (options.limit >= 0 && set.count >= options.limit) break;
    const std::string path = (fs::path(dir) / name).string();
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in)
      bad(path, std::string("cannot open it (") + std::strerror(errno) + "); a " +
                    to_string(version) + " folder holds " +
                    (version == CifarVersion::Cifar10
                         ? "data_batch_1.bin .. data_batch_5.bin and test_batch.bin"
                         : "train.bin and test.bin"));
    const auto bytes = static_cast<std::int64_t>(in.tellg());
    if (bytes < 0 || bytes % record != 0)
      bad(path, "holds " + std::to_string(bytes) + " bytes, not a whole number of " +
                    std::to_string(record) + "-byte " + to_string(version) + " records");
    in.seekg(0);
    std::int64_t records = bytes / record;
    if (options.limit >= 0) records = std::min(records, options.limit - set.count);
    set.pixels.reserve(static_cast<std::size_t>((set.count + records) * kPixels));
    for (std::int64_t r = 0; r < records; ++r) {
      if (!in.read(buffer.data(), record))
        bad(path, "cannot read record " + std::to_string(r) + " (" + std::strerror(errno) + ")");
      const auto label = static_cast<std::uint8_t>(buffer[static_cast<std::size_t>(label_at)]);
      if (label >= classes)
        bad(path, "record " + std::to_string(r) + " has label " + std::to_string(label) +
                      "; accepted: 0.." + std::to_string(classes - 1));
      set.labels.push_back(label);
      const char* pixels = buffer.data() + label_bytes(version);
      set.pixels.insert(set.pixels.end(), pixels, pixels + kPixels);
    }
    set.count += records;
  }
  return set;
}

void write_cifar(const std::string& dir, CifarVersion version, Split split, const ImageSet& set,
                 const std::vector<std::uint8_t>& coarse) {
  if (set.channels != kCifarChannels || set.rows != kCifarSide || set.cols != kCifarSide ||
      set.depth != 1)
    throw InvalidOption("write_cifar", "set", "holds images that are not 3x32x32");
  if (static_cast<std::int64_t>(set.labels.size()) != set.count ||
      static_cast<std::int64_t>(set.pixels.size()) != set.count * kPixels ||
      (version == CifarVersion::Cifar100 && static_cast<std::int64_t>(coarse.size()) != set.count))
    throw InvalidOption("write_cifar", "set",
                        "has pixels, labels or coarse labels that do not match its count " +
                            std::to_string(set.count));
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::vector<std::string> files = cifar_files(version, split);
  const auto parts = static_cast<std::int64_t>(files.size());
  std::int64_t next = 0;
  for (std::int64_t f = 0; f < parts; ++f) {
    const std::int64_t count = set.count / parts + (f < set.count % parts ? 1 : 0);
    const std::string path = (fs::path(dir) / files[static_cast<std::size_t>(f)]).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    for (std::int64_t n = next; n < next + count; ++n) {
      const auto i = static_cast<std::size_t>(n);
      if (version == CifarVersion::Cifar100) out.put(static_cast<char>(coarse[i]));
      out.put(static_cast<char>(set.labels[i]));
      out.write(reinterpret_cast<const char*>(set.pixels.data()) + n * kPixels, kPixels);
    }
    next += count;
    out.flush();
    if (!out) bad(path, std::string("cannot write it (") + std::strerror(errno) + ")");
  }
}

void write_generated_cifar(const std::string& dir, CifarVersion version,
                           std::int64_t train_per_class, std::int64_t test_per_class, int classes,
                           std::uint64_t seed) {
  const int most = cifar_classes(version, CifarLabel::Fine);
  if (classes < 2 || classes > most)
    throw InvalidOption(
        "write_generated_cifar", "classes",
        std::to_string(classes) + " is invalid; accepted: 2.." + std::to_string(most));
  if (train_per_class < 1 || test_per_class < 1)
    throw InvalidOption("write_generated_cifar", "per_class", "must be at least 1 for both splits");
  for (const Split split : {Split::Train, Split::Test}) {
    Random random{seed * 0x2545f4914f6cdd1dULL + (split == Split::Train ? 1 : 2)};
    const std::int64_t per_class = split == Split::Train ? train_per_class : test_per_class;
    ImageSet set;
    set.channels = kCifarChannels;
    set.rows = set.cols = kCifarSide;
    set.count = per_class * classes;
    set.pixels.resize(static_cast<std::size_t>(set.count * kPixels));
    std::vector<std::uint8_t> coarse;
    for (std::int64_t n = 0; n < set.count; ++n) {
      const int k = static_cast<int>(n % classes);
      set.labels.push_back(static_cast<std::uint8_t>(k));
      coarse.push_back(static_cast<std::uint8_t>(k / 5));
      draw_stripes(k, kCifarSide, random, set.pixels.data() + n * kPixels);
    }
    write_cifar(dir, version, split, set,
                version == CifarVersion::Cifar100 ? coarse : std::vector<std::uint8_t>{});
  }
}

}  // namespace weft::data
