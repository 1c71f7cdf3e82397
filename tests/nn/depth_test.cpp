// Refining a network's depth (weft/nn/depth.hpp): which coarse layers and weights each fine
// layer takes, loading a checkpoint of one layout of ranks into a deeper network at another
// (parameters, buffers and Adam's state), and that a network of identical steps keeps its ODE:
// refining it changes its outputs only by forward Euler's first-order error.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "weft/nn/checkpoint.hpp"
#include "weft/nn/depth.hpp"
#include "weft/nn/layer_parallel.hpp"
#include "weft/util/error.hpp"
#include "world.hpp"

namespace {

using torch::Tensor;
namespace tnn = torch::nn;
using weft::nn::DepthInterpolation;
using weft::nn::DepthRefinement;
using weft::nn::Layer;
using weft::nn::LayerParallel;
using weft::nn::LayerParallelOptions;
using weft::nn::Network;
using weft::nn::SequentialNetwork;
using weft::nn::Stage;
using weft::test::world_rank;
using weft::test::world_size;

using Sources = std::vector<std::pair<std::int64_t, double>>;

DepthRefinement refinement(std::vector<std::int64_t> coarse, std::int64_t factor,
                           DepthInterpolation interpolation) {
  DepthRefinement r;
  r.coarse_steps = std::move(coarse);
  r.factor = factor;
  r.interpolation = interpolation;
  return r;
}

TEST(DepthRefinement, EachFineLayerTakesTheCoarseLayersAtItsTime) {
  // Stages of 2 and 3 steps and a transition (chain layer 2) refined by 2: 4 + 1 + 6 layers.
  const auto constant = refinement({2, 3}, 2, DepthInterpolation::Constant);
  const std::vector<std::int64_t> want_constant{0, 0, 1, 1, 2, 3, 3, 4, 4, 5, 5};
  for (std::int64_t m = 0; m < 11; ++m)
    EXPECT_EQ(constant.layer_sources(m), (Sources{{want_constant[m], 1.0}})) << "layer " << m;
  const auto linear = refinement({2, 3}, 2, DepthInterpolation::Linear);
  const std::vector<Sources> want_linear{
      {{0, 1.0}}, {{0, 0.5}, {1, 0.5}}, {{1, 1.0}}, {{1, 1.0}},  // the last step: nothing beyond
      {{2, 1.0}},                                                // the transition is copied
      {{3, 1.0}}, {{3, 0.5}, {4, 0.5}}, {{4, 1.0}}, {{4, 0.5}, {5, 0.5}}, {{5, 1.0}}, {{5, 1.0}}};
  for (std::int64_t m = 0; m < 11; ++m)
    EXPECT_EQ(linear.layer_sources(m), want_linear[static_cast<size_t>(m)]) << "layer " << m;
  EXPECT_EQ(linear.fine_steps(), (std::vector<std::int64_t>{4, 6}));
  // By 3: fine step j at t = j/3 of a coarse step.
  const auto thirds = refinement({2}, 3, DepthInterpolation::Linear);
  EXPECT_EQ(thirds.layer_sources(4), (Sources{{1, 1.0}}));  // in the last coarse step
  EXPECT_EQ(thirds.layer_sources(2), (Sources{{0, 1.0 - 2.0 / 3.0}, {1, 2.0 / 3.0}}));

  const auto keys = linear.key_sources();
  using Named = std::vector<std::pair<std::string, double>>;
  EXPECT_EQ(keys("step_6.0.weight"), (Named{{"step_3.0.weight", 0.5}, {"step_4.0.weight", 0.5}}));
  EXPECT_EQ(keys("transition_4.1.running_mean"), (Named{{"transition_2.1.running_mean", 1.0}}));
  EXPECT_EQ(keys("open.0.bias"), (Named{{"open.0.bias", 1.0}}));
  EXPECT_EQ(keys("close.weight"), (Named{{"close.weight", 1.0}}));
  EXPECT_THROW(linear.layer_sources(11), weft::InvalidOption);
  EXPECT_THROW(refinement({2}, 1, DepthInterpolation::Constant).key_sources(), weft::InvalidOption);
  EXPECT_THROW(refinement({2, 0}, 2, DepthInterpolation::Constant).key_sources(),
               weft::InvalidOption);
  EXPECT_THROW(weft::nn::depth_interpolation_from("cubic", "test"), weft::InvalidOption);
}

// Steps and transitions of width 3 whose parameters are seeded by their chain index (so every
// rank builds the same ones), or all alike.
Layer make_layer(std::int64_t seed) {
  torch::manual_seed(static_cast<std::uint64_t>(seed));
  tnn::Sequential s(tnn::Linear(3, 3), tnn::Tanh());
  s->to(torch::kFloat64);
  return s;
}

Network make_network(const std::vector<std::int64_t>& steps, bool identical) {
  Network net;
  for (size_t s = 0; s < steps.size(); ++s) {
    Stage st;
    st.steps = steps[s];
    st.t_final = 1.0 + 0.5 * static_cast<double>(s);
    st.step = [identical](std::int64_t n) { return make_layer(identical ? 7 : 100 + n); };
    if (s + 1 < steps.size()) st.transition = [](std::int64_t n) { return make_layer(200 + n); };
    net.stages.push_back(st);
  }
  return net;
}

/// A folder every rank of this job names alike.
std::string shared_folder(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("weft-depth-test-np" + std::to_string(world_size()) + "-" + name);
  if (world_rank() == 0) std::filesystem::remove_all(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  return dir.string();
}

/// Adam's state after one step with gradients that differ per parameter.
void adam_step(tnn::Module& module, torch::optim::Adam& adam) {
  for (auto& p : module.named_parameters())
    p.value().mutable_grad() =
        torch::full_like(p.value(), 0.25 + 0.01 * static_cast<double>(p.value().numel())) +
        p.value().detach();
  adam.step();
}

Tensor adam_field(torch::optim::Adam& adam, const Tensor& p, bool second) {
  auto& state = adam.state();
  const auto it = state.find(c10::guts::to_string(p.unsafeGetTensorImpl()));
  if (it == state.end()) return Tensor();
  auto& s = static_cast<torch::optim::AdamParamState&>(*it->second);
  return second ? s.exp_avg_sq() : s.exp_avg();
}

// A layer-parallel network of stages (2, 3) at this job's ranks, trained one Adam step and
// saved, loads into the network of stages (4, 6) at the same ranks: each fine tensor (and its
// Adam moments) is the weighted sum the refinement names of the coarse ones, read back whole on
// each rank.
TEST(DepthRefinement, LoadsAnotherLayoutsCheckpointIntoTheDeeperNetwork) {
  const std::string dir = shared_folder("layouts");
  const auto r = refinement({2, 3}, 2, DepthInterpolation::Linear);
  {
    LayerParallel coarse(MPI_COMM_WORLD, make_network({2, 3}, false),
                         LayerParallelOptions::exact());
    torch::optim::Adam adam(coarse->parameters(), torch::optim::AdamOptions(1e-2));
    adam_step(*coarse, adam);
    weft::nn::save_checkpoint(dir, MPI_COMM_WORLD, *coarse, &adam, "{}");
  }
  // The coarse network whole, on this rank.
  SequentialNetwork whole(make_network({2, 3}, false));
  torch::optim::Adam whole_adam(whole->parameters(), torch::optim::AdamOptions(1e-2));
  weft::nn::load_checkpoint(dir, MPI_COMM_SELF, *whole, &whole_adam);

  LayerParallel fine(MPI_COMM_WORLD, make_network(r.fine_steps(), false),
                     LayerParallelOptions::exact());
  torch::optim::Adam fine_adam(fine->parameters(), torch::optim::AdamOptions(1e-2));
  weft::nn::load_checkpoint(dir, MPI_COMM_WORLD, *fine, &fine_adam, r.key_sources());
  const auto keys = r.key_sources();
  const auto stored = whole->named_parameters();
  int compared = 0;
  for (const auto& p : fine->named_parameters()) {
    Tensor want = torch::zeros_like(p.value());
    Tensor want_m = torch::zeros_like(p.value()), want_v = torch::zeros_like(p.value());
    for (const auto& [key, w] : keys(p.key())) {
      const Tensor* c = stored.find(key);
      ASSERT_NE(c, nullptr) << key;
      want.add_(*c, w);
      want_m.add_(adam_field(whole_adam, *c, false), w);
      want_v.add_(adam_field(whole_adam, *c, true), w);
    }
    EXPECT_TRUE(torch::equal(p.value(), want)) << p.key();
    ASSERT_TRUE(adam_field(fine_adam, p.value(), false).defined()) << p.key();
    EXPECT_TRUE(torch::allclose(adam_field(fine_adam, p.value(), false), want_m, 1e-15, 0))
        << p.key();
    EXPECT_TRUE(torch::allclose(adam_field(fine_adam, p.value(), true), want_v, 1e-15, 0))
        << p.key();
    ++compared;
  }
  // Every fine parameter on some rank: 11 layers of 2 tensors.
  const double all = weft::test::allreduce(compared, MPI_SUM);
  EXPECT_EQ(all, 22.0);
  // A refinement whose coarse network is not the checkpoint's is refused by name.
  const auto wrong = refinement({3, 3}, 2, DepthInterpolation::Constant);
  LayerParallel deeper(MPI_COMM_WORLD, make_network(wrong.fine_steps(), false),
                       LayerParallelOptions::exact());
  try {
    weft::nn::load_checkpoint(dir, MPI_COMM_WORLD, *deeper, nullptr, wrong.key_sources());
    ADD_FAILURE() << "a checkpoint without step_6 loaded";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no value for"), std::string::npos) << e.what();
  }
}

// x' = F(x) with F the same at every step: refining by 2 keeps F and halves h, so the output
// equals the deeper network built directly (to round-off) and moves towards the ODE's solution
// by forward Euler's first-order error: |y8 - y4| ≈ 2 |y16 - y8|.
TEST(DepthRefinement, IdenticalStepsKeepTheirODEAndChangeOnlyByTheDiscretization) {
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("weft-depth-test-identical-r" + std::to_string(world_rank()) + "-np" +
                           std::to_string(world_size()));
  std::filesystem::remove_all(dir);
  const Tensor x = torch::tensor({{0.8, -0.5, 0.3}}, torch::kFloat64);
  std::vector<Tensor> outputs;
  SequentialNetwork net(make_network({4}, true));
  torch::NoGradGuard no_grad;
  for (std::int64_t steps : {4, 8, 16}) {
    if (steps > 4) {  // the previous network, refined by 2
      weft::nn::save_checkpoint(dir, MPI_COMM_SELF, *net, nullptr, "{}");
      SequentialNetwork refined(make_network({steps}, false));  // other initial parameters
      weft::nn::load_checkpoint(
          dir, MPI_COMM_SELF, *refined, nullptr,
          refinement({steps / 2}, 2, DepthInterpolation::Constant).key_sources());
      SequentialNetwork direct(make_network({steps}, true));
      EXPECT_LT((refined->forward(x) - direct->forward(x)).abs().max().item<double>(), 1e-15);
      net = refined;
    }
    outputs.push_back(net->forward(x));
  }
  const double d1 = (outputs[1] - outputs[0]).norm().item<double>();
  const double d2 = (outputs[2] - outputs[1]).norm().item<double>();
  EXPECT_GT(d1, 1e-4);                                    // the discretization does change it
  EXPECT_LT(d1, 0.1 * outputs[0].norm().item<double>());  // but only a little
  EXPECT_NEAR(d1 / d2, 2.0, 0.3) << d1 << " " << d2;
  std::filesystem::remove_all(dir);
}

}  // namespace
