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
#include "expect.hpp"

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

using cli_test::expect_one_line;

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

using test_support::expect_relative;

/// `weft data SET SIZES --out DIR/SET`: a generated set in SET's published layout.
inline std::filesystem::path generated(const std::filesystem::path& dir, const std::string& set,
                                       const std::string& sizes) {
  const std::filesystem::path data = dir / set;
  const cli_test::Outcome r =
      cli_test::weft(0, "data " + set + " " + sizes + " --out " + data.string(), dir);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  return data;
}

}  // namespace weft::train_test
