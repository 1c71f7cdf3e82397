#pragma once
// The residual image classifier that `weft train` trains (MNIST-format images, 1 channel):
//   open:  conv3x3 1->C + ReLU ("conv"), or the image copied into C channels ("copy")
//   steps: N blocks  x <- x + h * ReLU(conv3x3(ReLU(conv3x3(x))))  at C channels, padding 1
//   close: flatten -> linear(C*H*W -> 32) -> ReLU -> linear(32 -> classes)
// Every layer's initial parameters depend only on (seed, layer), never on the rank count, so a
// layer-parallel run and the sequential reference start from the same network.
#include <cstdint>
#include <string>

#include "weft/nn/layer_parallel.hpp"

namespace weft::models {

enum class OpenLayer { Conv, Copy };
OpenLayer parse_open_layer(const std::string& name);  // "conv" | "copy"
std::string to_string(OpenLayer open);

struct ImageResNetSpec {
  int channels = 4;
  std::int64_t in_channels = 1;  ///< of the images (3 for RGB); the copy open layer needs 1
  std::int64_t steps = 8;
  double t_final = 1.0;
  OpenLayer open = OpenLayer::Conv;
  std::int64_t height = 28;
  std::int64_t width = 28;
  int hidden = 32;
  int classes = 10;
  std::uint64_t seed = 0;
};

/// The network description for weft::nn::LayerParallel and weft::nn::SequentialNetwork.
/// Throws weft::InvalidOption for non-positive sizes.
nn::Network image_resnet(const ImageResNetSpec& spec);

}  // namespace weft::models
