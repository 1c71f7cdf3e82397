#pragma once
// Layers whose convolutions are not LibTorch C++ modules (the Python module's layers: eager
// torch.nn modules and TorchScript) take part in LayerParallelOptions::spatial_kernels through
// this interface; LibTorch's Conv2d/Conv3d modules need nothing.
#include <torch/types.h>

#include <functional>

namespace weft::nn {

/// A layer module that swaps its own 3x3 (3x3x3) convolution kernels for one evaluation on a
/// grid coarser in space.
class SwapsCoarseKernels {
 public:
  using KernelMap = std::function<torch::Tensor(const torch::Tensor&)>;
  virtual ~SwapsCoarseKernels() = default;
  /// Until restore_kernels(): every 3x3 (3x3x3) convolution kernel w of the layer is map(w)
  /// in its forward; the parameters themselves stay untouched.
  virtual void use_coarse_kernels(const KernelMap& map) = 0;
  virtual void restore_kernels() = 0;
};

}  // namespace weft::nn
