#pragma once
// Probes: the kernels the layer-parallel modules run inside their solves, callable on their
// own, so that a cost model (`weft predict`), a benchmark or a test can time or check exactly
// what a solve evaluates without reaching into the module's internals.
//
//   weft::nn::SpatialProbe spatial;                   // LayerParallel's spatial coarsening
//   torch::Tensor coarse = spatial.restrict(state);   // [N, C, H, W] -> [N, C, H/2, W/2]
//   weft::nn::CellProbe cell(weft::nn::CellKind::GRU, /*layers=*/2);
//   auto next = cell.step(state, x_t, parameters);    // one MGRIT step of Recurrent
//   weft::nn::ChainProbe chain(weft::nn::LayerParallel(MPI_COMM_SELF, network));
//   auto x = chain.states(images);                    // points 0..N of a forward
//   weft::nn::StepGraph g;
//   chain.record(n, x[n], g);                         // a fine step with its graph
//   auto lambda_n = chain.vjp(n, n + 1, x[n], lambda, g, /*retain_graph=*/true);
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "weft/nn/layer_parallel.hpp"
#include "weft/nn/recurrent.hpp"

namespace weft::nn {

namespace detail {
class SpatialTransfer;
struct StackedCell;
struct Graph;
}  // namespace detail

/// The transfers between a level and the level coarsened in space from it (full weighting
/// with stride 2 and its transpose; LayerParallelOptions::spatial_levels), without graphs.
class SpatialProbe {
 public:
  SpatialProbe();
  ~SpatialProbe();
  SpatialProbe(const SpatialProbe&) = delete;
  SpatialProbe& operator=(const SpatialProbe&) = delete;

  torch::Tensor restrict(const torch::Tensor& fine);
  torch::Tensor interpolate(const torch::Tensor& coarse);

  /// Each level's depth (how often its states are restricted) for the flags of
  /// spatial_levels over `levels` levels.
  static std::vector<int> depths(const std::vector<int>& flags, int levels);
  /// Empty when a state of `shape` can be restricted, else why not.
  static std::string why_not_coarsenable(const std::vector<std::int64_t>& shape);
  /// A 3x3(x3) convolution kernel as layers use it on a grid 2^depth times coarser
  /// (LayerParallelOptions::spatial_kernels).
  static torch::Tensor coarse_kernel(const torch::Tensor& weight, int depth,
                                     SpatialKernels kernels);

 private:
  std::unique_ptr<detail::SpatialTransfer> transfer_;
};

/// One step of Recurrent's stacked cell as its MGRIT steps evaluate it: the state is the
/// layers' h (and, for LSTM, c: h_0, c_0, h_1, c_1, ...), `parameters` torch's weight_ih,
/// weight_hh, bias_ih, bias_hh of every layer in order.
class CellProbe {
 public:
  CellProbe(CellKind kind, std::int64_t layers, double implicit_step = 0,
            int implicit_iterations = 3);
  ~CellProbe();
  CellProbe(const CellProbe&) = delete;
  CellProbe& operator=(const CellProbe&) = delete;

  /// The state after one step from `state` with input `x` (`span` fine steps for the implicit
  /// cell's coarse steps; the explicit cell evaluates once).
  std::vector<torch::Tensor> step(const std::vector<torch::Tensor>& state, const torch::Tensor& x,
                                  const std::vector<torch::Tensor>& parameters,
                                  std::int64_t span = 1) const;
  /// The index of the top layer's h in the state.
  std::size_t top_h() const;
  CellKind kind() const;
  bool implicit() const;

 private:
  std::unique_ptr<detail::StackedCell> cell_;
};

/// A fine step's recorded graph (ChainProbe::record), for its vector-Jacobian products.
class StepGraph {
 public:
  StepGraph();
  ~StepGraph();
  StepGraph(StepGraph&&) noexcept;
  StepGraph& operator=(StepGraph&&) noexcept;
  bool recorded() const;

 private:
  friend class ChainProbe;
  std::unique_ptr<detail::Graph> graph_;
};

/// The chain of a LayerParallel module that holds every layer (one rank: MPI_COMM_SELF),
/// evaluated by the code its solvers run, with the module's random streams (its training mode
/// and next batch index) and buffer rules: steps without a graph (coarse steps composed as the
/// solvers compose them), a fine step that records its graph, and adjoint steps.
class ChainProbe {
 public:
  /// Throws weft::InvalidOption when the module does not hold every chain layer.
  explicit ChainProbe(LayerParallel module);

  LayerParallel& module() { return module_; }
  std::int64_t layers() const;
  bool is_transition(std::int64_t n) const;
  /// h of layer n's stage; 0 for a transition.
  double step_size(std::int64_t n) const;
  /// The states at points 0..N of a forward of `input` without graphs (point 0: the open
  /// layer's output).
  std::vector<torch::Tensor> states(const torch::Tensor& input);
  /// The step from point a to point b > a at x without a graph; `depth` > 0: x lives on a grid
  /// 2^depth times coarser in space.
  torch::Tensor step(std::int64_t a, std::int64_t b, const torch::Tensor& x, int depth = 0);
  /// The fine step n at x, recording layer n's graph into `graph`; returns the step's value.
  torch::Tensor record(std::int64_t n, const torch::Tensor& x, StepGraph& graph);
  /// The adjoint step from point b back to a at the forward state x_a: (dΦ/dx)ᵀ λ. A fine step
  /// reuses `graph` (recorded here when empty; kept with `retain_graph`); with `param_grads`
  /// a fine step also gives layer a's parameter gradients (dΦ/dθ)ᵀ λ, for the parameters that
  /// required gradients when the probe was built. Steps need 0 <= a < b <= layers()
  /// (weft::InvalidOption otherwise).
  torch::Tensor vjp(std::int64_t a, std::int64_t b, const torch::Tensor& x_a,
                    const torch::Tensor& lambda, StepGraph& graph, bool retain_graph,
                    std::vector<torch::Tensor>* param_grads = nullptr, int depth = 0);

 private:
  detail::Core& core();
  LayerParallel module_;
};

}  // namespace weft::nn
