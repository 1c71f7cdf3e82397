#pragma once
// Private to weft_nn. Spatial coarsening of convolutional states (4-D (N,C,H,W) and 5-D
// (N,C,D,H,W) tensors) between MGRIT levels:
// - restriction: full weighting with stride 2, the stencil [1,2,1]/4 in every spatial dimension
//   applied as a depthwise convolution (padding 1), so a side of even length n becomes n/2 and
//   coarse point i sits on fine point 2i;
// - interpolation: the transposed stencil (a depthwise transposed convolution, [1/2,1,1/2] per
//   dimension), so coarse points are copied and the fine points between them averaged.
// Both keep constants: at the grid's edge, where the stencil reaches into the zero padding
// (restriction: the first coarse point; interpolation: the last fine point), the value is
// rescaled by the weight that fell inside.
// A level's "depth" is how many times its states have been restricted (the number of levels
// at or above it, after the fine one, flagged in LayerParallelOptions::spatial_levels).
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "weft/nn/options.hpp"

namespace weft::nn::detail {

/// depth[l] for levels 0..levels-1 (flags empty: all 0; levels beyond the flags: the last).
std::vector<int> spatial_depths(const std::vector<int>& flags, int levels);

/// Empty when `shape` can be restricted (4-D or 5-D, every spatial side even), else why not.
std::string why_not_coarsenable(const std::vector<std::int64_t>& shape);
/// The restricted shape (every spatial side halved).
std::vector<std::int64_t> coarsened_shape(std::vector<std::int64_t> shape);

/// A 3x3 (3x3x3) convolution kernel for a grid 2^depth times coarser (SpatialKernels), a linear
/// map of the fine kernel per spatial dimension applied depth times:
/// - moments: the moments sum k_j, sum j k_j, sum j^2 k_j (j = -1, 0, 1) scaled by 1, 1/2, 1/4
///   per coarsening, so that on smooth states the coarse convolution approximates the fine one
///   restricted (to second order);
/// - galerkin: k' = G k with G = [[1/2, 1/8, 0], [1/2, 3/4, 1/2], [0, 1/8, 1/2]], the stencil of
///   R K P for SpatialTransfer's restriction R and interpolation P (exact at interior points;
///   moments 0 and 1 as above, moment 2 becomes (M_2 + M_0) / 4);
/// - same: the weight itself.
/// Both keep constants (sum k_j).
torch::Tensor coarse_kernel(const torch::Tensor& weight, int depth, SpatialKernels kernels);

class SpatialTransfer {
 public:
  /// The fine state restricted to the grid twice as coarse (no graph).
  torch::Tensor restrict(const torch::Tensor& fine);
  /// The coarse state interpolated to the grid twice as fine (no graph).
  torch::Tensor interpolate(const torch::Tensor& coarse);

 private:
  /// The depthwise kernel of `like` (its channels, dimension, dtype, device), times `scale`.
  const torch::Tensor& kernel(const torch::Tensor& like, double scale);

  std::map<std::tuple<std::int64_t, std::int64_t, int, std::string, double>, torch::Tensor>
      kernels_;
};

}  // namespace weft::nn::detail
