#pragma once
// weft::nn::Recurrent: a stacked GRU or LSTM whose sequence steps are the MGRIT time points,
// spread over the ranks of an MPI communicator, inside LibTorch autograd.
//
//   s_0 = (h0, c0)                          the hidden states of the L stacked cells
//   s_{t+1} = Φ(s_t, x_t), t < T            one step of every stacked cell (torch's equations)
//   output_t = h^{L-1}_{t+1}                the top cell's hidden state
//
// The state s_t is a fixed tuple of tensors (GRU: h of each layer; LSTM: h and c of each layer).
// The points 0..T are block-distributed as the MGRIT solver distributes them; step t (from s_t
// to s_{t+1}, with the input x_t) runs on the owner of point t+1, so each rank computes a chunk
// of the sequence (local_steps()). Coarse MGRIT levels step from a coarse point a to the next b
// with ONE cell evaluation Φ(s_a, x̄_ab), x̄_ab = x_a (the input at the coarse step's start,
// TorchBraid's choice) or the mean of x_a .. x_{b-1} (RecurrentOptions::coarse_input). The
// backward pass is the adjoint MGRIT solve in reverse time,
// λ_t = (∂Φ/∂s(s_t, x_t))ᵀ λ_{t+1} + (∂loss/∂output_{t-1} in the top h), whose final fine sweep
// computes the parameter gradients (∂Φ/∂θ)ᵀ λ_{t+1} and the input gradients (∂Φ/∂x_t)ᵀ λ_{t+1}
// of the local steps. Parameter gradients are summed over the ranks in one fused all-reduce,
// input gradients gathered, the initial-state gradient broadcast. With one level (the default,
// "exact mode") both solves are sequential chains over the ranks and every result equals
// torch::nn::GRU / torch::nn::LSTM (same parameters) up to rounding.
//
// Usage, the same code on EVERY rank of the communicator:
//
//   weft::nn::Recurrent rnn(MPI_COMM_WORLD,
//       weft::nn::RecurrentOptions(weft::nn::CellKind::GRU, /*input=*/28, /*hidden=*/64)
//           .num_layers(2));
//   torch::nn::Linear head(64, 10);
//   torch::optim::Adam opt(...rnn->parameters() and head->parameters()...);
//   auto out = rnn->forward(x);                    // x: [T, B, input] (sequence first)
//   auto loss = cross_entropy(head(out.h_n[-1]), labels);
//   loss.backward();  opt.step();                  // adjoint MGRIT solve on every rank
//
// Rules:
// - Replicated semantics: input, initial state, parameters and every result are the same on
//   every rank (parameters are broadcast from rank 0 at construction; gradients are summed over
//   the ranks). So the user's loss and optimizer run identically on every rank, and
//   forward() and the backward of its results are collective: every rank calls both, in the
//   same order, one backward per forward (a backward of an older forward throws InvalidOption).
// - The input x ([T, B, input_size], floating point, finite) must be the same on every rank;
//   each rank reads only the steps it computes (and, on coarse levels, the inputs of its
//   coarse steps). T >= number of ranks; T and B may change between calls.
// - Distributed mode, forward_local(): each rank passes, and gets back, only the rows of its
//   own steps (local_steps(T)); see there. Parameters stay replicated. Both modes may be mixed
//   between batches of one module.
// - Errors are agreed by all ranks first: every rank throws the same kind (InvalidOption for
//   T < ranks; BadData for a wrong shape or NaN/Inf input; Divergence) and none hangs.
// - Inference: call forward() under torch::NoGradGuard (no boundary states are kept).
// - The module must outlive the backward of its last forward.
// - Exact mode keeps each local step's autograd graph from the forward sweep until the adjoint
//   uses it (memory: the local steps' activations, as in ordinary backprop);
//   LayerParallelOptions::cache_graphs(false) recomputes each step in the adjoint instead.
#include <mpi.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "weft/nn/options.hpp"

namespace weft::nn {

namespace detail {
class RecurrentCore;
}  // namespace detail

enum class CellKind { GRU, LSTM };

/// "gru" or "lstm".
std::string to_string(CellKind kind);

/// The input of a coarse step from point a to point b > a + 1 (one cell evaluation that stands
/// for the b - a fine steps with inputs x_a .. x_{b-1}).
enum class CoarseInput {
  Start,  ///< x_a, the input at the coarse step's start (TorchBraid's choice)
  Mean,   ///< (x_a + ... + x_{b-1}) / (b - a), the mean of the inputs of the replaced steps
};

/// "start" or "mean".
std::string to_string(CoarseInput input);

struct RecurrentOptions {
  RecurrentOptions(CellKind cell, std::int64_t input_size, std::int64_t hidden_size)
      : cell_(cell), input_size_(input_size), hidden_size_(hidden_size) {}

  /// Throws weft::InvalidOption naming the option and its value.
  void validate() const;
  /// Tensors in the state tuple: L (GRU) or 2L (LSTM: h and c of each layer).
  std::int64_t state_parts() const;
  /// GRU (gates r, z, n) or LSTM (gates i, f, g, o), as torch::nn::GRU/LSTM.
  TORCH_ARG(CellKind, cell);
  /// Features of x_t (>= 1).
  TORCH_ARG(std::int64_t, input_size);
  /// Features of h (>= 1).
  TORCH_ARG(std::int64_t, hidden_size);
  /// Stacked cells L (>= 1).
  TORCH_ARG(std::int64_t, num_layers) = 1;
  /// Also return the top cell's hidden state at every step ([T, B, H], gathered on every rank).
  TORCH_ARG(bool, output_sequence) = false;
  /// The MGRIT solves (exact mode by default).
  TORCH_ARG(LayerParallelOptions, solver);
  /// The input of coarse MGRIT steps (no effect in exact mode; a converged multilevel solve
  /// gives the same result with either, only the convergence speed differs).
  TORCH_ARG(CoarseInput, coarse_input) = CoarseInput::Start;
  /// 0 (default): torch's explicit cells, s_{t+1} = Φ(s_t, x_t). Δt > 0: the implicit
  /// (ODE-style) cell, one backward-Euler step of ds/dt = Φ(s, x) − s,
  ///   s_{t+1} = s_t + Δt (Φ(s_{t+1}, x_t) − s_{t+1}),
  /// solved by `implicit_iterations` fixed-point iterations y <- (s_t + Δt Φ(y, x_t)) / (1 + Δt)
  /// from y = s_t; the cell IS this map (gradients are exact for it, whether or not the
  /// iteration has converged). A coarse step over b − a steps uses Δt (b − a). Δt = 1 with the
  /// explicit (forward-Euler) step would be torch's cell. Not torch::nn::GRU/LSTM any more.
  TORCH_ARG(double, implicit_step) = 0;
  /// Fixed-point iterations of the implicit cell (1 .. 2^31 - 1).
  TORCH_ARG(std::int64_t, implicit_iterations) = 3;
};

/// What forward() returns, the same on every rank (shapes as torch::nn::GRU/LSTM).
struct RecurrentOutput {
  torch::Tensor output;  ///< [T, B, H] with output_sequence(true); a 0-element tensor otherwise
  torch::Tensor h_n;     ///< [L, B, H] the final hidden state of every layer
  torch::Tensor c_n;     ///< [L, B, H] the final cell state (LSTM); a 0-element tensor for GRU
};

/// The two solves of the last batch on this rank.
struct RecurrentStatistics {
  std::int64_t batch = 0;
  SolveReport forward;
  SolveReport backward;
  double reduce_seconds = 0;  ///< the fused all-reduce of the parameter gradients
};

class RecurrentImpl : public torch::nn::Module {
 public:
  /// Collective over `comm` (duplicated internally): the parameters are created on rank 0
  /// (torch's initialisation, uniform in ±1/sqrt(H)) and broadcast. Parameter names are
  /// torch::nn::GRU/LSTM's: weight_ih_l<k>, weight_hh_l<k>, bias_ih_l<k>, bias_hh_l<k>.
  /// Throws weft::InvalidOption on every rank for invalid options.
  RecurrentImpl(MPI_Comm comm, RecurrentOptions options);
  ~RecurrentImpl() override;

  /// Collective. `input` [T, B, input_size]; `h0` (and `c0` for LSTM) [L, B, H], zeros when
  /// undefined. Gradients reach input, h0, c0 and the parameters through autograd.
  RecurrentOutput forward(const torch::Tensor& input, const torch::Tensor& h0 = {},
                          const torch::Tensor& c0 = {});

  /// Collective, distributed mode: each rank passes only the inputs of its own steps,
  /// `local_input` [local steps, B, input_size] with rows local_steps(T) of the sequence (T is
  /// the sum over the ranks; every rank's chunk must have its share: BadData otherwise). The
  /// inputs that coarse steps need from other ranks are sent by their owners. Returns the local
  /// part of the output sequence, [local steps, B, H] (with output_sequence(true)), and h_n, c_n
  /// as forward() (the same on every rank); the input gradient is the local chunk's. h0, c0 are
  /// the same on every rank (as in forward()). Gradients: the loss is taken as the sum over the
  /// ranks of each rank's terms in its output chunk, plus the terms in h_n/c_n, which count once
  /// (the last rank's gradient of them is used: compute them alike on every rank). Parameter
  /// gradients are the gradient of that loss, on every rank; the h0/c0 gradient is rank 0's.
  /// Results equal forward()'s rows of the same sequence (exact mode: to rounding).
  RecurrentOutput forward_local(const torch::Tensor& local_input, const torch::Tensor& h0 = {},
                                const torch::Tensor& c0 = {});

  /// Collective: new solver options (the solvers are rebuilt at the next forward).
  void set_solver(const LayerParallelOptions& solver);
  const RecurrentOptions& options() const;
  const RecurrentStatistics& statistics() const;
  /// The steps [first, end) this rank computes for a sequence of `length` steps.
  std::pair<std::int64_t, std::int64_t> local_steps(std::int64_t length) const;

  MPI_Comm comm() const;
  int rank() const;
  int ranks() const;

 private:
  RecurrentOutput run(const torch::Tensor& input, const torch::Tensor& h0, const torch::Tensor& c0,
                      bool distributed);
  std::unique_ptr<detail::RecurrentCore> core_;
};
TORCH_MODULE(Recurrent);

}  // namespace weft::nn
