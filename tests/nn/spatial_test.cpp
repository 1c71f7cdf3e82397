// Spatial coarsening (LayerParallelOptions::spatial_levels): the transfers themselves, MGRIT
// with coarse levels restricted in space iterated to convergence against exact mode (2-D with a
// stride-2 transition, 3-D), and the bad-input cases.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <functional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "weft/mgrit/options.hpp"
#include "weft/nn/layer_parallel.hpp"
#include "weft/nn/probes.hpp"
#include "weft/util/error.hpp"
#include "world.hpp"

namespace {

using torch::Tensor;
namespace tnn = torch::nn;
using weft::nn::Layer;
using weft::nn::LayerParallel;
using weft::nn::LayerParallelOptions;
using weft::nn::Network;
using weft::nn::SpatialKernels;
using weft::nn::Stage;
using SpatialTransfer = weft::nn::SpatialProbe;
namespace mgrit = weft::mgrit;
using weft::test::world_rank;
using weft::test::world_size;

double allreduce_max(double v) {
  return weft::test::allreduce(v, MPI_MAX);
}
double rel(const Tensor& a, const Tensor& b) {
  return (a - b).norm().item<double>() / std::max(b.norm().item<double>(), 1e-3);
}
const auto kDouble = torch::TensorOptions().dtype(torch::kFloat64);

// ------------------------------------------------------------------------------------------
// The transfers

TEST(SpatialTransfer, RestrictionAndInterpolationKeepConstantsIn2DAnd3D) {
  SpatialTransfer t;
  for (const std::vector<std::int64_t>& shape :
       {std::vector<std::int64_t>{2, 3, 8, 6}, std::vector<std::int64_t>{1, 2, 4, 6, 2}}) {
    const Tensor ones = torch::full(shape, 1.5, kDouble);
    const Tensor coarse = t.restrict(ones);
    std::vector<std::int64_t> half = shape;
    for (size_t d = 2; d < half.size(); ++d) half[d] /= 2;
    EXPECT_EQ(coarse.sizes().vec(), half);
    EXPECT_LT((coarse - 1.5).abs().max().item<double>(), 1e-15);
    const Tensor back = t.interpolate(coarse);
    EXPECT_EQ(back.sizes().vec(), shape);
    EXPECT_LT((back - 1.5).abs().max().item<double>(), 1e-15);
  }
}

TEST(SpatialTransfer, FullWeightingOfALinearFunctionSamplesItAtEvenPoints) {
  // Interior coarse point i sits on fine point 2i: [1,2,1]/4 of a linear function is its value.
  SpatialTransfer t;
  const Tensor i = torch::arange(8, kDouble);
  const Tensor f = (i.view({8, 1}) * 2.0 + i.view({1, 8}) * 3.0).expand({1, 1, 8, 8}).contiguous();
  const Tensor c = t.restrict(f);
  const Tensor expect = f.index({torch::indexing::Slice(), torch::indexing::Slice(),
                                 torch::indexing::Slice(0, 8, 2), torch::indexing::Slice(0, 8, 2)});
  using torch::indexing::Slice;
  EXPECT_LT((c.index({Slice(), Slice(), Slice(1), Slice(1)}) -
             expect.index({Slice(), Slice(), Slice(1), Slice(1)}))
                .abs()
                .max()
                .item<double>(),
            1e-13);
  // Interpolation of the even samples gives the linear function back away from the last edge.
  const Tensor p = t.interpolate(expect);
  EXPECT_LT((p.index({Slice(), Slice(), Slice(0, 7), Slice(0, 7)}) -
             f.index({Slice(), Slice(), Slice(0, 7), Slice(0, 7)}))
                .abs()
                .max()
                .item<double>(),
            1e-13);
}

TEST(SpatialTransfer, ScaledKernelsScaleTheMomentOfOrderABy2PowerMinusAPerCoarsening) {
  // M_ab = sum K[r][s] j_r^a j_s^b (j = -1, 0, 1): a kernel for a grid twice as coarse has
  // M_ab / 2^(a+b), so its sum (M_00) is kept.
  torch::manual_seed(4);
  const Tensor k = torch::randn({2, 3, 3, 3}, kDouble);
  const Tensor c = SpatialTransfer::coarse_kernel(k, 1, SpatialKernels::moments);
  const Tensor j = torch::tensor({-1.0, 0.0, 1.0}, kDouble);
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b) {
      const Tensor w = torch::outer(j.pow(a), j.pow(b));
      const Tensor fine = (k * w).sum({2, 3}), coarse = (c * w).sum({2, 3});
      EXPECT_LT((coarse - fine * std::pow(0.5, a + b)).abs().max().item<double>(), 1e-14)
          << "moment " << a << "," << b;
    }
  // Two coarsenings are one coarsening twice; a centred delta (the identity) is left alone.
  const auto moments = [](const Tensor& w, int depth) {
    return SpatialTransfer::coarse_kernel(w, depth, SpatialKernels::moments);
  };
  EXPECT_LT((moments(k, 2) - moments(c, 1)).abs().max().item<double>(), 1e-14);
  Tensor delta = torch::zeros({1, 1, 3, 3, 3}, kDouble);
  delta.index_put_({0, 0, 1, 1, 1}, 1.0);
  EXPECT_LT((moments(delta, 2) - delta).abs().max().item<double>(), 1e-15);
  EXPECT_TRUE(SpatialTransfer::coarse_kernel(k, 2, SpatialKernels::same).is_same(k));
}

/// conv(x, w) with padding 1 in 2-D or 3-D (w: [out, in, 3, 3(, 3)]).
Tensor convolve(const Tensor& x, const Tensor& w) {
  return x.dim() == 4 ? torch::conv2d(x, w, {}, 1, 1) : torch::conv3d(x, w, {}, 1, 1);
}
/// x's points 1 .. n-2 in every spatial dimension (those whose stencils see no edge).
Tensor interior(Tensor x) {
  for (int64_t d = 2; d < x.dim(); ++d) x = x.narrow(d, 1, x.size(d) - 2);
  return x;
}

TEST(SpatialTransfer, GalerkinKernelsAreRestrictionTimesConvolutionTimesInterpolationInside) {
  // The coarse convolution with the galerkin kernel equals restricting the fine convolution of
  // the interpolated state, at every coarse point whose transfers do not reach an edge; after
  // two coarsenings with the transfers of both. Random kernels mixing channels, 2-D and 3-D.
  torch::manual_seed(6);
  SpatialTransfer t;
  for (const auto& [dims, coarse_side, depth] :
       {std::tuple{2, 6, 1}, std::tuple{3, 5, 1}, std::tuple{2, 6, 2}}) {
    std::vector<std::int64_t> kernel{3, 2, 3, 3}, state{2, 2, coarse_side, coarse_side};
    if (dims == 3) {
      kernel.push_back(3);
      state.push_back(coarse_side);
    }
    const Tensor k = torch::randn(kernel, kDouble), x = torch::randn(state, kDouble);
    Tensor fine = x;
    for (int l = 0; l < depth; ++l) fine = t.interpolate(fine);
    Tensor expect = convolve(fine, k);
    for (int l = 0; l < depth; ++l) expect = t.restrict(expect);
    const Tensor got =
        convolve(x, SpatialTransfer::coarse_kernel(k, depth, SpatialKernels::galerkin));
    const std::string what = std::to_string(dims) + "-D, depth " + std::to_string(depth);
    EXPECT_LT((interior(got) - interior(expect)).abs().max().item<double>(), 1e-13) << what;
    // The edge points differ (zero padding), so the comparison above is not of equal tensors
    // by construction; and galerkin is neither the fine nor the moment-scaled kernel.
    EXPECT_GT((got - expect).abs().max().item<double>(), 1e-3) << what;
    for (SpatialKernels other : {SpatialKernels::same, SpatialKernels::moments})
      EXPECT_GT((interior(convolve(x, SpatialTransfer::coarse_kernel(k, depth, other))) -
                 interior(expect))
                    .abs()
                    .max()
                    .item<double>(),
                1e-3)
          << what << ", " << weft::nn::to_string(other);
  }
}

// ------------------------------------------------------------------------------------------
// Networks: open conv 1 -> C, steps conv-tanh-conv, optional stride-2 transition, close linear

struct Shape {
  int dims = 2;                           ///< 2 or 3 spatial dimensions
  std::int64_t side = 8;                  ///< input side
  std::vector<std::int64_t> steps{4};     ///< per stage
  std::vector<std::int64_t> channels{2};  ///< per stage
};

tnn::AnyModule conv(int dims, std::int64_t in, std::int64_t out, std::int64_t stride) {
  if (dims == 2)
    return tnn::AnyModule(tnn::Conv2d(tnn::Conv2dOptions(in, out, 3).stride(stride).padding(1)));
  return tnn::AnyModule(tnn::Conv3d(tnn::Conv3dOptions(in, out, 3).stride(stride).padding(1)));
}

Layer make_step(const Shape& s, std::int64_t stage, std::int64_t n) {
  torch::manual_seed(1000 + static_cast<std::uint64_t>(n));
  const std::int64_t c = s.channels[static_cast<size_t>(stage)];
  tnn::Sequential q;
  q->push_back(conv(s.dims, c, c, 1));
  q->push_back(tnn::Tanh());
  q->push_back(conv(s.dims, c, c, 1));
  q->to(torch::kFloat64);
  return q;
}
Layer make_transition(const Shape& s, std::int64_t stage, std::int64_t n) {
  torch::manual_seed(2000 + static_cast<std::uint64_t>(n));
  tnn::Sequential q;
  q->push_back(conv(s.dims, s.channels[static_cast<size_t>(stage)],
                    s.channels[static_cast<size_t>(stage) + 1], 2));
  q->push_back(tnn::Tanh());
  q->to(torch::kFloat64);
  return q;
}

Network make_network(const Shape& s) {
  Network net;
  for (size_t st = 0; st < s.steps.size(); ++st) {
    Stage stage;
    stage.steps = s.steps[st];
    stage.t_final = 1.0;
    const auto i = static_cast<std::int64_t>(st);
    stage.step = [s, i](std::int64_t n) { return make_step(s, i, n); };
    if (st + 1 < s.steps.size())
      stage.transition = [s, i](std::int64_t n) { return make_transition(s, i, n); };
    net.stages.push_back(stage);
  }
  net.open = [s] {
    torch::manual_seed(11);
    tnn::Sequential q;
    q->push_back(conv(s.dims, 1, s.channels.front(), 1));
    q->to(torch::kFloat64);
    return Layer(q);
  };
  net.close = [s] {
    torch::manual_seed(12);
    std::int64_t side = s.side >> (s.steps.size() - 1), features = s.channels.back();
    for (int d = 0; d < s.dims; ++d) features *= side;
    tnn::Sequential q(tnn::Flatten(), tnn::Linear(features, 3));
    q->to(torch::kFloat64);
    return Layer(q);
  };
  return net;
}

Tensor input_of(const Shape& s, std::int64_t batch) {
  torch::manual_seed(5);
  std::vector<std::int64_t> shape{batch, 1};
  for (int d = 0; d < s.dims; ++d) shape.push_back(s.side);
  return torch::randn(shape, kDouble);
}

LayerParallelOptions converged(int levels, std::vector<int> spatial,
                               SpatialKernels kernels = SpatialKernels::same) {
  auto solve = [&] {
    return mgrit::Options().max_levels(levels).cfactor(2).nrelax(1).max_iterations(30).abs_tol(
        1e-13);
  };
  LayerParallelOptions o;
  o.forward(solve()).backward(solve()).spatial_levels(std::move(spatial));
  o.spatial_kernels(kernels);
  return o;
}

/// One forward and backward of both models; the worst relative output and gradient difference
/// over all ranks and the number of gradients compared.
struct Outcome {
  double output = 0, grads = 0;
  std::int64_t compared = 0;
  int forward_iterations = 0;
  std::string levels;  ///< intervals per level of the forward hierarchy
};
Outcome run_both(const Shape& s, LayerParallel& model, LayerParallel& exact) {
  const Tensor x = input_of(s, 3);
  const Tensor labels = torch::tensor({0, 2, 1}, torch::kInt64);
  auto ce = [&](const Tensor& logits) {
    return torch::nn::functional::cross_entropy(logits, labels);
  };
  Outcome o;
  const Tensor out = model->forward(x);
  model->loss(out, ce).backward();
  const Tensor out_exact = exact->forward(x);
  exact->loss(out_exact, ce).backward();
  if (model->owns_output()) o.output = rel(out, out_exact);
  const auto ref = exact->named_parameters();
  for (const auto& p : model->named_parameters()) {
    const Tensor* r = ref.find(p.key());
    if (!r) {
      ADD_FAILURE() << "no exact-mode parameter " << p.key();
      continue;
    }
    if (!p.value().grad().defined() || !r->grad().defined()) {
      ADD_FAILURE() << "no gradient for " << p.key();
      continue;
    }
    o.grads = std::max(o.grads, rel(p.value().grad(), r->grad()));
    ++o.compared;
  }
  o.output = allreduce_max(o.output);
  o.grads = allreduce_max(o.grads);
  std::int64_t total = 0;
  MPI_Allreduce(&o.compared, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  o.compared = total;
  o.forward_iterations = model->statistics().forward.result.iterations;
  for (auto n : model->statistics().forward.statistics.intervals_per_level)
    o.levels += (o.levels.empty() ? "" : ",") + std::to_string(n);
  return o;
}

struct ConvergenceCase {
  const char* label;
  Shape shape;
  int levels;
  std::vector<int> spatial;
  SpatialKernels kernels = SpatialKernels::same;
};

void PrintTo(const ConvergenceCase& c, std::ostream* os) {
  *os << c.label;
}

class Converged : public ::testing::TestWithParam<ConvergenceCase> {};

TEST_P(Converged, OutputsAndEveryGradientEqualExactMode) {
  const ConvergenceCase& c = GetParam();
  LayerParallel model(MPI_COMM_WORLD, make_network(c.shape),
                      converged(c.levels, c.spatial, c.kernels));
  LayerParallel exact(MPI_COMM_WORLD, make_network(c.shape), LayerParallelOptions());
  const Outcome o = run_both(c.shape, model, exact);
  if (world_rank() == 0)
    std::printf(
        "[%d ranks] %s: output %.2e, grads %.2e (%lld tensors), %d forward iterations, "
        "intervals per level %s\n",
        world_size(), c.label, o.output, o.grads, static_cast<long long>(o.compared),
        o.forward_iterations, o.levels.c_str());
  EXPECT_LT(o.output, 1e-10);
  EXPECT_LT(o.grads, 1e-10);
  EXPECT_GT(o.compared, 0);
  EXPECT_EQ(model->statistics().forward.statistics.intervals_per_level.size(),
            static_cast<size_t>(c.levels));
  EXPECT_TRUE(model->statistics().forward.result.converged);
  EXPECT_TRUE(model->statistics().backward.result.converged);
}

INSTANTIATE_TEST_SUITE_P(
    Hierarchies, Converged,
    ::testing::Values(
        ConvergenceCase{"2-D, 2 stages, 2 levels", Shape{2, 8, {4, 3}, {2, 3}}, 2, {0, 1}},
        ConvergenceCase{"2-D, 2 stages, 3 levels", Shape{2, 8, {4, 3}, {2, 3}}, 3, {0, 1, 1}},
        ConvergenceCase{"3-D, 3 levels, level 2 only", Shape{3, 4, {8}, {2}}, 3, {0, 0, 1}},
        ConvergenceCase{"3-D, 3 levels", Shape{3, 4, {8}, {2}}, 3, {0, 1, 1}},
        ConvergenceCase{"2-D, 2 stages, 3 levels, scaled kernels",
                        Shape{2, 8, {4, 3}, {2, 3}},
                        3,
                        {0, 1, 1},
                        SpatialKernels::moments},
        ConvergenceCase{"3-D, 3 levels, galerkin kernels",
                        Shape{3, 4, {8}, {2}},
                        3,
                        {0, 1, 1},
                        SpatialKernels::galerkin}),
    [](const ::testing::TestParamInfo<ConvergenceCase>& p) {
      std::string name;
      for (char ch : std::string(p.param.label))
        if (std::isalnum(static_cast<unsigned char>(ch))) name += ch;
      return name;
    });

TEST(SpatialCoarsening, ChangesTheIteratesOfBothSolvesBeforeConvergence) {
  // One cycle is not exact: with coarse levels restricted in space outputs and gradients must
  // differ from the same hierarchy without (else the option did nothing). The backward is
  // checked with the forward exact, so only the adjoint's coarse levels differ.
  const Shape s{2, 8, {8}, {2}};
  auto one_cycle = [](int forward_levels, std::vector<int> spatial) {
    LayerParallelOptions o;
    auto solve = [](int levels) {
      return LayerParallelOptions::multilevel(levels, 2, 1, 1).forward();
    };
    std::vector<int> forward_flags(static_cast<size_t>(forward_levels), 0);
    if (forward_levels == 2) forward_flags = spatial;
    o.forward(solve(forward_levels)).backward(solve(2)).spatial_levels(forward_flags, spatial);
    return o;
  };
  const Tensor x = input_of(s, 2);
  const Tensor labels = torch::tensor({1, 2}, torch::kInt64);
  auto ce = [&](const Tensor& logits) {
    return torch::nn::functional::cross_entropy(logits, labels);
  };
  for (int forward_levels : {2, 1}) {
    LayerParallel coarse(MPI_COMM_WORLD, make_network(s), one_cycle(forward_levels, {0, 1}));
    LayerParallel plain(MPI_COMM_WORLD, make_network(s), one_cycle(forward_levels, {0, 0}));
    const Tensor a = coarse->forward(x);
    coarse->loss(a, ce).backward();
    const Tensor b = plain->forward(x);
    plain->loss(b, ce).backward();
    const double out = allreduce_max(coarse->owns_output() ? rel(a, b) : 0.0);
    double grads = 0;
    const auto ref = plain->named_parameters();
    for (const auto& p : coarse->named_parameters())
      if (const Tensor* r = ref.find(p.key()))
        grads = std::max(grads, rel(p.value().grad(), r->grad()));
    grads = allreduce_max(grads);
    if (forward_levels == 2) {
      EXPECT_GT(out, 1e-8);
    } else {
      EXPECT_LT(out, 1e-14);  // both forwards exact
    }
    EXPECT_GT(grads, 1e-8) << "forward levels " << forward_levels;
  }
}

TEST(SpatialKernelsOption, CoarseStepsOfTheSolvesConvolveWithTheChosenKernels) {
  // A step on a grid coarser in space, as the module's solves evaluate it (ChainProbe), is
  // x + h conv(tanh(conv(x, k1')), k2') with k' the chosen coarse kernels; on the fine grid the
  // kernels are the layer's own whatever the option.
  const Shape s{2, 8, {4}, {2}};
  torch::manual_seed(8);
  const Tensor coarse = torch::randn({2, 2, 4, 4}, kDouble),
               fine = torch::randn({2, 2, 8, 8}, kDouble);
  Layer layer = make_step(s, 0, 0);
  const auto p = layer.ptr()->parameters();  // weight, bias of each convolution
  auto expect = [&](const Tensor& x, int depth, SpatialKernels kernels) {
    auto k = [&](size_t i) { return SpatialTransfer::coarse_kernel(p[i], depth, kernels); };
    const Tensor y =
        torch::conv2d(torch::tanh(torch::conv2d(x, k(0), p[1], 1, 1)), k(2), p[3], 1, 1);
    return x + 0.25 * y;  // h = t_final / steps
  };
  for (SpatialKernels kernels :
       {SpatialKernels::same, SpatialKernels::moments, SpatialKernels::galerkin}) {
    LayerParallelOptions o = LayerParallelOptions::multilevel(2, 2, 1, 1);
    o.spatial_levels({0, 1}).spatial_kernels(kernels);
    weft::nn::ChainProbe probe(LayerParallel(MPI_COMM_SELF, make_network(s), o));
    const std::string what = weft::nn::to_string(kernels);
    ASSERT_EQ(probe.step_size(0), 0.25);
    const Tensor coarse_step = probe.step(0, 1, coarse, 1);
    EXPECT_LT((coarse_step - expect(coarse, 1, kernels)).abs().max().item<double>(), 1e-14) << what;
    EXPECT_LT((probe.step(0, 1, fine, 0) - expect(fine, 0, kernels)).abs().max().item<double>(),
              1e-14)
        << what;
    if (kernels != SpatialKernels::same) {  // the kernels make a difference on this state
      EXPECT_GT((coarse_step - expect(coarse, 1, SpatialKernels::same)).abs().max().item<double>(),
                1e-3)
          << what;
    }
  }
}

TEST(SpatialKernelsOption, CoarseKernelsFollowTheWeightsFromBatchToBatch) {
  // The coarse kernels are computed once per batch: after an optimizer step the next batch's
  // one-cycle gradients must be those of a fresh module holding the updated weights.
  const Shape s{2, 8, {8}, {2}};
  const Tensor labels = torch::tensor({1, 2}, torch::kInt64);
  auto ce = [&](const Tensor& logits) {
    return torch::nn::functional::cross_entropy(logits, labels);
  };
  auto options = [] {
    LayerParallelOptions o = LayerParallelOptions::multilevel(2, 2, 1, 1);
    o.spatial_levels({0, 1}).spatial_kernels(SpatialKernels::galerkin);
    return o;
  };
  auto batch = [&](LayerParallel& m, const Tensor& x) {
    for (auto& p : m->parameters()) p.mutable_grad() = Tensor();
    m->loss(m->forward(x), ce).backward();
  };
  LayerParallel trained(MPI_COMM_WORLD, make_network(s), options());
  batch(trained, input_of(s, 2));
  torch::optim::SGD(trained->parameters(), torch::optim::SGDOptions(0.5)).step();
  const Tensor x = input_of(s, 2) * 0.5;
  batch(trained, x);
  LayerParallel fresh(MPI_COMM_WORLD, make_network(s), options());
  {
    torch::NoGradGuard no_grad;
    const auto updated = trained->named_parameters();
    for (auto& p : fresh->named_parameters()) p.value().copy_(updated[p.key()]);
  }
  batch(fresh, x);
  double grads = 0;
  const auto ref = fresh->named_parameters();
  for (const auto& p : trained->named_parameters())
    grads = std::max(grads, rel(p.value().grad(), ref[p.key()].grad()));
  EXPECT_LT(allreduce_max(grads), 1e-13);
}

TEST(CoarseAdjointGraphs, AreBuiltOncePerBatchAndGiveTheGradientsOfRebuildingThem) {
  // Three adjoint iterations visit every coarse step several times: with cache_graphs each
  // coarse step's graph is built at its first visit and reused, and outputs and gradients are
  // those of rebuilding it at every visit (the same operations on the same values), for levels
  // coarsened in space and for plain coarse levels.
  const Shape s{2, 8, {8}, {2}};
  const Tensor x = input_of(s, 2);
  const Tensor labels = torch::tensor({1, 2}, torch::kInt64);
  auto ce = [&](const Tensor& logits) {
    return torch::nn::functional::cross_entropy(logits, labels);
  };
  for (const std::vector<int>& spatial : {std::vector<int>{0, 1, 1}, std::vector<int>{0, 0, 0}}) {
    auto options = [&](bool cache) {
      LayerParallelOptions o = LayerParallelOptions::multilevel(3, 2, 2, 3);
      o.spatial_levels(spatial);
      return o.cache_graphs(cache);
    };
    LayerParallel kept(MPI_COMM_WORLD, make_network(s), options(true));
    LayerParallel rebuilt(MPI_COMM_WORLD, make_network(s), options(false));
    const Tensor a = kept->forward(x);
    kept->loss(a, ce).backward();
    const Tensor b = rebuilt->forward(x);
    rebuilt->loss(b, ce).backward();
    const std::string what = spatial[1] ? "coarse in space" : "plain coarse levels";
    EXPECT_EQ(allreduce_max(kept->owns_output() ? rel(a, b) : 0.0), 0.0) << what;
    double grads = 0;
    const auto ref = rebuilt->named_parameters();
    for (const auto& p : kept->named_parameters())
      if (const Tensor* r = ref.find(p.key()))
        grads = std::max(grads, rel(p.value().grad(), r->grad()));
    EXPECT_LE(allreduce_max(grads), 1e-15) << what;
    const auto& k = kept->statistics();
    const auto& r = rebuilt->statistics();
    const double built = static_cast<double>(k.coarse_graphs_built);
    const double visits = static_cast<double>(r.coarse_graphs_built);
    EXPECT_EQ(r.coarse_graphs_reused, 0) << what;
    // Every visit either builds or reuses; at 3 iterations most visits reuse.
    EXPECT_EQ(k.coarse_graphs_built + k.coarse_graphs_reused, r.coarse_graphs_built) << what;
    EXPECT_GT(allreduce_max(visits), 0.0) << what;
    EXPECT_LE(allreduce_max(built / std::max(visits, 1.0)), 0.5) << what;
  }
}

// ------------------------------------------------------------------------------------------
// Batch norm on levels coarsened in space (LayerParallelOptions::spatial_running_statistics)

/// One stage of 2-D steps conv - batch norm - tanh - conv - batch norm.
Network make_batch_norm_network(const Shape& s) {
  Network net = make_network(s);
  net.stages.front().step = [s](std::int64_t n) -> Layer {
    torch::manual_seed(3000 + static_cast<std::uint64_t>(n));
    const std::int64_t c = s.channels.front();
    tnn::Sequential q(conv(2, c, c, 1), tnn::BatchNorm2d(c), tnn::Tanh(), conv(2, c, c, 1),
                      tnn::BatchNorm2d(c));
    q->to(torch::kFloat64);
    return q;
  };
  return net;
}

/// The last of `batches` training batches (each input scaled differently, so the running
/// statistics move): the output (on its owner) and the gradient of every local parameter.
struct LastBatch {
  Tensor output;
  std::vector<std::pair<std::string, Tensor>> grads;
};
LastBatch train_batches(LayerParallel& model, const Shape& s, int batches) {
  const Tensor labels = torch::tensor({1, 2, 0, 1}, torch::kInt64);
  auto ce = [&](const Tensor& logits) {
    return torch::nn::functional::cross_entropy(logits, labels);
  };
  LastBatch last;
  for (int b = 0; b < batches; ++b) {
    for (auto& p : model->parameters()) p.mutable_grad() = Tensor();
    last.output = model->forward(input_of(s, 4) * (1.0 + 0.5 * b) + 0.2 * b);
    model->loss(last.output, ce).backward();
  }
  for (const auto& p : model->named_parameters())
    if (p.value().grad().defined()) last.grads.emplace_back(p.key(), p.value().grad());
  EXPECT_FALSE(last.grads.empty());
  return last;
}

/// The worst relative difference over all ranks of outputs and of the gradients `a` has.
double difference(LayerParallel& a_model, const LastBatch& a, const LastBatch& b) {
  double worst = a_model->owns_output() ? rel(a.output, b.output) : 0.0;
  for (const auto& [name, grad] : a.grads)
    for (const auto& [other, ref] : b.grads)
      if (name == other) worst = std::max(worst, rel(grad, ref));
  return allreduce_max(worst);
}

LayerParallelOptions one_cycle_in_space(bool running) {
  LayerParallelOptions o = LayerParallelOptions::multilevel(3, 2, 1, 1);
  o.spatial_levels({0, 1, 1});
  return o.spatial_running_statistics(running);
}

TEST(SpatialBatchNorm, RunningStatisticsReplaceTheRestrictedStatesOwnFromTheFirstBatch) {
  // With one cycle the coarse steps' normalisation shows in the output and the gradients, at
  // the first batch (initial running statistics) and later ones; in exact mode the choice is
  // not used at all.
  const Shape s{2, 8, {8}, {2}};
  for (int batches : {1, 2}) {
    LayerParallel running(MPI_COMM_WORLD, make_batch_norm_network(s), one_cycle_in_space(true));
    LayerParallel own(MPI_COMM_WORLD, make_batch_norm_network(s), one_cycle_in_space(false));
    const LastBatch a = train_batches(running, s, batches);
    const LastBatch b = train_batches(own, s, batches);
    EXPECT_GT(difference(running, a, b), 1e-6) << batches << " batches";
  }
  LayerParallel exact_running(MPI_COMM_WORLD, make_batch_norm_network(s),
                              LayerParallelOptions().spatial_running_statistics(true));
  LayerParallel exact_own(MPI_COMM_WORLD, make_batch_norm_network(s),
                          LayerParallelOptions().spatial_running_statistics(false));
  const LastBatch a = train_batches(exact_running, s, 2);
  const LastBatch b = train_batches(exact_own, s, 2);
  EXPECT_EQ(difference(exact_running, a, b), 0.0);
}

TEST(SpatialBatchNorm, CoarseStepsAreTheSameAtEveryRankCount) {
  // Ghost copies of a layer (coarse steps that start on another rank) must normalise with the
  // statistics its owner uses: those at the batch's start, not those the owner's final sweep
  // has updated by the time of the adjoint. Each rank also runs the whole network alone; one
  // cycle each way, third batch.
  const Shape s{2, 8, {8}, {2}};
  for (bool running : {true, false}) {
    LayerParallel spread(MPI_COMM_WORLD, make_batch_norm_network(s), one_cycle_in_space(running));
    LayerParallel alone(MPI_COMM_SELF, make_batch_norm_network(s), one_cycle_in_space(running));
    const LastBatch a = train_batches(spread, s, 3);
    const LastBatch b = train_batches(alone, s, 3);
    EXPECT_LE(difference(spread, a, b), 1e-12) << (running ? "running" : "own");
  }
}

TEST(SpatialBatchNorm, AConvergedSolveEqualsExactMode) {
  const Shape s{2, 8, {8}, {2}};
  LayerParallel model(MPI_COMM_WORLD, make_batch_norm_network(s), converged(3, {0, 1, 1}));
  LayerParallel exact(MPI_COMM_WORLD, make_batch_norm_network(s), LayerParallelOptions());
  const LastBatch a = train_batches(model, s, 2);
  const LastBatch b = train_batches(exact, s, 2);
  EXPECT_LE(difference(model, a, b), 1e-10);
  EXPECT_TRUE(model->statistics().forward.result.converged);
  EXPECT_TRUE(model->statistics().backward.result.converged);
}

// ------------------------------------------------------------------------------------------
// Bad input: InvalidOption on every rank, naming the problem

void expect_invalid(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no InvalidOption (expected one mentioning \"" << part << "\")";
  } catch (const weft::InvalidOption& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(SpatialLevelsBadInput, WrongLengthOrCoarseFineLevelIsRejected) {
  const Shape s{2, 8, {4}, {2}};
  expect_invalid(
      [&] {
        LayerParallel(MPI_COMM_WORLD, make_network(s), converged(3, {0, 1}));
      },
      "2 entries for max_levels 3");
  expect_invalid(
      [&] {
        LayerParallel(MPI_COMM_WORLD, make_network(s), converged(2, {1, 1}));
      },
      "fine level");
  expect_invalid(
      [&] {
        LayerParallel(MPI_COMM_WORLD, make_network(s), converged(2, {0, 2}));
      },
      "entry 1 is 2");
}

TEST(SpatialLevelsBadInput, FRelaxationAboveALevelCoarseInSpaceIsRejected) {
  // Its C-points would change only by a coarse correction that cannot hold what restriction
  // drops: iterations stagnate. Level 1 above level 2 counts as well as the fine level.
  const Shape s{2, 8, {8}, {2}};
  for (const auto& [levels, spatial, level] : {std::make_tuple(2, std::vector<int>{0, 1}, 0),
                                               std::make_tuple(3, std::vector<int>{0, 0, 1}, 1)}) {
    LayerParallelOptions o = converged(levels, spatial);
    auto forward = o.forward();
    o.forward(forward.nrelax(0, level));
    expect_invalid([&] { LayerParallel(MPI_COMM_WORLD, make_network(s), o); },
                   "level " + std::to_string(level) + " needs nrelax >= 1");
  }
  // F-relaxation above a level coarse in time only is fine.
  LayerParallelOptions o = converged(3, {0, 0, 1});
  auto forward = o.forward();
  EXPECT_NO_THROW(o.forward(forward.nrelax(0, 0)).validate());
}

TEST(SpatialLevelsBadInput, AStateTooSmallToCoarsenIsRejectedOnEveryRank) {
  // 6 -> 3 on level 1: level 2 cannot halve an odd side.
  const Shape s{2, 6, {8}, {2}};
  LayerParallel model(MPI_COMM_WORLD, make_network(s), converged(3, {0, 1, 1}));
  torch::NoGradGuard no_grad;
  expect_invalid([&] { model->forward(input_of(s, 2)); }, "spatial size 3");
}

TEST(SpatialLevelsBadInput, AStepLayerTiedToTheFineGridIsRejectedOnEveryRank) {
  // A linear map over all pixels works on 8x8 states only.
  Network net;
  net.steps = 4;
  net.step = [](std::int64_t n) {
    torch::manual_seed(static_cast<std::uint64_t>(n));
    tnn::Sequential q(tnn::Flatten(), tnn::Linear(2 * 8 * 8, 2 * 8 * 8),
                      tnn::Unflatten(tnn::UnflattenOptions(1, {2, 8, 8})));
    q->to(torch::kFloat64);
    return Layer(q);
  };
  LayerParallel model(MPI_COMM_WORLD, net, converged(2, {0, 1}));
  torch::NoGradGuard no_grad;
  expect_invalid(
      [&] {
        model->forward(torch::randn({3, 2, 8, 8}, kDouble));
      },
      "restricted 1 time(s) in space (shape [3, 2, 4, 4]) fails on it");
}

TEST(SpatialLevelsBadInput, FlatStatesAreRejectedOnEveryRank) {
  Network net;
  net.steps = 4;
  net.step = [](std::int64_t n) {
    torch::manual_seed(static_cast<std::uint64_t>(n));
    tnn::Linear l(4, 4);
    l->to(torch::kFloat64);
    return Layer(l);
  };
  LayerParallel model(MPI_COMM_WORLD, net, converged(2, {0, 1}));
  torch::NoGradGuard no_grad;
  expect_invalid(
      [&] {
        model->forward(torch::randn({3, 4}, kDouble));
      },
      "has no spatial dimensions");
}

}  // namespace
