// weft::nn::Recurrent against torch::nn::GRU / torch::nn::LSTM with the same parameters:
// outputs, final states and every gradient (parameters, initial state, input), in exact mode
// and iterated multilevel mode (both coarse inputs), for sequence lengths that do not divide
// the rank count, replicated and distributed (each rank passes its chunk); the implicit cell
// against the same cell run sequentially here; and bad input failing alike on every rank.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "weft/mgrit/options.hpp"
#include "weft/nn/recurrent.hpp"
#include "weft/util/error.hpp"
#include "world.hpp"

namespace {

using torch::Tensor;
using weft::nn::CellKind;
using weft::nn::CoarseInput;
using weft::nn::LayerParallelOptions;
using weft::nn::Recurrent;
using weft::nn::RecurrentOptions;
namespace mgrit = weft::mgrit;

constexpr std::int64_t kInput = 2, kHidden = 3, kLayers = 2, kBatch = 2;

double max_diff(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined() ? 0.0 : 1e300;
  if (a.sizes() != b.sizes()) return 1e300;
  return (a - b).abs().max().item<double>();
}

/// The reference, a weft module with its parameters, inputs and loss weights: the same on every
/// rank (one seed).
struct Case {
  CellKind cell;
  std::int64_t steps;
  LayerParallelOptions solver;
  bool distributed = false;  ///< forward_local with this rank's rows
  CoarseInput coarse = CoarseInput::Start;
  double implicit_step = 0;  ///< > 0: the implicit cell, against sequential_implicit
};

constexpr int kImplicitIterations = 3;

/// The implicit cell run sequentially, written from its definition (recurrent.hpp):
/// s_{t+1} = y_K, y_0 = s_t, y_{k+1} = (s_t + dt Φ(y_k, x_t)) / (1 + dt), Φ = torch's cells.
/// Returns the output sequence, h_n, c_n (undefined for GRU).
std::vector<Tensor> sequential_implicit(bool lstm, double dt, const Tensor& x, const Tensor& h0,
                                        const Tensor& c0, torch::nn::Module& module) {
  auto params = module.named_parameters();
  auto p = [&](const char* name, std::int64_t k) { return params[name + std::to_string(k)]; };
  std::vector<Tensor> h, c;
  for (std::int64_t k = 0; k < kLayers; ++k) {
    h.push_back(h0[k]);
    if (lstm) c.push_back(c0[k]);
  }
  std::vector<Tensor> outputs;
  for (std::int64_t t = 0; t < x.size(0); ++t) {
    std::vector<Tensor> yh = h, yc = c;
    for (int it = 0; it < kImplicitIterations; ++it) {
      Tensor in = x[t];
      std::vector<Tensor> nh, nc;
      for (std::int64_t k = 0; k < kLayers; ++k) {
        const auto i = static_cast<size_t>(k);
        Tensor phi_h, phi_c;
        if (lstm) {
          std::tie(phi_h, phi_c) =
              at::lstm_cell(in, {yh[i], yc[i]}, p("weight_ih_l", k), p("weight_hh_l", k),
                            p("bias_ih_l", k), p("bias_hh_l", k));
          nc.push_back((c[i] + dt * phi_c) / (1.0 + dt));
        } else {
          phi_h = at::gru_cell(in, yh[i], p("weight_ih_l", k), p("weight_hh_l", k),
                               p("bias_ih_l", k), p("bias_hh_l", k));
        }
        in = phi_h;  // the next layer reads this layer's Φ output, as in one explicit step
        nh.push_back((h[i] + dt * phi_h) / (1.0 + dt));
      }
      yh = nh;
      yc = nc;
    }
    h = yh;
    c = yc;
    outputs.push_back(h.back());
  }
  return {torch::stack(outputs), torch::stack(h), lstm ? torch::stack(c) : Tensor()};
}

/// Every difference between weft and torch for one case (the largest over all ranks).
double worst_difference(const Case& c) {
  torch::manual_seed(42);
  const bool lstm = c.cell == CellKind::LSTM;
  torch::nn::AnyModule reference;
  std::vector<std::pair<std::string, Tensor>> ref_params;
  if (lstm) {
    torch::nn::LSTM m(torch::nn::LSTMOptions(kInput, kHidden).num_layers(kLayers));
    m->to(torch::kFloat64);
    reference = torch::nn::AnyModule(m);
  } else {
    torch::nn::GRU m(torch::nn::GRUOptions(kInput, kHidden).num_layers(kLayers));
    m->to(torch::kFloat64);
    reference = torch::nn::AnyModule(m);
  }
  Recurrent rnn(MPI_COMM_WORLD, RecurrentOptions(c.cell, kInput, kHidden)
                                    .num_layers(kLayers)
                                    .output_sequence(true)
                                    .solver(c.solver)
                                    .coarse_input(c.coarse)
                                    .implicit_step(c.implicit_step)
                                    .implicit_iterations(kImplicitIterations));
  rnn->to(torch::kFloat64);
  {
    torch::NoGradGuard no_grad;
    auto mine = rnn->named_parameters();
    for (const auto& p : reference.ptr()->named_parameters()) mine[p.key()].copy_(p.value());
  }
  auto options = torch::TensorOptions().dtype(torch::kFloat64);
  const Tensor x = torch::randn({c.steps, kBatch, kInput}, options);
  const Tensor h0 = torch::randn({kLayers, kBatch, kHidden}, options);
  const Tensor c0 = torch::randn({kLayers, kBatch, kHidden}, options);
  const Tensor w_out = torch::randn({c.steps, kBatch, kHidden}, options);
  const Tensor w_h = torch::randn({kLayers, kBatch, kHidden}, options);
  const Tensor w_c = torch::randn({kLayers, kBatch, kHidden}, options);

  // torch
  Tensor xr = x.clone().requires_grad_(true), hr = h0.clone().requires_grad_(true),
         cr = c0.clone().requires_grad_(true);
  Tensor out_r, h_r, c_r;
  if (c.implicit_step > 0) {
    auto r = sequential_implicit(lstm, c.implicit_step, xr, hr, cr, *reference.ptr());
    out_r = r[0];
    h_r = r[1];
    c_r = r[2];
  } else if (lstm) {
    auto [o, hc] = reference.get<torch::nn::LSTM>()->forward(xr, std::make_tuple(hr, cr));
    out_r = o;
    h_r = std::get<0>(hc);
    c_r = std::get<1>(hc);
  } else {
    auto [o, h] = reference.get<torch::nn::GRU>()->forward(xr, hr);
    out_r = o;
    h_r = h;
  }
  Tensor loss_r = (out_r * w_out).sum() + (h_r * w_h).sum();
  if (lstm) loss_r = loss_r + (c_r * w_c).sum();
  loss_r.backward();

  // weft; distributed: this rank's rows of x, of the output and of the output's loss weights
  // (the losses of the chunks add up to torch's loss; the h_n/c_n terms count once)
  const auto [first, end] =
      c.distributed ? rnn->local_steps(c.steps) : std::pair<std::int64_t, std::int64_t>{0, c.steps};
  Tensor xw = x.slice(0, first, end).clone().requires_grad_(true),
         hw = h0.clone().requires_grad_(true), cw = c0.clone().requires_grad_(true);
  auto out = c.distributed ? rnn->forward_local(xw, hw, lstm ? cw : Tensor())
                           : rnn->forward(xw, hw, lstm ? cw : Tensor());
  Tensor loss_w = (out.output * w_out.slice(0, first, end)).sum() + (out.h_n * w_h).sum();
  if (lstm) loss_w = loss_w + (out.c_n * w_c).sum();
  loss_w.backward();

  double worst = std::max({max_diff(out.output, out_r.slice(0, first, end)), max_diff(out.h_n, h_r),
                           max_diff(xw.grad(), xr.grad().slice(0, first, end)),
                           max_diff(hw.grad(), hr.grad())});
  if (lstm) worst = std::max({worst, max_diff(out.c_n, c_r), max_diff(cw.grad(), cr.grad())});
  auto mine = rnn->named_parameters();
  for (const auto& p : reference.ptr()->named_parameters()) {
    const double d = max_diff(mine[p.key()].grad(), p.value().grad());
    EXPECT_LE(d, 1e-12 * 1e6) << p.key();  // a missing or misplaced gradient fails loudly
    worst = std::max(worst, d);
  }
  return weft::test::allreduce(worst, MPI_MAX);
}

LayerParallelOptions converged_multilevel(int levels = 3) {
  auto o = mgrit::Options().max_levels(levels).cfactor(2).abs_tol(1e-13).max_iterations(40);
  return LayerParallelOptions().forward(o).backward(o);
}

TEST(Recurrent, ExactGruEqualsTorchGruForLengthsSevenTwentyEightAndHundred) {
  for (std::int64_t steps : {7, 28, 100})
    EXPECT_LE(worst_difference({CellKind::GRU, steps, LayerParallelOptions()}), 1e-12)
        << "length " << steps;
}

TEST(Recurrent, ExactLstmEqualsTorchLstmForLengthsSevenAndTwentyEight) {
  for (std::int64_t steps : {7, 28})
    EXPECT_LE(worst_difference({CellKind::LSTM, steps, LayerParallelOptions()}), 1e-12)
        << "length " << steps;
}

TEST(Recurrent, MultilevelIteratedToConvergenceEqualsTorch) {
  EXPECT_LE(worst_difference({CellKind::GRU, 28, converged_multilevel()}), 1e-10);
  EXPECT_LE(worst_difference({CellKind::LSTM, 7, converged_multilevel()}), 1e-10);
}

TEST(Recurrent, DistributedChunksEqualTorchInExactModeForLengthsNotDividingTheRanks) {
  for (std::int64_t steps : {7, 13}) {
    Case gru{CellKind::GRU, steps, LayerParallelOptions()};
    gru.distributed = true;
    EXPECT_LE(worst_difference(gru), 1e-12) << "GRU, length " << steps;
  }
  Case lstm{CellKind::LSTM, 13, LayerParallelOptions()};
  lstm.distributed = true;
  EXPECT_LE(worst_difference(lstm), 1e-12);
}

TEST(Recurrent, DistributedChunksEqualTorchWithConvergedMultilevelAndEitherCoarseInput) {
  // Coarse steps that start on another rank (Start) or span ranks (Mean) fetch their inputs.
  for (CoarseInput coarse : {CoarseInput::Start, CoarseInput::Mean})
    for (int levels : {2, 3}) {
      Case c{CellKind::GRU, 13, converged_multilevel(levels)};
      c.distributed = true;
      c.coarse = coarse;
      EXPECT_LE(worst_difference(c), 1e-12)
          << weft::nn::to_string(coarse) << ", " << levels << " levels";
    }
  Case lstm{CellKind::LSTM, 7, converged_multilevel(2)};
  lstm.distributed = true;
  lstm.coarse = CoarseInput::Mean;
  EXPECT_LE(worst_difference(lstm), 1e-12);
}

/// Distributed against replicated with the same unconverged multilevel solves (2 iterations
/// each way): equal only if the coarse steps got the same inputs. Also returns how far the
/// replicated output is from the converged one, so the case is known not to be trivial.
std::pair<double, double> distributed_vs_replicated(CoarseInput coarse) {
  const std::int64_t steps = 13;
  torch::manual_seed(5);
  auto few = mgrit::Options().max_levels(3).cfactor(2).max_iterations(2).abs_tol(0);
  auto options = RecurrentOptions(CellKind::GRU, kInput, kHidden)
                     .num_layers(kLayers)
                     .output_sequence(true)
                     .coarse_input(coarse);
  Recurrent rnn(MPI_COMM_WORLD, options.solver(LayerParallelOptions().forward(few).backward(few)));
  rnn->to(torch::kFloat64);
  const Tensor x = torch::randn({steps, kBatch, kInput}, torch::kFloat64);
  const Tensor w = torch::randn({steps, kBatch, kHidden}, torch::kFloat64);
  // Plain variables, not a structured binding: lambdas capture those only from C++20 on.
  const auto local = rnn->local_steps(steps);
  const auto first = local.first, end = local.second;
  auto run = [&](bool distributed) {
    rnn->zero_grad();
    Tensor xi = (distributed ? x.slice(0, first, end) : x).clone().requires_grad_(true);
    auto out = distributed ? rnn->forward_local(xi) : rnn->forward(xi);
    ((distributed ? w.slice(0, first, end) : w) * out.output).sum().backward();
    std::vector<Tensor> r{distributed ? out.output : out.output.slice(0, first, end),
                          distributed ? xi.grad() : xi.grad().slice(0, first, end)};
    for (const auto& p : rnn->parameters()) r.push_back(p.grad().clone());
    return r;
  };
  const auto replicated = run(false), distributed = run(true);
  double worst = 0;
  for (size_t i = 0; i < replicated.size(); ++i)
    worst = std::max(worst, max_diff(replicated[i], distributed[i]));
  rnn->set_solver(LayerParallelOptions());
  Tensor exact;
  {
    torch::NoGradGuard no_grad;
    exact = rnn->forward(x).output.slice(0, first, end);
  }
  return {weft::test::allreduce(worst, MPI_MAX),
          weft::test::allreduce(max_diff(replicated[0], exact), MPI_MAX)};
}

TEST(Recurrent, DistributedCoarseStepsGetTheReplicatedInputsBeforeConvergence) {
  for (CoarseInput coarse : {CoarseInput::Start, CoarseInput::Mean}) {
    const auto [difference, error] = distributed_vs_replicated(coarse);
    EXPECT_LE(difference, 1e-12) << weft::nn::to_string(coarse);
    EXPECT_GT(error, 1e-9) << weft::nn::to_string(coarse);
  }
}

TEST(Recurrent, MeanCoarseInputConvergesToTorchInReplicatedMode) {
  Case c{CellKind::GRU, 28, converged_multilevel()};
  c.coarse = CoarseInput::Mean;
  EXPECT_LE(worst_difference(c), 1e-12);
}

TEST(Recurrent, ImplicitCellEqualsItsSequentialRunExactMultilevelAndDistributed) {
  for (CellKind cell : {CellKind::GRU, CellKind::LSTM}) {
    Case exact{cell, 13, LayerParallelOptions()};
    exact.implicit_step = 0.7;
    EXPECT_LE(worst_difference(exact), 1e-12) << weft::nn::to_string(cell) << " exact";
    Case distributed = exact;
    distributed.distributed = true;
    EXPECT_LE(worst_difference(distributed), 1e-12) << weft::nn::to_string(cell) << " distributed";
  }
  Case multilevel{CellKind::GRU, 13, converged_multilevel(2)};
  multilevel.implicit_step = 0.7;
  multilevel.distributed = true;
  multilevel.coarse = CoarseInput::Mean;
  EXPECT_LE(worst_difference(multilevel), 1e-12);
}

TEST(Recurrent, ImplicitCellDiffersFromTheExplicitCell) {
  // Guards the test above: the sequential reference is not torch's cell in disguise.
  torch::manual_seed(42);
  torch::nn::GRU gru(torch::nn::GRUOptions(kInput, kHidden).num_layers(kLayers));
  gru->to(torch::kFloat64);
  const Tensor x = torch::randn({7, kBatch, kInput}, torch::kFloat64);
  const Tensor h0 = torch::randn({kLayers, kBatch, kHidden}, torch::kFloat64);
  torch::NoGradGuard no_grad;
  const Tensor implicit = sequential_implicit(false, 0.7, x, h0, Tensor(), *gru)[0];
  EXPECT_GT(max_diff(implicit, std::get<0>(gru->forward(x, h0))), 1e-3);
}

TEST(Recurrent, LengthAndBatchMayChangeBetweenCallsAndInferenceNeedsNoGraph) {
  torch::manual_seed(7);
  torch::nn::GRU reference(torch::nn::GRUOptions(kInput, kHidden).num_layers(kLayers));
  reference->to(torch::kFloat64);
  Recurrent rnn(MPI_COMM_WORLD,
                RecurrentOptions(CellKind::GRU, kInput, kHidden).num_layers(kLayers));
  rnn->to(torch::kFloat64);
  {
    torch::NoGradGuard no_grad;
    auto mine = rnn->named_parameters();
    for (const auto& p : reference->named_parameters()) mine[p.key()].copy_(p.value());
  }
  const std::int64_t ranks = weft::test::world_size();
  double worst = 0;
  for (auto [steps, batch] :
       {std::pair<std::int64_t, std::int64_t>{ranks + 5, 2}, {ranks + 2, 3}}) {
    const Tensor x = torch::randn({steps, batch, kInput}, torch::kFloat64);
    Tensor xr = x.clone().requires_grad_(true), xw = x.clone().requires_grad_(true);
    const Tensor h_r = std::get<1>(reference->forward(xr));
    h_r.sum().backward();
    const Tensor h_w = rnn->forward(xw).h_n;
    h_w.sum().backward();
    worst = std::max({worst, max_diff(h_w, h_r), max_diff(xw.grad(), xr.grad())});
    torch::NoGradGuard no_grad;
    worst = std::max(worst, max_diff(rnn->forward(x).h_n, h_r));
  }
  EXPECT_LE(weft::test::allreduce(worst, MPI_MAX), 1e-12);
}

TEST(Recurrent, ParametersAreTheSameOnEveryRank) {
  torch::manual_seed(1000 + static_cast<std::uint64_t>(weft::test::world_rank()));
  Recurrent rnn(MPI_COMM_WORLD, RecurrentOptions(CellKind::GRU, kInput, kHidden));
  double sum = 0;
  for (const auto& p : rnn->parameters()) sum += p.sum().item<double>();
  EXPECT_EQ(weft::test::allreduce(sum, MPI_MAX), weft::test::allreduce(sum, MPI_MIN));
}

TEST(Recurrent, BadInputFailsWithTheSameKindOnEveryRank) {
  const int ranks = weft::test::world_size();
  EXPECT_THROW(Recurrent(MPI_COMM_WORLD, RecurrentOptions(CellKind::GRU, kInput, 0)),
               weft::InvalidOption);
  EXPECT_THROW(
      Recurrent(MPI_COMM_WORLD, RecurrentOptions(CellKind::GRU, kInput, kHidden).implicit_step(-1)),
      weft::InvalidOption);
  EXPECT_THROW(Recurrent(MPI_COMM_WORLD,
                         RecurrentOptions(CellKind::GRU, kInput, kHidden).implicit_iterations(0)),
               weft::InvalidOption);
  Recurrent rnn(MPI_COMM_WORLD, RecurrentOptions(CellKind::LSTM, kInput, kHidden));
  auto options = torch::TensorOptions().dtype(torch::kFloat32);
  // shorter than the rank count
  EXPECT_THROW(rnn->forward(torch::zeros({ranks - 1, kBatch, kInput}, options)),
               weft::InvalidOption);
  // feature size mismatch
  EXPECT_THROW(rnn->forward(torch::zeros({8, kBatch, kInput + 1}, options)), weft::BadData);
  // distributed: chunks that are not the ranks' shares (rank 0 passes one step of rank 1)
  if (ranks > 1) {
    const auto [first, end] = rnn->local_steps(8);
    const int rank = weft::test::world_rank();
    const std::int64_t wrong = end - first + (rank == 0 ? 1 : rank == 1 ? -1 : 0);
    EXPECT_THROW(rnn->forward_local(torch::zeros({wrong, kBatch, kInput}, options)), weft::BadData);
  }
  // NaN in the sequence (on one step only)
  Tensor x = torch::zeros({8, kBatch, kInput}, options);
  x[5][1][0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(rnn->forward(x), weft::BadData);
  x[5][1][0] = std::numeric_limits<float>::infinity();
  EXPECT_THROW(rnn->forward(x), weft::BadData);
  // Finite values whose sum overflows (the check sums first) are not mistaken for Inf.
  const double huge =
      2.0 * static_cast<double>(std::numeric_limits<float>::max()) / (8.0 * kBatch * kInput);
  EXPECT_NO_THROW(rnn->forward(torch::full({8, kBatch, kInput}, huge, options)));
  // still usable afterwards
  auto out = rnn->forward(torch::ones({8, kBatch, kInput}, options));
  EXPECT_EQ(out.h_n.sizes(), torch::IntArrayRef({1, kBatch, kHidden}));
  EXPECT_TRUE(torch::isfinite(out.h_n).all().item<bool>());
}

}  // namespace
