#pragma once
// Private to weft_nn. Every evaluation of a chain layer goes through here: without a graph (the
// solvers' steps), recording a graph (the forward's final fine sweep), and vector-Jacobian
// products (the adjoint). Two rules live here and nowhere else:
// - random streams: in training mode, layer n draws from a generator seeded by
//   layer_stream_seed(seed, batch, n), the caller's generator restored afterwards, so every
//   evaluation of a layer within a batch applies the same dropout mask;
// - buffers: only an evaluation marked `updates_buffers` (the forward's final fine sweep on the
//   owner) may change a layer's buffers (batch-norm running statistics); every other
//   evaluation restores them.
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "chain.hpp"
#include "layer_bank.hpp"
#include "weft/nn/options.hpp"

namespace weft::nn::detail {

/// Seeds the default generator of `device` with `seed` for one evaluation (when `on`) and
/// restores the caller's generator state afterwards.
class StreamGuard {
 public:
  StreamGuard(bool on, torch::Device device, std::uint64_t seed);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  at::Generator generator_;
  torch::Tensor saved_;
  bool active_ = false;
};

/// A layer's autograd graph y = L_n(x) at a leaf x that shares storage with the stored x_n.
/// Only y's gradient edge is kept, not y: the vector-Jacobian product needs y's grad_fn, not
/// its value, and the graph keeps y alive itself where a backward formula needs it. (Keeping
/// y held a layer output per cached graph beyond what backprop holds: 4.5 MiB for the stages
/// network's 50-image batch.)
struct Graph {
  torch::Tensor x;
  torch::autograd::Edge root;  ///< no function when y does not depend on anything trainable
  bool recorded = false;
  std::int64_t version = -1;      ///< x's version when recorded
  std::int64_t output_bytes = 0;  ///< y's size (BatchStatistics::graph_bytes)
  bool defined() const { return recorded; }
  /// Keeps y's gradient edge.
  void hold(const torch::Tensor& y);
};

class LayerEvaluator {
 public:
  LayerEvaluator(LayerBank& bank, const Chain& chain) : bank_(bank), chain_(chain) {}

  /// The random streams of this batch (training: the module's training mode).
  void begin_batch(std::uint64_t seed, std::int64_t batch, bool training) {
    seed_ = seed;
    batch_ = batch;
    training_ = training;
    running_statistics_.clear();
    coarse_kernel_cache_.clear();
  }
  /// begin_batch, keeping the coarse kernels computed so far when seed, batch and mode are those
  /// of the batch begun last (ChainProbe begins the module's batch at every call; a weight
  /// changed in place still gets new kernels, see coarse_kernel_of).
  void resume_batch(std::uint64_t seed, std::int64_t batch, bool training) {
    const bool same = seed == seed_ && batch == batch_ && training == training_;
    auto kept = std::move(coarse_kernel_cache_);
    begin_batch(seed, batch, training);
    if (same) coarse_kernel_cache_ = std::move(kept);
  }

  /// Where evaluations are counted (nullptr: nowhere) and the level of the steps that follow.
  void count_into(std::vector<std::vector<LayerEvaluations>>* table) { table_ = table; }
  void at_level(int level) { level_ = level; }

  /// L_n(x) for one layer (F_n or G_n), without a graph. `depth` > 0: x lives on a grid 2^depth
  /// times coarser in space; the layer's 3x3(x3) convolutions then use the kernels set by
  /// coarse_kernels (spatial.hpp: coarse_kernel).
  torch::Tensor layer(std::int64_t n, const torch::Tensor& x, bool updates_buffers, int depth = 0);
  /// The step from point a to point b > a at x, without a graph: one layer when b = a + 1, the
  /// composition of Chain::segments otherwise.
  torch::Tensor step(std::int64_t a, std::int64_t b, const torch::Tensor& x, bool updates_buffers,
                     int depth = 0);
  /// y = L_n(x), its graph (at a leaf sharing x's storage) into `graph`.
  torch::Tensor record(std::int64_t n, const torch::Tensor& x, bool updates_buffers, Graph& graph);
  /// The step's value from its recorded layer output: x + H y, or y for a transition.
  torch::Tensor step_from(std::int64_t n, const torch::Tensor& x, const torch::Tensor& y) const;

  /// The adjoint step of the step from point a to point b at the forward state x_a:
  /// (dΦ/dx(x_a))ᵀ λ_b. A fine step (b = a + 1) may reuse `graph` (built here when undefined);
  /// with `param_grads` it also returns (dΦ/dθ_a)ᵀ λ_b for the given parameters of layer a.
  torch::Tensor vjp(std::int64_t a, std::int64_t b, const torch::Tensor& x_a,
                    const torch::Tensor& lambda, Graph& graph, bool retain_graph,
                    const std::vector<torch::Tensor>* params,
                    std::vector<torch::Tensor>* param_grads, bool* built, int depth = 0);
  /// The 3x3(x3) convolution kernels on coarse spatial grids (see layer()).
  void coarse_kernels(SpatialKernels kernels) { kernels_ = kernels; }
  /// In training mode, batch norm on coarse spatial grids normalises with the running
  /// statistics the layer had when the batch began
  /// (LayerParallelOptions::spatial_running_statistics).
  void running_statistics_when_coarsened(bool on) { running_when_coarsened_ = on; }

 private:
  LayerBank& bank_;
  const Chain& chain_;
  LayerEvaluations* tally(std::int64_t n);
  /// h as a 0-dim tensor of like's dtype (step sizes of the stages, cached).
  const torch::Tensor& factor(double h, const torch::Tensor& like);

  std::vector<std::vector<LayerEvaluations>>* table_ = nullptr;
  int level_ = 0;
  std::uint64_t seed_ = 0;
  std::int64_t batch_ = 0;
  bool training_ = false;
  SpatialKernels kernels_ = SpatialKernels::same;
  bool running_when_coarsened_ = false;
  /// Per layer, per batch-norm module (modules() order): its running mean and variance at the
  /// batch's start, copied at the layer's first coarse evaluation in the batch or before the
  /// final sweep updates them; undefined where the module has none to offer.
  std::unordered_map<std::int64_t, std::vector<std::pair<torch::Tensor, torch::Tensor>>>
      running_statistics_;
  /// Per convolution weight and depth: the coarse kernel (kernels_) and the weight's version it
  /// was computed from; computing one costs more than a coarse convolution, so each is computed
  /// once per batch (the weights do not change within one).
  struct CoarseKernel {
    torch::Tensor weight, kernel;
    std::int64_t version = -1;
  };
  std::map<std::pair<const void*, int>, CoarseKernel> coarse_kernel_cache_;
  /// The coarse kernel of `weight` (3x3(x3); others unchanged) at `depth`, from the cache.
  torch::Tensor coarse_kernel_of(const torch::Tensor& weight, int depth);
  const std::vector<std::pair<torch::Tensor, torch::Tensor>>& batch_start_statistics(
      std::int64_t n);
  std::vector<std::pair<double, torch::Tensor>> factors_;
};

}  // namespace weft::nn::detail
