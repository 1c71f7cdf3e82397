#pragma once
// The network `weft train` builds (training.cpp), for other LibTorch files of the CLI
// (`weft predict`'s cost measurement). Includes LibTorch headers: not for LibTorch-free files.
#include <cstdint>
#include <vector>

#include "training.hpp"
#include "weft/nn/layer_parallel.hpp"

namespace weft::cli {

/// [1, channels, rows, cols] of the training set's images (reads one image of c.data_dir).
std::vector<std::int64_t> training_image_shape(const TrainConfig& c);
/// The model of `m` for images of `shape` ([batch, channels, rows, cols]).
nn::Network make_training_network(const ModelConfig& m, const std::vector<std::int64_t>& shape);

}  // namespace weft::cli
