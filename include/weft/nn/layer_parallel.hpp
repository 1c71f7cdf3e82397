#pragma once
// weft::nn::LayerParallel: a residual network whose N step layers are spread over the ranks of
// an MPI communicator and run with MGRIT, forward and backward, inside LibTorch autograd.
//
//   x_0 = open(input)                      on the input rank (rank 0, the owner of point 0)
//   x_{n+1} = x_n + h F_n(x_n), n < N      h = T/N; layer n lives on the owner of point n+1
//   output = close(x_N)                    on the output rank (P-1, the owner of point N)
//
// The fine points 0..N are block-distributed like the MGRIT solver's own distribution
// (mgrit::Distribution::block_begin(N+1, P, rank)); a rank owns the layers of the steps into
// its points, so every rank computes as many fine steps as it has layers and parameter memory
// per rank is ∝ N/P. The adjoint solve moves each block boundary one point left, so that its
// step into n runs where layer n lives (each rank receives x at its first point's predecessor
// once per forward for that). The forward pass is an MGRIT solve of the chain above
// (steps on coarse level l apply the fine layer of the C-point with step h·cf^l, so a rank also
// keeps parameter copies of the few remote layers its steps start from: ghost layers, refreshed
// every forward). The backward pass is an MGRIT solve of the adjoint chain
// λ_n = λ_{n+1} + h (∂F_n/∂x(x_n))ᵀ λ_{n+1} in reverse time; its final fine sweep accumulates
// the parameter gradients h (∂F_n/∂θ_n)ᵀ λ_{n+1}. With one level (the default, "exact mode")
// both solves are sequential chains and outputs and gradients equal ordinary backprop.
//
// The user's loop, the same code on EVERY rank of the communicator:
//
//   weft::nn::Network net;
//   net.steps = 32;  net.t_final = 1.0;
//   net.step  = [](int64_t n) -> weft::nn::Layer { return MyBlock(...); };  // or a Sequential
//   net.open  = []() -> weft::nn::Layer { return MyOpening(...); };        // optional
//   net.close = []() -> weft::nn::Layer { return MyClassifier(...); };     // optional
//   weft::nn::LayerParallel model(MPI_COMM_WORLD, net, weft::nn::LayerParallelOptions());
//   torch::optim::SGD optimizer(model->parameters(), 0.1);   // this rank's parameters only
//   for (auto& [images, labels] : batches) {  // images read on rank 0, labels on rank P-1
//     optimizer.zero_grad();
//     torch::Tensor out = model->forward(images);     // logits on the output rank,
//                                                     // a 0-dim placeholder elsewhere
//     torch::Tensor loss = model->loss(out, [&](const torch::Tensor& logits) {
//       return torch::nn::functional::cross_entropy(logits, labels);  // runs on P-1 only
//     });                                            // the loss value on every rank
//     loss.backward();                               // every rank: the adjoint MGRIT solve
//     optimizer.step();
//   }
//
// Rules:
// - forward() and the backward of its result are collective: every rank calls both, in the
//   same order, one backward per forward (a backward of an older forward throws InvalidOption).
//   Without loss(): on the output rank backpropagate your loss; on the other ranks call
//   `out.backward()` on the placeholder (its gradient is ignored), so that their part of the
//   adjoint solve runs.
// - `input` is read on the input rank only (others may pass any tensor, even undefined). The
//   state shape (of x_0) is broadcast from the input rank every batch; batch sizes may change.
// - Step layers must map a tensor of their stage's state shape to the same shape (transitions
//   may change it; each stage's shape is found by applying the transitions to zeros), be
//   deterministic (the adjoint re-evaluates them at the stored x_n), and not share parameters.
// - The factories must be callable on any rank for any index and return modules of the same
//   structure for the same index every time: they build local layers, ghost copies (whose
//   parameters are overwritten) and the gathered sequential network.
// - Parameter names match the sequential network's: "open.*", "step_<n>.*", "close.*", so
//   per-rank state dicts are disjoint subsets of gather_sequential()'s.
// - Parameter gradients reach `.grad()` through autograd (the local step-layer parameters are
//   inputs of the autograd function), so zero_grad(), hooks and torch::optim work as usual.
// - Inference: run forward() under torch::NoGradGuard (still collective; no graphs are kept).
// - Errors that one rank detects are shared first, so every rank throws the same kind
//   (InvalidOption, BadData, Divergence) and none hangs.
// - The module must outlive the backward of its last forward.
// - Batch norm (torch::nn::BatchNorm2d as you write it) may sit in steps and transitions: every
//   evaluation normalizes with the statistics of the batch it is applied to, and the running
//   statistics change exactly once per batch, at the forward solve's final fine sweep (whose
//   states the gradients use); every other evaluation (coarse levels, ghost copies, iterations,
//   adjoint re-evaluations) leaves the module's buffers as they were. On levels coarsened in
//   space steps normalise with the running statistics of the batch's start instead
//   (LayerParallelOptions::spatial_running_statistics). With buffers present the
//   forward's final sweep is F then C, so every layer is evaluated once at its final input.
// - Dropout (any layer drawing random numbers): in training mode every evaluation of chain
//   layer n within one batch draws from a generator seeded by layer_stream_seed(seed, batch, n)
//   (seed: LayerParallelOptions::seed), so one batch uses one mask per layer on every level,
//   rank count and copy; the caller's generator state is restored afterwards.
// - backward() may run MPI on an autograd thread for device tensors: initialise MPI with at
//   least MPI_THREAD_SERIALIZED there. On CPU it runs on the calling thread.
#include <mpi.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "weft/nn/network.hpp"
#include "weft/nn/options.hpp"

namespace weft::nn {

namespace detail {
struct Core;
}  // namespace detail
class ChainProbe;

class LayerParallelImpl : public torch::nn::Module {
 public:
  /// Collective over `comm` (duplicated internally). Throws weft::InvalidOption on every rank
  /// when N < P, N < 1, T is not finite and positive, the step factory is missing, or the
  /// options are invalid.
  LayerParallelImpl(MPI_Comm comm, Network network, LayerParallelOptions options = {});
  /// Data x layer parallelism: `layer_comm` holds this replica's ranks (the layers are spread
  /// over them), `data_comm` the ranks of the other replicas with the same layer rank (see
  /// split_replicas). Each replica runs its own share of the batch; after backward the
  /// parameter gradients are averaged over `data_comm` (bucketed all-reduces started during
  /// the adjoint solve; the open and close layers' at the end of backward). Batch-norm
  /// statistics stay per replica, as in PyTorch's DistributedDataParallel.
  LayerParallelImpl(MPI_Comm layer_comm, MPI_Comm data_comm, Network network,
                    LayerParallelOptions options = {});
  ~LayerParallelImpl() override;

  /// Collective. Runs the open layer (input rank), the forward MGRIT solve, and the close layer
  /// (output rank). Returns close(x_N) on the output rank and a 0-dim zero placeholder that is
  /// connected to the autograd graph on every other rank.
  /// Throws weft::BadData on every rank when the input rank's x_0 is undefined or not finite,
  /// weft::Divergence on every rank when a multilevel solve diverges.
  torch::Tensor forward(const torch::Tensor& input);

  /// Collective. On the output rank: criterion(output), which must be a scalar. On the other
  /// ranks: a scalar that depends on the placeholder `output` (so backward() reaches the
  /// adjoint solve) and holds the same value. Call backward() on the result on every rank.
  torch::Tensor loss(const torch::Tensor& output,
                     const std::function<torch::Tensor(const torch::Tensor&)>& criterion);
  /// Collective: `value` of the output rank, on every rank (metrics such as accuracy).
  double broadcast_from_output(double value) const;

  /// Collective, evaluation mode only (call eval() first), no graph: the exact network
  /// (sequential chain, no MGRIT) on `count` inputs, pipelined: the input rank applies the open
  /// layer and its layers to input(j) and passes the state on while it starts on input(j + 1),
  /// and so on down the chain, so P ranks take about (count + P - 1) / count times one rank's
  /// share of the work instead of P times it. `input(j)` is called on the input rank for
  /// j = 0..count-1 in order, `output(j, y)` on the output rank with y = close(x_N) of input j.
  /// An exception on one rank (from input, output or a layer) reaches every rank: the chain
  /// finishes its messages, then every rank throws (the failing rank its own error).
  /// Throws InvalidOption in training mode.
  void infer(std::int64_t count, const std::function<torch::Tensor(std::int64_t)>& input,
             const std::function<void(std::int64_t, const torch::Tensor&)>& output);

  /// Collective: the whole network on `root` (an empty holder elsewhere), parameters and
  /// buffers copied, for inference, export and checks.
  SequentialNetwork gather_sequential(int root = 0);
  /// Collective: the inverse: copies parameters and buffers of `full` (read on `root` only; may
  /// be an empty holder elsewhere) into the distributed layers (checkpoint loading).
  void load_sequential(const SequentialNetwork& full, int root = 0);

  /// Collective: new solver options (rebuilds the solvers and the ghost layers).
  void set_options(const LayerParallelOptions& options);
  const LayerParallelOptions& options() const;
  /// The last batch on this rank.
  const BatchStatistics& statistics() const;

  MPI_Comm comm() const;
  int rank() const;
  int ranks() const;
  /// The replicas' communicator (MPI_COMM_NULL without data parallelism), its size and this
  /// replica's index in it.
  MPI_Comm data_comm() const;
  int data_ranks() const;
  int replica() const;
  /// The batch index of the next training-mode forward (random streams, see
  /// layer_stream_seed); 0 at construction; set it when resuming.
  std::int64_t batch_index() const;
  void set_batch_index(std::int64_t batch);
  /// Chain layer n is a transition between stages.
  bool is_transition(std::int64_t n) const;
  std::int64_t steps() const;
  double step_size() const;
  bool owns_input() const { return rank() == 0; }
  bool owns_output() const { return rank() == ranks() - 1; }
  /// This rank's fine points [first_point, end_point) and layers [first_layer, end_layer).
  std::int64_t first_point() const;
  std::int64_t end_point() const;
  std::int64_t first_layer() const;
  std::int64_t end_layer() const;
  /// A local layer (first_layer() <= n < end_layer()).
  Layer& layer(std::int64_t n);
  /// Empty on ranks that do not own them.
  Layer& open();
  Layer& close();
  /// Indices of the remote layers this rank keeps copies of (for the coarse forward steps).
  std::vector<std::int64_t> ghost_layers() const;

  // Device and dtype changes apply to the ghost layers too.
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Device device, bool non_blocking = false) override;

 private:
  friend class ChainProbe;  // evaluates the chain with the solvers' code (weft/nn/probes.hpp)
  std::unique_ptr<detail::Core> core_;
};
TORCH_MODULE(LayerParallel);

/// The communicators of data x layer parallelism: `world`'s P ranks as `data_ranks` replicas of
/// P / data_ranks consecutive ranks each (replica k holds world ranks k P/D .. (k+1) P/D - 1).
class ReplicaGroups {
 public:
  /// Collective over `world`. Throws InvalidOption on every rank when data_ranks < 1 or does
  /// not divide P.
  ReplicaGroups(MPI_Comm world, int data_ranks);
  ~ReplicaGroups();
  ReplicaGroups(const ReplicaGroups&) = delete;
  ReplicaGroups& operator=(const ReplicaGroups&) = delete;

  MPI_Comm layer_comm() const { return layers_; }  ///< this replica's ranks
  MPI_Comm data_comm() const { return data_; }     ///< the same layer rank in every replica
  int replica() const { return replica_; }
  int replicas() const { return replicas_; }

 private:
  MPI_Comm layers_ = MPI_COMM_NULL, data_ = MPI_COMM_NULL;
  int replica_ = 0, replicas_ = 1;
};

}  // namespace weft::nn
