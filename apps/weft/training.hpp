#pragma once
// `weft train` and `weft eval` behind a LibTorch-free interface: the subcommand files parse
// flags into these structs; training.cpp hands them to the library's Trainer (weft/train).
#include <mpi.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "weft/train/model_config.hpp"
#include "weft/train/options.hpp"

namespace weft::cli {

using train::ModelConfig;

/// The Trainer's options plus what only the command line has: which files --data names, the
/// outputs, and which flags were given.
struct TrainConfig : train::TrainerOptions {
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string data_format;     ///< --data-format: "" = recognised by the folder's files
  std::string label = "fine";  ///< --label (CIFAR-100)
  /// --normalize: "measured" (on the training set, per channel for colour images), "none", or
  /// the values: MEAN,STD for every channel, or M1..MC,S1..SC per channel.
  std::string normalize = "measured";
  /// --augment: auto (crop-flip for CIFAR, none otherwise), none, crop-flip; --crop-padding.
  std::string augment = "auto";
  std::int64_t crop_padding = 4;
  std::int64_t image_size = 0;  ///< --image-size: image files fitted to S x S (0: the default 64)
  std::vector<double> normalize_values;
  std::int64_t train_size = -1;  ///< -1: the whole training set
  std::int64_t test_size = -1;
  std::string metrics_path;
  /// The flags given on the command line among those a checkpoint fixes (--channels, --steps,
  /// --T, --open, --seed, --optimizer): with --resume each must match the checkpoint. Also the
  /// spatial-level flags given, which errors found later (weft predict's) name.
  std::set<std::string> given;
  bool progress = true;
  /// --check-images: decode every image file once before training (each rank a share), so that
  /// damage inside an image is rejected before any work, not found at its batch.
  bool check_images = false;
};

struct EvalConfig {
  std::string resume_dir;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string data_format;
  std::string label = "fine";
  std::int64_t test_size = -1;
  std::int64_t batch = 500;
  int threads = 0;
  std::string json_path;
};

/// Collective over `comm`; returns the exit code. Throws weft errors (see cli_support.hpp).
int run_training(const TrainConfig& config, MPI_Comm comm);
int run_evaluation(const EvalConfig& config, MPI_Comm comm);

/// One training example's shape ([channels, rows, cols], or [channels, depth, rows, cols] for
/// volumes) of the set --data names: "shapes3d" is the cached default set's, without
/// generating it; a folder's is read from its first training image.
std::vector<std::int64_t> training_example_shape(const TrainConfig& config);

}  // namespace weft::cli
