// weft::nn::LayerParallel against plain sequential LibTorch backprop, at any rank count.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "weft/mgrit/hierarchy.hpp"
#include "weft/nn/layer_parallel.hpp"
#include "weft/util/error.hpp"
#include "world.hpp"

namespace {

using torch::Tensor;
namespace tnn = torch::nn;
using weft::nn::Layer;
using weft::nn::LayerEvaluations;
using weft::nn::LayerParallel;
using weft::nn::LayerParallelOptions;
using weft::nn::Network;
using weft::nn::SolveReport;
namespace mgrit = weft::mgrit;

using weft::test::world_rank;
using weft::test::world_size;

constexpr std::int64_t kChannels = 4;
constexpr std::int64_t kSide = 8;
constexpr std::int64_t kClasses = 3;

// Every layer is seeded by its index, so every rank (and every factory call) builds the same
// parameters: the layer-parallel model and the reference start identical.
Layer make_open() {
  torch::manual_seed(11);
  tnn::Sequential s(tnn::Conv2d(tnn::Conv2dOptions(1, kChannels, 3).padding(1)), tnn::ReLU());
  s->to(torch::kFloat64);
  return s;
}
Layer make_step(std::int64_t n) {
  torch::manual_seed(1000 + static_cast<std::uint64_t>(n));
  tnn::Sequential s(tnn::Conv2d(tnn::Conv2dOptions(kChannels, kChannels, 3).padding(1)),
                    tnn::ReLU(),
                    tnn::Conv2d(tnn::Conv2dOptions(kChannels, kChannels, 3).padding(1)));
  s->to(torch::kFloat64);
  return s;
}
Layer make_close() {
  torch::manual_seed(12);
  tnn::Sequential s(tnn::Flatten(), tnn::Linear(kChannels * kSide * kSide, kClasses));
  s->to(torch::kFloat64);
  return s;
}

Network make_network(std::int64_t steps, double t_final = 1.0) {
  Network net;
  net.steps = steps;
  net.t_final = t_final;
  net.step = make_step;
  net.open = make_open;
  net.close = make_close;
  return net;
}

/// Plain sequential LibTorch: open, x <- x + h F_n(x), close. Parameter names as weft's.
struct Reference : tnn::Module {
  explicit Reference(std::int64_t steps, double t_final = 1.0,
                     const weft::nn::StepFactory& step = make_step)
      : h(t_final / static_cast<double>(steps)) {
    open = make_open();
    register_module("open", open.ptr());
    for (std::int64_t n = 0; n < steps; ++n) {
      layers.push_back(step(n));
      register_module("step_" + std::to_string(n), layers.back().ptr());
    }
    close = make_close();
    register_module("close", close.ptr());
  }
  Tensor forward(Tensor x) {
    x = open.forward(x);
    for (auto& f : layers) x = x + h * f.forward(x);
    return close.forward(x);
  }
  double h;
  Layer open, close;
  std::vector<Layer> layers;
};

struct Batch {
  Tensor x, labels;
};
Batch make_batch(std::int64_t size, std::uint64_t seed) {
  torch::manual_seed(seed);
  Batch b;
  b.x = torch::randn({size, 1, kSide, kSide}, torch::kFloat64);
  b.labels = torch::randint(0, kClasses, {size}, torch::kInt64);
  return b;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& labels) {
  return torch::nn::functional::cross_entropy(logits, labels);
}

double rel(const Tensor& a, const Tensor& b) {
  const double nb = b.norm().item<double>();
  return (a - b).norm().item<double>() / (nb > 0 ? nb : 1.0);
}

using weft::test::allreduce;

/// Errors of one layer-parallel training step against the reference.
struct Comparison {
  double loss = 0;            ///< relative error of the loss (every rank)
  double output = 0;          ///< relative error of the output (output rank, else 0)
  double input_grad = 0;      ///< relative error of the input gradient (rank 0, else 0)
  double max_param = 0;       ///< largest relative error of one parameter gradient (all ranks)
  double network_grad = 0;    ///< relative error of all parameter gradients together
  std::int64_t compared = 0;  ///< parameter tensors compared (all ranks)
};

Comparison compare_step(LayerParallel& model, Reference& ref, const Batch& batch) {
  Comparison c;
  for (auto& p : ref.parameters()) p.mutable_grad() = Tensor();
  Tensor xr = batch.x.clone().requires_grad_(true);
  Tensor out_ref = ref.forward(xr);
  Tensor loss_ref = cross_entropy(out_ref, batch.labels);
  loss_ref.backward();

  model->zero_grad();
  Tensor xp = batch.x.clone().requires_grad_(true);
  Tensor out = model->forward(xp);
  Tensor loss =
      model->loss(out, [&](const Tensor& logits) { return cross_entropy(logits, batch.labels); });
  loss.backward();

  c.loss =
      std::abs(loss.item<double>() - loss_ref.item<double>()) / std::abs(loss_ref.item<double>());
  if (model->owns_output()) c.output = rel(out, out_ref);
  if (model->owns_input()) c.input_grad = rel(xp.grad(), xr.grad());

  auto ref_params = ref.named_parameters();
  double diff2 = 0, norm2 = 0, max_param = 0;
  double compared = 0;
  for (const auto& item : model->named_parameters()) {
    const Tensor* r = ref_params.find(item.key());
    EXPECT_NE(r, nullptr) << item.key();
    if (!r) continue;
    EXPECT_TRUE(item.value().grad().defined()) << item.key();
    if (!item.value().grad().defined()) continue;
    const Tensor& g = item.value().grad();
    const Tensor& gr = r->grad();
    diff2 += (g - gr).pow(2).sum().item<double>();
    norm2 += gr.pow(2).sum().item<double>();
    max_param = std::max(max_param, rel(g, gr));
    compared += 1;
  }
  c.loss = allreduce(c.loss, MPI_MAX);
  c.output = allreduce(c.output, MPI_MAX);
  c.input_grad = allreduce(c.input_grad, MPI_MAX);
  c.max_param = allreduce(max_param, MPI_MAX);
  c.network_grad = std::sqrt(allreduce(diff2, MPI_SUM) / allreduce(norm2, MPI_SUM));
  c.compared = static_cast<std::int64_t>(allreduce(compared, MPI_SUM));
  return c;
}

void print(const std::string& what, const Comparison& c) {
  if (world_rank() != 0) return;
  std::printf(
      "[%d ranks] %s: rel. errors loss %.2e, output %.2e, input grad %.2e, max param grad "
      "%.2e, network grad %.2e (%lld tensors)\n",
      world_size(), what.c_str(), c.loss, c.output, c.input_grad, c.max_param, c.network_grad,
      static_cast<long long>(c.compared));
}

std::int64_t parameter_tensors(std::int64_t steps) {
  return 2 + 4 * steps + 2;
}

mgrit::Options converged(int levels, int cf) {
  return mgrit::Options()
      .max_levels(levels)
      .cfactor(cf)
      .min_coarse(1)
      .abs_tol(0.0)
      .rel_tol(1e-12)
      .max_iterations(80);
}

// ------------------------------------------------------------------------------------------

class Exact : public ::testing::TestWithParam<std::int64_t> {};

TEST_P(Exact, OutputAndEveryGradientEqualSequentialBackprop) {
  torch::set_num_threads(1);
  const std::int64_t N = GetParam();
  for (bool cache : {true, false}) {
    Reference ref(N);
    LayerParallel model(MPI_COMM_WORLD, make_network(N),
                        LayerParallelOptions().cache_graphs(cache));
    // Layer n lives with point n+1: a rank computes exactly the steps of its own layers, and
    // one level needs no ghost layers.
    const int r = world_rank(), P = world_size();
    EXPECT_EQ(model->first_point(), mgrit::Distribution::block_begin(N + 1, P, r));
    EXPECT_EQ(model->first_layer(), r == 0 ? 0 : model->first_point() - 1);
    EXPECT_EQ(model->end_layer(), r == P - 1 ? N : model->end_point() - 1);
    EXPECT_TRUE(model->ghost_layers().empty());
    for (std::uint64_t seed : {1u, 2u}) {
      const Comparison c = compare_step(model, ref, make_batch(3, seed));
      print("exact N=" + std::to_string(N) + (cache ? " cached graphs" : " recomputed"), c);
      EXPECT_LT(c.loss, 1e-12);
      EXPECT_LT(c.output, 1e-12);
      EXPECT_LT(c.input_grad, 1e-12);
      EXPECT_LT(c.max_param, 1e-12);
      EXPECT_LT(c.network_grad, 1e-12);
      EXPECT_EQ(c.compared, parameter_tensors(N));
      const auto& s = model->statistics();
      EXPECT_EQ(s.forward.result.iterations, 1);
      EXPECT_EQ(s.backward.result.iterations, 1);
      const std::int64_t local = model->end_layer() - model->first_layer();
      // Every local layer is evaluated with autograd exactly once per batch.
      EXPECT_EQ(s.graphs_reused + s.graphs_built, local);
      if (cache) {
        // Including the layer whose input came from the left neighbour.
        EXPECT_EQ(s.graphs_recorded, local);
        EXPECT_EQ(s.graphs_built, 0);
      } else {
        EXPECT_EQ(s.graphs_recorded, 0);
      }
    }
  }
}

// N = 4: at 4 ranks the last rank owns point N only (no step layer, just the close layer).
INSTANTIATE_TEST_SUITE_P(Steps, Exact, ::testing::Values(12, 7, 4));

/// A step whose gradients autograd hands back without a copy: for x + b (even n) the
/// gradients of x and of b are the incoming gradient itself; for x w + cat(b1, b2) (odd n)
/// those of b1 and b2 are views of it. The adjoint scales and sums gradients in place only
/// where no one else sees the write.
struct PassThroughImpl : tnn::Module {
  static constexpr std::int64_t kBatch = 3;
  explicit PassThroughImpl(std::int64_t n) : odd(n % 2 == 1) {
    torch::manual_seed(2000 + static_cast<std::uint64_t>(n));
    const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
    if (!odd) {
      b = register_parameter("b", torch::randn({kBatch, kChannels, kSide, kSide}, f64));
      return;
    }
    w = register_parameter("w", torch::randn({1}, f64));
    b1 = register_parameter("b1", torch::randn({kBatch, kChannels / 2, kSide, kSide}, f64));
    b2 = register_parameter("b2", torch::randn({kBatch, kChannels / 2, kSide, kSide}, f64));
  }
  Tensor forward(const Tensor& x) { return odd ? x * w + torch::cat({b1, b2}, 1) : x + b; }
  bool odd;
  Tensor w, b, b1, b2;
};
TORCH_MODULE(PassThrough);

TEST(Exact, GradientsThatAreTheIncomingGradientOrItsViewsStayExact) {
  torch::set_num_threads(1);
  const std::int64_t N = 6;
  const weft::nn::StepFactory step = [](std::int64_t n) -> Layer { return PassThrough(n); };
  Network net = make_network(N);
  net.step = step;
  Reference ref(N, 1.0, step);
  LayerParallel model(MPI_COMM_WORLD, net);
  for (std::uint64_t seed : {3u, 4u}) {
    const Comparison c = compare_step(model, ref, make_batch(PassThroughImpl::kBatch, seed));
    print("exact, pass-through gradients", c);
    EXPECT_LT(c.loss, 1e-12);
    EXPECT_LT(c.output, 1e-12);
    EXPECT_LT(c.input_grad, 1e-12);
    EXPECT_LT(c.max_param, 1e-12);
    EXPECT_LT(c.network_grad, 1e-12);
    EXPECT_EQ(c.compared, 2 + 3 * (N / 2) + 1 * (N / 2) + 2);
  }
}

struct MultilevelCase {
  std::int64_t steps;
  int levels, cf;
  enum Variant { XBraidV, PyMGRITV, FCycleFRelax, RelaxOnlyCoarsest } variant = XBraidV;
};

mgrit::Options variant(mgrit::Options o, MultilevelCase::Variant v) {
  switch (v) {
    case MultilevelCase::XBraidV:
      return o;
    case MultilevelCase::PyMGRITV:
      return o.convention(mgrit::Convention::PyMGRIT);
    case MultilevelCase::FCycleFRelax:
      return o.cycle(mgrit::Cycle::F).nrelax(0);
    case MultilevelCase::RelaxOnlyCoarsest:
      return o.relax_only_coarsest(true).nrelax_coarsest(3);
  }
  return o;
}

const char* variant_name(MultilevelCase::Variant v) {
  switch (v) {
    case MultilevelCase::XBraidV:
      return "xbraid V FCF";
    case MultilevelCase::PyMGRITV:
      return "pymgrit V FCF";
    case MultilevelCase::FCycleFRelax:
      return "xbraid F-cycle F-relax";
    case MultilevelCase::RelaxOnlyCoarsest:
      return "xbraid relax-only coarsest";
  }
  return "?";
}

class Multilevel : public ::testing::TestWithParam<MultilevelCase> {};

TEST_P(Multilevel, ConvergedSolvesMatchSequentialBackprop) {
  torch::set_num_threads(1);
  const MultilevelCase mc = GetParam();
  const std::int64_t N = mc.steps;
  Reference ref(N);
  // Built in exact mode, switched to multilevel solves (new solvers and ghost layers).
  LayerParallel model(MPI_COMM_WORLD, make_network(N));
  LayerParallelOptions options;
  options.forward(variant(converged(mc.levels, mc.cf), mc.variant))
      .backward(variant(converged(mc.levels, mc.cf), mc.variant));
  model->set_options(options);
  const Comparison c = compare_step(model, ref, make_batch(3, 5));
  const auto& s = model->statistics();
  print("multilevel N=" + std::to_string(N) + " levels " +
            std::to_string(s.forward.statistics.intervals_per_level.size()) + " cf " +
            std::to_string(mc.cf) + " " + variant_name(mc.variant) + " (" +
            std::to_string(s.forward.result.iterations) + "+" +
            std::to_string(s.backward.result.iterations) + " iterations)",
        c);
  EXPECT_EQ(static_cast<int>(s.forward.statistics.intervals_per_level.size()), mc.levels);
  EXPECT_TRUE(s.forward.result.converged);
  EXPECT_TRUE(s.backward.result.converged);
  EXPECT_LT(c.loss, 1e-9);
  EXPECT_LT(c.output, 1e-9);
  EXPECT_LT(c.input_grad, 1e-8);
  EXPECT_LT(c.max_param, 1e-7);
  EXPECT_LT(c.network_grad, 1e-8);
  EXPECT_EQ(c.compared, parameter_tensors(N));
  // A step into point p of any level starts from its predecessor q with layer q, which lives
  // on the owner of q+1: the ghosts are the layers q whose owner differs from p's.
  const int P = world_size();
  auto owner = [&](std::int64_t point) {
    int r = 0;
    while (r + 1 < P && mgrit::Distribution::block_begin(N + 1, P, r + 1) <= point) ++r;
    return r;
  };
  const auto hierarchy = mgrit::Hierarchy::uniform(mgrit::TimeGrid::uniform(0.0, 1.0, N),
                                                   options.forward_solver_options());
  std::set<std::int64_t> expected;
  for (int l = 0; l < hierarchy.levels(); ++l) {
    const auto& fine = hierarchy.level(l).fine;
    for (size_t k = 1; k < fine.size(); ++k)
      if (owner(fine[k]) == world_rank() && owner(fine[k - 1] + 1) != world_rank())
        expected.insert(fine[k - 1]);
  }
  const auto ghosts = model->ghost_layers();
  EXPECT_EQ(std::set<std::int64_t>(ghosts.begin(), ghosts.end()), expected);
  EXPECT_EQ(s.backward.statistics.steps_per_level.size(), static_cast<size_t>(mc.levels));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, Multilevel,
    ::testing::Values(MultilevelCase{12, 3, 2}, MultilevelCase{7, 2, 2}, MultilevelCase{16, 3, 4},
                      MultilevelCase{12, 3, 2, MultilevelCase::PyMGRITV},
                      MultilevelCase{16, 3, 2, MultilevelCase::FCycleFRelax},
                      MultilevelCase{16, 3, 2, MultilevelCase::RelaxOnlyCoarsest},
                      MultilevelCase{64, 3, 4}));

TEST(Placement, LayerCostsPlaceBlocksOfEqualCostAndChangeNoResult) {
  torch::set_num_threads(1);
  const std::int64_t N = 12;
  const int r = world_rank(), P = world_size();
  // The first four layers ten times dearer than the others: fewer of them per rank.
  std::vector<double> costs(static_cast<size_t>(N), 1.0);
  for (size_t n = 0; n < 4; ++n) costs[n] = 10.0;
  std::vector<mgrit::index_t> first = mgrit::Distribution::balanced_blocks(costs, P);
  first.push_back(N + 1);
  Reference ref(N);
  for (const bool exact : {true, false}) {
    // Inexact solves (1 iteration each way) too: the placement must not change what they give.
    const LayerParallelOptions equal =
        exact ? LayerParallelOptions() : LayerParallelOptions::multilevel(3, 2, 1, 1);
    LayerParallelOptions balanced = equal;
    balanced.layer_costs(costs);
    LayerParallel a(MPI_COMM_WORLD, make_network(N), equal);
    LayerParallel b(MPI_COMM_WORLD, make_network(N), balanced);
    EXPECT_EQ(b->first_point(), first[static_cast<size_t>(r)]);
    EXPECT_EQ(b->end_point(), first[static_cast<size_t>(r) + 1]);
    EXPECT_EQ(b->first_layer(), r == 0 ? 0 : b->first_point() - 1);
    EXPECT_EQ(b->end_layer(), r == P - 1 ? N : b->end_point() - 1);
    for (std::uint64_t seed : {1u, 2u}) {
      const Comparison ca = compare_step(a, ref, make_batch(3, seed));
      const Comparison cb = compare_step(b, ref, make_batch(3, seed));
      print(std::string(exact ? "exact" : "1+1 iterations") + ", layers placed by cost", cb);
      EXPECT_EQ(cb.compared, parameter_tensors(N));
      if (exact) {
        EXPECT_LT(cb.loss, 1e-12);
        EXPECT_LT(cb.output, 1e-12);
        EXPECT_LT(cb.input_grad, 1e-12);
        EXPECT_LT(cb.network_grad, 1e-12);
        continue;
      }
      EXPECT_GT(ca.network_grad, 1e-6) << "the inexact solve should differ from backprop";
      EXPECT_NEAR(cb.loss, ca.loss, 1e-12 + 1e-9 * ca.loss);
      EXPECT_NEAR(cb.output, ca.output, 1e-12 + 1e-9 * ca.output);
      EXPECT_NEAR(cb.input_grad, ca.input_grad, 1e-12 + 1e-9 * ca.input_grad);
      EXPECT_NEAR(cb.network_grad, ca.network_grad, 1e-12 + 1e-9 * ca.network_grad);
      EXPECT_NEAR(cb.max_param, ca.max_param, 1e-12 + 1e-9 * ca.max_param);
    }
  }
}

TEST(Placement, LayerCostsOfTheWrongLengthOrChangedLaterAreInvalidOptions) {
  const std::int64_t N = 6;
  const std::vector<double> ones(static_cast<size_t>(N), 1.0);
  auto refused = [](const std::function<void()>& body, const std::string& part) {
    try {
      body();
      ADD_FAILURE() << "accepted: " << part;
    } catch (const weft::InvalidOption& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  refused(
      [&] {
        LayerParallel(MPI_COMM_WORLD, make_network(N),
                      LayerParallelOptions().layer_costs({1, 2, 3}));
      },
      "layer_costs has 3 entries for 6 chain layers");
  refused([] { LayerParallelOptions().layer_costs({1, -1}).validate(); }, "layer_costs[1] = -1");
  LayerParallel model(MPI_COMM_WORLD, make_network(N), LayerParallelOptions().layer_costs(ones));
  refused([&] { model->set_options(LayerParallelOptions()); },
          "set_options cannot change layer_costs");
  LayerParallelOptions multilevel = LayerParallelOptions::multilevel(2, 2, 1, 1);
  EXPECT_NO_THROW(model->set_options(multilevel.layer_costs(ones)));
}

TEST(FewIterations, GradientErrorIsSmallAndTrainingDecreasesTheLoss) {
  torch::set_num_threads(1);
  const std::int64_t N = 12;
  Reference ref(N);
  LayerParallel model(MPI_COMM_WORLD, make_network(N),
                      LayerParallelOptions::multilevel(3, 2, /*forward=*/2, /*backward=*/1));
  const Comparison c = compare_step(model, ref, make_batch(4, 9));
  print("2 forward + 1 backward iterations, 3 levels cf 2, N=12", c);
  EXPECT_TRUE(std::isfinite(c.network_grad));
  EXPECT_LT(c.network_grad, 0.5);
  EXPECT_LT(c.output, 0.5);
  const auto& s = model->statistics();
  EXPECT_EQ(s.forward.result.iterations, 2);
  EXPECT_EQ(s.backward.result.iterations, 1);
  // Work accounting: in a one-stage network every step evaluates one layer, so the layer
  // evaluations per level add up to the solver's step evaluations per level. On the fine level
  // each layer's graph is recorded once (by the forward's final sweep, or by the adjoint for
  // the steps that sweep does not redo), and each layer gives its parameter gradients once.
  std::int64_t fine_recorded = 0, with_params = 0;
  for (const SolveReport* r : {&s.forward, &s.backward}) {
    const bool fwd = r == &s.forward;
    const auto& steps = r->statistics.steps_per_level;
    ASSERT_LE(r->evaluations.size(), steps.size());
    for (size_t l = 0; l < steps.size(); ++l) {
      std::int64_t evaluations = 0;
      if (l < r->evaluations.size())
        for (const LayerEvaluations& e : r->evaluations[l]) {
          evaluations += fwd ? e.plain + e.recorded : e.vjp + e.vjp_params;
          if (l == 0) fine_recorded += e.recorded;
          with_params += e.vjp_params;
        }
      EXPECT_EQ(evaluations, steps[l]) << (fwd ? "forward" : "backward") << " level " << l;
    }
  }
  EXPECT_EQ(static_cast<std::int64_t>(allreduce(static_cast<double>(fine_recorded), MPI_SUM)), N);
  EXPECT_EQ(static_cast<std::int64_t>(allreduce(static_cast<double>(with_params), MPI_SUM)), N);
  if (world_rank() == 0) {
    std::printf("[%d ranks]   forward residuals:", world_size());
    for (const auto& r : s.forward.result.residuals)
      if (r) std::printf(" %.3e", *r);
    std::printf("; steps per level on rank 0 (fwd/bwd):");
    for (size_t l = 0; l < s.forward.statistics.steps_per_level.size(); ++l)
      std::printf(" %lld/%lld", static_cast<long long>(s.forward.statistics.steps_per_level[l]),
                  static_cast<long long>(s.backward.statistics.steps_per_level[l]));
    std::printf("; %.1f ms fwd, %.1f ms bwd; graphs recorded %lld, reused %lld, built %lld\n",
                1e3 * s.forward.seconds, 1e3 * s.backward.seconds,
                static_cast<long long>(s.graphs_recorded), static_cast<long long>(s.graphs_reused),
                static_cast<long long>(s.graphs_built));
  }

  // A short training run on fixed synthetic data.
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.2));
  const Batch data = make_batch(16, 21);
  std::vector<double> losses;
  for (int epoch = 0; epoch < 12; ++epoch) {
    optimizer.zero_grad();
    Tensor out = model->forward(data.x);
    Tensor loss =
        model->loss(out, [&](const Tensor& logits) { return cross_entropy(logits, data.labels); });
    loss.backward();
    optimizer.step();
    losses.push_back(loss.item<double>());
  }
  if (world_rank() == 0)
    std::printf("[%d ranks]   training loss %.4f -> %.4f\n", world_size(), losses.front(),
                losses.back());
  for (double l : losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(losses.back(), 0.8 * losses.front());
  // Every rank saw the same loss values.
  EXPECT_EQ(allreduce(losses.back(), MPI_MAX), allreduce(losses.back(), MPI_MIN));
}

TEST(FewIterations, GradientErrorShrinksWithIterations) {
  torch::set_num_threads(1);
  const std::int64_t N = 32;
  Reference ref(N);
  LayerParallel model(MPI_COMM_WORLD, make_network(N));
  const Batch batch = make_batch(4, 13);
  std::vector<double> errors;
  for (auto [fwd, bwd] : std::vector<std::pair<int, int>>{{1, 1}, {2, 1}, {2, 2}, {3, 3}}) {
    model->set_options(LayerParallelOptions::multilevel(3, 4, fwd, bwd));
    const Comparison c = compare_step(model, ref, batch);
    print("N=32, 3 levels cf 4, " + std::to_string(fwd) + " forward + " + std::to_string(bwd) +
              " backward iterations",
          c);
    EXPECT_TRUE(std::isfinite(c.network_grad));
    errors.push_back(c.network_grad);
  }
  EXPECT_LT(errors.back(), errors.front());
  EXPECT_LT(errors.back(), 0.05);
}

TEST(Gather, SequentialNetworkReproducesTheTrainedModelAndLoadsBack) {
  torch::set_num_threads(1);
  const std::int64_t N = 7;
  LayerParallel model(MPI_COMM_WORLD, make_network(N));
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  const Batch data = make_batch(5, 31);
  auto criterion = [&](const Tensor& logits) { return cross_entropy(logits, data.labels); };
  for (int step = 0; step < 2; ++step) {
    optimizer.zero_grad();
    model->loss(model->forward(data.x), criterion).backward();
    optimizer.step();
  }
  Tensor loss;
  {
    torch::NoGradGuard no_grad;  // inference: no graphs, no backward
    loss = model->loss(model->forward(data.x), criterion);
  }
  weft::nn::SequentialNetwork full = model->gather_sequential(0);
  double gathered_loss = 0;
  if (world_rank() == 0) {
    ASSERT_FALSE(full.is_empty());
    EXPECT_EQ(full->steps(), N);
    EXPECT_EQ(full->named_parameters().size(), static_cast<size_t>(parameter_tensors(N)));
    torch::NoGradGuard no_grad;
    gathered_loss = criterion(full->forward(data.x)).item<double>();
    EXPECT_NEAR(gathered_loss, loss.item<double>(), 1e-12 * std::abs(gathered_loss));
  } else {
    EXPECT_TRUE(full.is_empty());
  }

  // A fresh model (initial parameters) loads the trained ones.
  LayerParallel fresh(MPI_COMM_WORLD, make_network(N));
  fresh->load_sequential(full, 0);
  torch::NoGradGuard no_grad;
  Tensor fresh_loss = fresh->loss(fresh->forward(data.x), criterion);
  EXPECT_NEAR(fresh_loss.item<double>(), loss.item<double>(), 1e-12 * loss.item<double>());
}

TEST(WarmStart, ReusesStatesAndSurvivesBatchSizeChanges) {
  torch::set_num_threads(1);
  const std::int64_t N = 12;
  Reference ref(N);
  LayerParallelOptions options;
  options.forward(converged(3, 2).abs_tol(1e-10).warm_start(true))
      .backward(converged(3, 2).abs_tol(1e-12).warm_start(true));
  LayerParallel model(MPI_COMM_WORLD, make_network(N), options);
  std::vector<int> iterations;
  for (std::int64_t size : {3, 3, 5, 3}) {
    const Comparison c = compare_step(model, ref, make_batch(size, 41));
    EXPECT_LT(c.network_grad, 1e-8) << "batch size " << size;
    EXPECT_LT(c.output, 1e-9) << "batch size " << size;
    iterations.push_back(model->statistics().forward.result.iterations);
  }
  if (world_rank() == 0)
    std::printf(
        "[%d ranks] warm start: forward iterations %d, %d (same batch), %d (new size), "
        "%d\n",
        world_size(), iterations[0], iterations[1], iterations[2], iterations[3]);
  EXPECT_LT(iterations[1], iterations[0]);
}

TEST(BadInput, FewerStepsThanRanksIsAnInvalidOptionOnEveryRank) {
  const int P = world_size();
  const std::int64_t N = P - 1;  // 0 steps on one rank
  try {
    LayerParallel model(MPI_COMM_WORLD, make_network(N));
    ADD_FAILURE() << "no exception";
  } catch (const weft::InvalidOption& e) {
    const std::string what = e.what();
    if (P > 1) {
      EXPECT_NE(what.find(std::to_string(N) + " step layers"), std::string::npos) << what;
      EXPECT_NE(what.find(std::to_string(P) + " ranks"), std::string::npos) << what;
    }
  }
}

TEST(BadInput, NonFiniteInputIsBadDataOnEveryRankAndTheModelStaysUsable) {
  torch::set_num_threads(1);
  const std::int64_t N = 7;
  LayerParallel model(MPI_COMM_WORLD, make_network(N),
                      LayerParallelOptions::multilevel(2, 2, 2, 1));
  Batch data = make_batch(2, 51);
  data.x[1][0][3][4] = std::numeric_limits<double>::quiet_NaN();
  auto criterion = [&](const Tensor& logits) { return cross_entropy(logits, data.labels); };
  EXPECT_THROW(model->forward(data.x), weft::BadData);
  // Undefined input on the input rank.
  EXPECT_THROW(model->forward(Tensor()), weft::BadData);
  // The model still works.
  const Batch good = make_batch(2, 52);
  Tensor loss = model->loss(model->forward(good.x), [&](const Tensor& logits) {
    return cross_entropy(logits, good.labels);
  });
  EXPECT_NO_THROW(loss.backward());
  EXPECT_TRUE(std::isfinite(loss.item<double>()));
  (void)criterion;
}

TEST(BadInput, LayersThatDoNotFitAreBadDataOnEveryRank) {
  torch::set_num_threads(1);
  const std::int64_t N = 7;
  const Batch data = make_batch(2, 81);
  {
    // The last step layer changes the channel count.
    Network net = make_network(N);
    net.step = [](std::int64_t n) -> Layer {
      if (n < N - 1) return make_step(n);
      tnn::Conv2d conv(tnn::Conv2dOptions(kChannels, kChannels + 1, 3).padding(1));
      conv->to(torch::kFloat64);
      return conv;
    };
    LayerParallel model(MPI_COMM_WORLD, net);
    try {
      model->forward(data.x);
      ADD_FAILURE() << "no exception";
    } catch (const weft::BadData& e) {
      EXPECT_NE(std::string(e.what()).find("step layer 6"), std::string::npos) << e.what();
      if (world_rank() == 0) std::printf("[%d ranks] %s\n", world_size(), e.what());
    }
  }
  {
    // The close layer expects another state size.
    Network net = make_network(N);
    net.close = []() -> Layer {
      tnn::Linear linear(kChannels * kSide * kSide + 1, kClasses);
      linear->to(torch::kFloat64);
      return linear;
    };
    LayerParallel model(MPI_COMM_WORLD, net);
    EXPECT_THROW(model->forward(data.x), weft::BadData);
  }
  {
    // The input does not fit the open layer (3 channels instead of 1): BadData on every rank,
    // with the open layer's own message.
    LayerParallel model(MPI_COMM_WORLD, make_network(N));
    const Tensor wrong = torch::randn({2, 3, kSide, kSide}, torch::kFloat64);
    try {
      model->forward(wrong);
      ADD_FAILURE() << "no exception";
    } catch (const weft::BadData& e) {
      EXPECT_NE(std::string(e.what()).find("open layer failed on rank 0"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("channels"), std::string::npos) << e.what();
    }
    // Still usable.
    Tensor loss = model->loss(model->forward(data.x), [&](const Tensor& logits) {
      return cross_entropy(logits, data.labels);
    });
    EXPECT_NO_THROW(loss.backward());
  }
}

TEST(BadInput, NonFiniteLossGradientIsDivergenceOnEveryRank) {
  torch::set_num_threads(1);
  LayerParallel model(MPI_COMM_WORLD, make_network(7));
  const Batch data = make_batch(2, 61);
  Tensor out = model->forward(data.x);
  Tensor loss = model->loss(out, [&](const Tensor& logits) {
    return (logits * std::numeric_limits<double>::quiet_NaN()).sum();
  });
  EXPECT_TRUE(std::isnan(loss.item<double>()));
  EXPECT_THROW(loss.backward(), weft::Divergence);
}

TEST(BadInput, BackwardOfAnOlderForwardIsAnInvalidOption) {
  torch::set_num_threads(1);
  LayerParallel model(MPI_COMM_WORLD, make_network(7));
  const Batch data = make_batch(2, 71);
  auto criterion = [&](const Tensor& logits) { return cross_entropy(logits, data.labels); };
  Tensor first = model->loss(model->forward(data.x), criterion);
  Tensor second = model->loss(model->forward(data.x), criterion);
  EXPECT_THROW(first.backward(), weft::InvalidOption);
  EXPECT_NO_THROW(second.backward());
}

}  // namespace
