// Time per training batch (forward, backward, optimizer step) of the same network in one run:
// Fashion-MNIST images copied into 8 channels, 32 residual steps, batch 50.
//   - plain sequential LibTorch (weft::nn::SequentialNetwork) on rank 0: the baseline
//   - weft exact mode (1 level: sequential chains over the ranks)
//   - weft MGRIT: 3 levels, cf 4, 2 forward / 1 backward iteration, F-relaxation on the fine
//     level and FCF on coarse levels, skip of the first down-cycle
// The configurations run interleaved batch by batch (--warmup rounds discarded, then --rounds
// rounds of --batches batches), so a slow phase of the shared machine hits all of them; the
// table shows medians and ratios to the baseline, step evaluations per level, and per rank
// where the time of the weft configurations went.
// --model stages: the multi-stage batch-norm network of weft train --model stages (8,16,32
// channels, 2 steps each) instead. --model tiny: 1 channel, 64 steps (copy-open), where a
// step's arithmetic is nearly nothing and the ratios to plain LibTorch show what weft adds per
// step (with --batch 8: the overhead-bound configuration of issue 24, item 7). At 2 ranks two more
// configurations compare data parallelism with its baseline: weft exact mode on one rank with half
// the batch (on each rank in turn, the other sleeping), and 2 replicas x 1 rank taking half the
// batch each (gradients averaged); the goal is <= 1.1x per global batch, in wall time (the slowest
// rank from the common start). Per rank it also prints memory: own parameters and buffers, ghost
// copies, stored states and cached graphs. A third data-parallel reference runs weft exact mode
// with half the batch on every rank at once, without communication: two processes sharing the
// machine, which is what the replicas pay besides their all-reduces. Work bound: the cost of each
// evaluation kind is measured in isolation on the sequential network, interleaved with the rounds:
// on the fine level per layer (x + h F(x) without graph, with graph, vector-Jacobian product for
// the state, and for state and parameters), on coarse levels per coarse step as the solver composes
// it (forward without graph; adjoint: record the composition, then its vector-Jacobian product).
// Each weft configuration's solve time per direction is compared with the sum over its levels of
// its evaluations (counted by the solver's reports) times those costs. The backward is compared a
// second time with the fine level's VJPs priced as backprop performs them (graphs recorded by a
// forward sweep over the chain, VJPs in reverse order: their saved tensors are out of cache, as in
// the adjoint's reuse of the forward's graphs). --only PREFIX runs just the configurations so named
// (profiling). Run at 1 and 2 ranks: bench/run_train_bench.sh.
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "weft/data/idx.hpp"
#include "weft/models/image_resnet.hpp"
#include "weft/models/stages_net.hpp"
#include "weft/nn/layer_parallel.hpp"
#include "weft/nn/probes.hpp"
#include "weft/util/clock.hpp"
#include "weft/util/memory.hpp"
#include "weft/util/mpi.hpp"

namespace {

namespace F = torch::nn::functional;

using weft::clock::now;

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

// MPI_Allreduce(MAX) whose waiting ranks sleep instead of spinning, so that a rank idle during
// the baseline (which runs on rank 0 only) does not compete with it for the machine.
void polite_max(const double* local, double* global, int count) {
  MPI_Request request;
  MPI_Iallreduce(local, global, count, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &request);
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Where one rank's batch time went (weft configurations): forward and backward each as steps /
// waiting / solver bookkeeping / outside the solver [s], then the layer graphs recorded in the
// forward, reused and built in the backward, and memory (KiB).
constexpr size_t kSplit = 15;
using RankSplit = std::array<double, kSplit>;

// One configuration: a training step and a description of its MGRIT work.
struct Config {
  std::string name;
  std::function<Times(const torch::Tensor&, const torch::Tensor&)> step;
  std::function<std::string()> work;  // collective
  std::vector<double> forward, backward, optimizer;
  // Wall time of the batch: the slowest rank's whole step (the ranks start together). The
  // phases above are each the slowest rank's, so at 2 ranks their sum can exceed it.
  std::vector<double> wall;
  std::function<RankSplit()> split;  // weft configurations only
  std::vector<RankSplit> splits;
  std::function<const weft::nn::BatchStatistics*()> stats;  // weft configurations only
  std::vector<double> fwd_solve, bwd_solve;                 // this rank's solve seconds
  std::vector<std::vector<double>> fwd_levels, bwd_levels;  // its step seconds per level
  bool full_batch = true;  // the work bound's layer costs are measured at the full batch
};

constexpr std::int64_t kCfactor = 4;    // of the MGRIT configuration
constexpr size_t kSamplesPerRound = 3;  // of each layer cost, before each round's batches

// Seconds per layer evaluation of each kind, per chain layer (medians over the rounds).
struct LayerCosts {
  std::vector<std::vector<double>> plain, recorded, vjp, vjp_params;  // [layer][sample]
  // The two vector-Jacobian products as backprop performs them: on graphs recorded by a forward
  // sweep over the whole chain, in reverse layer order (the graphs' saved tensors are no longer
  // in cache), as the adjoint's fine sweeps reuse the forward's graphs.
  std::vector<std::vector<double>> vjp_backprop, vjp_params_backprop;
  void resize(size_t n) {
    for (auto* v : {&plain, &recorded, &vjp, &vjp_params, &vjp_backprop, &vjp_params_backprop})
      v->resize(n);
  }
};

// Each chain layer's input in a forward of `x`.
std::vector<torch::Tensor> layer_inputs(weft::nn::ChainProbe& chain, const torch::Tensor& x) {
  std::vector<torch::Tensor> points = chain.states(x);
  points.pop_back();
  return points;
}

// Seconds `body` takes.
template <class Body>
double seconds(Body&& body) {
  const double t0 = now();
  body();
  return now() - t0;
}

// One sample of every kind for every layer, at the layer's input from a forward of `x`, through
// the probe: the solvers' own evaluations (src/nn/layer_evaluator.cpp).
void measure_layer_costs(weft::nn::ChainProbe& chain, const torch::Tensor& x, LayerCosts& costs) {
  const std::vector<torch::Tensor> inputs = layer_inputs(chain, x);
  costs.resize(inputs.size());
  for (std::int64_t n = 0; n < chain.layers(); ++n) {
    const auto k = static_cast<size_t>(n);
    const torch::Tensor& xn = inputs[k];
    costs.plain[k].push_back(seconds([&] { chain.step(n, n + 1, xn); }));
    weft::nn::StepGraph graph;
    torch::Tensor out;
    costs.recorded[k].push_back(seconds([&] { out = chain.record(n, xn, graph); }));
    const torch::Tensor lambda = torch::randn_like(out);
    std::vector<torch::Tensor> grads;
    costs.vjp[k].push_back(seconds([&] { chain.vjp(n, n + 1, xn, lambda, graph, true); }));
    costs.vjp_params[k].push_back(
        seconds([&] { chain.vjp(n, n + 1, xn, lambda, graph, true, &grads); }));
  }
}

// One sample of each fine-level VJP as backprop performs it (see LayerCosts).
void measure_backprop_costs(weft::nn::ChainProbe& chain, const torch::Tensor& x,
                            LayerCosts& costs) {
  const std::vector<torch::Tensor> inputs = layer_inputs(chain, x);
  const size_t layers = inputs.size();
  costs.resize(layers);
  for (int with_params = 0; with_params < 2; ++with_params) {
    std::vector<weft::nn::StepGraph> graphs(layers);
    torch::Tensor lambda;
    for (size_t k = 0; k < layers; ++k)
      lambda = chain.record(static_cast<std::int64_t>(k), inputs[k], graphs[k]);
    lambda = torch::randn_like(lambda);
    std::vector<torch::Tensor> grads;
    for (size_t k = layers; k-- > 0;) {
      const auto n = static_cast<std::int64_t>(k);
      const double t = seconds([&] {
        lambda = chain.vjp(n, n + 1, inputs[k], lambda, graphs[k], /*retain_graph=*/false,
                           with_params ? &grads : nullptr);
      });
      (with_params ? costs.vjp_params_backprop : costs.vjp_backprop)[k].push_back(t);
    }
  }
}

// A coarse step from point a to b as the solver evaluates it (each run of residual steps of one
// stage as ONE step of its first layer with the run's summed step size, each transition as
// itself). Costs per coarse step (a, b), [sample]: forward without a graph, and the adjoint's
// build (record the composition's graph, then the vector-Jacobian product). These are the "cost
// per evaluation" of the coarse levels; summing isolated layer costs would leave out what a
// composition costs beyond its layers.
struct CoarseCosts {
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<double>> plain, build;
};

// The coarse intervals of a level whose points are the multiples of `span` (and N).
std::vector<std::pair<std::int64_t, std::int64_t>> coarse_intervals(std::int64_t layers,
                                                                    std::int64_t span) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (std::int64_t a = 0; a < layers; a += span) out.emplace_back(a, std::min(a + span, layers));
  return out;
}

void measure_coarse_costs(weft::nn::ChainProbe& chain, const torch::Tensor& x,
                          const std::vector<std::int64_t>& spans, CoarseCosts& costs) {
  const std::vector<torch::Tensor> inputs = layer_inputs(chain, x);
  for (std::int64_t span : spans)
    for (const auto& [a, b] : coarse_intervals(chain.layers(), span)) {
      const std::int64_t from = a, to = b;  // (structured bindings: not capturable in C++17)
      const torch::Tensor& xa = inputs[static_cast<size_t>(a)];
      torch::Tensor out;
      costs.plain[{a, b}].push_back(seconds([&] { out = chain.step(from, to, xa); }));
      const torch::Tensor lambda = torch::randn_like(out);
      weft::nn::StepGraph fresh;
      costs.build[{a, b}].push_back(
          seconds([&] { chain.vjp(from, to, xa, lambda, fresh, /*retain_graph=*/false); }));
    }
}

// "L<level> <seconds spent in its sweeps>/<its work bound>" in ms.
std::string fmt_level(size_t level, double spent, double bound) {
  char text[64];
  std::snprintf(text, sizeof text, "%sL%zu %.1f/%.1f", level == 0 ? "" : " ", level, 1e3 * spent,
                1e3 * bound);
  return text;
}

// The work bound of one solve on this rank [s]: its layer evaluations times their costs.
double work_bound(const std::vector<weft::nn::LayerEvaluations>& level,
                  const std::vector<double>& cost) {
  const size_t n = level.size();
  double bound = 0;
  for (size_t k = 0; k < n; ++k)
    bound += static_cast<double>(level[k].plain) * cost[k] +
             static_cast<double>(level[k].recorded) * cost[n + k] +
             static_cast<double>(level[k].vjp) * cost[2 * n + k] +
             static_cast<double>(level[k].vjp_params) * cost[3 * n + k];
  return bound;
}

Times timed_step(const std::function<torch::Tensor()>& loss_of_forward,
                 torch::optim::Optimizer& opt) {
  opt.zero_grad();
  const double t0 = now();
  torch::Tensor loss = loss_of_forward();
  const double t1 = now();
  loss.backward();
  const double t2 = now();
  opt.step();
  return {t1 - t0, t2 - t1, now() - t2};
}

std::string steps_per_level(const weft::nn::LayerParallel& model) {
  auto total = [](const std::vector<weft::mgrit::index_t>& mine) {
    std::vector<weft::mgrit::index_t> sum(mine.size());
    MPI_Allreduce(mine.data(), sum.data(), static_cast<int>(mine.size()), MPI_INT64_T, MPI_SUM,
                  MPI_COMM_WORLD);
    std::string text;
    for (auto n : sum) text += (text.empty() ? "" : "/") + std::to_string(n);
    return text;
  };
  const auto& s = model->statistics();
  return "forward " + total(s.forward.statistics.steps_per_level) + ", backward " +
         total(s.backward.statistics.steps_per_level);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string allocator = weft::keep_freed_memory();  // as the weft CLI does
  weft::mpi::Environment mpi_env(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::string dir = "/usr/share/datasets/fashion-mnist";
  std::string model_kind = "resnet";
  int batches = 3, warmup = 1, threads = 1, rounds = 8, batch_size = 50;
  bool flush_denormal = true;  // as weft train does; --flush-denormal 0 keeps subnormal floats
  std::string only;  // --only PREFIX: run just the configurations so named (for profiling)
  for (int a = 1; a + 1 < argc; a += 2) {
    const std::string flag = argv[a];
    if (flag == "--data") dir = argv[a + 1];
    if (flag == "--batches") batches = std::stoi(argv[a + 1]);
    if (flag == "--warmup") warmup = std::stoi(argv[a + 1]);
    if (flag == "--threads") threads = std::stoi(argv[a + 1]);
    if (flag == "--rounds") rounds = std::stoi(argv[a + 1]);
    if (flag == "--model") model_kind = argv[a + 1];
    if (flag == "--batch") batch_size = std::stoi(argv[a + 1]);
    if (flag == "--only") only = argv[a + 1];  // ratios are then to the first one run
    if (flag == "--flush-denormal") flush_denormal = std::string(argv[a + 1]) != "0";
  }
  torch::set_num_threads(threads);
  at::globalContext().setFlushDenormal(flush_denormal);
  if (model_kind != "resnet" && model_kind != "stages" && model_kind != "tiny") {
    if (rank == 0) std::fprintf(stderr, "train_step_bench: --model resnet|stages|tiny\n");
    return 2;
  }
  const Batches data = load(dir, batches, batch_size);

  weft::models::ImageResNetSpec spec;
  const bool tiny = model_kind == "tiny";
  spec.channels = tiny ? 1 : 8;
  spec.steps = tiny ? 64 : 32;
  spec.open = weft::models::OpenLayer::Copy;
  const bool stages = model_kind == "stages";
  const weft::nn::Network net = stages ? weft::models::stages_net(weft::models::StagesNetSpec())
                                       : weft::models::image_resnet(spec);

  std::vector<Config> configs;
  // The baseline runs on rank 0 while the other ranks wait for the next configuration.
  weft::nn::SequentialNetwork seq(nullptr);
  std::unique_ptr<torch::optim::SGD> seq_opt;
  // The work bound's costs per evaluation: the chain's steps as the solvers evaluate them.
  std::unique_ptr<weft::nn::ChainProbe> probe;
  if (rank == 0) {
    seq = weft::nn::SequentialNetwork(net);
    seq_opt = std::make_unique<torch::optim::SGD>(seq->parameters(), 0.01);
    probe = std::make_unique<weft::nn::ChainProbe>(weft::nn::LayerParallel(MPI_COMM_SELF, net));
    probe->module()->train();
  }
  configs.emplace_back();
  configs.back().name = "plain LibTorch (rank 0)";
  configs.back().step = [&](const torch::Tensor& x, const torch::Tensor& y) {
    if (rank != 0) return Times{};
    return timed_step([&] { return F::cross_entropy(seq->forward(x), y); }, *seq_opt);
  };
  configs.back().work = [] { return std::string(); };

  weft::mgrit::Options fwd, bwd;
  for (auto* o : {&fwd, &bwd}) {
    o->max_levels(3).cfactor(kCfactor).nrelax(1).nrelax(0, 0).abs_tol(0);
    o->initial_phase(weft::mgrit::InitialPhase::Skip);
  }
  fwd.max_iterations(2);
  bwd.max_iterations(1);
  const std::pair<const char*, weft::nn::LayerParallelOptions> variants[] = {
      {"weft exact mode (1 level)", weft::nn::LayerParallelOptions::exact()},
      {"weft MGRIT 3 lev cf4, 2 fwd/1 bwd",
       weft::nn::LayerParallelOptions().forward(fwd).backward(bwd)}};
  std::vector<weft::nn::LayerParallel> models;
  std::vector<std::unique_ptr<torch::optim::SGD>> optimizers;
  std::vector<std::string> names;
  std::vector<std::function<std::pair<torch::Tensor, torch::Tensor>(const torch::Tensor&,
                                                                    const torch::Tensor&)>>
      inputs;
  auto whole = [](const torch::Tensor& x, const torch::Tensor& y) { return std::make_pair(x, y); };
  for (const auto& [name, options] : variants) {
    models.push_back(weft::nn::LayerParallel(MPI_COMM_WORLD, net, options));
    names.push_back(name);
    inputs.push_back(whole);
  }
  // Data parallelism at 2 ranks: its baseline (1 rank, half the batch) and 2 replicas.
  std::unique_ptr<weft::nn::ReplicaGroups> groups;
  if (ranks == 2) {
    groups = std::make_unique<weft::nn::ReplicaGroups>(MPI_COMM_WORLD, 2);
    const int replica = groups->replica();
    models.push_back(weft::nn::LayerParallel(groups->layer_comm(), groups->data_comm(), net,
                                             weft::nn::LayerParallelOptions()));
    names.push_back("weft 2 replicas x 1 rank, half each");
    inputs.push_back([replica](const torch::Tensor& x, const torch::Tensor& y) {
      const auto half = x.size(0) / 2;
      return std::make_pair(x.slice(0, replica * half, (replica + 1) * half),
                            y.slice(0, replica * half, (replica + 1) * half));
    });
  }
  // The half-batch baseline: one rank trains alone while the other sleeps, on each rank in
  // turn. The two cores of a virtual machine need not be equally fast, and replicas wait for
  // the slower one; a single rank on that core pays the same.
  weft::nn::LayerParallel half_model(nullptr);
  std::unique_ptr<torch::optim::SGD> half_opt;
  if (ranks == 2) {
    half_model = weft::nn::LayerParallel(MPI_COMM_SELF, net);
    half_opt = std::make_unique<torch::optim::SGD>(half_model->parameters(), 0.01);
    for (int who = 0; who < 2; ++who) {
      configs.emplace_back();
      configs.back().name = "weft exact, rank " + std::to_string(who) + " alone, half";
      configs.back().step = [&, who](const torch::Tensor& x, const torch::Tensor& y) {
        if (rank != who) return Times{};
        const auto half = x.size(0) / 2;
        const auto xs = x.slice(0, 0, half), ys = y.slice(0, 0, half);
        return timed_step(
            [&] {
              auto out = half_model->forward(xs);
              return half_model->loss(
                  out, [&](const torch::Tensor& z) { return F::cross_entropy(z, ys); });
            },
            *half_opt);
      };
      configs.back().work = [] { return std::string(); };
    }
  }
  // Its machine-sharing reference: every rank trains its own copy with half the batch at the
  // same time (no messages).
  weft::nn::LayerParallel alone_model(nullptr);
  std::unique_ptr<torch::optim::SGD> alone_opt;
  if (ranks == 2) {
    alone_model = weft::nn::LayerParallel(MPI_COMM_SELF, net);
    alone_opt = std::make_unique<torch::optim::SGD>(alone_model->parameters(), 0.01);
    configs.emplace_back();
    configs.back().name = "weft exact, each rank alone, half";
    configs.back().step = [&](const torch::Tensor& x, const torch::Tensor& y) {
      const auto half = x.size(0) / 2;
      const auto xs = x.slice(0, rank * half, (rank + 1) * half);
      const auto ys = y.slice(0, rank * half, (rank + 1) * half);
      return timed_step(
          [&] {
            auto out = alone_model->forward(xs);
            return alone_model->loss(
                out, [&](const torch::Tensor& z) { return F::cross_entropy(z, ys); });
          },
          *alone_opt);
    };
    configs.back().work = [] { return std::string(); };
  }
  for (auto& model : models)
    optimizers.push_back(std::make_unique<torch::optim::SGD>(model->parameters(), 0.01));
  for (size_t m = 0; m < models.size(); ++m) {
    weft::nn::LayerParallel model = models[m];
    torch::optim::SGD* opt = optimizers[m].get();
    const auto input = inputs[m];
    configs.emplace_back();
    configs.back().name = names[m];
    configs.back().step = [model, opt, input](const torch::Tensor& x_all,
                                              const torch::Tensor& y_all) mutable {
      const auto [x, y] = input(x_all, y_all);
      return timed_step(
          [&] {
            auto out = model->forward(x);
            return model->loss(out, [&](const torch::Tensor& z) { return F::cross_entropy(z, y); });
          },
          *opt);
    };
    configs.back().work = [model] { return steps_per_level(model); };
    configs.back().stats = [model]() { return &model->statistics(); };
    configs.back().full_batch = names[m].rfind("weft 2 replicas", 0) != 0;
    configs.back().split = [model]() -> RankSplit {
      const auto& s = model->statistics();
      auto part = [](const weft::nn::SolveReport& r, size_t k) {
        const auto& st = r.statistics;
        const double v[4] = {st.step_seconds, st.comm_seconds, st.other_seconds(),
                             r.seconds - st.solve_seconds};
        return v[k];
      };
      return {part(s.forward, 0),
              part(s.forward, 1),
              part(s.forward, 2),
              part(s.forward, 3),
              part(s.backward, 0),
              part(s.backward, 1),
              part(s.backward, 2),
              part(s.backward, 3),
              static_cast<double>(s.graphs_recorded),
              static_cast<double>(s.graphs_reused),
              static_cast<double>(s.graphs_built),
              static_cast<double>(s.parameter_bytes) / 1024.0,
              static_cast<double>(s.ghost_bytes_held) / 1024.0,
              static_cast<double>(s.state_bytes) / 1024.0,
              static_cast<double>(s.graph_bytes) / 1024.0};
    };
  }

  if (!only.empty())
    configs.erase(std::remove_if(configs.begin(), configs.end(),
                                 [&](const Config& c) { return c.name.rfind(only, 0) != 0; }),
                  configs.end());
  // Batch by batch, every configuration in turn: a slow phase of the machine (they last
  // seconds) then hits all configurations alike. After each round rank 0 samples the layer
  // costs (the other ranks sleep in the next round's first reduction).
  LayerCosts costs;
  CoarseCosts coarse_costs;
  const std::vector<std::int64_t> spans{kCfactor, kCfactor * kCfactor};  // levels 1 and 2
  for (int round = 0; round < warmup + rounds; ++round) {
    if (rank == 0 && round >= warmup)
      for (size_t sample = 0; sample < kSamplesPerRound; ++sample) {
        measure_layer_costs(*probe, data.images[0], costs);
        measure_backprop_costs(*probe, data.images[0], costs);
        measure_coarse_costs(*probe, data.images[0], spans, coarse_costs);
      }
    for (int i = 0; i < batches; ++i)
      for (auto& c : configs) {
        const double start = now();
        const Times t =
            c.step(data.images[static_cast<size_t>(i)], data.labels[static_cast<size_t>(i)]);
        double local[4] = {t.forward, t.backward, t.optimizer, now() - start}, slowest[4];
        polite_max(local, slowest, 4);
        if (round < warmup) continue;
        if (c.split) c.splits.push_back(c.split());
        if (c.stats) {
          c.fwd_solve.push_back(c.stats()->forward.statistics.solve_seconds);
          c.bwd_solve.push_back(c.stats()->backward.statistics.solve_seconds);
          c.fwd_levels.push_back(c.stats()->forward.statistics.step_seconds_per_level);
          c.bwd_levels.push_back(c.stats()->backward.statistics.step_seconds_per_level);
        }
        c.forward.push_back(slowest[0]);
        c.backward.push_back(slowest[1]);
        c.optimizer.push_back(slowest[2]);
        c.wall.push_back(slowest[3]);
      }
  }

  if (rank == 0) {
    std::printf(
        "# training batch: %s, batch %d, Fashion-MNIST; %d "
        "rank(s), %d torch thread(s) per rank; medians of %d rounds x %d batches, "
        "configurations interleaved batch by batch; subnormals %s; %s; batches [ms]\n",
        stages ? "stages network 8,16,32 channels x 2 steps, batch norm"
        : tiny ? "copy-open 1 channel, 64 steps"
               : "copy-open 8 channels, 32 steps",
        batch_size, ranks, threads, rounds, batches, flush_denormal ? "flushed" : "kept",
        allocator.c_str());
    std::printf("  %-34s %9s %9s %9s %9s %8s %9s\n", "", "forward", "backward", "optim", "total",
                "ratio", "wall");
  }
  double baseline = 0;
  for (auto& c : configs) {
    const Times t{median(c.forward), median(c.backward), median(c.optimizer)};
    if (baseline == 0) baseline = t.total();
    const std::string work = c.work();
    if (rank != 0) continue;
    std::printf("  %-34s %9.1f %9.1f %9.1f %9.1f %8.3f %9.1f\n", c.name.c_str(), 1e3 * t.forward,
                1e3 * t.backward, 1e3 * t.optimizer, 1e3 * t.total(), t.total() / baseline,
                1e3 * median(c.wall));
    if (!work.empty()) std::printf("  %-34s step evaluations per level: %s\n", "", work.c_str());
  }
  std::map<std::string, double> wall;
  for (auto& c : configs) wall[c.name] = median(c.wall);
  const bool data_parallel_ran = wall.count("weft exact, rank 0 alone, half") &&
                                 wall.count("weft exact, rank 1 alone, half") &&
                                 wall.count("weft 2 replicas x 1 rank, half each") &&
                                 wall.count("weft exact, each rank alone, half");
  if (ranks == 2 && rank == 0 && data_parallel_ran) {
    // Per global batch, wall time: the slowest rank from the common start to its end.
    const double rank0 = wall["weft exact, rank 0 alone, half"];
    const double rank1 = wall["weft exact, rank 1 alone, half"];
    const double replicas = wall["weft 2 replicas x 1 rank, half each"];
    const double both = wall["weft exact, each rank alone, half"];
    std::printf(
        "  data parallelism, wall ms per global batch: rank 0 alone %.1f, rank 1 alone %.1f "
        "(half the batch), both at once without messages %.1f, 2 replicas %.1f\n"
        "  2 replicas / 1 rank with half the batch = %.3f (rank 0), %.3f (the slower rank; "
        "goal <= 1.1); / both at once = %.3f\n",
        1e3 * rank0, 1e3 * rank1, 1e3 * both, 1e3 * replicas, replicas / rank0,
        replicas / std::max(rank0, rank1), replicas / both);
  }
  // Work bound per configuration, rank, direction and level, from the cost samples
  // [first, last) of each kind (rank 0 measures; every rank gets the medians).
  const auto layers = static_cast<size_t>(net.layers());
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> intervals;  // [level - 1]
  for (std::int64_t span : spans) intervals.push_back(coarse_intervals(net.layers(), span));
  struct CostTable {
    std::vector<double> cost, backprop_cost;  // 4 kinds x layers
    std::vector<double> coarse;               // plain, build per interval, level by level
  };
  const auto cost_table = [&](size_t first, size_t last) {
    const auto med = [&](const std::vector<double>& v) {
      return median(std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(first),
                                        v.begin() + static_cast<std::ptrdiff_t>(last)));
    };
    CostTable t;
    t.cost.assign(4 * layers, 0.0);
    t.backprop_cost.assign(4 * layers, 0.0);
    if (rank == 0) {
      for (size_t k = 0; k < layers; ++k) {
        t.cost[k] = t.backprop_cost[k] = med(costs.plain[k]);
        t.cost[layers + k] = t.backprop_cost[layers + k] = med(costs.recorded[k]);
        t.cost[2 * layers + k] = med(costs.vjp[k]);
        t.cost[3 * layers + k] = med(costs.vjp_params[k]);
        t.backprop_cost[2 * layers + k] = med(costs.vjp_backprop[k]);
        t.backprop_cost[3 * layers + k] = med(costs.vjp_params_backprop[k]);
      }
      for (const auto& level : intervals)
        for (const auto& ab : level) {
          t.coarse.push_back(med(coarse_costs.plain[ab]));
          t.coarse.push_back(med(coarse_costs.build[ab]));
        }
    }
    t.coarse.resize(2 * [&] {
      size_t n = 0;
      for (const auto& level : intervals) n += level.size();
      return n;
    }());
    for (auto* v : {&t.cost, &t.backprop_cost, &t.coarse})
      MPI_Bcast(v->data(), static_cast<int>(v->size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return t;
  };
  const size_t samples = static_cast<size_t>(rounds) * kSamplesPerRound;
  const CostTable all_samples = cost_table(0, samples);
  const std::vector<double>& coarse_cost = all_samples.coarse;
  // The work bound of one level of a solve on this rank [s].
  const auto level_bound = [&](size_t level, const std::vector<weft::nn::LayerEvaluations>& ev,
                               const CostTable& t, bool as_backprop = false) {
    if (level == 0 || level > intervals.size())
      return work_bound(ev, as_backprop ? t.backprop_cost : t.cost);
    size_t at = 0;
    for (size_t l = 1; l < level; ++l) at += 2 * intervals[l - 1].size();
    double bound = 0;
    for (const auto& [a, b] : intervals[level - 1]) {
      const auto& first = ev[static_cast<size_t>(a)];  // a coarse step counts at its first layer
      bound += static_cast<double>(first.plain) * t.coarse[at] +
               static_cast<double>(first.vjp + first.vjp_params) * t.coarse[at + 1];
      at += 2;
    }
    return bound;
  };
  // A solve's bound: the sum over its levels.
  const auto solve_bound = [&](const weft::nn::SolveReport& r, const CostTable& t,
                               bool as_backprop) {
    double bound = 0;
    for (size_t l = 0; l < r.evaluations.size(); ++l)
      bound += level_bound(l, r.evaluations[l], t, as_backprop);
    return bound;
  };
  // The same ratio round by round: each round's median solve time over the bound from that
  // round's cost samples. The machine's speed drifts over seconds; within a round (about a
  // second) solve and samples see the same speed.
  std::vector<CostTable> per_round;
  for (size_t r = 0; r < static_cast<size_t>(rounds); ++r)
    per_round.push_back(cost_table(r * kSamplesPerRound, (r + 1) * kSamplesPerRound));
  const auto round_ratios = [&](const Config& c, const weft::nn::SolveReport& r, bool forward,
                                bool as_backprop) {
    const auto& solves = forward ? c.fwd_solve : c.bwd_solve;
    std::vector<double> ratios;
    for (size_t k = 0; k < per_round.size(); ++k) {
      const auto b = static_cast<std::ptrdiff_t>(k * static_cast<size_t>(batches));
      const double solve =
          median(std::vector<double>(solves.begin() + b, solves.begin() + b + batches));
      const double bound = solve_bound(r, per_round[k], as_backprop);
      if (bound > 0) ratios.push_back(solve / bound);
    }
    return ratios;
  };
  if (rank == 0) {
    std::printf("  coarse step costs [ms] (forward / adjoint build), per level and step (a-b):");
    size_t at = 0;
    for (size_t l = 0; l < intervals.size(); ++l) {
      std::printf("\n    level %zu:", l + 1);
      for (const auto& [a, b] : intervals[l]) {
        std::printf(" %lld-%lld %.2f/%.2f", static_cast<long long>(a), static_cast<long long>(b),
                    1e3 * coarse_cost[at], 1e3 * coarse_cost[at + 1]);
        at += 2;
      }
    }
    std::printf("\n");
  }
  for (auto& c : configs) {
    if (!c.stats || !c.full_batch) continue;
    std::string text;
    if (c.stats() == nullptr) continue;
    for (const weft::nn::SolveReport* r : {&c.stats()->forward, &c.stats()->backward}) {
      const bool is_forward = r == &c.stats()->forward;
      double bound = 0;
      std::string levels;
      const auto& per_level = is_forward ? c.fwd_levels : c.bwd_levels;
      for (size_t l = 0; l < r->evaluations.size(); ++l) {
        const double b = level_bound(l, r->evaluations[l], all_samples);
        bound += b;
        std::vector<double> spent;  // this level's steps and vector operations, per batch
        for (const auto& batch : per_level)
          if (l < batch.size()) spent.push_back(batch[l]);
        levels += fmt_level(l, median(spent), b);
      }
      const double solve = median(is_forward ? c.fwd_solve : c.bwd_solve);
      char line[512];
      // Backward: against the bound with the fine level's VJPs priced as backprop performs
      // them, too. Then the same ratio by round (median and range).
      const double cold = is_forward ? bound : solve_bound(*r, all_samples, true);
      const auto by_round = round_ratios(c, *r, is_forward, !is_forward);
      std::snprintf(line, sizeof line, "%s solve %.1f ms, bound %.1f ms (%s), ratio %.3f; ",
                    is_forward ? "forward" : "backward", 1e3 * solve, 1e3 * bound, levels.c_str(),
                    bound > 0 ? solve / bound : 0.0);
      text += line;
      if (!is_forward) {
        std::snprintf(line, sizeof line, "VJPs priced as in backprop: bound %.1f ms, ratio %.3f; ",
                      1e3 * cold, cold > 0 ? solve / cold : 0.0);
        text += line;
      }
      if (!by_round.empty()) {
        std::snprintf(line, sizeof line, "by round %.3f (%.3f-%.3f)%s", median(by_round),
                      *std::min_element(by_round.begin(), by_round.end()),
                      *std::max_element(by_round.begin(), by_round.end()), is_forward ? "; " : "");
        text += line;
      }
    }
    // Gather every rank's line on rank 0.
    std::vector<char> mine(1024, '\0');
    std::snprintf(mine.data(), mine.size(), "%s", text.c_str());
    std::vector<char> all(mine.size() * static_cast<size_t>(ranks));
    MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, all.data(),
               static_cast<int>(mine.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank != 0) continue;
    std::printf("  %s, work bound per rank (levels: ms in its sweeps / bound):\n", c.name.c_str());
    for (int r = 0; r < ranks; ++r)
      std::printf("    rank %d: %s\n", r, &all[mine.size() * static_cast<size_t>(r)]);
  }
  // Per rank: time in steps (layer evaluations and vector operations) and the rest (waiting for
  // neighbours, collectives, bookkeeping) of the weft configurations.
  for (auto& c : configs) {
    if (!c.split) continue;
    RankSplit mine{};
    for (size_t k = 0; k < kSplit; ++k) {
      std::vector<double> v;
      for (const auto& s : c.splits) v.push_back(s[k]);
      mine[k] = (k < 8 ? 1e3 : 1.0) * median(v);  // seconds to ms; graph counts as they are
    }
    std::vector<double> all(kSplit * static_cast<size_t>(ranks));
    MPI_Gather(mine.data(), kSplit, MPI_DOUBLE, all.data(), kSplit, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank != 0) continue;
    std::printf("  %s, per rank [ms]: steps / waiting / bookkeeping / outside the solve\n",
                c.name.c_str());
    for (int r = 0; r < ranks; ++r) {
      const double* a = &all[kSplit * static_cast<size_t>(r)];
      std::printf(
          "    rank %d: forward %6.1f / %5.1f / %5.1f / %5.1f, backward %6.1f / %5.1f / %5.1f / "
          "%5.1f\n",
          r, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
      std::printf(
          "            layer graphs: %.0f recorded in the forward, %.0f reused, %.0f built in the "
          "backward\n",
          a[8], a[9], a[10]);
      std::printf(
          "            memory [KiB]: parameters %.0f, ghost copies %.0f, states %.0f, "
          "graph outputs %.0f\n",
          a[11], a[12], a[13], a[14]);
    }
  }
  if (rank == 0)
    std::printf(
        "  goals as ratios to plain LibTorch (TorchBraid on this kind of machine: 1041 ms"
        " at 1 rank, 577 ms at 2 ranks, plain PyTorch 405 ms): exact mode <= 1.03 at 1"
        " rank; MGRIT <= 2/3 of TorchBraid = %.3f at 1 rank, %.3f at 2 ranks\n",
        2.0 / 3.0 * 1041.0 / 405.0, 2.0 / 3.0 * 577.0 / 405.0);
  return 0;
}
