#pragma once
// Private to weft_nn. One batch through a stacked recurrent cell: the forward MGRIT solve over
// the sequence (states: TensorTuple), and the adjoint MGRIT solve in reverse time whose final
// fine sweep computes the parameter and input gradients of the local steps. Solvers are
// rebuilt only when the sequence length changes (or the options do).
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "placement.hpp"
#include "recurrent_plan.hpp"
#include "solve_pair.hpp"
#include "tensor_tuple.hpp"
#include "weft/mgrit/solver.hpp"
#include "weft/nn/recurrent.hpp"

namespace weft::nn::detail {

/// Φ(s, x): one step of every stacked cell with torch's GRU/LSTM equations. Parameters per
/// layer k: weight_ih, weight_hh, bias_ih, bias_hh (4k .. 4k+3).
/// With implicit_step > 0 the implicit cell of RecurrentOptions::implicit_step around Φ.
struct StackedCell {
  CellKind kind = CellKind::GRU;
  std::int64_t layers = 1;
  double implicit_step = 0;
  int implicit_iterations = 0;
  /// A step that stands for `span` fine steps (the explicit cell ignores it: one evaluation).
  TensorTuple step(const TensorTuple& s, const torch::Tensor& x,
                   const std::vector<torch::Tensor>& params, std::int64_t span = 1) const;
  /// Φ itself (torch's equations).
  TensorTuple explicit_step(const TensorTuple& s, const torch::Tensor& x,
                            const std::vector<torch::Tensor>& params) const;
  /// The index of the top cell's h in the state tuple.
  size_t top_h() const {
    return static_cast<size_t>(kind == CellKind::LSTM ? 2 * (layers - 1) : layers - 1);
  }
};

class RecurrentSolve;

/// s_b = Φ(s_a, x_a) (one cell evaluation, also for coarse steps a -> b > a + 1).
struct RecurrentForwardApp : TensorTupleOps {
  RecurrentSolve* solve = nullptr;
  TensorTuple init(double t) const;
  void step(const TensorTuple& in, TensorTuple& out, double t0, double t1,
            const mgrit::StepInfo& info) const;
};

/// λ_a = (∂Φ/∂s(s_a, x_a))ᵀ λ_b + (the output gradient at a); on the final fine sweep also the
/// parameter and input gradients of step a.
struct RecurrentAdjointApp : TensorTupleOps {
  RecurrentSolve* solve = nullptr;
  TensorTuple init(double t) const;
  void step(const TensorTuple& in, TensorTuple& out, double t0, double t1,
            const mgrit::StepInfo& info) const;
};

class RecurrentSolve {
 public:
  RecurrentSolve(MPI_Comm comm, StackedCell cell, CoarseInput coarse_input,
                 RecurrentStatistics& stats);
  ~RecurrentSolve();

  void configure(const LayerParallelOptions& options);
  /// Collective: solvers for `length` steps (InvalidOption on every rank when length < ranks).
  void prepare(std::int64_t length);
  std::int64_t length() const { return length_; }
  /// This rank's steps [step_begin, step_end).
  std::int64_t step_begin() const { return placement_.layer_begin(rank_); }
  std::int64_t step_end() const { return placement_.layer_end(rank_); }
  /// Steps of rank r.
  std::int64_t step_begin(int r) const { return placement_.layer_begin(r); }
  std::int64_t step_end(int r) const { return placement_.layer_end(r); }

  struct Forward {
    TensorTuple final_state;  ///< s_T on every rank
    torch::Tensor output;     ///< [T, B, H] on every rank (when asked)
  };
  /// Collective. `x` [T, B, F] and `s0` are the same on every rank; `params` the cell's.
  /// `input_grad`: the backward will want the input gradient. `distributed`: `x` holds only
  /// this rank's steps, and the output only this rank's rows.
  Forward forward(const torch::Tensor& x, const TensorTuple& s0,
                  const std::vector<torch::Tensor>& params, bool output_sequence,
                  bool needs_backward, bool input_grad, bool distributed);

  struct Backward {
    TensorTuple initial_state;          ///< λ_0 on every rank
    torch::Tensor input;                ///< [T, B, F] on every rank (when asked)
    std::vector<torch::Tensor> params;  ///< summed over the ranks, on every rank
  };
  /// Collective. `final_state` (∂loss/∂s_T) and `output` (∂loss/∂output, may be undefined) are
  /// the same on every rank (distributed: `output` and the input gradient are the local rows).
  Backward backward(const TensorTuple& final_state, const torch::Tensor& output, bool input_grad);

 private:
  friend struct RecurrentForwardApp;
  friend struct RecurrentAdjointApp;

  const TensorTuple& forward_state(std::int64_t t) const;
  /// The input row of fine step a (a local step, or any step in replicated mode).
  torch::Tensor input_row(std::int64_t a) const;
  /// The input of the step a -> b (b = a + 1: the row; coarse: coarse_inputs_).
  torch::Tensor step_input(std::int64_t a, std::int64_t b) const;
  /// ∂loss/∂output_t (output_grad_ defined).
  torch::Tensor output_grad_row(std::int64_t t) const;
  /// Fills coarse_inputs_ for this rank's coarse steps (messages in distributed mode).
  void prepare_coarse_inputs();
  /// Distributed: output_grad_ from the local rows and the previous rank's last row.
  void shift_output_grad(const torch::Tensor& local);
  /// Rows [step_begin(r), step_end(r)) of every rank, concatenated on every rank.
  torch::Tensor gather_steps(const torch::Tensor& local) const;
  TensorTuple broadcast(TensorTuple u, int root) const;

  MPI_Comm comm_;
  int rank_ = 0, ranks_ = 1;
  StackedCell cell_;
  CoarseInput coarse_input_;
  RecurrentStatistics& stats_;
  LayerParallelOptions options_;
  std::int64_t length_ = -1;
  Placement placement_;
  CoarseInputPlan plan_;

  RecurrentForwardApp fapp_;
  RecurrentAdjointApp aapp_;
  /// The solvers and the boundary state s_{lo-1} (ranks > 0).
  SolvePair<RecurrentForwardApp, RecurrentAdjointApp> pair_;

  // per batch
  bool distributed_ = false;
  torch::Tensor x_;            ///< the input sequence (distributed: the local steps' rows)
  std::int64_t x_offset_ = 0;  ///< the step of x_[0]
  std::map<StepInterval, torch::Tensor> coarse_inputs_;
  TensorTuple s0_, zero_;  ///< s_0 and a zero state
  std::vector<torch::Tensor> detached_params_;
  TensorTuple lambda_T_;
  torch::Tensor output_grad_;  ///< ∂loss/∂output rows from output_grad_offset_, or undefined
  std::int64_t output_grad_offset_ = 0;
  torch::Tensor output_grad_last_;  ///< ∂loss/∂output_{T-1}, on every rank
  bool input_grad_ = false;
  torch::Tensor input_grad_local_;  ///< [local steps, B, F]
  std::vector<torch::Tensor> param_grads_;
  /// Exact mode: each local step's autograd graph from the forward solve's only sweep, used
  /// once by the adjoint (so no step is evaluated twice). Multilevel solves recompute instead
  /// (the forward's final sweep may start a step from a state that changes afterwards).
  struct StepGraph {
    TensorTuple s;
    torch::Tensor x;
    TensorTuple y;
  };
  bool cache_graphs_ = false;
  std::vector<torch::Tensor> graph_params_;  ///< leaves shared by the cached graphs
  std::vector<StepGraph> graphs_;            ///< per local step
};

}  // namespace weft::nn::detail
