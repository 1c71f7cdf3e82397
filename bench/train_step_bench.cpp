// Time per training batch (forward, backward, optimizer step) of the same network in one run:
// Fashion-MNIST images copied into 8 channels, 32 residual steps, batch 50.
//   - plain sequential LibTorch (weft::nn::SequentialNetwork), the baseline (rank 0)
//   - weft exact mode (1 level: sequential chains over the ranks)
//   - weft MGRIT: 3 levels, cf 4, 2 forward / 1 backward iteration, F-relaxation on the fine
//     level and FCF on coarse levels, skip of the first down-cycle
// Prints medians over --batches measured batches (after --warmup) and ratios to the baseline,
// plus step evaluations per level. Run at 1 and 2 ranks: bench/run_train_bench.sh.
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "weft/data/idx.hpp"
#include "weft/models/image_resnet.hpp"
#include "weft/nn/layer_parallel.hpp"

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

struct Times {
  double forward = 0, backward = 0, optimizer = 0;
  double total() const { return forward + backward + optimizer; }
};

struct Batches {
  std::vector<torch::Tensor> images, labels;
};

Batches load(const std::string& dir, int count, std::int64_t batch) {
  weft::data::IdxOptions o;
  o.limit = count * batch;
  const auto set =
      weft::data::load_idx(dir + "/train-images-idx3-ubyte", dir + "/train-labels-idx1-ubyte", o);
  auto pixels =
      weft::data::to_float(set, weft::data::kFashionMnistMean, weft::data::kFashionMnistStd);
  auto labels = weft::data::labels_as_int64(set);
  const auto x = torch::from_blob(pixels.data(), {set.count, 1, 28, 28}).clone();
  const auto y = torch::from_blob(labels.data(), {set.count}, torch::kInt64).clone();
  Batches b;
  for (int i = 0; i < count; ++i) {
    b.images.push_back(x.slice(0, i * batch, (i + 1) * batch));
    b.labels.push_back(y.slice(0, i * batch, (i + 1) * batch));
  }
  return b;
}

// Median times of the measured batches (max over ranks per batch).
template <class Step>
Times measure(const Batches& data, int warmup, MPI_Comm comm, Step step) {
  std::vector<double> f, b, o;
  for (size_t i = 0; i < data.images.size(); ++i) {
    Times t = step(data.images[i], data.labels[i]);
    double local[3] = {t.forward, t.backward, t.optimizer}, slowest[3];
    MPI_Allreduce(local, slowest, 3, MPI_DOUBLE, MPI_MAX, comm);
    if (static_cast<int>(i) < warmup) continue;
    f.push_back(slowest[0]);
    b.push_back(slowest[1]);
    o.push_back(slowest[2]);
  }
  return {median(f), median(b), median(o)};
}

void report(const char* name, const Times& t, double baseline) {
  std::printf("  %-34s %9.1f %9.1f %9.1f %9.1f %8s\n", name, 1e3 * t.forward, 1e3 * t.backward,
              1e3 * t.optimizer, 1e3 * t.total(),
              baseline > 0 ? (std::to_string(t.total() / baseline).substr(0, 5)).c_str() : "-");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::string dir = "/usr/share/datasets/fashion-mnist";
  int batches = 12, warmup = 2, threads = 1;
  for (int a = 1; a + 1 < argc; a += 2) {
    const std::string flag = argv[a];
    if (flag == "--data") dir = argv[a + 1];
    if (flag == "--batches") batches = std::stoi(argv[a + 1]);
    if (flag == "--warmup") warmup = std::stoi(argv[a + 1]);
    if (flag == "--threads") threads = std::stoi(argv[a + 1]);
  }
  torch::set_num_threads(threads);
  const Batches data = load(dir, batches + warmup, 50);

  weft::models::ImageResNetSpec spec;
  spec.channels = 8;
  spec.steps = 32;
  spec.open = weft::models::OpenLayer::Copy;
  const weft::nn::Network net = weft::models::image_resnet(spec);
  namespace F = torch::nn::functional;

  if (rank == 0)
    std::printf(
        "# training batch time: copy-open 8 channels, 32 steps, batch 50, Fashion-MNIST;"
        " %d rank(s), %d torch thread(s) per rank, median of %d batches [ms]\n",
        ranks, threads, batches);
  if (rank == 0)
    std::printf("  %-34s %9s %9s %9s %9s %8s\n", "", "forward", "backward", "optim", "total",
                "ratio");

  double baseline = 0;
  if (ranks == 1) {
    weft::nn::SequentialNetwork seq(net);
    torch::optim::SGD opt(seq->parameters(), 0.01);
    const Times t = measure(data, warmup, MPI_COMM_SELF, [&](auto& x, auto& y) {
      Times r;
      opt.zero_grad();
      double t0 = now();
      auto loss = F::cross_entropy(seq->forward(x), y);
      double t1 = now();
      loss.backward();
      double t2 = now();
      opt.step();
      r = {t1 - t0, t2 - t1, now() - t2};
      return r;
    });
    baseline = t.total();
    report("plain LibTorch (sequential)", t, baseline);
  }
  MPI_Bcast(&baseline, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);

  auto run = [&](const char* name, const weft::nn::LayerParallelOptions& options) {
    weft::nn::LayerParallel model(MPI_COMM_WORLD, net, options);
    torch::optim::SGD opt(model->parameters(), 0.01);
    std::vector<std::int64_t> fwd_steps, bwd_steps;
    const Times t = measure(data, warmup, MPI_COMM_WORLD, [&](auto& x, auto& y) {
      Times r;
      opt.zero_grad();
      double t0 = now();
      auto out = model->forward(x);
      auto loss = model->loss(out, [&](const torch::Tensor& z) { return F::cross_entropy(z, y); });
      double t1 = now();
      loss.backward();
      double t2 = now();
      opt.step();
      r = {t1 - t0, t2 - t1, now() - t2};
      return r;
    });
    const auto& s = model->statistics();
    auto total = [&](const std::vector<weft::mgrit::index_t>& mine) {
      std::vector<weft::mgrit::index_t> sum(mine.size());
      MPI_Allreduce(mine.data(), sum.data(), static_cast<int>(mine.size()), MPI_INT64_T, MPI_SUM,
                    MPI_COMM_WORLD);
      std::string text;
      for (auto n : sum) text += (text.empty() ? "" : "/") + std::to_string(n);
      return text;
    };
    const std::string f = total(s.forward.statistics.steps_per_level);
    const std::string b = total(s.backward.statistics.steps_per_level);
    if (rank == 0) {
      report(name, t, baseline);
      std::printf("  %-34s step evaluations per level (all ranks): forward %s, backward %s\n", "",
                  f.c_str(), b.c_str());
    }
  };
  run("weft exact mode (1 level)", weft::nn::LayerParallelOptions::exact());

  weft::mgrit::Options fwd, bwd;
  for (auto* o : {&fwd, &bwd}) {
    o->max_levels(3).cfactor(4).nrelax(1).nrelax(0, 0).abs_tol(0);
    o->initial_phase(weft::mgrit::InitialPhase::Skip);
  }
  fwd.max_iterations(2);
  bwd.max_iterations(1);
  run("weft MGRIT 3 lev cf4, 2 fwd/1 bwd it",
      weft::nn::LayerParallelOptions().forward(fwd).backward(bwd));

  if (rank == 0)
    std::printf(
        "  (TorchBraid on this kind of machine, same MGRIT configuration: 1041 ms per "
        "batch at 1 rank, 577 ms at 2 ranks; plain PyTorch 405 ms)\n");
  MPI_Finalize();
  return 0;
}
