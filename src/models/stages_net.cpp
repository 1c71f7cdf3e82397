#include "weft/models/stages_net.hpp"

#include <torch/torch.h>

#include <cmath>
#include <string>

#include "seed_scope.hpp"
#include "weft/util/error.hpp"

namespace weft::models {

namespace {
constexpr std::uint64_t kOpenTag = 0x6f70656eULL;  // distinct seed streams per layer role
constexpr std::uint64_t kCloseTag = 0x636c6f73ULL;
constexpr std::uint64_t kTransitionTag = 0x7472616eULL;

// Appends a 3x3 (3x3x3 in 3-D) convolution, padding 1. A convolution that feeds batch norm has
// no bias: in training mode batch norm subtracts it again, so its gradient is exactly zero and
// what an optimizer sees is round-off (Adam, which divides by the gradient's size, turns that
// into steps of lr's size). Such a bias would still move the running mean, so evaluation would
// depend on round-off: layer-parallel and sequential training would differ in evaluation only.
void conv3x3(torch::nn::Sequential& seq, int dims, std::int64_t in, std::int64_t out,
             std::int64_t stride, bool bias) {
  if (dims == 3)
    seq->push_back(torch::nn::Conv3d(
        torch::nn::Conv3dOptions(in, out, 3).stride(stride).padding(1).bias(bias)));
  else
    seq->push_back(torch::nn::Conv2d(
        torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(bias)));
}

void batch_norm(torch::nn::Sequential& seq, int dims, std::int64_t channels) {
  if (dims == 3)
    seq->push_back(torch::nn::BatchNorm3d(channels));
  else
    seq->push_back(torch::nn::BatchNorm2d(channels));
}

void check(bool ok, const std::string& option, const std::string& detail) {
  if (!ok) throw InvalidOption("StagesNet", option, detail);
}
}  // namespace

nn::Network stages_net(const StagesNetSpec& spec) {
  const size_t stages = spec.channels.size();
  check(stages >= 1, "channels", "is empty; need at least one stage");
  check(spec.steps.size() == stages, "steps",
        "lists " + std::to_string(spec.steps.size()) + " stages but channels lists " +
            std::to_string(stages) + "; give one value per stage in each");
  for (size_t s = 0; s < stages; ++s) {
    check(spec.channels[s] >= 1 && spec.channels[s] <= 4096, "channels",
          std::to_string(spec.channels[s]) + " is invalid; accepted: 1..4096");
    check(spec.steps[s] >= 1, "steps",
          std::to_string(spec.steps[s]) + " is invalid; accepted: an integer >= 1 per stage");
  }
  check(spec.t_final > 0 && std::isfinite(spec.t_final), "t_final",
        number_text(spec.t_final) + " is invalid; accepted: a finite number > 0");
  check(spec.dropout >= 0 && spec.dropout < 1, "dropout",
        number_text(spec.dropout) + " is invalid; accepted: a rate in [0, 1)");
  check(spec.classes >= 1, "classes", "is " + std::to_string(spec.classes) + "; need at least 1");
  check(spec.in_channels >= 1 && spec.in_channels <= 4096, "in_channels",
        std::to_string(spec.in_channels) + " is invalid; accepted: 1..4096");
  check(spec.dims == 2 || spec.dims == 3, "dims",
        std::to_string(spec.dims) + " is invalid; accepted: 2 (images) or 3 (volumes)");
  const int dims = spec.dims;
  check(!spec.imagenet_stem || dims == 2, "imagenet_stem", "is for images, not volumes");
  std::int64_t side = std::min(spec.height, spec.width);
  if (dims == 3) side = std::min(side, spec.depth);
  if (spec.imagenet_stem) side = ((side + 1) / 2 + 1) / 2;
  for (size_t s = 1; s < stages; ++s) side = (side + 1) / 2;
  check(spec.height >= 1 && spec.width >= 1 && (dims == 2 || spec.depth >= 1) &&
            (stages == 1 || side >= 1),
        "height/width",
        "of " + (dims == 3 ? std::to_string(spec.depth) + "x" : std::string()) +
            std::to_string(spec.height) + "x" + std::to_string(spec.width) + " are too small for " +
            std::to_string(stages) + " stages");

  const bool bn = spec.batchnorm;
  const double dropout = spec.dropout;
  const std::uint64_t seed = spec.seed;
  nn::Network net;
  for (size_t s = 0; s < stages; ++s) {
    nn::Stage st;
    st.steps = spec.steps[s];
    st.t_final = spec.t_final;
    const std::int64_t c = spec.channels[s];
    st.step = [c, bn, dropout, seed, dims](std::int64_t n) -> nn::Layer {
      detail::SeedScope scope(seed * 1000003ULL + static_cast<std::uint64_t>(n));
      torch::nn::Sequential f;
      conv3x3(f, dims, c, c, 1, !bn);
      if (bn) batch_norm(f, dims, c);
      f->push_back(torch::nn::ReLU());
      if (dropout > 0) f->push_back(torch::nn::Dropout(dropout));
      conv3x3(f, dims, c, c, 1, !bn);
      if (bn) batch_norm(f, dims, c);
      return f;
    };
    if (s + 1 < stages) {
      const std::int64_t out = spec.channels[s + 1];
      st.transition = [c, out, bn, seed, dims](std::int64_t n) -> nn::Layer {
        detail::SeedScope scope((seed ^ kTransitionTag) * 1000003ULL +
                                static_cast<std::uint64_t>(n));
        torch::nn::Sequential g;
        conv3x3(g, dims, c, out, 2, !bn);
        if (bn) batch_norm(g, dims, out);
        g->push_back(torch::nn::ReLU());
        return g;
      };
    }
    net.stages.push_back(st);
  }
  const std::int64_t c0 = spec.channels.front(), last = spec.channels.back();
  const std::int64_t in = spec.in_channels;
  const bool stem = spec.imagenet_stem;
  net.open = [c0, in, bn, seed, dims, stem]() -> nn::Layer {
    detail::SeedScope scope(seed ^ kOpenTag);
    torch::nn::Sequential open;
    if (stem)
      open->push_back(
          torch::nn::Conv2d(torch::nn::Conv2dOptions(in, c0, 7).stride(2).padding(3).bias(!bn)));
    else
      conv3x3(open, dims, in, c0, 1, !bn);
    if (bn) batch_norm(open, dims, c0);
    open->push_back(torch::nn::ReLU());
    if (stem)
      open->push_back(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(2).padding(1)));
    return open;
  };
  const int classes = spec.classes;
  net.close = [last, classes, seed, dims]() -> nn::Layer {
    detail::SeedScope scope(seed ^ kCloseTag);
    torch::nn::Sequential close;
    if (dims == 3)
      close->push_back(torch::nn::AdaptiveAvgPool3d(torch::nn::AdaptiveAvgPool3dOptions(1)));
    else
      close->push_back(torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions(1)));
    close->push_back(torch::nn::Flatten());
    close->push_back(torch::nn::Linear(last, classes));
    return close;
  };
  return net;
}

}  // namespace weft::models
