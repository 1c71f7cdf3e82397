#pragma once
// Private to weft_nn. MGRIT states that are a fixed tuple of tensors (the hidden states of
// stacked recurrent cells, LSTM's (h, c) pairs): the App's vector operations and MPI buffers
// for any such state, written once. Every state owns its tensors: sum and copy write into y /
// dst in place when the shapes match and clone otherwise, so no two states share storage.
#include <torch/torch.h>

#include <cstddef>
#include <vector>

namespace weft::nn::detail {

using TensorTuple = std::vector<torch::Tensor>;

struct TensorTupleOps {
  using State = TensorTuple;

  /// y <- a x + b y, part by part.
  void sum(double a, const TensorTuple& x, double b, TensorTuple& y) const;
  /// The 2-norm of all parts together.
  double norm(const TensorTuple& u) const;
  void copy(const TensorTuple& src, TensorTuple& dst) const;
  /// The parts' bytes, concatenated (same dtype and shapes as `like` on both sides).
  std::size_t buffer_size(const TensorTuple& like) const;
  void pack(const TensorTuple& u, void* buffer) const;
  /// `u` holds a state of the sender's shapes.
  void unpack(const void* buffer, TensorTuple& u) const;
};

/// Zeros shaped like `like`.
TensorTuple zeros_like(const TensorTuple& like);
/// Deep copies, detached from any graph.
TensorTuple detached_clone(const TensorTuple& u);

/// No NaN or Inf in `t`. 40x faster than isfinite(t).all() on a 1.25 MB state (0.015 against
/// 0.6 ms, one thread): a sum is finite only when every element is, and it needs no boolean
/// temporary; only a sum that overflowed is checked element by element.
bool all_finite(const torch::Tensor& t);

}  // namespace weft::nn::detail
