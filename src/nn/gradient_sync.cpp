#include "gradient_sync.hpp"

#include <chrono>
#include <string>

#include "weft/util/clock.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"
#include "weft/util/trace.hpp"

namespace weft::nn::detail {

using torch::Tensor;

namespace {
MPI_Datatype mpi_type(torch::Dtype dtype) {
  switch (dtype) {
    case torch::kFloat32:
      return MPI_FLOAT;
    case torch::kFloat64:
      return MPI_DOUBLE;
    default:
      throw InvalidOption(std::string("data-parallel gradients: dtype ") + c10::toString(dtype) +
                          " is not supported (float32 or float64)");
  }
}

/// The gradients of one layer as one flat CPU vector (zeros where undefined).
Tensor flatten(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
  std::vector<Tensor> parts;
  for (size_t p = 0; p < params.size(); ++p) {
    const Tensor& g = p < grads.size() ? grads[p] : Tensor();
    parts.push_back(g.defined() ? g.detach().to(torch::kCPU).reshape({-1})
                                : torch::zeros({params[p].numel()},
                                               torch::TensorOptions().dtype(params[p].dtype())));
  }
  return parts.empty() ? Tensor() : torch::cat(parts);
}
}  // namespace

GradientSync::GradientSync(MPI_Comm comm, std::int64_t bucket_bytes)
    : comm_(comm), bucket_bytes_(bucket_bytes) {
  if (comm_ != MPI_COMM_NULL) {
    replicas_ = mpi::size(comm_);
    active_ = replicas_ > 1;
  }
}

void GradientSync::begin(const std::vector<std::vector<Tensor>>& layer_params) {
  buckets_.clear();
  params_ = &layer_params;
  pending_grads_.assign(layer_params.size(), {});
  bucket_of_.assign(layer_params.size(), 0);
  if (!active_) return;
  std::int64_t bytes = bucket_bytes_;
  for (size_t k = layer_params.size(); k-- > 0;) {
    if (bytes >= bucket_bytes_) {
      buckets_.emplace_back();
      bytes = 0;
    }
    buckets_.back().layers.push_back(k);
    ++buckets_.back().pending;
    bucket_of_[k] = buckets_.size() - 1;
    for (const Tensor& p : layer_params[k]) bytes += p.numel() * p.element_size();
  }
}

void GradientSync::start(Bucket& b, std::vector<std::vector<Tensor>>* grads) {
  std::vector<Tensor> parts;
  for (size_t k : b.layers) {
    const Tensor f = flatten((*params_)[k], (*grads)[k]);
    if (f.defined()) parts.push_back(f);
  }
  if (parts.empty()) return;
  b.flat = torch::cat(parts).contiguous();
  mpi::check(MPI_Iallreduce(MPI_IN_PLACE, b.flat.data_ptr(), static_cast<int>(b.flat.numel()),
                            mpi_type(b.flat.scalar_type()), MPI_SUM, comm_, &b.request),
             "MPI_Iallreduce (gradients)");
}

void GradientSync::layer_done(size_t k, std::vector<Tensor>& grads) {
  if (!active_) return;
  pending_grads_[k] = grads;
  Bucket& b = buckets_[bucket_of_[k]];
  if (--b.pending == 0) start(b, &pending_grads_);
}

double GradientSync::finish(std::vector<std::vector<Tensor>>& grads) {
  if (!active_) return 0.0;
  const double t = clock::now();
  for (Bucket& b : buckets_)
    if (b.pending != 0)
      throw MpiError("data-parallel gradients: " + std::to_string(b.pending) +
                     " layers of a bucket never finished (the adjoint's final sweep missed them)");
  // A replica that finished its backward first sleeps until every replica is here (it leaves
  // the core to the others); then the reductions run without sleeps between their rounds. A
  // sleeping replica would add its sleep to every round of a multi-round all-reduce.
  std::size_t bytes = 0;
  for (const Bucket& b : buckets_)
    if (b.flat.defined()) bytes += static_cast<std::size_t>(b.flat.nbytes());
  trace::Span span("allreduce", "mpi", trace::Kind::Reduce);
  span.reduction(comm_, bytes);
  MPI_Request arrived = MPI_REQUEST_NULL;
  mpi::check(MPI_Ibarrier(comm_, &arrived), "MPI_Ibarrier (gradients)");
  mpi::wait_politely(arrived, "MPI_Wait (replicas' backward)");
  for (Bucket& b : buckets_)
    if (b.request != MPI_REQUEST_NULL)
      mpi::check(MPI_Wait(&b.request, MPI_STATUS_IGNORE), "MPI_Wait (gradients)");
  const double waited = clock::now() - t;
  torch::NoGradGuard no_grad;
  for (Bucket& b : buckets_) {
    if (!b.flat.defined()) continue;
    b.flat.div_(replicas_);
    std::int64_t offset = 0;
    for (size_t k : b.layers) {
      const auto& params = (*params_)[k];
      grads[k].resize(params.size());
      for (size_t p = 0; p < params.size(); ++p) {
        const std::int64_t n = params[p].numel();
        grads[k][p] = b.flat.slice(0, offset, offset + n)
                          .view(params[p].sizes())
                          .to(params[p].device(), /*non_blocking=*/false, /*copy=*/true);
        offset += n;
      }
    }
  }
  buckets_.clear();
  pending_grads_.clear();
  return waited;
}

void GradientSync::average_now(const std::vector<Tensor>& tensors) {
  reduce_now(tensors, replicas_);
}

void GradientSync::sum_now(const std::vector<Tensor>& tensors) {
  reduce_now(tensors, 1);
}

void GradientSync::reduce_now(const std::vector<Tensor>& tensors, int divisor) {
  if (!active_ || tensors.empty()) return;
  torch::NoGradGuard no_grad;
  std::vector<Tensor> parts;
  for (const Tensor& t : tensors) parts.push_back(t.detach().to(torch::kCPU).reshape({-1}));
  Tensor flat = torch::cat(parts).contiguous();
  {
    trace::Span span("allreduce", "mpi", trace::Kind::Reduce);
    span.reduction(comm_, static_cast<std::size_t>(flat.nbytes()));
    mpi::check(MPI_Allreduce(MPI_IN_PLACE, flat.data_ptr(), static_cast<int>(flat.numel()),
                             mpi_type(flat.scalar_type()), MPI_SUM, comm_),
               "MPI_Allreduce (gradients)");
  }
  if (divisor != 1) flat.div_(divisor);
  std::int64_t offset = 0;
  for (const Tensor& t : tensors) {
    const std::int64_t n = t.numel();
    Tensor target = t;
    target.copy_(flat.slice(0, offset, offset + n).view(t.sizes()));
    offset += n;
  }
}

}  // namespace weft::nn::detail
