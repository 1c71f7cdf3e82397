#pragma once
// Private to weft_nn. One batch through the chain: the forward MGRIT solve over tensor states
// (x_0 given on the input rank), and the adjoint MGRIT solve in reverse time (λ_N given on the
// output rank) whose final fine sweep accumulates the parameter gradients. Per-batch inputs come
// in as arguments; the solvers are rebuilt only when the input's shape or dtype changes.
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "chain.hpp"
#include "gradient_sync.hpp"
#include "layer_bank.hpp"
#include "layer_evaluator.hpp"
#include "placement.hpp"
#include "solve_pair.hpp"
#include "spatial.hpp"
#include "weft/mgrit/solver.hpp"
#include "weft/nn/options.hpp"

namespace weft::nn::detail {

class BatchSolve;

/// The state shape of every stage, from x_0's shape by applying the transitions to zeros.
struct StageShapes {
  std::vector<std::vector<std::int64_t>> shape;  ///< per stage
  torch::Dtype dtype = torch::kFloat32;
  torch::Device device = torch::kCPU;
  torch::TensorOptions options() const {
    return torch::TensorOptions().dtype(dtype).device(device);
  }
};

/// Vector operations and MPI buffers of tensor states, shared by both Apps. Initial guesses
/// share one zero tensor per stage, so operations that write into a state first detach it from
/// that tensor (copy on write); copies of it share it too, and adding it is no operation.
struct TensorOps {
  using State = torch::Tensor;
  BatchSolve* solve = nullptr;
  bool adjoint = false;  ///< whose spatial levels (LayerParallelOptions::spatial_levels)

  void sum(double a, const torch::Tensor& x, double b, torch::Tensor& y) const;
  double norm(const torch::Tensor& u) const;
  void copy(const torch::Tensor& src, torch::Tensor& dst) const;
  std::size_t buffer_size(const torch::Tensor& like) const;
  void pack(const torch::Tensor& u, void* buffer) const;
  /// `u` holds a state of the sender's point (its shape and dtype).
  void unpack(const void* buffer, torch::Tensor& u) const;
  /// Restriction / interpolation in space where the coarser level is flagged, copies elsewhere.
  void coarsen(const torch::Tensor& fine, torch::Tensor& coarse, int fine_level) const;
  void refine(const torch::Tensor& coarse, torch::Tensor& fine, int coarse_level) const;
  /// How many times level `level`'s states are restricted in space.
  int depth(int level) const;
};

/// x_b = Φ(x_a): one layer, or a coarse step (Chain::segments).
struct ForwardApp : TensorOps {
  torch::Tensor init(double t) const;
  void step(const torch::Tensor& in, torch::Tensor& out, double t0, double t1,
            const mgrit::StepInfo& info) const;
};

/// λ_a = (∂Φ_{a→b}/∂x(x_a))ᵀ λ_b from b = info.from down to a = info.to; on the final fine
/// sweep also accumulates the parameter gradients of layer a.
struct AdjointApp : TensorOps {
  torch::Tensor init(double t) const;
  void step(const torch::Tensor& in, torch::Tensor& out, double t0, double t1,
            const mgrit::StepInfo& info) const;
};

class BatchSolve {
 public:
  BatchSolve(MPI_Comm comm, const Chain& chain, const Placement& placement, LayerBank& bank,
             LayerEvaluator& evaluator, GradientSync& sync, BatchStatistics& stats);

  /// New options (solvers rebuilt at the next forward).
  /// New options, with the placement (the owner's, given at construction) already updated.
  void configure(const LayerParallelOptions& options);
  /// Drops the solvers and everything stored (device changes, failures).
  void reset();
  bool ready() const { return pair_.ready(); }

  /// Collective. Prepares solvers for states of x_0's `shape` and `dtype` (from the input rank).
  void prepare(const std::vector<std::int64_t>& shape, torch::Dtype dtype);
  /// Collective: x_N on the output rank (undefined elsewhere). `x0` is read on rank 0.
  /// `record_graphs`: keep each local layer's graph from the final sweep for the adjoint;
  /// `needs_backward`: also fetch x at the point before this rank's first (the adjoint's input).
  torch::Tensor forward(const torch::Tensor& x0, bool record_graphs, bool needs_backward);
  /// Collective: λ_0 on the input rank (undefined elsewhere) and the gradients of the local
  /// layers' trainable parameters, in LayerBank::trainable() order.
  std::vector<torch::Tensor> backward(const torch::Tensor& lambda_N);

  const StageShapes& shapes() const { return shapes_; }
  const std::vector<std::int64_t>& shape_of_point(std::int64_t p) const {
    return shapes_.shape[static_cast<size_t>(chain_.stage_of_point(p))];
  }
  /// The state shape of point p on a level restricted `depth` times in space.
  const std::vector<std::int64_t>& shape_of_point(std::int64_t p, int depth) const {
    return depth_shapes_[static_cast<size_t>(depth)][static_cast<size_t>(chain_.stage_of_point(p))];
  }
  /// One zero state per stage, shared by all initial guesses.
  const torch::Tensor& zero_of_point(std::int64_t p);
  bool is_shared_zero(const torch::Tensor& t) const;

 private:
  friend struct TensorOps;
  friend struct ForwardApp;
  friend struct AdjointApp;

  void find_shapes(const std::vector<std::int64_t>& shape0, torch::Dtype dtype);
  void validate_layers();
  /// Per-depth stage shapes for the levels the solvers built, checked (InvalidOption).
  void find_spatial_shapes();
  /// x_n restricted `depth` times (cached for the adjoint solve).
  const torch::Tensor* forward_state(std::int64_t n, int depth);
  const torch::Tensor* forward_state(std::int64_t n) const;

  MPI_Comm comm_;
  int rank_ = 0, ranks_ = 1;
  const Chain& chain_;
  const Placement& placement_;  ///< the owner's (Core's)
  LayerBank& bank_;
  LayerEvaluator& evaluator_;
  GradientSync& sync_;
  BatchStatistics& stats_;
  LayerParallelOptions options_;
  std::int64_t lo_ = 0, hi_ = 0;  ///< forward points

  StageShapes shapes_;
  std::vector<std::int64_t> input_shape_;
  std::vector<torch::Tensor> zeros_;  ///< per stage

  // Spatial coarsening: depth per level, stage shapes per depth, restricted forward states.
  std::vector<int> forward_depth_, adjoint_depth_;
  std::vector<std::vector<std::vector<std::int64_t>>> depth_shapes_;
  mutable SpatialTransfer transfer_;
  std::map<std::pair<int, std::int64_t>, torch::Tensor> coarse_x_;

  ForwardApp fapp_;
  AdjointApp aapp_;
  SolvePair<ForwardApp, AdjointApp> pair_;  ///< the solvers and the boundary state x_{lo-1}

  // per batch
  bool record_graphs_ = false;
  torch::Tensor x0_, lambda_N_;
  std::vector<Graph> graphs_;  ///< per local layer
  /// The adjoint's coarse steps (level, to, from) of this batch: each linearizes at the same
  /// forward state in every iteration, so its graph is built at its first visit and reused.
  std::map<std::tuple<int, std::int64_t, std::int64_t>, Graph> coarse_graphs_;
  std::vector<std::vector<torch::Tensor>> grad_acc_;
  mutable torch::Tensor staging_;
};

}  // namespace weft::nn::detail
