#pragma once
// What a Trainer's checkpoint says about itself (its metadata), read without LibTorch: the
// model, the examples it takes, the epoch, the data normalization, the optimizer and the
// multilevel training methods' state.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "weft/train/depth_growth.hpp"
#include "weft/train/iteration_control.hpp"
#include "weft/train/mgopt.hpp"
#include "weft/train/model_config.hpp"

namespace weft::train {

/// The per-pixel normalization x' = (x - mean) / std applied to the data (stored so that a
/// resumed run and an evaluation normalize as the training did): one mean and std for every
/// channel, or, when `channel_mean` is not empty, one per channel (channel_mean[c],
/// channel_std[c]; then `mean` and `std` are their averages, for reports).
struct Normalization {
  double mean = 0, std = 1;
  std::vector<double> channel_mean, channel_std;

  bool per_channel() const { return !channel_mean.empty(); }
  /// Channel c's (mean, std).
  double mean_of(std::size_t c) const { return per_channel() ? channel_mean.at(c) : mean; }
  double std_of(std::size_t c) const { return per_channel() ? channel_std.at(c) : std; }
};

/// The shape of one example: rows x cols images, or depth x rows x cols volumes.
struct ExampleShape {
  std::int64_t rows = 0, cols = 0;
  std::int64_t depth = 1;     ///< 1 for images
  std::int64_t channels = 1;  ///< colour channels (3 for CIFAR's RGB)
  bool volume = false;        ///< depth x rows x cols (3-D models)
};

struct CheckpointInfo {
  ModelConfig model;
  ExampleShape example;
  int epoch = 0;  ///< the last epoch trained
  Normalization normalization;
  std::string optimizer;
  /// Nested iteration over depth: the schedule and the level `model` is at (level == K, or no
  /// growth: the full depth).
  DepthGrowth growth;
  int growth_level = 0;
  /// MG/Opt's settings (levels 0: trained without): `weft train --resume` continues with them
  /// unless --mgopt is given.
  MGOpt mgopt;
  /// The iteration controller's state at the end of the epoch (automatic iterations), so that a
  /// resumed run takes the uninterrupted run's decisions.
  std::optional<IterationController::State> iteration_control;
};

/// Reads and checks the metadata of checkpoint `dir` (weft::BadData naming the folder and what
/// is wrong: no metadata, not JSON, a missing or invalid field, a checkpoint of an older
/// network). Local: wrap it in weft::mpi::collectively when every rank reads.
CheckpointInfo read_checkpoint_info(const std::string& dir);

}  // namespace weft::train
