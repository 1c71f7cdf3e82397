// The chain probe (weft/nn/probes.hpp) against the same network evaluated by hand with plain
// LibTorch: states, fine steps with and without graphs, coarse steps across a transition, and
// the adjoint steps with their parameter gradients.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <vector>

#include "weft/nn/probes.hpp"
#include "weft/util/error.hpp"
#include "world.hpp"

namespace {

using torch::Tensor;
namespace tnn = torch::nn;
using weft::nn::ChainProbe;
using weft::nn::Layer;
using weft::nn::LayerParallel;
using weft::nn::Network;
using weft::nn::SequentialNetwork;
using weft::nn::Stage;
using weft::nn::StepGraph;

// Two stages of 3 steps (4 then 6 channels, 6x6 then 3x3) and a stride-2 transition; every
// factory seeds itself, so the probe's module and the hand-written chain hold the same weights.
Network two_stages() {
  Network net;
  for (std::int64_t s = 0; s < 2; ++s) {
    Stage st;
    st.steps = 3;
    st.t_final = 1.0 + static_cast<double>(s);
    const std::int64_t c = s == 0 ? 4 : 6;
    st.step = [c](std::int64_t n) -> Layer {
      torch::manual_seed(100 + static_cast<std::uint64_t>(n));
      tnn::Sequential q(tnn::Conv2d(tnn::Conv2dOptions(c, c, 3).padding(1)), tnn::Tanh());
      q->to(torch::kFloat64);
      return q;
    };
    if (s == 0)
      st.transition = [](std::int64_t n) -> Layer {
        torch::manual_seed(200 + static_cast<std::uint64_t>(n));
        tnn::Sequential q(tnn::Conv2d(tnn::Conv2dOptions(4, 6, 3).stride(2).padding(1)),
                          tnn::Tanh());
        q->to(torch::kFloat64);
        return q;
      };
    net.stages.push_back(st);
  }
  return net;
}

double max_diff(const Tensor& a, const Tensor& b) {
  return (a - b).abs().max().item<double>();
}

struct ChainProbeTest : ::testing::Test {
  ChainProbe probe{LayerParallel(MPI_COMM_SELF, two_stages())};
  SequentialNetwork reference{two_stages()};
  Tensor input = torch::randn({2, 4, 6, 6}, torch::kFloat64);

  // x + h F(x), or G(x) for the transition (layer 3).
  Tensor fine(std::int64_t n, const Tensor& x) {
    const Tensor y = reference->step(n).forward(x);
    return reference->is_transition(n) ? y : x + reference->step_size(n) * y;
  }
};

TEST_F(ChainProbeTest, StatesAndFineStepsAreTheSequentialChains) {
  ASSERT_EQ(probe.layers(), 7);
  EXPECT_TRUE(probe.is_transition(3));
  EXPECT_DOUBLE_EQ(probe.step_size(0), 1.0 / 3);
  EXPECT_DOUBLE_EQ(probe.step_size(4), 2.0 / 3);
  EXPECT_DOUBLE_EQ(probe.step_size(3), 0.0);
  torch::NoGradGuard no_grad;
  const std::vector<Tensor> x = probe.states(input);
  ASSERT_EQ(x.size(), 8u);
  Tensor z = input;
  for (std::int64_t n = 0; n < 7; ++n) {
    z = fine(n, z);
    EXPECT_LT(max_diff(x[static_cast<size_t>(n + 1)], z), 1e-13) << "point " << n + 1;
    EXPECT_LT(max_diff(probe.step(n, n + 1, x[static_cast<size_t>(n)]), z), 1e-13);
    StepGraph g;
    EXPECT_LT(max_diff(probe.record(n, x[static_cast<size_t>(n)], g), z), 1e-13);
    EXPECT_TRUE(g.recorded());
  }
}

TEST_F(ChainProbeTest, CoarseStepsInjectTheFirstLayerAndApplyTransitionsExactly) {
  torch::NoGradGuard no_grad;
  const std::vector<Tensor> x = probe.states(input);
  // 1 -> 6: steps 1, 2 as one step of layer 1 with 2h; the transition; steps 4, 5 as one of 4.
  Tensor z = x[1] + 2 * reference->step_size(1) * reference->step(1).forward(x[1]);
  z = reference->step(3).forward(z);
  z = z + 2 * reference->step_size(4) * reference->step(4).forward(z);
  EXPECT_LT(max_diff(probe.step(1, 6, x[1]), z), 1e-13);
}

TEST_F(ChainProbeTest, AdjointStepsAreTheVectorJacobianProductsOfTheSteps) {
  const std::vector<Tensor> x = probe.states(input);
  for (std::int64_t n : {0, 3, 5}) {
    const auto k = static_cast<size_t>(n);
    const Tensor lambda = torch::randn_like(x[k + 1]);
    const Tensor leaf = x[k].detach().requires_grad_(true);
    std::vector<Tensor> wrt{leaf};
    for (const Tensor& p : reference->step(n).module().parameters()) wrt.push_back(p);
    const auto expected = torch::autograd::grad({fine(n, leaf)}, wrt, {lambda});

    StepGraph g;
    probe.record(n, x[k], g);
    const Tensor reused = probe.vjp(n, n + 1, x[k], lambda, g, /*retain_graph=*/true);
    EXPECT_LT(max_diff(reused, expected[0]), 1e-12) << "layer " << n;
    std::vector<Tensor> grads;
    const Tensor last = probe.vjp(n, n + 1, x[k], lambda, g, /*retain_graph=*/false, &grads);
    EXPECT_LT(max_diff(last, expected[0]), 1e-12);
    EXPECT_FALSE(g.recorded());
    ASSERT_EQ(grads.size() + 1, expected.size());
    for (size_t p = 0; p < grads.size(); ++p)
      EXPECT_LT(max_diff(grads[p], expected[p + 1]), 1e-12) << "layer " << n << " parameter " << p;
    StepGraph fresh;  // built inside vjp
    EXPECT_LT(max_diff(probe.vjp(n, n + 1, x[k], lambda, fresh, false), expected[0]), 1e-12);
  }
  // A coarse step across the transition: the adjoint of the composition.
  const Tensor lambda = torch::randn_like(x[6]);
  const Tensor leaf = x[1].detach().requires_grad_(true);
  Tensor z = leaf + 2 * reference->step_size(1) * reference->step(1).forward(leaf);
  z = reference->step(3).forward(z);
  z = z + 2 * reference->step_size(4) * reference->step(4).forward(z);
  const Tensor expected = torch::autograd::grad({z}, {leaf}, {lambda})[0];
  StepGraph unused;
  EXPECT_LT(max_diff(probe.vjp(1, 6, x[1], lambda, unused, false), expected), 1e-12);
}

TEST_F(ChainProbeTest, StepsOutsideTheChainAreInvalidOptions) {
  const std::vector<Tensor> x = probe.states(input);
  EXPECT_THROW(probe.step(3, 3, x[3]), weft::InvalidOption);
  EXPECT_THROW(probe.step(0, 8, x[0]), weft::InvalidOption);
  StepGraph g;
  EXPECT_THROW(probe.record(7, x[7], g), weft::InvalidOption);
  EXPECT_THROW(probe.vjp(-1, 0, x[0], x[0], g, false), weft::InvalidOption);
}

TEST(ChainProbe, NeedsEveryLayerOnItsRank) {
  if (weft::test::world_size() < 2) GTEST_SKIP() << "one rank holds every layer";
  EXPECT_THROW(ChainProbe(LayerParallel(MPI_COMM_WORLD, two_stages())), weft::InvalidOption);
}

}  // namespace
