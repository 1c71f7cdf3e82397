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
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace weft::cli_test {

namespace fs = std::filesystem;
using json = nlohmann::json;

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

// Open MPI as root and oversubscribed, one thread per rank, for every run the tests start.
class MpiRunEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 0);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
    setenv("OMP_NUM_THREADS", "1", 0);
  }
};
inline const auto* const kMpiRunEnvironment =
    ::testing::AddGlobalTestEnvironment(new MpiRunEnvironment);

// `weft mgrit ARGS --json DIR/NAME.json` on `np` ranks: expects success, returns the JSON.
inline nlohmann::json mgrit_json(int np, const std::string& args, const fs::path& dir,
                                 const std::string& name, Outcome* outcome = nullptr) {
  const fs::path path = dir / (name + ".json");
  const Outcome r = weft(np, "mgrit " + args + " --json " + path.string(), dir);
  EXPECT_EQ(r.code, 0) << "weft mgrit " << args << "\nstdout:\n" << r.out << "stderr:\n" << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  if (outcome) *outcome = r;
  if (r.code != 0) return json();
  return json::parse(slurp(path));
}

struct Csv {
  std::vector<std::string> header;
  std::vector<std::vector<double>> rows;
};

inline Csv read_csv(const fs::path& path) {
  Csv csv;
  std::ifstream in(path);
  auto split = [](const std::string& text) {
    std::vector<std::string> items;
    std::istringstream s(text);
    for (std::string item; std::getline(s, item, ',');) items.push_back(item);
    return items;
  };
  std::string line;
  if (!std::getline(in, line)) return csv;
  csv.header = split(line);
  while (std::getline(in, line)) {
    std::vector<double> row;
    for (const auto& item : split(line)) row.push_back(std::stod(item));
    csv.rows.push_back(row);
  }
  return csv;
}

/// One line on stderr naming `mentions`, the exit code, and none of Open MPI's abort banner.
inline void expect_one_line(const Outcome& r, int code, const std::string& mentions) {
  EXPECT_EQ(r.code, code) << r.out << r.err;
  EXPECT_EQ(r.err_lines().size(), 1u) << r.err;
  EXPECT_NE(r.err.find(mentions), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("MPI_ABORT"), std::string::npos) << r.err;
}

}  // namespace weft::cli_test
