#pragma once
// What a Trainer reports while it runs. It prints nothing itself: front ends (the CLI's
// progress bar, epoch lines and metrics file; a user's logger) observe these events. No
// LibTorch.
//
// Every rank that trains receives every event (with `serial`, rank 0 alone); `rank` is the
// rank in the Trainer's communicator, so an observer that prints does so where rank == 0.
// Observers may throw: an exception from run_started, epoch_done, evaluation_done or
// checkpoint_written on any rank ends the run on every rank with that error (agreed with
// weft::mpi::collectively); batch_done runs on the hot path and must not throw.
#include <cstdint>
#include <string>
#include <vector>

#include "weft/train/metrics.hpp"

namespace weft::train {

struct RunStarted {
  int rank = 0;
  int start_epoch = 1, epochs = 1;  ///< epochs start_epoch..epochs run (resume starts later)
  std::int64_t train_examples = 0, test_examples = 0;
  std::int64_t batches_per_epoch = 0;
  int ranks = 1;        ///< all ranks
  int layer_ranks = 1;  ///< ranks per replica
  int replicas = 1;
  bool serial = false;
  int torch_threads = 1;  ///< per rank
  /// The chain layers each rank of a replica holds (empty: serial or a recurrent model), and
  /// with TrainerOptions::balance_cost the seconds of measured step cost they add up to.
  std::vector<std::int64_t> layers_per_rank;
  std::vector<double> cost_per_rank;
};

struct EpochStarted {
  int rank = 0;
  int epoch = 0;
  std::int64_t examples = 0;  ///< in the epoch
};

struct BatchDone {
  int rank = 0;
  int epoch = 0;
  std::int64_t batch = 0;                   ///< within the epoch
  std::int64_t global_batch = 0;            ///< (epoch - 1) x batches per epoch + batch
  std::int64_t seen = 0;                    ///< examples of the epoch so far
  std::int64_t examples = 0;                ///< in the epoch
  double loss = 0, correct = 0;             ///< this batch: mean loss, correct predictions
  double mean_loss = 0, mean_accuracy = 0;  ///< the epoch so far
  double learning_rate = 0;
};

struct EvaluationDone {
  int rank = 0;
  int epoch = 0;
  Evaluation evaluation;
};

struct EpochDone {
  int rank = 0;
  EpochMetrics metrics;
};

struct CheckpointWritten {
  int rank = 0;
  int epoch = 0;
  std::string dir;
};

struct TraceWritten {
  int rank = 0;
  std::string path;
};

/// Nested iteration over depth: the network was refined before epoch `epoch`.
struct DepthRefined {
  int rank = 0;
  int epoch = 0;
  int level = 0;                              ///< the new level (1..K)
  std::int64_t from_steps = 0, to_steps = 0;  ///< residual steps, all stages
};

/// Sent before the Trainer throws weft::train::Diverged.
struct DivergenceFound {
  int rank = 0;
  int epoch = 0;
  std::int64_t batch = 0;
  double loss = 0;
};

class Observer {
 public:
  virtual ~Observer() = default;
  virtual void run_started(const RunStarted&) {}
  virtual void epoch_started(const EpochStarted&) {}
  virtual void batch_done(const BatchDone&) {}
  virtual void evaluation_done(const EvaluationDone&) {}
  virtual void epoch_done(const EpochDone&) {}
  virtual void checkpoint_written(const CheckpointWritten&) {}
  virtual void trace_written(const TraceWritten&) {}
  virtual void divergence(const DivergenceFound&) {}
  virtual void depth_refined(const DepthRefined&) {}
};

}  // namespace weft::train
