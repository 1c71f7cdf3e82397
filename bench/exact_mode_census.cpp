// Where weft's exact mode differs from plain LibTorch, operation by operation: one training
// batch of the stages network (weft train --model stages: 8, 16, 32 channels, 2 steps per stage,
// batch norm; batch 50) in plain sequential LibTorch and in weft exact mode, in the same
// process, with a LibTorch RecordFunction observer on every dispatched operation. Prints, per
// batch, each operation whose count or time differs between the two (time: top-level calls
// only, so nested calls are not counted twice), and the wall time of both. The observer slows
// small operations, so the times locate differences; train_step_bench measures the ratio.
//   build/bench/exact_mode_census [--batches 40] [--threads 1]
#include <ATen/record_function.h>
#include <mpi.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "weft/models/stages_net.hpp"
#include "weft/nn/layer_parallel.hpp"
#include "weft/util/clock.hpp"
#include "weft/util/memory.hpp"
#include "weft/util/mpi.hpp"

namespace {

using weft::clock::now;

struct OpTotals {
  double seconds = 0;  // top-level calls
  double calls = 0;    // all calls
};

// The observer's tally; recording only while `active`.
struct Tally {
  bool active = false;
  int depth = 0;
  std::map<std::string, OpTotals> ops;
};
Tally tally;

struct Started : at::ObserverContext {
  double t0 = 0;
  int depth = 0;
};

void observe_operations() {
  at::addGlobalCallback(
      at::RecordFunctionCallback(
          [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
            if (!tally.active) return nullptr;
            tally.ops[fn.name()].calls += 1;
            auto started = std::make_unique<Started>();
            started->depth = tally.depth++;
            started->t0 = now();
            return started;
          },
          [](const at::RecordFunction& fn, at::ObserverContext* context) {
            if (!context) return;
            const auto* started = static_cast<Started*>(context);
            --tally.depth;
            if (started->depth == 0) tally.ops[fn.name()].seconds += now() - started->t0;
          })
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
}

}  // namespace

int main(int argc, char** argv) {
  weft::keep_freed_memory();
  weft::mpi::Environment mpi_env(&argc, &argv);
  int batches = 40, threads = 1;
  for (int a = 1; a < argc; a += 2) {
    const std::string flag = argv[a];
    int* target = flag == "--batches" ? &batches : flag == "--threads" ? &threads : nullptr;
    std::size_t used = 0;
    int value = 0;
    try {
      if (target && a + 1 < argc) value = std::stoi(argv[a + 1], &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (!target || a + 1 >= argc || used != std::string(argv[a + 1]).size() || value < 1) {
      std::fprintf(stderr,
                   "exact_mode_census: %s%s%s is invalid; usage: exact_mode_census "
                   "[--batches N >= 1] [--threads N >= 1]\n",
                   flag.c_str(), a + 1 < argc ? " " : "", a + 1 < argc ? argv[a + 1] : "");
      return 2;
    }
    *target = value;
  }
  torch::set_num_threads(threads);
  at::globalContext().setFlushDenormal(true);
  torch::manual_seed(1);
  const torch::Tensor x = torch::randn({50, 1, 28, 28});
  const torch::Tensor labels = torch::randint(0, 10, {50}, torch::kInt64);
  const weft::nn::Network net = weft::models::stages_net(weft::models::StagesNetSpec());
  weft::nn::SequentialNetwork plain(net);
  weft::nn::LayerParallel exact(MPI_COMM_SELF, net, weft::nn::LayerParallelOptions::exact());
  torch::optim::SGD plain_opt(plain->parameters(), 0.01), exact_opt(exact->parameters(), 0.01);
  auto criterion = [&](const torch::Tensor& z) {
    return torch::nn::functional::cross_entropy(z, labels);
  };

  observe_operations();
  std::map<std::string, OpTotals> totals[2];
  double wall[2] = {0, 0};
  const int warmup = 2;
  for (int b = 0; b < warmup + batches; ++b)
    for (int which = 0; which < 2; ++which) {
      tally.ops.clear();
      tally.active = b >= warmup;
      const double t0 = now();
      if (which == 0) {
        plain_opt.zero_grad();
        criterion(plain->forward(x)).backward();
        plain_opt.step();
      } else {
        exact_opt.zero_grad();
        exact->loss(exact->forward(x), criterion).backward();
        exact_opt.step();
      }
      if (!tally.active) continue;
      tally.active = false;
      wall[which] += now() - t0;
      for (const auto& [name, t] : tally.ops) {
        totals[which][name].seconds += t.seconds;
        totals[which][name].calls += t.calls;
      }
    }

  std::printf(
      "# one training batch of the stages network (batch 50), per batch over %d batches: "
      "operations whose calls or top-level time differ\n%-64s %17s %23s\n",
      batches, "operation", "calls plain/weft", "top-level ms plain/weft");
  std::map<std::string, std::pair<OpTotals, OpTotals>> all;
  for (const auto& [name, t] : totals[0]) all[name].first = t;
  for (const auto& [name, t] : totals[1]) all[name].second = t;
  double calls[2] = {0, 0};
  for (const auto& [name, t] : all) {
    const double n = batches;
    calls[0] += t.first.calls / n;
    calls[1] += t.second.calls / n;
    const bool calls_differ = std::abs(t.first.calls - t.second.calls) >= n;
    const bool time_differs = std::abs(t.first.seconds - t.second.seconds) / n > 10e-6;
    if (!calls_differ && !time_differs) continue;
    std::printf("%-64.64s %8.0f/%-8.0f %11.3f/%-11.3f\n", name.c_str(), t.first.calls / n,
                t.second.calls / n, 1e3 * t.first.seconds / n, 1e3 * t.second.seconds / n);
  }
  std::printf(
      "operations per batch: plain %.0f, weft exact %.0f; wall ms per batch (observed): "
      "plain %.3f, weft exact %.3f, ratio %.3f\n",
      calls[0], calls[1], 1e3 * wall[0] / batches, 1e3 * wall[1] / batches, wall[1] / wall[0]);
  return 0;
}
