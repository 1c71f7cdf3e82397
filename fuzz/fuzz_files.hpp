#pragma once
// What the libFuzzer harnesses share: writing an input as the file a reader opens.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace weft::fuzz {

/// Writes `size` bytes to `path` (silently nothing when it cannot be opened).
inline void write_bytes(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
}

}  // namespace weft::fuzz
