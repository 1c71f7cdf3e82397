#pragma once
// Runs the real `weft` binary from a test (under mpiexec, or directly as an MPI singleton) and
// captures its exit code and output. The including target defines WEFT_CLI_BINARY, WEFT_MPIEXEC
// and WEFT_CLI_WORKDIR.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace weft::cli_test {

namespace fs = std::filesystem;

struct Outcome {
  int code = -1;
  std::string out, err;
  std::vector<std::string> err_lines() const {
    std::vector<std::string> lines;
    std::istringstream in(err);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) lines.push_back(line);
    return lines;
  }
};

inline std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh directory per test for the files a run writes.
inline fs::path work_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "." + info->name();
  std::replace(name.begin(), name.end(), '/', '_');
  const fs::path dir = fs::path(WEFT_CLI_WORKDIR) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Runs `weft ARGS` on `np` ranks (mpiexec -q: no launcher banners), capturing both streams;
// np = 0 starts the binary directly (an MPI singleton: fast, and no launcher at all).
inline Outcome weft(int np, const std::string& args, const fs::path& dir) {
  static int counter = 0;  // one counter per test binary is enough: files go to per-test dirs
  const std::string tag = std::to_string(counter++);
  const fs::path out = dir / ("stdout" + tag), err = dir / ("stderr" + tag);
  const std::string launcher =
      np == 0 ? std::string()
              : std::string(WEFT_MPIEXEC) + " -q --oversubscribe -np " + std::to_string(np) + " ";
  const std::string cmd =
      launcher + WEFT_CLI_BINARY + " " + args + " > " + out.string() + " 2> " + err.string();
  const int status = std::system(cmd.c_str());
  Outcome r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace weft::cli_test
