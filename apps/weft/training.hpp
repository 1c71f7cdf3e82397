#pragma once
// `weft train` and `weft eval` behind a LibTorch-free interface: the subcommand files parse
// flags into these structs; training.cpp hands them to the library's Trainer (weft/train).
#include <mpi.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "weft/nn/options.hpp"
#include "weft/train/model_config.hpp"

namespace weft::cli {

using train::ModelConfig;

struct TrainConfig {
  ModelConfig model;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::int64_t batch = 50;
  int epochs = 2;
  std::int64_t train_size = -1;  ///< -1: the whole training set
  std::int64_t test_size = -1;
  std::string optimizer = "adam";  ///< sgd | adam
  double lr = 1e-3;
  /// constant | cosine: lr · (1 + cos(π k / K)) / 2 at global batch k of K = epochs × batches
  /// per epoch (a function of the batch index only, so resumed runs follow the same curve).
  std::string lr_schedule = "constant";
  double momentum = 0.9;
  int threads = 0;      ///< torch intra-op threads per rank; 0: cores / ranks
  bool serial = false;  ///< plain sequential LibTorch training (rank 0), the reference
  int data_ranks = 1;   ///< replicas of P / data_ranks layer-parallel ranks each
  nn::LayerParallelOptions parallel;
  std::string metrics_path;
  std::string trace_path;          ///< --trace: a timeline of a few batches (docs/tracing.md)
  std::int64_t trace_batches = 4;  ///< traced batches, after the first two of the run
  std::string checkpoint_dir;
  std::string resume_dir;
  /// The flags given on the command line among those a checkpoint fixes (--channels, --steps,
  /// --T, --open, --seed, --optimizer): with --resume each must match the checkpoint.
  std::set<std::string> given;
  bool progress = true;
};

struct EvalConfig {
  std::string resume_dir;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::int64_t test_size = -1;
  std::int64_t batch = 500;
  int threads = 0;
  std::string json_path;
};

/// Collective over `comm`; returns the exit code. Throws weft errors (see cli_support.hpp).
int run_training(const TrainConfig& config, MPI_Comm comm);
int run_evaluation(const EvalConfig& config, MPI_Comm comm);

}  // namespace weft::cli
