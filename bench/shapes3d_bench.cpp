// Time to generate the shapes3d benchmark on one core: the default set (4000 training + 1000
// test samples of 32^3 voxels) by default, or `shapes3d_bench TRAIN TEST SIZE REPEATS`.
// Prints the medians of the repeats, wall clock and this process's CPU time (the figure that
// holds on a busy machine): generation only, then writing the gzip IDX files.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "weft/data/shapes3d.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t train = argc > 1 ? std::atoll(argv[1]) : 4000;
  const std::int64_t test = argc > 2 ? std::atoll(argv[2]) : 1000;
  const std::int64_t size = argc > 3 ? std::atoll(argv[3]) : 32;
  const int repeats = argc > 4 ? std::atoi(argv[4]) : 3;
  const std::string dir = (std::filesystem::temp_directory_path() / "weft-shapes3d-bench").string();
  std::vector<double> generate, write, generate_cpu;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    auto start = std::chrono::steady_clock::now();
    const std::clock_t cpu = std::clock();
    for (const auto split : {weft::data::Split::Train, weft::data::Split::Test}) {
      weft::data::Shapes3dOptions o;
      o.count = split == weft::data::Split::Train ? train : test;
      o.size = size;
      o.split = split;
      const auto set = weft::data::generate_shapes3d(o);
      if (set.pixels.empty() && o.count > 0) return 1;
    }
    generate.push_back(seconds_since(start));
    generate_cpu.push_back(static_cast<double>(std::clock() - cpu) / CLOCKS_PER_SEC);
    start = std::chrono::steady_clock::now();
    weft::data::write_shapes3d(dir, train, test, size, 1);
    write.push_back(seconds_since(start) - generate.back());  // writing = total - generation
  }
  std::filesystem::remove_all(dir);
  const double voxels = static_cast<double>(train + test) * static_cast<double>(size * size * size);
  std::printf(
      "shapes3d %lld + %lld samples of %lld^3: generate %.2f s wall, %.2f s CPU (%.0f Mvoxel per "
      "CPU second); write gzip %.2f s wall (medians of %d)\n",
      static_cast<long long>(train), static_cast<long long>(test), static_cast<long long>(size),
      median(generate), median(generate_cpu), voxels / median(generate_cpu) / 1e6, median(write),
      static_cast<int>(generate.size()));
  return 0;
}
