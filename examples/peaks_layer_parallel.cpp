// The smallest complete weft::nn program: a residual network trained layer-parallel on the
// synthetic "peaks" set (5 classes of points in [-3, 3]^2, weft::data), with multilevel MGRIT
// forward and adjoint solves over every rank of MPI_COMM_WORLD.
//
//   mpirun -np 2 ./weft_example_peaks
//
// The same code runs on every rank: the input rank (0) reads the points, the output rank (P-1)
// the labels. It exits non-zero unless the training loss falls, so it doubles as a test.
#include <mpi.h>
#include <torch/torch.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "weft/data/peaks.hpp"
#include "weft/nn/layer_parallel.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace F = torch::nn::functional;

constexpr std::int64_t kWidth = 8;  // features of the state x_n

int main(int argc, char** argv) {
  weft::mpi::Environment env(&argc, &argv);
  const int rank = weft::mpi::rank(MPI_COMM_WORLD);
  try {
    torch::manual_seed(1);  // the same initial parameters for every layer on every rank
    weft::nn::Network net;
    net.steps = 8;
    net.t_final = 1.0;
    net.open = []() -> weft::nn::Layer {
      return torch::nn::Sequential(torch::nn::Linear(2, kWidth), torch::nn::Tanh());
    };
    net.step = [](std::int64_t) -> weft::nn::Layer {
      return torch::nn::Sequential(torch::nn::Linear(kWidth, kWidth), torch::nn::Tanh());
    };
    net.close = []() -> weft::nn::Layer {
      return torch::nn::Linear(kWidth, weft::data::kPeaksClasses);
    };
    // 3 levels, cf 2, 2 forward and 1 adjoint iteration per batch.
    weft::nn::LayerParallel model(MPI_COMM_WORLD, net,
                                  weft::nn::LayerParallelOptions::multilevel(3, 2, 2, 1));
    torch::optim::Adam optimizer(model->parameters(), 1e-2);

    const weft::data::PeaksSet set = weft::data::make_peaks(1000, 7);
    const auto points =
        torch::from_blob(const_cast<float*>(set.points.data()), {set.count(), 2}).clone();
    const auto labels =
        torch::from_blob(const_cast<std::int64_t*>(set.labels.data()), {set.count()}, torch::kInt64)
            .clone();
    constexpr std::int64_t batch = 100;
    std::vector<double> epoch_loss;
    for (int epoch = 0; epoch < 5; ++epoch) {
      double sum = 0;
      for (std::int64_t start = 0; start < set.count(); start += batch) {
        const auto x = points.slice(0, start, start + batch);
        const auto y = labels.slice(0, start, start + batch);
        optimizer.zero_grad();
        torch::Tensor out = model->forward(x);
        torch::Tensor loss = model->loss(
            out, [&](const torch::Tensor& logits) { return F::cross_entropy(logits, y); });
        loss.backward();
        optimizer.step();
        sum += loss.item<double>();
      }
      epoch_loss.push_back(sum / static_cast<double>(set.count() / batch));
      if (rank == 0) std::printf("epoch %d  loss %.4f\n", epoch + 1, epoch_loss.back());
    }
    const bool learned = epoch_loss.back() < 0.9 * epoch_loss.front();
    if (rank == 0)
      std::printf("%s on %d ranks: loss %.4f -> %.4f\n", learned ? "trained" : "NOT trained",
                  weft::mpi::size(MPI_COMM_WORLD), epoch_loss.front(), epoch_loss.back());
    return learned ? 0 : 1;
  } catch (const weft::Error& e) {
    std::fprintf(stderr, "peaks_layer_parallel: rank %d: %s\n", rank, e.what());
    return 1;
  }
}
