#pragma once
// The multi-stage image classifier of `weft train --model stages` (MNIST-format images,
// 1 channel), in the style of the networks people train layer-parallel:
//   open:        conv3x3 1->C_0, batch norm, ReLU  (no convolution bias before a batch norm)
//   stage s:     N_s steps  x <- x + h_s F(x),  F = conv3x3-BN-ReLU-[dropout]-conv3x3-BN  at C_s
//   transition:  conv3x3 stride 2 C_s->C_{s+1}, BN, ReLU  (halves the resolution)
//   close:       global average pooling -> linear(C_last -> classes)
// h_s = t_final / N_s. Batch norm (`batchnorm`) and dropout (`dropout` > 0, after the ReLU
// inside each step) are optional. With `dims` 3 every convolution, batch norm and the pooling
// are their 3-D versions (3x3x3 kernels) and the input is [batch, 1, depth, height, width]
// (`weft train --model conv3d`). Every layer's initial parameters depend only on (seed, layer).
#include <cstdint>
#include <vector>

#include "weft/nn/layer_parallel.hpp"

namespace weft::models {

struct StagesNetSpec {
  std::vector<std::int64_t> channels{8, 16, 32};  ///< C_s per stage
  std::vector<std::int64_t> steps{2, 2, 2};       ///< N_s per stage
  double t_final = 1.0;                           ///< per stage
  bool batchnorm = true;
  double dropout = 0.0;          ///< in [0, 1)
  int dims = 2;                  ///< spatial dimensions: 2 (images) or 3 (volumes)
  std::int64_t depth = 1;        ///< volumes only
  std::int64_t in_channels = 1;  ///< of the images (3 for RGB)
  /// The open layer: conv3x3 stride 1 (false), or ImageNet's stem (true, images only): conv7x7
  /// stride 2 + BN + ReLU + max pool 3x3 stride 2, which takes 64x64 to 16x16, as the open layer
  /// of TorchBraid's Tiny-ImageNet network.
  bool imagenet_stem = false;
  std::int64_t height = 28;
  std::int64_t width = 28;
  int classes = 10;
  std::uint64_t seed = 0;
};

/// Throws weft::InvalidOption naming the field ("StagesNet: channels ...") when the lists
/// differ in length or hold a value out of range, or the images are too small to halve.
nn::Network stages_net(const StagesNetSpec& spec);

}  // namespace weft::models
