#include "weft/models/image_resnet.hpp"

#include <torch/torch.h>

#include <cmath>
#include <string>

#include "seed_scope.hpp"
#include "weft/util/error.hpp"

namespace weft::models {

OpenLayer parse_open_layer(const std::string& name) {
  if (name == "conv") return OpenLayer::Conv;
  if (name == "copy") return OpenLayer::Copy;
  throw InvalidOption("ImageResNet", "open", "'" + name + "' is invalid; accepted: conv, copy");
}

std::string to_string(OpenLayer open) {
  return open == OpenLayer::Conv ? "conv" : "copy";
}

namespace {

constexpr std::uint64_t kOpenTag = 0x6f70656eULL;  // distinct seed streams per layer role
constexpr std::uint64_t kCloseTag = 0x636c6f73ULL;

torch::nn::Conv2d conv3x3(int in, int out) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).padding(1));
}

}  // namespace

nn::Network image_resnet(const ImageResNetSpec& spec) {
  auto positive = [](long long v, const char* what) {
    if (v < 1)
      throw InvalidOption("ImageResNet", what,
                          std::to_string(v) + " is invalid; accepted: an integer >= 1");
  };
  positive(spec.channels, "channels");
  positive(spec.steps, "steps");
  positive(spec.height, "height");
  positive(spec.width, "width");
  positive(spec.hidden, "hidden");
  positive(spec.classes, "classes");
  positive(spec.in_channels, "in_channels");
  if (spec.open == OpenLayer::Copy && spec.in_channels != 1)
    throw InvalidOption("ImageResNet", "open",
                        "copy repeats one channel; the images have " +
                            std::to_string(spec.in_channels) + "; accepted with them: conv");
  if (!(spec.t_final > 0) || !std::isfinite(spec.t_final))
    throw InvalidOption("ImageResNet", "t_final",
                        number_text(spec.t_final) + " is invalid; accepted: a finite number > 0");

  nn::Network net;
  net.steps = spec.steps;
  net.t_final = spec.t_final;
  const int c = spec.channels;
  const std::uint64_t seed = spec.seed;
  net.step = [c, seed](std::int64_t n) -> nn::Layer {
    detail::SeedScope scope(seed * 1000003ULL + static_cast<std::uint64_t>(n));
    return torch::nn::Sequential(conv3x3(c, c), torch::nn::ReLU(), conv3x3(c, c),
                                 torch::nn::ReLU());
  };
  if (spec.open == OpenLayer::Conv) {
    const int in = static_cast<int>(spec.in_channels);
    net.open = [c, in, seed]() -> nn::Layer {
      detail::SeedScope scope(seed ^ kOpenTag);
      return torch::nn::Sequential(conv3x3(in, c), torch::nn::ReLU());
    };
  } else {
    net.open = [c]() -> nn::Layer {
      return torch::nn::Functional([c](const torch::Tensor& x) {
        return x.expand({x.size(0), c, x.size(2), x.size(3)}).contiguous();
      });
    };
  }
  const std::int64_t features = c * spec.height * spec.width;
  const int hidden = spec.hidden, classes = spec.classes;
  net.close = [features, hidden, classes, seed]() -> nn::Layer {
    detail::SeedScope scope(seed ^ kCloseTag);
    return torch::nn::Sequential(torch::nn::Flatten(), torch::nn::Linear(features, hidden),
                                 torch::nn::ReLU(), torch::nn::Linear(hidden, classes));
  };
  return net;
}

}  // namespace weft::models
