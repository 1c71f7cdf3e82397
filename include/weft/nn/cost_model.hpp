#pragma once
// The cost model of a training batch: the figures measured for a network's layers
// (MeasuredCosts), every rank's events of one batch as the layer-parallel module runs them
// (batch_schedule: the MGRIT solvers' own schedules, weft/mgrit/schedule.hpp, plus what the
// module does around them), and their replay on virtual clocks at any rank count
// (predict_batch). `weft predict` measures the costs and prints the predictions; the model
// itself needs neither LibTorch nor MPI.
#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "weft/mgrit/schedule.hpp"
#include "weft/nn/options.hpp"

namespace weft::nn {

/// The figures of one spatial depth d >= 1 (states restricted d times in space, as batch_solve
/// holds them on levels coarsened in space), per layer or point as in MeasuredCosts.
struct SpatialCosts {
  std::vector<std::size_t> state_bytes;  ///< per point
  std::vector<double> forward;           ///< per layer: the step on the coarse state, no graph
  std::vector<double> adjoint_build;     ///< per layer: record and vjp on the coarse state
  std::vector<double> adjoint_reuse;     ///< per layer: the vjp on its kept graph (cache_graphs)
  std::vector<double> axpy;              ///< per point
  std::vector<double> restriction;       ///< per point: depth d-1 to d
  std::vector<double> interpolation;     ///< per point: depth d to d-1
};

/// Seconds per evaluation, measured with the model's own layers at the training batch size.
/// gru/lstm: the T sequence steps are the layers (one stacked-cell step each, a coarse step one
/// too; the implicit cell's step, measured as it runs, is its fixed-point iterations), open is
/// empty, close is the head with loss and backward on every rank, and the optimizer steps every
/// parameter on every rank (the model is replicated).
struct MeasuredCosts {
  std::int64_t layers = 0;               ///< N chain layers (steps and transitions)
  std::vector<bool> transition;          ///< per layer
  std::vector<double> step_size;         ///< per layer: h of its stage (0 for a transition)
  std::vector<std::size_t> state_bytes;  ///< per point 0..N
  // Per layer n, the step into n+1 (forward) or into n (adjoint):
  std::vector<double> forward;         ///< x + h F(x) without a graph (iterations, coarse steps)
  std::vector<double> forward_record;  ///< the same, recording the graph (final fine sweep)
  std::vector<double> adjoint_reuse;   ///< λ + h (∂F/∂x)ᵀ λ on the recorded graph
  std::vector<double> adjoint_final;   ///< the same with the parameter gradients (final sweep)
  std::vector<double> adjoint_build;   ///< record the graph, then the vjp (coarse steps)
  std::vector<double> axpy;            ///< per point: y += a x on its state (FAS updates)
  std::vector<double> parameters;      ///< per layer: parameter count
  double open_forward = 0, open_backward = 0;  ///< on the input rank
  double close = 0;                  ///< close layer, loss and their backward, on the output rank
  double open_close_parameters = 0;  ///< parameter count of open (first rank) and close (last)
  double open_parameters = 0;
  double optimizer = 0;      ///< one optimizer step over all parameters
  double serial_batch = 0;   ///< plain LibTorch: forward, loss, backward, optimizer step
  bool has_buffers = false;  ///< batch norm: the forward's final sweep is F then C
  int threads = 1;           ///< torch threads the costs were measured with
  /// Spatial coarsening: the depth of each level (forward and adjoint solve; empty: none) and
  /// the figures of depths 1, 2, ... (spatial[d - 1]).
  std::vector<int> forward_depth, adjoint_depth;
  std::vector<SpatialCosts> spatial;
  /// In situ, per level of the forward and of the adjoint solve: what the solver spends on the
  /// level's steps when the model trains at one rank (its sweeps and its share of the solve's
  /// other vector work, less what the schedule prices as events of their own), over the same
  /// steps priced from the figures above (1: the isolated figures are right; empty: not
  /// measured). Steps are priced at their figure times this factor, at every rank count.
  std::vector<double> forward_in_situ, adjoint_in_situ;
  /// Per rank and batch, what the model spends outside the events priced one by one (module
  /// calls, autograd's own work, gradient bookkeeping, zero_grad), per phase: the one-rank
  /// training batch's phase time less the same phase predicted at one rank from the figures
  /// above and the in-situ factors (0 when that is negative or not measured). Every rank pays
  /// it, at every rank count: the traces show a part of each rank's batch that does not
  /// shrink with its layers.
  double fixed_forward = 0, fixed_backward = 0, fixed_optimizer = 0;
  /// Memory: this process's resident bytes before any model exists (LibTorch, MPI, the
  /// program), and the bytes the one-rank training batch holds at the end of its forward (its
  /// peak: parameters, gradients, optimizer state, the solvers' states and the graphs kept for
  /// the backward), counted by the allocator.
  double process_bytes = 0, model_bytes = 0;
  bool recurrent = false;     ///< gru/lstm (see above)
  double gradient_bytes = 0;  ///< gru/lstm: the fused all-reduce of the parameter gradients
};

/// The relative cost of each chain layer that LayerParallelOptions::layer_costs balances:
/// what every batch evaluates of it on the fine level at least once, its forward step without
/// and with a graph and its adjoint step on the graph without and with parameter gradients.
std::vector<double> layer_costs(const MeasuredCosts& m);

/// Message cost between two ranks.
struct LinkCosts {
  double latency = 0;    ///< seconds
  double bandwidth = 0;  ///< bytes per second
  std::string source;    ///< "ping-pong between ranks 0 and 1" or "default" / "flags"
};

/// One rank count's figures.
struct Prediction {
  int ranks = 1;
  double batch_seconds = 0;
  /// The batch split at the ends of its phases as `weft train` times them (when the slowest
  /// rank ends each): forward (open and the forward solve), backward (close, loss, adjoint
  /// solve, open's backward), the rest (optimizer step). They add up to batch_seconds.
  double forward_seconds = 0, backward_seconds = 0, optimizer_seconds = 0;
  double busiest_seconds = 0;  ///< steps and fixed work of the busiest rank
  /// Resident memory of the rank holding the most layers: the process plus that share of the
  /// model's bytes (the data set, which `weft train` also holds, is not included).
  double memory_bytes = 0;
};

/// The price of one solver step or level transfer under the measured costs (forward or
/// adjoint, any level, at the level's spatial depth), scaled by the level's in-situ factor
/// unless `isolated`.
double step_seconds(const MeasuredCosts& m, const mgrit::Event& e, bool cache_graphs,
                    bool isolated = false);

/// Message tags of the phases in a batch's schedule: the forward solve's keep theirs (100 +
/// level), the adjoint solve's are offset by kAdjointTags, messages outside the solves use
/// kOutsideTag; reductions outside the solves carry kOutsideTag too (the solves' carry 0).
inline constexpr int kAdjointTags = 10000;
inline constexpr int kOutsideTag = 1;

/// Every rank's events of one training batch at `ranks` ranks. Chains: open, forward solve,
/// boundary exchange, close and loss, loss broadcast, adjoint solve, open's backward, optimizer
/// step. gru/lstm (m.recurrent): forward solve, boundary exchange, final-state broadcast, head
/// and loss on every rank, adjoint solve, initial-state broadcast, the gradients' all-reduce,
/// the optimizer on every rank (nn/recurrent_solve.cpp).
/// `phase_ends`, when given, receives per rank the number of its events by the end of the
/// forward phase and of the backward phase (no message crosses either end).
mgrit::Schedule batch_schedule(const LayerParallelOptions& options, const MeasuredCosts& m,
                               int ranks,
                               std::vector<std::array<std::size_t, 2>>* phase_ends = nullptr);

/// The batch at `ranks` ranks: the schedule above on virtual clocks (mgrit::simulate).
Prediction predict_batch(const LayerParallelOptions& options, const MeasuredCosts& m,
                         const LinkCosts& link, int ranks);

/// Typical of MPI between two processes of one node over shared memory.
inline constexpr double kDefaultLatency = 2e-6;   ///< seconds
inline constexpr double kDefaultBandwidth = 5e9;  ///< bytes per second

/// Collective over `comm`: the latency (half the median round trip of 8 bytes) and bandwidth
/// (of `state_bytes`, less the latency) of messages between ranks 0 and 1, the other ranks
/// idle; with fewer than 2 ranks, the defaults above (source "defaults ...").
LinkCosts measure_link(MPI_Comm comm, std::size_t state_bytes);

/// The costs of the same single-stage network with `layers` layers: layer n takes the figures
/// of measured layer min(n, m.layers - 1), point p those of min(p, m.layers); the step size
/// becomes T / layers. For weak scaling of networks whose layers cost alike.
MeasuredCosts with_layers(const MeasuredCosts& m, std::int64_t layers, double t_final);

/// The costs with every computing figure (steps, transfers between levels, FAS updates, open,
/// close, the optimizer, the per-rank fixed costs) multiplied by `factor` > 0: what a rank pays
/// when the machine's other cores are busy too (weft::train::measure_busy_slowdown). Messages,
/// sizes, memory and the serial batch (one process on an otherwise idle machine) are unchanged.
MeasuredCosts slowed(const MeasuredCosts& m, double factor);

}  // namespace weft::nn
