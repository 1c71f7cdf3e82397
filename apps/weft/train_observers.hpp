#pragma once
// What `weft train` prints and writes while the library's Trainer runs: observers of its
// events (weft/train/observer.hpp) for the run's header, the progress bar, the epoch lines,
// the `--metrics` JSON lines and the trace notice; and the confusion matrix of `weft eval`.
// No LibTorch.
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "training.hpp"
#include "weft/train/observer.hpp"

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

/// The data as the header names it.
struct DataText {
  std::string size;    ///< "28x28", "16x16x16"
  std::string folder;  ///< where it was read
  std::int64_t rows = 0, cols = 0;
  std::string reader;  ///< "idx, 10 classes", "cifar100 coarse labels, 20 classes"
  std::string augmentation = "none";
};

/// The console on rank 0: the header, the progress bar (unless --no-progress), one line per
/// epoch, the trace notice.
class ConsoleReport : public train::Observer {
 public:
  ConsoleReport(const TrainConfig& config, DataText data);
  void run_started(const train::RunStarted& e) override;
  void epoch_started(const train::EpochStarted& e) override;
  void batch_done(const train::BatchDone& e) override;
  void epoch_done(const train::EpochDone& e) override;
  void trace_written(const train::TraceWritten& e) override;
  void depth_refined(const train::DepthRefined& e) override;

 private:
  const TrainConfig& config_;
  DataText data_;
  std::unique_ptr<Progress> progress_;
};

/// --metrics: one JSON line per epoch on rank 0, appended when the run resumes.
class MetricsFile : public train::Observer {
 public:
  /// `data` (a JSON object) is added to every line: what the data is.
  MetricsFile(std::string path, nlohmann::json data)
      : path_(std::move(path)), data_(std::move(data)) {}
  void run_started(const train::RunStarted& e) override;
  void epoch_done(const train::EpochDone& e) override;

 private:
  std::string path_;
  nlohmann::json data_;
  std::ofstream out_;
};

void print_confusion(const std::vector<std::int64_t>& confusion, int classes);

}  // namespace weft::cli
