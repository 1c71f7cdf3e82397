// Multi-stage networks (transitions that change the state's shape), batch norm and dropout in
// the layers, and data x layer parallelism, against a hand-written sequential LibTorch network.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "weft/mgrit/options.hpp"
#include "weft/nn/layer_parallel.hpp"
#include "weft/util/error.hpp"
#include "world.hpp"

namespace {

using torch::Tensor;
namespace tnn = torch::nn;
using weft::nn::Layer;
using weft::nn::LayerParallel;
using weft::nn::LayerParallelOptions;
using weft::nn::Network;
using weft::nn::Stage;
namespace mgrit = weft::mgrit;

using weft::test::world_rank;
using weft::test::world_size;
double allreduce_max(double v) {
  return weft::test::allreduce(v, MPI_MAX);
}

constexpr std::int64_t kClasses = 3;
const std::vector<std::int64_t> kChannels{4, 6, 8};  // per stage
const std::vector<std::int64_t> kSide{8, 4, 2};      // per stage

/// What the layers contain.
struct Kind {
  bool batchnorm = false;
  double dropout = 0.0;
  torch::Dtype dtype = torch::kFloat64;
};

// Layers are seeded by their chain index, so every rank and every factory call builds the same
// parameters.
Layer make_open(const Kind& k) {
  torch::manual_seed(11);
  tnn::Sequential s(tnn::Conv2d(tnn::Conv2dOptions(1, kChannels[0], 3).padding(1)), tnn::ReLU());
  s->to(k.dtype);
  return s;
}
Layer make_step(const Kind& k, std::int64_t stage, std::int64_t n) {
  torch::manual_seed(1000 + static_cast<std::uint64_t>(n));
  const std::int64_t c = kChannels[static_cast<size_t>(stage)];
  tnn::Sequential s(tnn::Conv2d(tnn::Conv2dOptions(c, c, 3).padding(1)));
  if (k.batchnorm) s->push_back(tnn::BatchNorm2d(c));
  s->push_back(tnn::ReLU());
  if (k.dropout > 0) s->push_back(tnn::Dropout(k.dropout));
  s->push_back(tnn::Conv2d(tnn::Conv2dOptions(c, c, 3).padding(1)));
  s->to(k.dtype);
  return s;
}
Layer make_transition(const Kind& k, std::int64_t stage, std::int64_t n) {
  torch::manual_seed(2000 + static_cast<std::uint64_t>(n));
  const std::int64_t in = kChannels[static_cast<size_t>(stage)];
  const std::int64_t out = kChannels[static_cast<size_t>(stage + 1)];
  tnn::Sequential s(tnn::Conv2d(tnn::Conv2dOptions(in, out, 3).stride(2).padding(1)));
  if (k.batchnorm) s->push_back(tnn::BatchNorm2d(out));
  s->push_back(tnn::ReLU());
  s->to(k.dtype);
  return s;
}
Layer make_close(const Kind& k, size_t stages) {
  torch::manual_seed(12);
  const std::int64_t c = kChannels[stages - 1], side = kSide[stages - 1];
  tnn::Sequential s(tnn::Flatten(), tnn::Linear(c * side * side, kClasses));
  s->to(k.dtype);
  return s;
}

Network make_network(const std::vector<std::int64_t>& steps, const Kind& k) {
  Network net;
  for (size_t s = 0; s < steps.size(); ++s) {
    Stage st;
    st.steps = steps[s];
    st.t_final = 1.0 + 0.5 * static_cast<double>(s);
    const auto stage = static_cast<std::int64_t>(s);
    st.step = [k, stage](std::int64_t n) { return make_step(k, stage, n); };
    if (s + 1 < steps.size())
      st.transition = [k, stage](std::int64_t n) { return make_transition(k, stage, n); };
    net.stages.push_back(st);
  }
  net.open = [k] { return make_open(k); };
  const size_t stages = steps.size();
  net.close = [k, stages] { return make_close(k, stages); };
  return net;
}

/// The same network written out by hand: open, each stage's steps x <- x + h_s F(x), the
/// transitions x <- G(x), close. Dropout draws, in training mode, from the documented stream of
/// each layer: the global generator seeded with layer_stream_seed(seed, batch, n).
struct Reference : tnn::Module {
  Reference(const std::vector<std::int64_t>& steps, const Kind& k, std::uint64_t stream_seed)
      : seed(stream_seed) {
    open = make_open(k);
    register_module("open", open.ptr());
    std::int64_t n = 0;
    for (size_t s = 0; s < steps.size(); ++s) {
      const double h = (1.0 + 0.5 * static_cast<double>(s)) / static_cast<double>(steps[s]);
      for (std::int64_t j = 0; j < steps[s]; ++j, ++n) {
        layers.push_back(make_step(k, static_cast<std::int64_t>(s), n));
        hs.push_back(h);
        register_module("step_" + std::to_string(n), layers.back().ptr());
      }
      if (s + 1 < steps.size()) {
        layers.push_back(make_transition(k, static_cast<std::int64_t>(s), n));
        hs.push_back(0.0);
        register_module("transition_" + std::to_string(n), layers.back().ptr());
        ++n;
      }
    }
    close = make_close(k, steps.size());
    register_module("close", close.ptr());
  }
  Tensor forward(Tensor x) {
    x = open.forward(x);
    for (size_t n = 0; n < layers.size(); ++n) {
      Tensor y;
      if (is_training()) {
        auto gen = at::detail::getDefaultCPUGenerator();
        const Tensor saved = gen.get_state();
        gen.set_current_seed(
            weft::nn::layer_stream_seed(seed, batch, static_cast<std::int64_t>(n)));
        y = layers[n].forward(x);
        gen.set_state(saved);
      } else {
        y = layers[n].forward(x);
      }
      x = hs[n] == 0.0 ? y : x + hs[n] * y;
    }
    if (is_training()) ++batch;
    return close.forward(x);
  }
  std::uint64_t seed;
  std::int64_t batch = 0;
  Layer open, close;
  std::vector<Layer> layers;
  std::vector<double> hs;
};

struct Batch {
  Tensor x, labels;
};
Batch make_batch(std::int64_t size, std::uint64_t seed, torch::Dtype dtype) {
  torch::manual_seed(seed);
  Batch b;
  b.x = torch::randn({size, 1, kSide[0], kSide[0]}, torch::TensorOptions().dtype(dtype));
  b.labels = torch::randint(0, kClasses, {size}, torch::kInt64);
  return b;
}

/// Relative difference; below norm 1e-3 absolute (a conv bias before batch norm has a zero
/// gradient in exact arithmetic, so both sides hold rounding noise).
double rel(const Tensor& a, const Tensor& b) {
  const double nb = b.norm().item<double>();
  return (a - b).norm().item<double>() / std::max(nb, 1e-3);
}

/// The largest relative difference over this rank's parameters, gradients and buffers (by the
/// sequential names), reduced over all ranks; `compared` counts tensors everywhere.
struct Difference {
  double params = 0, grads = 0, buffers = 0;
  std::int64_t compared = 0;
};
Difference compare_modules(tnn::Module& model, tnn::Module& ref, bool with_grads, double bound) {
  Difference d;
  const auto ref_params = ref.named_parameters();
  for (const auto& p : model.named_parameters()) {
    const Tensor* r = ref_params.find(p.key());
    if (!r) {
      ADD_FAILURE() << "no reference parameter " << p.key();
      continue;
    }
    d.params = std::max(d.params, rel(p.value(), *r));
    if (with_grads) {
      EXPECT_TRUE(p.value().grad().defined()) << p.key();
      if (p.value().grad().defined() && r->grad().defined()) {
        const double e = rel(p.value().grad(), r->grad());
        if (e > bound) ADD_FAILURE() << "gradient of " << p.key() << " differs by " << e;
        d.grads = std::max(d.grads, e);
      }
    }
    ++d.compared;
  }
  const auto ref_buffers = ref.named_buffers();
  for (const auto& b : model.named_buffers()) {
    const Tensor* r = ref_buffers.find(b.key());
    if (!r) {
      ADD_FAILURE() << "no reference buffer " << b.key();
      continue;
    }
    d.buffers = std::max(d.buffers, rel(b.value().to(torch::kFloat64), r->to(torch::kFloat64)));
    ++d.compared;
  }
  d.params = allreduce_max(d.params);
  d.grads = allreduce_max(d.grads);
  d.buffers = allreduce_max(d.buffers);
  std::int64_t total = 0;
  MPI_Allreduce(&d.compared, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  d.compared = total;
  return d;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& labels) {
  return torch::nn::functional::cross_entropy(logits, labels);
}

/// `steps_count` SGD steps of both; returns the largest output difference; checks parameters,
/// gradients and buffers after each step against `bound`.
double train_and_compare(LayerParallel& model, Reference& ref, std::int64_t steps_count,
                         std::int64_t batch, double bound, const char* label) {
  torch::optim::SGD opt(model->parameters(), 0.05);
  torch::optim::SGD opt_ref(ref.parameters(), 0.05);
  double worst_out = 0;
  for (std::int64_t k = 0; k < steps_count; ++k) {
    const Batch b = make_batch(batch, 300 + static_cast<std::uint64_t>(k), torch::kFloat64);
    opt.zero_grad();
    opt_ref.zero_grad();
    const Tensor out = model->forward(b.x);
    const Tensor out_ref = ref.forward(b.x);
    Tensor loss =
        model->loss(out, [&](const Tensor& logits) { return cross_entropy(logits, b.labels); });
    cross_entropy(out_ref, b.labels).backward();
    loss.backward();
    if (model->owns_output()) worst_out = std::max(worst_out, rel(out, out_ref));
    const Difference d = compare_modules(*model, ref, true, bound);
    worst_out = allreduce_max(worst_out);
    if (world_rank() == 0)
      std::printf(
          "[%d ranks] %s step %lld: output %.2e, grads %.2e, params %.2e, buffers %.2e "
          "(%lld tensors)\n",
          world_size(), label, static_cast<long long>(k), worst_out, d.grads, d.params, d.buffers,
          static_cast<long long>(d.compared));
    EXPECT_LT(worst_out, bound) << label;
    EXPECT_LT(d.grads, bound) << label;
    EXPECT_LT(d.params, bound) << label;
    EXPECT_LT(d.buffers, bound) << label;
    EXPECT_GT(d.compared, 0);
    opt.step();
    opt_ref.step();
  }
  return worst_out;
}

LayerParallelOptions converged(int levels, int cf) {
  auto solve = [&] {
    return mgrit::Options().max_levels(levels).cfactor(cf).nrelax(1).max_iterations(40).abs_tol(
        1e-13);
  };
  LayerParallelOptions o;
  o.forward(solve()).backward(solve());
  return o;
}

// ------------------------------------------------------------------------------------------
// Stages

struct StagesCase {
  std::vector<std::int64_t> steps;
  bool exact;
};

class Stages : public ::testing::TestWithParam<StagesCase> {};

TEST_P(Stages, OutputsAndEveryGradientEqualSequentialBackprop) {
  const StagesCase& c = GetParam();
  const Kind k;
  LayerParallel model(MPI_COMM_WORLD, make_network(c.steps, k),
                      c.exact ? LayerParallelOptions() : converged(3, 2));
  Reference ref(c.steps, k, 0);
  const double bound = c.exact ? 1e-12 : 1e-10;
  train_and_compare(model, ref, 2, 5, bound, c.exact ? "stages exact" : "stages multilevel");
}

INSTANTIATE_TEST_SUITE_P(Lengths, Stages,
                         ::testing::Values(StagesCase{{3, 5, 2}, true}, StagesCase{{2, 3}, true},
                                           StagesCase{{3, 5, 2}, false},
                                           StagesCase{{5, 4}, false}));

TEST(StagesInCoarseIntervals, TransitionsNeedNotSitOnCoarsePoints) {
  // cf 4: the transitions at chain indices 3 and 9 fall inside coarse intervals on level 1.
  const std::vector<std::int64_t> steps{3, 5, 2};
  LayerParallel model(MPI_COMM_WORLD, make_network(steps, Kind()), converged(2, 4));
  Reference ref(steps, Kind(), 0);
  train_and_compare(model, ref, 1, 4, 1e-10, "transitions inside coarse intervals");
}

// ------------------------------------------------------------------------------------------
// Batch norm and dropout

TEST(BatchNorm, ExactTrainingEqualsSequentialIncludingRunningStatistics) {
  Kind k;
  k.batchnorm = true;
  const std::vector<std::int64_t> steps{3, 4};
  LayerParallel model(MPI_COMM_WORLD, make_network(steps, k));
  Reference ref(steps, k, 0);
  train_and_compare(model, ref, 3, 6, 1e-12, "batch norm exact");
  // Eval mode uses the running statistics.
  model->eval();
  ref.eval();
  const Batch b = make_batch(4, 77, torch::kFloat64);
  torch::NoGradGuard no_grad;
  const Tensor out = model->forward(b.x);
  const Tensor out_ref = ref.forward(b.x);
  if (model->owns_output()) {
    EXPECT_LT(rel(out, out_ref), 1e-12);
  }
  // The gathered network carries the buffers.
  auto full = model->gather_sequential(0);
  if (world_rank() == 0) {
    const auto mine = full->named_buffers();
    std::int64_t checked = 0;
    for (const auto& b2 : ref.named_buffers()) {
      const Tensor* m = mine.find(b2.key());
      ASSERT_NE(m, nullptr) << b2.key();
      EXPECT_LT(rel(m->to(torch::kFloat64), b2.value().to(torch::kFloat64)), 1e-12) << b2.key();
      ++checked;
    }
    EXPECT_GT(checked, 0);
  }
}

TEST(BatchNorm, MultilevelIteratedToConvergenceUpdatesStatisticsOnceFromFinalStates) {
  Kind k;
  k.batchnorm = true;
  const std::vector<std::int64_t> steps{5, 4};
  LayerParallel model(MPI_COMM_WORLD, make_network(steps, k), converged(3, 2));
  Reference ref(steps, k, 0);
  train_and_compare(model, ref, 2, 6, 1e-10, "batch norm multilevel");
}

TEST(BatchNorm, FewIterationsReuseTheGraphOfEveryFinalSweepEvaluation) {
  // Not converged: the F then C final sweep evaluates the first layer after each C-point before
  // the C relaxation replaces that point. That evaluation produced the stored next state and
  // took the running statistics, so the adjoint linearizes there: the forward's graphs serve
  // every local layer and none is rebuilt. Like every MGRIT result, the gradients are those of
  // one rank.
  Kind k;
  k.batchnorm = true;
  const std::vector<std::int64_t> steps{5, 4};
  const auto options = LayerParallelOptions::multilevel(3, 2, 2, 1);
  LayerParallel model(MPI_COMM_WORLD, make_network(steps, k), options);
  LayerParallel alone(MPI_COMM_SELF, make_network(steps, k), options);
  const Batch b = make_batch(6, 41, torch::kFloat64);
  for (LayerParallel* m : {&model, &alone}) {
    const Tensor out = (*m)->forward(b.x);
    (*m)->loss(out, [&](const Tensor& logits) { return cross_entropy(logits, b.labels); })
        .backward();
  }
  const auto& s = model->statistics();
  const std::int64_t local = model->end_layer() - model->first_layer();
  EXPECT_EQ(s.graphs_recorded, local);
  EXPECT_EQ(s.graphs_reused, local);
  EXPECT_EQ(s.graphs_built, 0);
  const auto mine = alone->named_parameters();
  double worst = 0;
  std::int64_t compared = 0;
  for (const auto& p : model->named_parameters()) {
    const Tensor* r = mine.find(p.key());
    ASSERT_NE(r, nullptr) << p.key();
    ASSERT_TRUE(p.value().grad().defined() && r->grad().defined()) << p.key();
    worst = std::max(worst, rel(p.value().grad(), r->grad()));
    ++compared;
  }
  EXPECT_GT(compared, 0);
  EXPECT_LT(allreduce_max(worst), 1e-12);
}

TEST(BatchNorm, TheOptionsTextNamesTheFinalSweepTheSolverRunsWithBuffers) {
  // The forward line ends with the final sweep: F then C where layers have buffers (multilevel).
  const auto final_sweep = [](const std::string& text) {
    const std::string forward = text.substr(0, text.find('\n'));
    return forward.substr(forward.rfind(' ') + 1);
  };
  const auto multilevel = LayerParallelOptions::multilevel(2, 2, 1, 1);
  EXPECT_EQ(final_sweep(to_string(multilevel)), "F");
  EXPECT_EQ(final_sweep(to_string(multilevel, true)), "CF");
  EXPECT_EQ(final_sweep(to_string(LayerParallelOptions(), true)), "F");  // one level: sequential
}

TEST(Dropout, EveryEvaluationOfALayerInABatchUsesTheSameMask) {
  Kind k;
  k.dropout = 0.3;
  const std::vector<std::int64_t> steps{4, 3};
  for (bool exact : {true, false}) {
    LayerParallelOptions o = exact ? LayerParallelOptions() : converged(3, 2);
    o.seed(42);
    LayerParallel model(MPI_COMM_WORLD, make_network(steps, k), o);
    Reference ref(steps, k, 42);
    train_and_compare(model, ref, 2, 5, exact ? 1e-12 : 1e-10,
                      exact ? "dropout exact" : "dropout multilevel");
  }
}

TEST(Dropout, MasksChangeFromBatchToBatchAndLeaveTheCallersGeneratorAlone) {
  Kind k;
  k.dropout = 0.5;
  const std::vector<std::int64_t> steps{4};
  LayerParallel model(MPI_COMM_WORLD, make_network(steps, k));
  const Batch b = make_batch(3, 5, torch::kFloat64);
  torch::NoGradGuard no_grad;
  torch::manual_seed(99);
  const Tensor first = model->forward(b.x);
  const Tensor after_first = torch::rand({4});
  torch::manual_seed(99);
  const Tensor second = model->forward(b.x);
  const Tensor after_second = torch::rand({4});
  EXPECT_TRUE(torch::equal(after_first, after_second));  // the caller's stream is untouched
  if (model->owns_output()) {
    EXPECT_GT(rel(first, second), 1e-3);
  }  // new masks for batch 2
  model->set_batch_index(0);
  const Tensor again = model->forward(b.x);
  if (model->owns_output()) {
    EXPECT_LT(rel(again, first), 1e-15);
  }  // reproducible
}

// ------------------------------------------------------------------------------------------
// Data x layer parallelism

TEST(DataParallel, TwoReplicasEqualSequentialTrainingWithTheGlobalBatch) {
  if (world_size() % 2 != 0) GTEST_SKIP() << "needs an even number of ranks";
  Kind k;
  k.dtype = torch::kFloat32;
  const std::vector<std::int64_t> steps{3, 2};
  weft::nn::ReplicaGroups groups(MPI_COMM_WORLD, 2);
  LayerParallelOptions o;
  o.bucket_bytes(2000);  // several buckets
  LayerParallel model(groups.layer_comm(), groups.data_comm(), make_network(steps, k), o);
  EXPECT_EQ(model->data_ranks(), 2);
  Reference ref(steps, k, 0);
  torch::optim::SGD opt(model->parameters(), 0.1);
  torch::optim::SGD opt_ref(ref.parameters(), 0.1);
  for (int step = 0; step < 2; ++step) {
    const Batch b = make_batch(8, 500 + static_cast<std::uint64_t>(step), torch::kFloat32);
    const std::int64_t half = 4, first = groups.replica() * half;
    const Tensor x = b.x.slice(0, first, first + half);
    const Tensor labels = b.labels.slice(0, first, first + half);
    opt.zero_grad();
    opt_ref.zero_grad();
    Tensor loss = model->loss(model->forward(x),
                              [&](const Tensor& logits) { return cross_entropy(logits, labels); });
    loss.backward();
    cross_entropy(ref.forward(b.x), b.labels).backward();
    const Difference d = compare_modules(*model, ref, true, 1e-5);
    if (world_rank() == 0)
      std::printf("[%d ranks, 2 replicas] step %d: grads %.2e, params %.2e, buckets %lld\n",
                  world_size(), step, d.grads, d.params,
                  static_cast<long long>(model->statistics().reduce_buckets));
    EXPECT_LT(d.grads, 1e-5);
    EXPECT_LT(d.params, 1e-5);
    opt.step();
    opt_ref.step();
  }
  EXPECT_GE(model->statistics().reduce_buckets, 1);
}

// ------------------------------------------------------------------------------------------
// Bad input

TEST(StagesBadInput, DescriptionsThatDoNotMakeAChainAreInvalidOptions) {
  Network net = make_network({3, 2}, Kind());
  net.stages[0].transition = nullptr;
  EXPECT_THROW(LayerParallel(MPI_COMM_WORLD, net), weft::InvalidOption);
  net = make_network({3, 2}, Kind());
  net.steps = 5;
  EXPECT_THROW(LayerParallel(MPI_COMM_WORLD, net), weft::InvalidOption);
  net = make_network({3, 0}, Kind());
  EXPECT_THROW(LayerParallel(MPI_COMM_WORLD, net), weft::InvalidOption);
  EXPECT_THROW(weft::nn::ReplicaGroups(MPI_COMM_WORLD, world_size() + 1), weft::InvalidOption);
}

TEST(StagesBadInput, AStepThatChangesTheShapeInsideAStageIsBadDataOnEveryRank) {
  Network net = make_network({3, 3}, Kind());
  net.stages[1].step = [](std::int64_t n) -> Layer {
    if (n != 5) return make_step(Kind(), 1, n);
    tnn::Conv2d conv(tnn::Conv2dOptions(kChannels[1], kChannels[1], 3).stride(2).padding(1));
    conv->to(torch::kFloat64);
    return conv;
  };
  LayerParallel model(MPI_COMM_WORLD, net);
  try {
    model->forward(make_batch(2, 1, torch::kFloat64).x);
    ADD_FAILURE() << "no exception";
  } catch (const weft::BadData& e) {
    EXPECT_NE(std::string(e.what()).find("step layer 5"), std::string::npos) << e.what();
  }
}

// ------------------------------------------------------------------------------------------
// Pipelined exact inference (LayerParallelImpl::infer)

/// Inputs of different sizes (one of a single example), the same on every rank.
std::vector<Tensor> inference_inputs() {
  std::vector<Tensor> xs;
  for (std::int64_t j = 0; j < 6; ++j)
    xs.push_back(
        make_batch(j == 3 ? 1 : 2 + j, 300 + static_cast<std::uint64_t>(j), torch::kFloat64).x);
  return xs;
}

TEST(Inference, PipelinedEqualsTheSequentialNetworkWhateverTheSolversOptions) {
  Kind k;
  k.batchnorm = true;
  const std::vector<std::int64_t> steps{3, 4};
  LayerParallel model(MPI_COMM_WORLD, make_network(steps, k));
  Reference ref(steps, k, 0);
  train_and_compare(model, ref, 2, 6, 1e-12, "batch norm exact");  // running statistics move
  // Multilevel solvers with one iteration: their forward is not the network's, infer's is.
  model->set_options(LayerParallelOptions::multilevel(2, 2, 1, 1));
  model->eval();
  ref.eval();
  torch::NoGradGuard no_grad;
  const std::vector<Tensor> xs = inference_inputs();
  std::vector<Tensor> outputs(xs.size());
  std::vector<std::int64_t> order;
  model->infer(
      static_cast<std::int64_t>(xs.size()),
      [&](std::int64_t j) { return xs[static_cast<size_t>(j)]; },
      [&](std::int64_t j, const Tensor& y) {
        order.push_back(j);
        outputs[static_cast<size_t>(j)] = y;
      });
  if (model->owns_output()) {
    ASSERT_EQ(order, (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5}));
    for (size_t j = 0; j < xs.size(); ++j) {
      const Tensor expected = ref.forward(xs[j]);
      ASSERT_EQ(outputs[j].sizes(), expected.sizes()) << "input " << j;
      EXPECT_LT(rel(outputs[j], expected), 1e-12) << "input " << j;
    }
    // The one-iteration multilevel forward of the same module is not the network's: the
    // comparison above can tell.
    const Tensor approximate = model->forward(xs[0]);
    EXPECT_GT(rel(approximate, ref.forward(xs[0])), 1e-6);
  } else {
    EXPECT_TRUE(order.empty());
    model->forward(xs[0]);
  }
}

TEST(Inference, AFailureOnOneRankReachesEveryRankAfterTheChainDrains) {
  LayerParallel model(MPI_COMM_WORLD, make_network({3, 4}, Kind()));
  model->eval();
  const std::vector<Tensor> xs = inference_inputs();
  const int last = world_size() - 1;
  // The input rank fails on input 2: inputs 0 and 1 still come out, none after them.
  std::vector<std::int64_t> seen;
  try {
    model->infer(
        6,
        [&](std::int64_t j) -> Tensor {
          if (j == 2) throw weft::BadData("input 2 is damaged");
          return xs[static_cast<size_t>(j)];
        },
        [&](std::int64_t j, const Tensor&) { seen.push_back(j); });
    ADD_FAILURE() << "no exception on rank " << world_rank();
  } catch (const weft::BadData& e) {
    if (world_rank() == 0) {
      EXPECT_NE(std::string(e.what()).find("damaged"), std::string::npos) << e.what();
    }
  }
  if (world_rank() == last) {
    EXPECT_EQ(seen, (std::vector<std::int64_t>{0, 1}));
  }
  // The output rank fails on output 1: every rank throws, and the module still works.
  try {
    model->infer(
        6, [&](std::int64_t j) { return xs[static_cast<size_t>(j)]; },
        [&](std::int64_t j, const Tensor&) {
          if (j == 1) throw weft::InvalidOption("output 1 refused");
        });
    ADD_FAILURE() << "no exception on rank " << world_rank();
  } catch (const weft::InvalidOption&) {
  }
  std::int64_t outputs = 0;
  model->infer(
      2, [&](std::int64_t j) { return xs[static_cast<size_t>(j)]; },
      [&](std::int64_t, const Tensor&) { ++outputs; });
  EXPECT_EQ(outputs, world_rank() == last ? 2 : 0);
}

TEST(Inference, TrainingModeIsAnInvalidOptionOnEveryRank) {
  LayerParallel model(MPI_COMM_WORLD, make_network({3, 4}, Kind()));
  EXPECT_THROW(model->infer(
                   1, [](std::int64_t) { return make_batch(2, 1, torch::kFloat64).x; },
                   [](std::int64_t, const Tensor&) {}),
               weft::InvalidOption);
}

}  // namespace
