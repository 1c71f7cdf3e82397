#pragma once
// Private to weft_nn. Averages parameter gradients over data-parallel replicas. The step layers'
// gradients are complete one layer at a time during the adjoint's final fine sweep; they are
// grouped into buckets of consecutive layers (in the order the sweep finishes them, high layers
// first), and each bucket's fused all-reduce starts as soon as its last layer is done, so the
// reductions overlap the rest of the adjoint solve. Every replica finishes layers in the same
// order (same placement, same solver), so the nonblocking collectives match.
#include <mpi.h>
#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace weft::nn::detail {

class GradientSync {
 public:
  /// `comm`: the replicas (MPI_COMM_NULL: nothing to do).
  GradientSync(MPI_Comm comm, std::int64_t bucket_bytes);
  bool active() const { return active_; }

  /// Before the adjoint: buckets over the local layers (their parameter lists).
  void begin(const std::vector<std::vector<torch::Tensor>>& layer_params);
  /// Layer k's gradients (parallel to its parameter list; undefined = zero) are final.
  void layer_done(size_t k, std::vector<torch::Tensor>& grads);
  /// Waits for every bucket and replaces the gradients by their averages over the replicas.
  /// Returns the seconds spent waiting.
  double finish(std::vector<std::vector<torch::Tensor>>& grads);
  std::int64_t buckets() const { return static_cast<std::int64_t>(buckets_.size()); }

  /// One fused blocking all-reduce averaging these tensors in place (the open and close
  /// layers' gradients, at the end of backward).
  void average_now(const std::vector<torch::Tensor>& tensors);
  /// The same, summing instead of averaging (gradients of replicated parameters whose work is
  /// split over the ranks, e.g. the steps of a recurrent sequence).
  void sum_now(const std::vector<torch::Tensor>& tensors);

 private:
  struct Bucket {
    std::vector<size_t> layers;
    size_t pending = 0;
    torch::Tensor flat;  ///< CPU, contiguous
    MPI_Request request = MPI_REQUEST_NULL;
  };
  void start(Bucket& b, std::vector<std::vector<torch::Tensor>>* grads);
  void reduce_now(const std::vector<torch::Tensor>& tensors, int divisor);

  MPI_Comm comm_ = MPI_COMM_NULL;
  bool active_ = false;
  int replicas_ = 1;
  std::int64_t bucket_bytes_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;
  const std::vector<std::vector<torch::Tensor>>* params_ = nullptr;
  std::vector<std::vector<torch::Tensor>> pending_grads_;
};

}  // namespace weft::nn::detail
