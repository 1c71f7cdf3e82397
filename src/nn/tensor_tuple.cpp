#include "tensor_tuple.hpp"

#include <cmath>
#include <cstring>

namespace weft::nn::detail {

using torch::Tensor;

void TensorTupleOps::sum(double a, const TensorTuple& x, double b, TensorTuple& y) const {
  torch::NoGradGuard no_grad;
  if (y.size() != x.size()) y.assign(x.size(), Tensor());
  for (size_t i = 0; i < x.size(); ++i) {
    Tensor& yi = y[i];
    if (!yi.defined() || b == 0.0 || yi.sizes() != x[i].sizes()) {
      yi = a == 1.0 ? x[i].clone() : x[i] * a;
      continue;
    }
    if (b != 1.0) yi.mul_(b);
    yi.add_(x[i], a);
  }
}

double TensorTupleOps::norm(const TensorTuple& u) const {
  torch::NoGradGuard no_grad;
  double squares = 0;
  for (const Tensor& t : u) {
    const double n = t.norm().item<double>();
    squares += n * n;
  }
  return std::sqrt(squares);
}

void TensorTupleOps::copy(const TensorTuple& src, TensorTuple& dst) const {
  torch::NoGradGuard no_grad;
  if (dst.size() != src.size()) dst.assign(src.size(), Tensor());
  for (size_t i = 0; i < src.size(); ++i) {
    if (dst[i].defined() && dst[i].sizes() == src[i].sizes() && dst[i].dtype() == src[i].dtype() &&
        dst[i].device() == src[i].device())
      dst[i].copy_(src[i]);
    else
      dst[i] = src[i].clone();
  }
}

std::size_t TensorTupleOps::buffer_size(const TensorTuple& like) const {
  std::size_t bytes = 0;
  for (const Tensor& t : like) bytes += static_cast<std::size_t>(t.numel()) * t.element_size();
  return bytes;
}

void TensorTupleOps::pack(const TensorTuple& u, void* buffer) const {
  torch::NoGradGuard no_grad;
  auto* out = static_cast<char*>(buffer);
  for (const Tensor& t : u) {
    const Tensor c = t.to(torch::kCPU).contiguous();
    const std::size_t bytes = static_cast<std::size_t>(c.numel()) * c.element_size();
    if (bytes) std::memcpy(out, c.data_ptr(), bytes);
    out += bytes;
  }
}

void TensorTupleOps::unpack(const void* buffer, TensorTuple& u) const {
  torch::NoGradGuard no_grad;
  const auto* in = static_cast<const char*>(buffer);
  for (Tensor& t : u) {
    const Tensor blob =
        torch::from_blob(const_cast<char*>(in), t.sizes(), torch::TensorOptions().dtype(t.dtype()));
    t.copy_(blob);
    in += static_cast<std::size_t>(t.numel()) * t.element_size();
  }
}

TensorTuple zeros_like(const TensorTuple& like) {
  TensorTuple z;
  z.reserve(like.size());
  for (const Tensor& t : like) z.push_back(torch::zeros_like(t));
  return z;
}

TensorTuple detached_clone(const TensorTuple& u) {
  TensorTuple c;
  c.reserve(u.size());
  for (const Tensor& t : u) c.push_back(t.detach().clone());
  return c;
}

bool all_finite(const torch::Tensor& t) {
  torch::NoGradGuard no_grad;
  if (t.is_floating_point() && std::isfinite(t.sum().item<double>())) return true;
  return torch::isfinite(t).all().item<bool>();  // other dtypes, and sums that overflowed
}

}  // namespace weft::nn::detail
