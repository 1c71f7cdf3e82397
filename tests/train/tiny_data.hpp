#pragma once
// Small MNIST-format data sets written by the tests themselves (no download, any image size).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace weft::train_test {

inline void write_file(const std::filesystem::path& path, const std::vector<unsigned char>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// An IDX header: the magic number, then one 32-bit size per dimension (big-endian).
inline std::vector<unsigned char> idx_header(std::uint32_t magic,
                                             const std::vector<std::uint32_t>& dims) {
  std::vector<unsigned char> b;
  auto put = [&](std::uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<unsigned char>(v >> s));
  };
  put(magic);
  for (auto d : dims) put(d);
  return b;
}

// A small MNIST-format folder with `n` images of rows x cols, every pixel 7.
inline std::filesystem::path tiny_dataset(const std::filesystem::path& dir, std::uint32_t rows,
                                          std::uint32_t cols, std::uint32_t n = 20) {
  std::filesystem::create_directories(dir);
  for (const char* split : {"train", "t10k"}) {
    auto images = idx_header(0x803, {n, rows, cols});
    images.resize(images.size() + n * rows * cols, 7);
    write_file(dir / (std::string(split) + "-images-idx3-ubyte"), images);
    auto labels = idx_header(0x801, {n});
    for (std::uint32_t i = 0; i < n; ++i) labels.push_back(static_cast<unsigned char>(i % 10));
    write_file(dir / (std::string(split) + "-labels-idx1-ubyte"), labels);
  }
  return dir;
}

}  // namespace weft::train_test
