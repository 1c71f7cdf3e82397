// libFuzzer harness: any bytes as the test file of a CIFAR-10 and of a CIFAR-100 folder. Every
// problem must be a weft::BadData naming the file; nothing may crash or read past a record.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "fuzz_files.hpp"
#include "weft/data/cifar.hpp"
#include "weft/util/error.hpp"

namespace {
std::string scratch_dir() {
  static const std::string dir = [] {
    const std::string d = "/tmp/weft-fuzz-cifar-" + std::to_string(getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string dir = scratch_dir();
  weft::fuzz::write_bytes(dir + "/test_batch.bin", data, size);
  weft::fuzz::write_bytes(dir + "/test.bin", data, size);
  weft::data::CifarOptions options;
  options.limit = size > 0 && (data[0] & 1) ? 2 : -1;  // limited reads stop early
  options.label =
      size > 1 && (data[1] & 1) ? weft::data::CifarLabel::Coarse : weft::data::CifarLabel::Fine;
  for (const auto version : {weft::data::CifarVersion::Cifar10, weft::data::CifarVersion::Cifar100})
    try {
      weft::data::read_cifar(dir, version, weft::data::Split::Test, options);
    } catch (const weft::BadData&) {
    }
  return 0;
}
