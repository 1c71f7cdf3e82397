// Spatial restriction and interpolation of convolutional states (see spatial.hpp).
#include "spatial.hpp"

#include <utility>

namespace weft::nn::detail {

using torch::Tensor;

std::vector<int> spatial_depths(const std::vector<int>& flags, int levels) {
  std::vector<int> depth(static_cast<size_t>(levels), 0);
  for (int l = 1; l < levels; ++l) {
    const bool coarsened = static_cast<size_t>(l) < flags.size() && flags[static_cast<size_t>(l)];
    depth[static_cast<size_t>(l)] = depth[static_cast<size_t>(l - 1)] + (coarsened ? 1 : 0);
  }
  return depth;
}

std::string why_not_coarsenable(const std::vector<std::int64_t>& shape) {
  if (shape.size() != 4 && shape.size() != 5)
    return "has no spatial dimensions (" + std::to_string(shape.size()) +
           "-D; spatial coarsening needs 4-D (N,C,H,W) or 5-D (N,C,D,H,W) states)";
  for (size_t d = 2; d < shape.size(); ++d)
    if (shape[d] < 2 || shape[d] % 2 != 0)
      return "has spatial size " + std::to_string(shape[d]) + " in dimension " + std::to_string(d) +
             " (coarsening in space needs even sizes >= 2)";
  return "";
}

std::vector<std::int64_t> coarsened_shape(std::vector<std::int64_t> shape) {
  for (size_t d = 2; d < shape.size(); ++d) shape[d] /= 2;
  return shape;
}

Tensor coarse_kernel(const Tensor& weight, int depth, SpatialKernels kernels) {
  if (kernels == SpatialKernels::same || depth <= 0) return weight;
  torch::NoGradGuard no_grad;
  // Per dimension k' = A k. moments: A = V^-1 diag(1, 1/2, 1/4) V with V the moments (rows 1,
  // j, j^2 over j = -1, 0, 1). galerkin: the coarse point's weights on its three neighbours of
  // R K P, summed over the fine points each coarse neighbour reaches.
  const std::vector<double> moments{3.0 / 8, 0.0,      -1.0 / 8, 3.0 / 4, 1.0,
                                    3.0 / 4, -1.0 / 8, 0.0,      3.0 / 8};
  const std::vector<double> galerkin{1.0 / 2, 1.0 / 8, 0.0,     1.0 / 2, 3.0 / 4,
                                     1.0 / 2, 0.0,     1.0 / 8, 1.0 / 2};
  const Tensor a =
      torch::tensor(kernels == SpatialKernels::moments ? moments : galerkin, weight.options())
          .view({3, 3});
  // All dimensions at once: the kernel's taps (row-major) times A ⊗ A (⊗ A), one matmul.
  const Tensor m = weight.dim() == 4 ? torch::kron(a, a) : torch::kron(torch::kron(a, a), a);
  Tensor map = m;
  for (int level = 1; level < depth; ++level) map = torch::matmul(m, map);
  return torch::matmul(weight.reshape({-1, m.size(0)}), map.t()).view(weight.sizes());
}

const Tensor& SpatialTransfer::kernel(const Tensor& like, double scale) {
  const std::int64_t channels = like.size(1), dims = like.dim() - 2;
  auto key = std::make_tuple(channels, dims, static_cast<int>(like.scalar_type()),
                             like.device().str(), scale);
  auto it = kernels_.find(key);
  if (it != kernels_.end()) return it->second;
  const auto options = torch::TensorOptions().dtype(torch::kFloat64);
  const Tensor w = torch::tensor({0.25, 0.5, 0.25}, options);
  Tensor k = dims == 2 ? torch::outer(w, w) : torch::einsum("i,j,k->ijk", {w, w, w});
  std::vector<std::int64_t> shape{channels, 1};
  for (std::int64_t d = 0; d < dims; ++d) shape.push_back(3);
  k = (k * scale).expand(shape).contiguous().to(like.options());
  return kernels_.emplace(std::move(key), std::move(k)).first->second;
}

Tensor SpatialTransfer::restrict(const Tensor& fine) {
  torch::NoGradGuard no_grad;
  const std::int64_t channels = fine.size(1);
  const Tensor& k = kernel(fine, 1.0);
  Tensor coarse = fine.dim() == 4 ? torch::conv2d(fine, k, {}, 2, 1, 1, channels)
                                  : torch::conv3d(fine, k, {}, 2, 1, 1, channels);
  // The first coarse point's stencil reaches one fine point into the zero padding (weight 1/4).
  for (std::int64_t d = 2; d < coarse.dim(); ++d) coarse.narrow(d, 0, 1).mul_(4.0 / 3.0);
  return coarse;
}

Tensor SpatialTransfer::interpolate(const Tensor& coarse) {
  torch::NoGradGuard no_grad;
  const std::int64_t channels = coarse.size(1);
  const Tensor& k = kernel(coarse, coarse.dim() == 4 ? 4.0 : 8.0);  // [1/2, 1, 1/2] per dimension
  Tensor fine = coarse.dim() == 4 ? torch::conv_transpose2d(coarse, k, {}, 2, 1, 1, channels)
                                  : torch::conv_transpose3d(coarse, k, {}, 2, 1, 1, channels);
  // The last fine point has a coarse neighbour on one side only (weight 1/2).
  for (std::int64_t d = 2; d < fine.dim(); ++d) fine.narrow(d, fine.size(d) - 1, 1).mul_(2.0);
  return fine;
}

}  // namespace weft::nn::detail
