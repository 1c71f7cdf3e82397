#pragma once
// What the `weft train` end-to-end tests share: the Fashion-MNIST location, running
// `weft train` with a metrics file and reading its epoch records, relative comparisons.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.hpp"

namespace weft::train_test {

inline const char* kFashionMnist = "/usr/share/datasets/fashion-mnist";

inline bool have_fashion_mnist() {
  return std::filesystem::exists(std::filesystem::path(kFashionMnist) /
                                 "train-images-idx3-ubyte.gz");
}

/// Tests that train on the installed Fashion-MNIST: skipped where it is not installed.
class FashionMnistTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_fashion_mnist())
      GTEST_SKIP() << "Fashion-MNIST is not installed at " << kFashionMnist;
  }
};

/// One line on stderr naming `mentions`, the exit code, and none of Open MPI's abort banner.
inline void expect_one_line(const cli_test::Outcome& r, int code, const std::string& mentions) {
  EXPECT_EQ(r.code, code) << r.out << r.err;
  EXPECT_EQ(r.err_lines().size(), 1u) << r.err;
  EXPECT_NE(r.err.find(mentions), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("MPI_ABORT"), std::string::npos) << r.err;
}

inline std::vector<nlohmann::json> read_metrics(const std::filesystem::path& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

/// Runs `weft train ARGS --metrics DIR/NAME.jsonl` at `np` ranks (appending to the file when it
/// exists) and returns its epoch records.
inline std::vector<nlohmann::json> train(int np, const std::string& args,
                                         const std::filesystem::path& dir,
                                         const std::string& name) {
  const std::filesystem::path metrics = dir / (name + ".jsonl");
  const cli_test::Outcome r = cli_test::weft(
      np, "train --no-progress --threads 1 " + args + " --metrics " + metrics.string(), dir);
  EXPECT_EQ(r.code, 0) << "weft train " << args << "\n" << r.out << r.err;
  return read_metrics(metrics);
}

inline void expect_relative(double a, double b, double rel, const std::string& what) {
  EXPECT_LE(std::abs(a - b), rel * std::abs(b)) << what << ": " << a << " vs " << b;
}

}  // namespace weft::train_test
