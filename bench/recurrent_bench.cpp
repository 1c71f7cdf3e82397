// Per-batch time of weft::nn::Recurrent (forward + backward) against torch::nn::GRU/LSTM with the
// same parameters, in the same run, interleaved, medians of --reps repetitions. At P ranks the
// weft figure is the slowest rank's; the LibTorch baseline runs on every rank alone (its median
// over ranks is reported). Prints one JSON line.
//
//   mpirun -np 1 build/bench/recurrent_bench --cell gru --steps 28 --batch 100 --hidden 64
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "weft/nn/recurrent.hpp"
#include "weft/util/mpi.hpp"

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  weft::mpi::Environment env(&argc, &argv);
  std::string cell = "gru";
  std::int64_t steps = 28, batch = 100, hidden = 64, input = 28, layers = 1, reps = 30;
  int levels = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--cell")
      cell = v;
    else if (k == "--steps")
      steps = std::atoll(v.c_str());
    else if (k == "--batch")
      batch = std::atoll(v.c_str());
    else if (k == "--hidden")
      hidden = std::atoll(v.c_str());
    else if (k == "--input")
      input = std::atoll(v.c_str());
    else if (k == "--layers")
      layers = std::atoll(v.c_str());
    else if (k == "--reps")
      reps = std::atoll(v.c_str());
    else if (k == "--levels")
      levels = std::atoi(v.c_str());
  }
  torch::set_num_threads(1);
  const bool lstm = cell == "lstm";
  torch::manual_seed(3);
  weft::nn::LayerParallelOptions solver;
  if (levels > 1) solver = weft::nn::LayerParallelOptions::multilevel(levels, 4, 2, 1);
  weft::nn::Recurrent rnn(
      MPI_COMM_WORLD, weft::nn::RecurrentOptions(
                          lstm ? weft::nn::CellKind::LSTM : weft::nn::CellKind::GRU, input, hidden)
                          .num_layers(layers)
                          .solver(solver));
  torch::nn::AnyModule reference;
  if (lstm)
    reference = torch::nn::AnyModule(
        torch::nn::LSTM(torch::nn::LSTMOptions(input, hidden).num_layers(layers)));
  else
    reference = torch::nn::AnyModule(
        torch::nn::GRU(torch::nn::GRUOptions(input, hidden).num_layers(layers)));
  const torch::Tensor x = torch::randn({steps, batch, input});
  auto run_weft = [&] {
    rnn->zero_grad();
    rnn->forward(x).h_n.sum().backward();
  };
  auto run_torch = [&] {
    reference.ptr()->zero_grad();
    torch::Tensor h = lstm ? std::get<0>(std::get<1>(reference.get<torch::nn::LSTM>()->forward(x)))
                           : std::get<1>(reference.get<torch::nn::GRU>()->forward(x));
    h.sum().backward();
  };
  run_weft();
  run_torch();
  std::vector<double> tw, tt;
  for (std::int64_t r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    run_weft();
    double local = now() - t0, slowest = 0;
    MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    tw.push_back(slowest);
    t0 = now();
    run_torch();
    tt.push_back(now() - t0);
  }
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const double w = median(tw), t = median(tt);
  if (rank == 0)
    std::printf(
        "{\"cell\": \"%s\", \"ranks\": %d, \"levels\": %d, \"steps\": %lld, \"batch\": %lld, "
        "\"hidden\": %lld, \"layers\": %lld, \"weft_ms\": %.3f, \"torch_ms\": %.3f, "
        "\"ratio\": %.3f}\n",
        cell.c_str(), ranks, levels, static_cast<long long>(steps), static_cast<long long>(batch),
        static_cast<long long>(hidden), static_cast<long long>(layers), 1e3 * w, 1e3 * t, w / t);
  return 0;
}
