// A rank that dies (SIGKILL) in the middle of a 2- or 4-rank job, in `weft train` and in
// `weft mgrit`: the job must end within 10 s with a non-zero exit, and no rank may be left
// running (no orphan).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_runner.hpp"
#include "tiny_data.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using weft::cli_test::slurp;
using weft::cli_test::work_dir;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The children of `parent` (the launcher's ranks) with their OMPI_COMM_WORLD_RANK.
std::vector<std::pair<pid_t, int>> ranks_of(pid_t parent) {
  std::vector<std::pair<pid_t, int>> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...: comm may hold spaces, so parse after the last ')'.
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid != parent) continue;
    const std::string env = slurp(entry.path() / "environ");
    const std::string key = std::string("OMPI_COMM_WORLD_RANK=");
    const auto at = env.find(key);
    if (at == std::string::npos) continue;
    out.emplace_back(static_cast<pid_t>(std::stoi(name)), std::atoi(env.c_str() + at + key.size()));
  }
  return out;
}

bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  return line.substr(line.rfind(')') + 2, 1) != "Z";
}

// Starts `mpiexec -np NP weft ARGS`, waits until every rank runs and `ready` holds, kills the
// last rank, and checks how the job ends. Call it inside ASSERT_NO_FATAL_FAILURE: its ASSERTs
// end only this helper. Whatever way it ends, no process of the job is left running.
void kill_one_rank(int np, const std::string& args, const fs::path& dir,
                   const std::function<bool()>& ready) {
  const fs::path out = dir / ("out" + std::to_string(np)), err = dir / ("err" + std::to_string(np));
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    setpgid(0, 0);
    const std::string cmd = std::string("exec ") + WEFT_MPIEXEC + " -q --oversubscribe -np " +
                            std::to_string(np) + " " + WEFT_CLI_BINARY + " " + args + " > " +
                            out.string() + " 2> " + err.string();
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::vector<std::pair<pid_t, int>> ranks;
  // On an early return (a failed ASSERT) the job must not outlive the test.
  struct Reaper {
    pid_t launcher;
    const std::vector<std::pair<pid_t, int>>& ranks;
    ~Reaper() {
      int status = 0;
      if (waitpid(launcher, &status, WNOHANG) != 0) return;
      kill(-launcher, SIGKILL);
      for (const auto& entry : ranks) kill(entry.first, SIGKILL);
      waitpid(launcher, &status, 0);
    }
  } reaper{launcher, ranks};
  const auto start = Clock::now();
  while (seconds_since(start) < 90) {
    ranks = ranks_of(launcher);
    if (static_cast<int>(ranks.size()) == np && ready()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  int status = 0;
  ASSERT_EQ(static_cast<int>(ranks.size()), np) << "ranks never started";
  ASSERT_EQ(waitpid(launcher, &status, WNOHANG), 0) << "the job ended before a rank was killed";
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // well inside the work
  pid_t victim = 0;
  for (const auto& [pid, rank] : ranks)
    if (rank == np - 1) victim = pid;
  ASSERT_NE(victim, 0);
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  const auto killed = Clock::now();
  pid_t done = 0;
  while (seconds_since(killed) < 10 && (done = waitpid(launcher, &status, WNOHANG)) == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double took = seconds_since(killed);
  if (done == 0) {  // leave nothing behind for the next test
    kill(-launcher, SIGKILL);
    for (const auto& [pid, rank] : ranks) kill(pid, SIGKILL);
    waitpid(launcher, &status, 0);
  }
  ASSERT_EQ(done, launcher) << "the job still runs " << took << " s after rank " << np - 1
                            << " died";
  EXPECT_TRUE(!WIFEXITED(status) || WEXITSTATUS(status) != 0) << "exit status 0 after a death";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (const auto& [pid, rank] : ranks) {
    EXPECT_FALSE(alive(pid)) << "rank " << rank << " (pid " << pid << ") outlived the job";
    if (alive(pid)) kill(pid, SIGKILL);
  }
}

TEST(DeadRank, EndsATrainingJobWithin10Seconds) {
  const fs::path dir = work_dir();
  const std::string data = weft::train_test::tiny_dataset(dir / "data", 28, 28).string();
  for (int np : {2, 4}) {
    const fs::path out = dir / ("out" + std::to_string(np));
    ASSERT_NO_FATAL_FAILURE(kill_one_rank(
        np, "train --no-progress --threads 1 --steps 4 --channels 2 --epochs 100000 --data " + data,
        dir, [&]() { return slurp(out).find("epoch 1:") != std::string::npos; }))
        << np << " ranks";
  }
}

TEST(DeadRank, EndsAnMgritJobWithin10Seconds) {
  const fs::path dir = work_dir();
  for (int np : {2, 4})
    ASSERT_NO_FATAL_FAILURE(kill_one_rank(
        np, "mgrit --nx 129 --nt 200000 --tol 0 --max-iter 100000", dir, []() { return true; }))
        << np << " ranks";
}

}  // namespace
