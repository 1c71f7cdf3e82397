// libFuzzer harness: any bytes as an IDX image file and as an IDX label file (plain or gzip).
// Every problem must be a weft::BadData naming the file; nothing may crash, leak into undefined
// behaviour or allocate what the header merely claims.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "weft/data/idx.hpp"
#include "weft/util/error.hpp"

namespace {
std::string scratch_file() {
  static const std::string path = "/tmp/weft-fuzz-idx-" + std::to_string(getpid());
  return path;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = scratch_file();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  weft::data::IdxOptions options;
  options.limit = size > 0 && (data[0] & 1) ? 3 : -1;  // limited reads stop early
  try {
    weft::data::read_idx_images(path, options);
  } catch (const weft::BadData&) {
  }
  try {
    weft::data::read_idx_labels(path, options);
  } catch (const weft::BadData&) {
  }
  return 0;
}
