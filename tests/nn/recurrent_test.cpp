// weft::nn::Recurrent against torch::nn::GRU / torch::nn::LSTM with the same parameters:
// outputs, final states and every gradient (parameters, initial state, input), in exact mode
// and iterated multilevel mode, for sequence lengths that do not divide the rank count; and
// bad input failing alike on every rank.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "weft/mgrit/options.hpp"
#include "weft/nn/recurrent.hpp"
#include "weft/util/error.hpp"
#include "world.hpp"

namespace {

using torch::Tensor;
using weft::nn::CellKind;
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
};

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
                                    .solver(c.solver));
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
  if (lstm) {
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

  // weft
  Tensor xw = x.clone().requires_grad_(true), hw = h0.clone().requires_grad_(true),
         cw = c0.clone().requires_grad_(true);
  auto out = rnn->forward(xw, hw, lstm ? cw : Tensor());
  Tensor loss_w = (out.output * w_out).sum() + (out.h_n * w_h).sum();
  if (lstm) loss_w = loss_w + (out.c_n * w_c).sum();
  loss_w.backward();

  double worst = std::max({max_diff(out.output, out_r), max_diff(out.h_n, h_r),
                           max_diff(xw.grad(), xr.grad()), max_diff(hw.grad(), hr.grad())});
  if (lstm) worst = std::max({worst, max_diff(out.c_n, c_r), max_diff(cw.grad(), cr.grad())});
  auto mine = rnn->named_parameters();
  for (const auto& p : reference.ptr()->named_parameters()) {
    const double d = max_diff(mine[p.key()].grad(), p.value().grad());
    EXPECT_LE(d, 1e-12 * 1e6) << p.key();  // a missing or misplaced gradient fails loudly
    worst = std::max(worst, d);
  }
  return weft::test::allreduce(worst, MPI_MAX);
}

LayerParallelOptions converged_multilevel() {
  auto o = mgrit::Options().max_levels(3).cfactor(2).abs_tol(1e-13).max_iterations(40);
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
  Recurrent rnn(MPI_COMM_WORLD, RecurrentOptions(CellKind::LSTM, kInput, kHidden));
  auto options = torch::TensorOptions().dtype(torch::kFloat32);
  // shorter than the rank count
  EXPECT_THROW(rnn->forward(torch::zeros({ranks - 1, kBatch, kInput}, options)),
               weft::InvalidOption);
  // feature size mismatch
  EXPECT_THROW(rnn->forward(torch::zeros({8, kBatch, kInput + 1}, options)), weft::BadData);
  // NaN in the sequence (on one step only)
  Tensor x = torch::zeros({8, kBatch, kInput}, options);
  x[5][1][0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(rnn->forward(x), weft::BadData);
  // still usable afterwards
  auto out = rnn->forward(torch::ones({8, kBatch, kInput}, options));
  EXPECT_EQ(out.h_n.sizes(), torch::IntArrayRef({1, kBatch, kHidden}));
  EXPECT_TRUE(torch::isfinite(out.h_n).all().item<bool>());
}

}  // namespace
