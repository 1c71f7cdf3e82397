// The network of `weft train --model stages` (models::stages_net: batch norm in the open layer,
// the steps and the transitions; dropout inside the steps), trained layer-parallel in exact
// mode, against the same network trained by nn::SequentialNetwork (what `weft train --serial`
// runs): the training losses, every running statistic, the evaluation outputs and the
// gathered network agree to round-off in double precision at every rank count.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "weft/models/stages_net.hpp"
#include "weft/nn/layer_parallel.hpp"
#include "weft/util/error.hpp"
#include "world.hpp"

namespace {

using torch::Tensor;
using weft::nn::LayerParallel;
using weft::nn::SequentialNetwork;
using weft::test::world_rank;

constexpr std::uint64_t kStreamSeed = 5;

weft::models::StagesNetSpec small_spec(double dropout) {
  weft::models::StagesNetSpec spec;
  spec.channels = {3, 5};
  spec.steps = {3, 4};
  spec.height = spec.width = 8;
  spec.classes = 4;
  spec.dropout = dropout;
  spec.seed = 7;
  return spec;
}

double rel(const Tensor& a, const Tensor& b) {
  return (a - b).norm().item<double>() / std::max(1e-300, b.norm().item<double>());
}

struct Batch {
  Tensor x, y;
};
Batch make_batch(std::int64_t rows, std::uint64_t seed) {
  torch::manual_seed(seed);
  return {torch::randn({rows, 1, 8, 8}, torch::kFloat64), torch::randint(0, 4, {rows})};
}

// Trains both for `batches` SGD steps (eval mode between batches, as `weft train` evaluates
// after each epoch), comparing the training loss of each batch, then compares eval outputs and
// every buffer of the gathered network with the sequential one's.
void train_and_compare(double dropout) {
  const auto net = weft::models::stages_net(small_spec(dropout));
  LayerParallel parallel(MPI_COMM_WORLD, net,
                         weft::nn::LayerParallelOptions::exact().seed(kStreamSeed));
  SequentialNetwork serial(net, kStreamSeed);
  parallel->to(torch::kFloat64);
  serial->to(torch::kFloat64);
  torch::optim::SGD opt_p(parallel->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::SGD opt_s(serial->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int b = 0; b < 4; ++b) {
    const Batch batch = make_batch(6, 100 + static_cast<std::uint64_t>(b));
    opt_p.zero_grad();
    opt_s.zero_grad();
    const Tensor loss_p = parallel->loss(parallel->forward(batch.x), [&](const Tensor& z) {
      return torch::nn::functional::cross_entropy(z, batch.y);
    });
    loss_p.backward();
    opt_p.step();
    const Tensor loss_s = torch::nn::functional::cross_entropy(serial->forward(batch.x), batch.y);
    loss_s.backward();
    opt_s.step();
    EXPECT_NEAR(loss_p.item<double>(), loss_s.item<double>(), 1e-12 * loss_s.item<double>())
        << "training loss of batch " << b;
    // Evaluation in between, as after an epoch: it must change nothing.
    parallel->eval();
    serial->eval();
    {
      torch::NoGradGuard no_grad;
      const Batch test = make_batch(5, 900);
      const Tensor out_p = parallel->forward(test.x), out_s = serial->forward(test.x);
      if (parallel->owns_output()) {
        EXPECT_LT(rel(out_p, out_s), 1e-11) << "eval after batch " << b;
      }
    }
    parallel->train();
    serial->train();
  }
  auto gathered = parallel->gather_sequential(0);
  if (world_rank() != 0) return;
  const auto mine = gathered->named_buffers();
  std::int64_t checked = 0;
  for (const auto& b : serial->named_buffers()) {
    const Tensor* m = mine.find(b.key());
    ASSERT_NE(m, nullptr) << b.key();
    if (b.value().dim() == 0) {  // num_batches_tracked: every layer saw every batch once
      EXPECT_EQ(m->item<std::int64_t>(), b.value().item<std::int64_t>()) << b.key();
      continue;
    }
    EXPECT_LT(rel(*m, b.value()), 1e-12) << b.key();
    ++checked;
  }
  // open + 7 steps x 2 + 1 transition = 16 batch norms, each a running mean and variance
  EXPECT_EQ(checked, 32);
}

TEST(StagesNet, ExactLayerParallelTrainingEqualsSequentialIncludingEveryRunningStatistic) {
  train_and_compare(0.0);
}

TEST(StagesNet, WithDropoutExactLayerParallelTrainingEqualsSequential) {
  train_and_compare(0.2);
}

// The imagenet stem (the open layer of TorchBraid's Tiny-ImageNet network): conv7x7 stride 2 +
// BN + ReLU + max pool 3x3 stride 2 takes 3x64x64 images to 16x16 states; layer-parallel
// training with it still equals the sequential network.
TEST(StagesNet, ImagenetStemTakes64x64ImagesTo16x16States) {
  weft::models::StagesNetSpec spec;
  spec.channels = {4, 8};
  spec.steps = {2, 2};
  spec.in_channels = 3;
  spec.height = spec.width = 64;
  spec.imagenet_stem = true;
  spec.classes = 5;
  const auto net = weft::models::stages_net(spec);
  const weft::nn::Layer open = net.open();
  open.module().eval();
  const Tensor x = torch::randn({2, 3, 64, 64});
  const Tensor y = open.forward(x);
  EXPECT_EQ(y.sizes(), (std::vector<std::int64_t>{2, 4, 16, 16}));
  std::int64_t parameters = 0;
  for (const auto& p : open.module().parameters()) parameters += p.numel();
  EXPECT_EQ(parameters, 7 * 7 * 3 * 4 + 2 * 4);  // no bias before batch norm; BN weight, bias
  LayerParallel parallel(MPI_COMM_WORLD, net,
                         weft::nn::LayerParallelOptions::exact().seed(kStreamSeed));
  SequentialNetwork serial(net, kStreamSeed);
  parallel->to(torch::kFloat64);
  serial->to(torch::kFloat64);
  torch::manual_seed(3);
  const Tensor images = torch::randn({3, 3, 64, 64}, torch::kFloat64);
  const Tensor labels = torch::randint(0, 5, {3});
  const Tensor loss_p = parallel->loss(parallel->forward(images), [&](const Tensor& z) {
    return torch::nn::functional::cross_entropy(z, labels);
  });
  const Tensor loss_s = torch::nn::functional::cross_entropy(serial->forward(images), labels);
  EXPECT_NEAR(loss_p.item<double>(), loss_s.item<double>(), 1e-12 * loss_s.item<double>());
  spec.dims = 3;
  spec.depth = 8;
  EXPECT_THROW(weft::models::stages_net(spec), weft::InvalidOption);
}

}  // namespace
