#pragma once
// Options and per-batch statistics of weft::nn::LayerParallel. Free of LibTorch, so option
// parsing and reporting code (the CLI) can use it without compiling LibTorch headers.
//
//   // exact mode (the default): one level, outputs and gradients equal sequential backprop
//   weft::nn::LayerParallelOptions exact;
//   // layer-parallel: 3 levels, cf 4, 2 forward and 1 backward iteration
//   auto fast = weft::nn::LayerParallelOptions::multilevel(3, 4, 2, 1);
//   // anything mgrit::Options offers, separately per direction
//   weft::nn::LayerParallelOptions custom;
//   custom.forward(mgrit::Options().max_levels(3).cfactor(2).abs_tol(1e-10).max_iterations(20))
//         .backward(mgrit::Options().max_levels(3).cfactor(2).max_iterations(1));
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "weft/mgrit/options.hpp"
#include "weft/mgrit/result.hpp"

namespace weft::nn {

/// The kernels of a layer's 3x3 (3x3x3) convolutions on a grid 2^d times coarser in space,
/// each a linear map of the fine kernel applied per spatial dimension d times (docs/training.md,
/// "Spatial coarsening"):
/// - same: the fine kernel, as if the coarse grid were the fine one;
/// - moments: the moments sum j^a k_j (j = -1, 0, 1) of order a = 0, 1, 2 scaled by 2^-a, so
///   that on smooth states the coarse convolution approximates the fine one on the coarser
///   spacing;
/// - galerkin: R K P, the fine convolution between the coarsening's own transfers
///   (interpolation P, then K, then full-weighting restriction R), at interior points.
enum class SpatialKernels { same, moments, galerkin };
/// "same", "moments", "galerkin".
const char* to_string(SpatialKernels kernels);
/// The kernels named `name`; throws weft::InvalidOption naming `where` and the choices.
SpatialKernels spatial_kernels_from(const std::string& name, const std::string& where);

class LayerParallelOptions {
 public:
  /// Exact mode: both solves with one level (a sequential chain over the ranks).
  LayerParallelOptions();

  /// Exact mode (the default constructor's options).
  static LayerParallelOptions exact();
  /// Fixed-iteration multilevel solves (XBraid convention, skip, FCF relaxation, residuals
  /// measured but never used to stop): `levels` levels with coarsening factor `cfactor`,
  /// `forward_iterations` and `backward_iterations` cycles.
  static LayerParallelOptions multilevel(int levels, int cfactor, int forward_iterations,
                                         int backward_iterations);

  /// Options of the forward solve. The module overrides: direction (Forward) and storage of
  /// every fine point (the adjoint needs x_n). With warm_start(true) and the default initial
  /// phase, the initial phase is None (a skip phase would replace the warm states by a coarse
  /// solve). Warm starts reuse the previous batch's states while the state shape is unchanged.
  LayerParallelOptions& forward(mgrit::Options options) {
    forward_ = std::move(options);
    return *this;
  }
  /// Options of the adjoint (backward) solve. The module overrides: direction (Reverse),
  /// storage of every fine point, and the final sweep (CF: every fine interval is stepped once
  /// more, which is where parameter gradients are accumulated).
  LayerParallelOptions& backward(mgrit::Options options) {
    backward_ = std::move(options);
    return *this;
  }
  /// Keep each local layer's autograd graph y_n = F_n(x_n) between the forward solve's final
  /// sweep and the adjoint solve (and across adjoint iterations), so each layer is evaluated
  /// with autograd at most once per batch; likewise each coarse adjoint step's graph, built at
  /// its first visit in the batch and reused by later iterations (it linearizes at the same
  /// forward state every time). Memory: the activations of the local layers (as in ordinary
  /// backprop) plus one graph per coarse step of this rank. Off: every adjoint step recomputes
  /// F_n (one graph alive at a time).
  LayerParallelOptions& cache_graphs(bool on) {
    cache_graphs_ = on;
    return *this;
  }
  /// Check the network input x_0 for NaN/Inf on the input rank before each forward solve
  /// (weft::BadData on every rank when it fails).
  LayerParallelOptions& check_input(bool on) {
    check_input_ = on;
    return *this;
  }

  /// Seed of the layers' random streams (dropout): see weft::nn::layer_stream_seed.
  LayerParallelOptions& seed(std::uint64_t value) {
    seed_ = value;
    return *this;
  }
  /// Gradients of data-parallel replicas are averaged in buckets of about this many bytes,
  /// each all-reduced as soon as the adjoint's final sweep has finished its layers.
  LayerParallelOptions& bucket_bytes(std::int64_t bytes) {
    bucket_bytes_ = bytes;
    return *this;
  }

  /// Spatial coarsening of convolutional networks (4-D (N,C,H,W) or 5-D (N,C,D,H,W) states):
  /// flags[l] = 1 where level l's states are restricted in space relative to level l-1 (full
  /// weighting, stride 2 in every spatial dimension; interpolation back with the transposed
  /// stencil). One flag per level (the direction's max_levels), flags[0] = 0 (the fine level);
  /// empty (the default): every level keeps the fine grid. Coarse steps apply the same layers to
  /// the coarse states. Every stage's state must be 4-D or 5-D and have even spatial sizes on
  /// each level that is coarsened from (checked at the first batch: InvalidOption).
  /// This overload sets both directions.
  LayerParallelOptions& spatial_levels(std::vector<int> flags) {
    forward_spatial_ = flags;
    backward_spatial_ = std::move(flags);
    return *this;
  }
  LayerParallelOptions& spatial_levels(std::vector<int> forward, std::vector<int> backward) {
    forward_spatial_ = std::move(forward);
    backward_spatial_ = std::move(backward);
    return *this;
  }

  /// Which 3x3 (3x3x3) convolution kernels the layers use on levels coarsened in space
  /// (SpatialKernels; default `same`, the fine kernels on every grid). Other kernel sizes always
  /// keep theirs.
  LayerParallelOptions& spatial_kernels(SpatialKernels kernels) {
    spatial_kernels_ = kernels;
    return *this;
  }

  /// Batch norm on levels coarsened in space (on, the default): in training mode a coarse step
  /// there normalises with the layer's running statistics as they stood when the batch began
  /// (the module's eval mode), not with those of its restricted states. Restriction averages
  /// neighbouring voxels, so a restricted state's statistics differ from the fine state's (its
  /// variance is smaller), and normalising it by its own makes the coarse step a different
  /// function from the fine step it stands for. Before the first batch the running statistics
  /// are their initial values (mean 0, variance 1), which still serve far better than the
  /// restricted states' own; a module that tracks none uses its own. Off: every evaluation uses
  /// the statistics of its own states. Only coarse steps change: a converged solve, and exact
  /// mode, are the same.
  LayerParallelOptions& spatial_running_statistics(bool on) {
    spatial_running_statistics_ = on;
    return *this;
  }

  /// Relative cost of each chain layer (N entries: the steps and transitions in chain order),
  /// to place the layers by cost: each rank gets a contiguous block of at least one layer, the
  /// blocks chosen so that the largest sum of costs on one rank is as small as possible
  /// (mgrit::Distribution::balanced_blocks), and both solves follow them. Empty (the default):
  /// equal numbers of layers (the solvers' block distribution). Only where the layers run
  /// changes: outputs and gradients are those of any other placement. Not for Recurrent.
  LayerParallelOptions& layer_costs(std::vector<double> costs) {
    layer_costs_ = std::move(costs);
    return *this;
  }

  const mgrit::Options& forward() const { return forward_; }
  const mgrit::Options& backward() const { return backward_; }
  const std::vector<double>& layer_costs() const { return layer_costs_; }
  bool cache_graphs() const { return cache_graphs_; }
  bool check_input() const { return check_input_; }
  std::uint64_t seed() const { return seed_; }
  std::int64_t bucket_bytes() const { return bucket_bytes_; }
  const std::vector<int>& forward_spatial() const { return forward_spatial_; }
  const std::vector<int>& backward_spatial() const { return backward_spatial_; }
  SpatialKernels spatial_kernels() const { return spatial_kernels_; }
  bool spatial_running_statistics() const { return spatial_running_statistics_; }

  /// What the forward / adjoint solver actually runs with (the user's options plus the
  /// overrides listed above).
  mgrit::Options forward_solver_options() const;
  mgrit::Options backward_solver_options() const;

  /// Throws weft::InvalidOption naming the direction and the offending option.
  void validate() const;

 private:
  mgrit::Options forward_;
  mgrit::Options backward_;
  bool cache_graphs_ = true;
  bool check_input_ = true;
  std::uint64_t seed_ = 0;
  std::int64_t bucket_bytes_ = 1 << 20;
  std::vector<int> forward_spatial_, backward_spatial_;
  SpatialKernels spatial_kernels_ = SpatialKernels::same;
  bool spatial_running_statistics_ = true;
  std::vector<double> layer_costs_;
};

/// One line per direction: levels, cfactors, relaxation, iterations, tolerances, ... With
/// `layers_have_buffers` (batch norm), the forward's final sweep is reported as the solver runs
/// it in multilevel mode: F then C, so that every layer is evaluated once there.
std::string to_string(const LayerParallelOptions& options, bool layers_have_buffers = false);

/// One MGRIT solve of a batch (forward or adjoint), as seen by this rank.
/// How often one solve evaluated one chain layer on this rank, by kind: with the cost of each
/// kind measured in isolation this gives the solve's work bound (bench/train_step_bench).
struct LayerEvaluations {
  std::int64_t plain = 0;  ///< without a graph: x + h F(x) or G(x)
  std::int64_t recorded =
      0;                 ///< recording an autograd graph (forward final sweep, adjoint rebuilds)
  std::int64_t vjp = 0;  ///< vector-Jacobian product for the state only
  std::int64_t vjp_params = 0;  ///< for the state and the layer's parameters (final sweep)
};

struct SolveReport {
  mgrit::Result result;          ///< iterations, residual history, converged
  mgrit::Statistics statistics;  ///< hierarchy, step evaluations per level on this rank, timers
  double seconds = 0;            ///< wall time of the whole phase on this rank
  /// [level][chain layer]: the layer evaluations of the solve's steps on this rank (a coarse
  /// step counts one evaluation per layer of its composition).
  std::vector<std::vector<LayerEvaluations>> evaluations;
};

/// What the last forward/backward pair did on this rank.
struct BatchStatistics {
  std::int64_t batch = 0;           ///< forward calls so far (1 for the first batch)
  std::vector<std::int64_t> shape;  ///< the state shape x_n of this batch
  SolveReport forward;              ///< includes the ghost exchange in `seconds`
  SolveReport backward;
  double exchange_seconds = 0;       ///< shape broadcast and ghost-layer parameter exchange
  std::int64_t ghost_bytes = 0;      ///< parameter bytes received for ghost layers
  std::int64_t graphs_recorded = 0;  ///< layer graphs recorded by the forward final sweep
  std::int64_t graphs_reused = 0;    ///< adjoint steps that reused a cached graph
  std::int64_t graphs_built = 0;     ///< adjoint steps that evaluated F_n with autograd
  /// The adjoint's coarse steps (cache_graphs): graphs built at a step's first visit in the
  /// batch, and visits that reused one.
  std::int64_t coarse_graphs_built = 0, coarse_graphs_reused = 0;
  double reduce_seconds = 0;        ///< waiting for the replicas' gradient all-reduces
  std::int64_t reduce_buckets = 0;  ///< all-reduce calls for the step layers' gradients
  /// Memory on this rank: parameters and buffers of local layers (and of the ghost copies),
  /// stored states of both solves, and the cached layer graphs' saved activations (estimated
  /// as the bytes of their outputs).
  std::int64_t parameter_bytes = 0;
  std::int64_t ghost_bytes_held = 0;
  std::int64_t state_bytes = 0;
  std::int64_t graph_bytes = 0;
};

}  // namespace weft::nn
