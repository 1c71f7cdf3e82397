#pragma once
// What `weft train` prints while it runs: the progress bar, per-epoch figures and the
// confusion matrix. No LibTorch.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

namespace weft::cli {

/// A progress bar on a terminal (also under mpirun, following mpirun's own output); one line
/// per 20 % in files and pipes.
class Progress {
 public:
  Progress(bool enabled, int epoch, std::int64_t total);
  void update(std::int64_t done, double loss, double accuracy);

 private:
  bool enabled_, tty_;
  int epoch_;
  std::int64_t total_;
  double start_, shown_ = 0;
  std::int64_t next_line_ = 0;
};

/// Mean over batches, skipping the first two (warm-up) when there are more.
double steady_mean(const std::vector<double>& v);
nlohmann::json optional_number(const std::optional<double>& v);
void print_confusion(const std::vector<std::int64_t>& confusion, int classes);

}  // namespace weft::cli
