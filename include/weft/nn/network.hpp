#pragma once
// The description of a layer-parallel network and its sequential reference, apart from the
// module that runs it in parallel (layer_parallel.hpp): Layer (any tensor-to-tensor module),
// the factories, Stage and Network (the chain of residual steps and transitions), the random
// streams of layers that draw random numbers, and SequentialNetwork (the whole chain on one
// rank, with the same parameter names and masks).
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>
#include <vector>

namespace weft::nn {

/// A module with a tensor-to-tensor forward, held by pointer: anything a factory returns.
/// Converts implicitly from module holders (torch::nn::Sequential, torch::nn::Linear, your
/// TORCH_MODULE types), from shared pointers to module classes, and from torch::nn::AnyModule.
class Layer {
 public:
  Layer() = default;
  template <class M>
  Layer(torch::nn::ModuleHolder<M> holder)  // NOLINT(google-explicit-constructor)
      : Layer(holder.ptr()) {}
  template <class M, class = std::enable_if_t<std::is_base_of_v<torch::nn::Module, M>>>
  Layer(std::shared_ptr<M> module)  // NOLINT(google-explicit-constructor)
      : module_(module),
        forward_([module](const torch::Tensor& x) -> torch::Tensor { return module->forward(x); }) {
  }
  Layer(torch::nn::AnyModule any)  // NOLINT(google-explicit-constructor)
      : module_(any.is_empty() ? nullptr : any.ptr()),
        forward_(
            [any](const torch::Tensor& x) mutable -> torch::Tensor { return any.forward(x); }) {}

  torch::Tensor forward(const torch::Tensor& x) const { return forward_(x); }
  const std::shared_ptr<torch::nn::Module>& ptr() const { return module_; }
  torch::nn::Module& module() const { return *module_; }
  bool is_empty() const { return module_ == nullptr; }

 private:
  std::shared_ptr<torch::nn::Module> module_;
  std::function<torch::Tensor(const torch::Tensor&)> forward_;
};

/// F_n (or G_n for a transition) for layer n, numbered along the whole chain (0 <= n < N).
using StepFactory = std::function<Layer(std::int64_t layer)>;
/// The open or close layer.
using LayerFactory = std::function<Layer()>;

/// A run of residual steps of one state shape, and the transition to the next stage.
struct Stage {
  std::int64_t steps = 0;  ///< N_s >= 1 residual steps x <- x + h_s F_n(x)
  double t_final = 1.0;    ///< T_s; h_s = T_s / N_s
  StepFactory step;        ///< F_n for the stage's steps (n: chain index)
  /// G_n after this stage (required for every stage but the last; none after the last):
  /// x <- G(x), free to change the state's shape (a stride-2 convolution, pooling).
  StepFactory transition;
};

/// The network: its stages and how to build its layers. One stage: set steps, t_final and step
/// (as before stages existed); several: fill `stages` and leave `steps` 0.
///
/// The chain: stage 0's steps, transition 0, stage 1's steps, ..., stage S-1's steps; layer n
/// maps point n to point n+1, N = sum N_s + S - 1 layers. Parameter names follow the chain:
/// "step_<n>.*" for residual steps, "transition_<n>.*" for transitions.
struct Network {
  std::int64_t steps = 0;     ///< N step layers of a one-stage network (N >= number of ranks)
  double t_final = 1.0;       ///< T; the step size is h = T/N
  StepFactory step;           ///< required for a one-stage network
  std::vector<Stage> stages;  ///< a multi-stage network (then steps = 0, step empty)
  LayerFactory open;          ///< optional; built on the input rank (and a gather root)
  LayerFactory close;         ///< optional; built on the output rank (and a gather root)

  /// The stages, whichever way the network was described (one stage from steps/t_final/step).
  /// Throws InvalidOption naming the problem when the description is inconsistent.
  std::vector<Stage> resolved_stages() const;
  /// N: layers along the chain, transitions included.
  std::int64_t layers() const;
};

/// Random streams of layers that draw random numbers (dropout): within one batch every
/// evaluation of chain layer n draws from a generator seeded by (seed, batch, n) and the
/// caller's generator state is restored afterwards. Used by LayerParallel and
/// SequentialNetwork alike, so both apply the same masks.
std::uint64_t layer_stream_seed(std::uint64_t seed, std::int64_t batch, std::int64_t layer);

/// The whole network on one rank: open, then the chain (x <- x + h_s F_n(x) for residual
/// steps, x <- G_n(x) for transitions), then close. Parameter names: "open.*", "step_<n>.*",
/// "transition_<n>.*", "close.*". In training mode, chain layers draw random numbers from
/// their streams (layer_stream_seed) with the batch index counted like LayerParallel's.
class SequentialNetworkImpl : public torch::nn::Module {
 public:
  SequentialNetworkImpl(const Network& network, std::uint64_t seed = 0);
  torch::Tensor forward(torch::Tensor x);

  /// Chain layers N (transitions included).
  std::int64_t steps() const { return static_cast<std::int64_t>(steps_.size()); }
  /// h of the first stage.
  double step_size() const { return h_.empty() ? 0.0 : h_.front(); }
  /// h of layer n (0 for a transition).
  double step_size(std::int64_t n) const { return h_.at(static_cast<size_t>(n)); }
  bool is_transition(std::int64_t n) const { return h_.at(static_cast<size_t>(n)) == 0.0; }
  Layer& step(std::int64_t n) { return steps_.at(static_cast<size_t>(n)); }
  const Layer& step(std::int64_t n) const { return steps_.at(static_cast<size_t>(n)); }
  /// Empty when the Network has none.
  Layer& open() { return open_; }
  const Layer& open() const { return open_; }
  Layer& close() { return close_; }
  const Layer& close() const { return close_; }
  /// The batch index of the next training-mode forward (0 at construction).
  std::int64_t batch_index() const { return batch_; }
  void set_batch_index(std::int64_t batch) { batch_ = batch; }

 private:
  std::vector<double> h_;
  Layer open_, close_;
  std::vector<Layer> steps_;
  std::uint64_t seed_ = 0;
  std::int64_t batch_ = 0;
};
TORCH_MODULE(SequentialNetwork);

}  // namespace weft::nn
