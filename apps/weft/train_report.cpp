#include "train_report.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>

#include "weft/util/clock.hpp"

namespace weft::cli {

namespace {
using weft::clock::now;

// A rank started by Open MPI's mpirun writes into a pseudo-terminal even when mpirun's own
// output goes to a file or a pipe; then mpirun's (the parent's) standard output decides.
bool output_is_terminal() {
  if (isatty(STDOUT_FILENO) == 0) return false;
  if (!std::getenv("OMPI_COMM_WORLD_SIZE")) return true;
  char target[256] = {};
  const std::string link = "/proc/" + std::to_string(getppid()) + "/fd/1";
  const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
  if (n <= 0) return true;  // cannot tell: keep the terminal's bar
  const std::string path(target, static_cast<size_t>(n));
  return path.rfind("/dev/pts/", 0) == 0 || path.rfind("/dev/tty", 0) == 0;
}
}  // namespace

Progress::Progress(bool enabled, int epoch, std::int64_t total)
    : enabled_(enabled), tty_(output_is_terminal()), epoch_(epoch), total_(total), start_(now()) {}

void Progress::update(std::int64_t done, double loss, double accuracy) {
  if (!enabled_) return;
  const double t = now();
  const bool last = done >= total_;
  if (tty_) {
    if (!last && t - shown_ < 0.2) return;
  } else if (!last && done < next_line_) {
    return;
  }
  shown_ = t;
  next_line_ = done + total_ / 5;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / std::max<std::int64_t>(1, total_));
  const std::string bar = std::string(static_cast<size_t>(filled), '#') +
                          std::string(static_cast<size_t>(kWidth - filled), '.');
  const double rate = static_cast<double>(done) / std::max(1e-9, t - start_);
  std::printf("%sepoch %d [%s] %lld/%lld  loss %.4f  acc %.4f  %.0f samples/s%s", tty_ ? "\r" : "",
              epoch_, bar.c_str(), static_cast<long long>(done), static_cast<long long>(total_),
              loss, accuracy, rate, tty_ && !last ? "" : "\n");
  std::fflush(stdout);
}

double steady_mean(const std::vector<double>& v) {
  const size_t skip = v.size() > 2 ? 2 : 0;
  if (v.size() == skip) return 0;
  return std::accumulate(v.begin() + static_cast<long>(skip), v.end(), 0.0) /
         static_cast<double>(v.size() - skip);
}

nlohmann::json optional_number(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

void print_confusion(const std::vector<std::int64_t>& confusion, int classes) {
  std::printf("confusion matrix (rows: true label, columns: predicted)\n      ");
  for (int c = 0; c < classes; ++c) std::printf("%6d", c);
  std::printf("\n");
  for (int r = 0; r < classes; ++r) {
    std::printf("%6d", r);
    for (int c = 0; c < classes; ++c)
      std::printf("%6lld", static_cast<long long>(confusion[static_cast<size_t>(r * classes + c)]));
    std::printf("\n");
  }
}

}  // namespace weft::cli
