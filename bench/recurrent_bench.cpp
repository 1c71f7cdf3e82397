// Per-batch time of weft::nn::Recurrent (forward + backward of h_n.sum()) against
// torch::nn::GRU/LSTM with the same sizes, and against its own work bound, in the same run,
// interleaved, medians of --reps repetitions, one torch thread per rank.
//
//   mpirun -np 1 build/bench/recurrent_bench --cell gru --steps 28 --batch 100 --hidden 64
//   mpirun -np 2 build/bench/recurrent_bench --steps 784 --input 1 --levels 2 --cf 4
//       --fwd-iters 2 --bwd-iters 1   (one line)
//
// Baseline: at P ranks the weft figure is the slowest rank's; the LibTorch baseline runs on
// every rank alone (its median over ranks is reported).
//
// Work bound, per rank: the solves' step evaluations on this rank (mgrit::Statistics, per
// level), sorted by kind as RecurrentForwardApp / RecurrentAdjointApp perform them, times the
// cost of one evaluation of that kind measured on this rank in the same repetition:
//   plain       the stacked cell without a graph (every multilevel forward step)
//   graph       the cell recording its autograd graph (exact mode's forward; the final fine
//               adjoint step when no graph was cached)
//   vjp         an adjoint step of the state only: the cell with a graph for the state and
//               the vector-Jacobian product (every adjoint step but the final fine sweep's)
//   vjp_params  the VJP of a recorded graph for the state and the parameters (the final fine
//               sweep: one per local step)
// bound = Σ evaluations × cost; ratio = measured wall time of the phase on this rank / bound.
// The rest of the phase is waiting for other ranks (the solves' comm_seconds: "wait") and the
// solver's overhead per local step (vector operations, bookkeeping, the boundary exchange,
// broadcasts, the gradient all-reduce): (measured - bound - wait) / local steps.
// Messages: the solves' state messages (statistics) × the one-way time of a state-sized
// message, measured by a ping-pong between ranks 0 and 1 in the same run.
//
// Prints a table per rank and one JSON line (rank 0).
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "weft/data/idx.hpp"
#include "weft/nn/probes.hpp"
#include "weft/nn/recurrent.hpp"
#include "weft/util/clock.hpp"
#include "weft/util/memory.hpp"
#include "weft/util/mpi.hpp"

namespace {

using torch::Tensor;
using State = std::vector<Tensor>;

using weft::clock::now;
/// CPU seconds of this process: unlike wall time, not inflated by other processes on shared
/// cores (but it counts MPI's busy polling while a rank waits).
double cpu_now() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Costs {
  double plain = 0, graph = 0, vjp = 0, vjp_params = 0;  ///< CPU seconds per evaluation
};

/// Seconds per evaluation of each kind, each the mean over `count` steps of the sequence.
Costs measure_costs(bool lstm, std::int64_t layers, const Tensor& x,
                    const std::vector<Tensor>& params, std::int64_t hidden, std::int64_t count) {
  // One step of every stacked cell: the solver's own evaluation, so the costs are the solver's.
  const weft::nn::CellProbe cell(lstm ? weft::nn::CellKind::LSTM : weft::nn::CellKind::GRU, layers);
  const std::int64_t batch = x.size(1);
  const size_t parts = static_cast<size_t>(lstm ? 2 * layers : layers);
  State s, lambda;
  for (size_t i = 0; i < parts; ++i) {
    s.push_back(torch::randn({batch, hidden}));
    lambda.push_back(torch::randn({batch, hidden}));
  }
  std::vector<Tensor> detached, leaves, sums;
  for (const Tensor& p : params) {
    detached.push_back(p.detach());
    leaves.push_back(p.detach().requires_grad_(true));
    sums.push_back(torch::zeros_like(p));
  }
  const auto n = static_cast<double>(count);
  Costs c;
  {
    torch::NoGradGuard no_grad;
    const double t0 = cpu_now();
    for (std::int64_t k = 0; k < count; ++k) s = cell.step(s, x[k], detached);
    c.plain = (cpu_now() - t0) / n;
  }
  // Recorded graphs, kept alive as the solver's cache keeps them, then their VJPs.
  std::vector<State> inputs, outputs;
  double t0 = cpu_now();
  for (std::int64_t k = 0; k < count; ++k) {
    State in;
    for (const Tensor& t : s) in.push_back(t.detach().requires_grad_(true));
    State y = cell.step(in, x[k], leaves);
    torch::NoGradGuard no_grad;
    State next;
    for (const Tensor& t : y) next.push_back(t.detach().clone());
    s = next;
    inputs.push_back(in);
    outputs.push_back(y);
  }
  c.graph = (cpu_now() - t0) / n;
  t0 = cpu_now();
  for (std::int64_t k = 0; k < count; ++k) {
    std::vector<Tensor> wrt = inputs[static_cast<size_t>(k)];
    wrt.insert(wrt.end(), leaves.begin(), leaves.end());
    const auto g =
        torch::autograd::grad(outputs[static_cast<size_t>(k)], wrt, lambda, false, false, true);
    torch::NoGradGuard no_grad;
    for (size_t p = 0; p < leaves.size(); ++p)
      if (g[parts + p].defined()) sums[p].add_(g[parts + p]);
  }
  c.vjp_params = (cpu_now() - t0) / n;
  t0 = cpu_now();
  for (std::int64_t k = 0; k < count; ++k) {
    State in;
    for (const Tensor& t : s) in.push_back(t.detach().requires_grad_(true));
    const State y = cell.step(in, x[k], detached);
    lambda = torch::autograd::grad(y, in, lambda, false, false, true);
  }
  c.vjp = (cpu_now() - t0) / n;
  return c;
}

/// One-way time [s] of a message of `bytes` between ranks 0 and 1 (median of round trips / 2);
/// 0 at one rank.
double one_way_seconds(MPI_Comm comm, std::int64_t bytes, int trips) {
  const int rank = weft::mpi::rank(comm);
  if (weft::mpi::size(comm) < 2) return 0;
  std::vector<char> buffer(static_cast<size_t>(bytes));
  const int count = static_cast<int>(bytes);
  std::vector<double> rtt;
  for (int i = 0; i < trips + 5; ++i) {
    MPI_Barrier(comm);
    const double t0 = now();
    if (rank == 0) {
      MPI_Send(buffer.data(), count, MPI_BYTE, 1, 7, comm);
      MPI_Recv(buffer.data(), count, MPI_BYTE, 1, 7, comm, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(buffer.data(), count, MPI_BYTE, 0, 7, comm, MPI_STATUS_IGNORE);
      MPI_Send(buffer.data(), count, MPI_BYTE, 0, 7, comm);
    }
    if (i >= 5) rtt.push_back(now() - t0);
  }
  double one_way = median(rtt) / 2;
  MPI_Bcast(&one_way, 1, MPI_DOUBLE, 0, comm);
  return one_way;
}

std::string levels_text(const std::vector<weft::mgrit::index_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

/// One phase (forward or backward) on this rank, medians over the repetitions [ms]: wall time,
/// the MGRIT solve inside it, the solve's waiting for messages, the bound; each ratio and
/// difference is the median of the repetitions' own (the costs come from the same moment as
/// the batch they bound).
struct Phase {
  double wall, solve, wait, bound, cpu;
  double cpu_ratio;   ///< cpu / bound: the work ratio, robust on loaded cores (1 rank)
  double ratio;       ///< wall / bound
  double busy_ratio;  ///< (solve - wait) / bound
  double overhead;    ///< solve - wait - bound [ms]
  double outside;     ///< wall - solve [ms]
};

/// What one rank reports (gathered on rank 0 as doubles).
struct RankFigures {
  double local_steps, fwd_evals, bwd_evals;
  double plain_us, graph_us, vjp_us, vjp_params_us;
  Phase fwd, bwd;
  double fwd_messages, bwd_messages;
  static constexpr int kCount = 29;
};

/// The first `batch` test images of the MNIST-layout folder `dir` as [steps, batch, input]
/// sequences (rows: 28 x 28; pixels: 784 x 1), normalized as `weft train` does (Fashion-MNIST).
Tensor image_sequences(const std::string& dir, std::int64_t steps, std::int64_t batch,
                       std::int64_t input) {
  namespace data = weft::data;
  data::IdxOptions options;
  options.limit = batch;
  const data::ImageSet set =
      data::load_idx(dir + "/" + data::images_file(data::Split::Test),
                     dir + "/" + data::labels_file(data::Split::Test), options);
  if (set.rows * set.cols != steps * input || set.count < batch) {
    std::fprintf(stderr, "recurrent_bench: %lld images of %lldx%lld do not make %lld x %lld\n",
                 static_cast<long long>(set.count), static_cast<long long>(set.rows),
                 static_cast<long long>(set.cols), static_cast<long long>(steps),
                 static_cast<long long>(input));
    std::exit(2);
  }
  std::vector<float> pixels = data::to_float(set, data::kFashionMnistMean, data::kFashionMnistStd);
  return torch::from_blob(pixels.data(), {batch, steps, input})
      .permute({1, 0, 2})
      .clone(torch::MemoryFormat::Contiguous);
}

/// The forward and gradient error of weft's solves (the configured MGRIT options) against
/// LibTorch's GRU/LSTM with the same parameters, for the loss (w . h_n) with a fixed random w:
/// relative 2-norm errors of h_n, of all parameter gradients together and of the input
/// gradient. Prints one JSON line on rank 0.
int report_gradient_error(weft::nn::Recurrent& rnn, torch::nn::AnyModule& reference, bool lstm,
                          const Tensor& x) {
  {
    torch::NoGradGuard no_grad;
    auto named = reference.ptr()->named_parameters();
    for (const auto& p : rnn->named_parameters()) named[p.key()].copy_(p.value());
  }
  const Tensor w =
      torch::randn({rnn->options().num_layers(), x.size(1), rnn->options().hidden_size()});
  auto run = [&](bool weft_solve) {
    Tensor xi = x.detach().requires_grad_(true);
    torch::nn::Module& m = weft_solve ? static_cast<torch::nn::Module&>(*rnn) : *reference.ptr();
    m.zero_grad();
    Tensor h = weft_solve ? rnn->forward(xi).h_n
               : lstm     ? std::get<0>(std::get<1>(reference.get<torch::nn::LSTM>()->forward(xi)))
                          : std::get<1>(reference.get<torch::nn::GRU>()->forward(xi));
    (h * w).sum().backward();
    std::vector<Tensor> grads;
    for (const auto& p : m.parameters()) grads.push_back(p.grad().reshape({-1}));
    return std::make_tuple(h.detach(), torch::cat(grads), xi.grad());
  };
  const auto [h1, g1, x1] = run(true);
  const auto [h0, g0, x0] = run(false);
  auto rel = [](const Tensor& a, const Tensor& b) {
    return (a - b).norm().item<double>() / b.norm().item<double>();
  };
  const weft::nn::RecurrentStatistics& st = rnn->statistics();
  auto residual = [](const weft::nn::SolveReport& r) {
    const auto v = r.result.final_residual();
    return v ? *v : -1.0;
  };
  if (rnn->rank() == 0)
    std::printf(
        "{\"ranks\": %d, \"steps\": %lld, \"batch\": %lld, \"levels\": %d, \"fwd_iterations\": "
        "%d, \"bwd_iterations\": %d, \"h_n_error\": %.3e, \"param_grad_error\": %.3e, "
        "\"input_grad_error\": %.3e, \"fwd_residual\": %.3e, \"bwd_residual\": %.3e}\n",
        rnn->ranks(), static_cast<long long>(x.size(0)), static_cast<long long>(x.size(1)),
        static_cast<int>(st.forward.statistics.intervals_per_level.size()),
        st.forward.result.iterations, st.backward.result.iterations, rel(h1, h0), rel(g1, g0),
        rel(x1, x0), residual(st.forward), residual(st.backward));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string allocator = weft::keep_freed_memory();  // as the weft CLI does
  weft::mpi::Environment env(&argc, &argv);
  std::string cell = "gru";
  std::int64_t steps = 28, batch = 100, hidden = 64, input = 28, layers = 1, reps = 30;
  int levels = 1, cf = 4, fwd_iters = 2, bwd_iters = 1;
  bool baseline = true;  // --baseline 0: no torch::nn::GRU/LSTM timing (long sequences)
  // --flush-denormal 0: keep subnormal floats. Over long sequences the adjoint decays through
  // the subnormal range, where every operation costs several times more (docs/benchmarks.md).
  bool flush_denormal = true;
  std::string data;             // --data DIR: the first --batch Fashion-MNIST test images as input
  bool gradient_error = false;  // --gradient-error 1: errors against LibTorch, no timing
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
    else if (k == "--cf")
      cf = std::atoi(v.c_str());
    else if (k == "--fwd-iters")
      fwd_iters = std::atoi(v.c_str());
    else if (k == "--bwd-iters")
      bwd_iters = std::atoi(v.c_str());
    else if (k == "--baseline")
      baseline = v != "0";
    else if (k == "--flush-denormal")
      flush_denormal = v != "0";
    else if (k == "--data")
      data = v;
    else if (k == "--gradient-error")
      gradient_error = v != "0";
    else {
      std::fprintf(stderr, "recurrent_bench: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  torch::set_num_threads(1);
  at::globalContext().setFlushDenormal(flush_denormal);
  const bool lstm = cell == "lstm";
  torch::manual_seed(3);
  weft::nn::LayerParallelOptions solver;
  if (levels > 1)
    solver = weft::nn::LayerParallelOptions::multilevel(levels, cf, fwd_iters, bwd_iters);
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
  const Tensor x = data.empty() ? torch::randn({steps, batch, input})
                                : image_sequences(data, steps, batch, input);
  if (gradient_error) return report_gradient_error(rnn, reference, lstm, x);
  const auto [first, end] = rnn->local_steps(steps);
  const std::int64_t local = end - first;
  const auto n_local = static_cast<double>(local);
  const bool cached = levels == 1 && solver.cache_graphs();
  // Per repetition and phase: wall, solve, wait, bound, CPU [s].
  std::vector<std::array<double, 5>> fwd, bwd;
  auto run_weft = [&](const Costs* c) {
    rnn->zero_grad();
    const double t0 = now(), c0 = cpu_now();
    const Tensor h = rnn->forward(x).h_n.sum();
    const double t1 = now(), c1 = cpu_now();
    h.backward();
    const double t2 = now(), c2 = cpu_now();
    if (!c) return;
    // The evaluations by kind, as the Apps perform them (see the top of this file).
    const weft::nn::RecurrentStatistics& st = rnn->statistics();
    const auto nf = static_cast<double>(st.forward.statistics.total_steps());
    const auto nb = static_cast<double>(st.backward.statistics.total_steps());
    const double fwd_bound =
        cached ? n_local * c->graph + (nf - n_local) * c->plain : nf * c->plain;
    const double bwd_bound =
        (nb - n_local) * c->vjp + n_local * (c->vjp_params + (cached ? 0.0 : c->graph));
    fwd.push_back({t1 - t0, st.forward.statistics.solve_seconds, st.forward.statistics.comm_seconds,
                   fwd_bound, c1 - c0});
    bwd.push_back({t2 - t1, st.backward.statistics.solve_seconds,
                   st.backward.statistics.comm_seconds, bwd_bound, c2 - c1});
  };
  auto run_torch = [&] {
    if (!baseline) return;
    reference.ptr()->zero_grad();
    Tensor h = lstm ? std::get<0>(std::get<1>(reference.get<torch::nn::LSTM>()->forward(x)))
                    : std::get<1>(reference.get<torch::nn::GRU>()->forward(x));
    h.sum().backward();
  };
  run_weft(nullptr);
  run_torch();
  const std::int64_t cost_steps = std::min<std::int64_t>(local, 32);
  std::vector<double> tw, tt, plain, graph, vjp, vjp_params;
  for (std::int64_t r = 0; r < reps; ++r) {
    // The costs just before the batch they bound.
    const Costs c = measure_costs(lstm, layers, x.slice(0, first, first + cost_steps),
                                  rnn->parameters(), hidden, cost_steps);
    plain.push_back(c.plain);
    graph.push_back(c.graph);
    vjp.push_back(c.vjp);
    vjp_params.push_back(c.vjp_params);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    run_weft(&c);
    double mine = now() - t0, slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    tw.push_back(slowest);
    t0 = now();
    run_torch();
    tt.push_back(now() - t0);
  }
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  auto phase = [](const std::vector<std::array<double, 5>>& v) {
    std::vector<double> col[5], cpu_ratio, ratio, busy, overhead, outside;
    for (const auto& e : v) {
      for (size_t i = 0; i < 5; ++i) col[i].push_back(e[i]);
      cpu_ratio.push_back(e[4] / e[3]);
      ratio.push_back(e[0] / e[3]);
      busy.push_back((e[1] - e[2]) / e[3]);
      overhead.push_back(e[1] - e[2] - e[3]);
      outside.push_back(e[0] - e[1]);
    }
    return Phase{1e3 * median(col[0]), 1e3 * median(col[1]), 1e3 * median(col[2]),
                 1e3 * median(col[3]), 1e3 * median(col[4]), median(cpu_ratio),
                 median(ratio),        median(busy),         1e3 * median(overhead),
                 1e3 * median(outside)};
  };

  // The solves are deterministic: every repetition evaluates and messages the same.
  const weft::nn::RecurrentStatistics& st = rnn->statistics();
  const auto& fsteps = st.forward.statistics.steps_per_level;
  const auto& bsteps = st.backward.statistics.steps_per_level;
  const std::int64_t state_bytes =
      (lstm ? 2 : 1) * layers * batch * hidden * static_cast<std::int64_t>(sizeof(float));
  const double message_s = one_way_seconds(MPI_COMM_WORLD, state_bytes, 200);

  RankFigures mine{n_local,
                   static_cast<double>(st.forward.statistics.total_steps()),
                   static_cast<double>(st.backward.statistics.total_steps()),
                   1e6 * median(plain),
                   1e6 * median(graph),
                   1e6 * median(vjp),
                   1e6 * median(vjp_params),
                   phase(fwd),
                   phase(bwd),
                   static_cast<double>(st.forward.statistics.messages_received),
                   static_cast<double>(st.backward.statistics.messages_received)};
  static_assert(sizeof(RankFigures) == RankFigures::kCount * sizeof(double));
  std::vector<RankFigures> all(static_cast<size_t>(ranks));
  MPI_Gather(&mine, RankFigures::kCount, MPI_DOUBLE, all.data(), RankFigures::kCount, MPI_DOUBLE, 0,
             MPI_COMM_WORLD);
  const double w = median(tw), t = median(tt);
  if (rank == 0) {
    std::printf(
        "%s, %lld steps, batch %lld, input %lld, hidden %lld, layers %lld, %d rank(s), %s; "
        "medians of %lld; subnormals %s; %s\n",
        cell.c_str(), static_cast<long long>(steps), static_cast<long long>(batch),
        static_cast<long long>(input), static_cast<long long>(hidden),
        static_cast<long long>(layers), ranks,
        levels == 1 ? "exact mode"
                    : (std::to_string(levels) + " levels, cf " + std::to_string(cf) + ", " +
                       std::to_string(fwd_iters) + " forward / " + std::to_string(bwd_iters) +
                       " backward iterations")
                          .c_str(),
        static_cast<long long>(reps), flush_denormal ? "flushed" : "kept", allocator.c_str());
    std::printf("rank 0 evaluations per level: forward %s, backward %s\n",
                levels_text(fsteps).c_str(), levels_text(bsteps).c_str());
    std::printf("state message %lld bytes: %.1f us one way (ping-pong 0<->1)\n",
                static_cast<long long>(state_bytes), 1e6 * message_s);
    std::printf(
        "bound: evaluations x CPU cost; cpu = CPU time of the phase / bound; ratio = wall / bound; "
        "busy = (solve - wait) / bound; overhead = solve - wait - bound "
        "per local step; outside = wall - solve per local step (checks, boundary exchange, "
        "broadcasts, gathers, the all-reduce, and waiting in them); messages = received states "
        "x one-way time per local step\n");
    std::printf("rank local evals f/b | cost us: plain  graph    vjp vjp+par |");
    for (const char* name : {"forward", "backward"})
      std::printf(" %-8s ms: wall  bound   cpu ratio  busy  wait |", name);
    std::printf(" us/step: overhead outside messages\n");
    for (int r = 0; r < ranks; ++r) {
      const RankFigures& f = all[static_cast<size_t>(r)];
      std::printf("%4d %5.0f %5.0f/%-5.0f| %14.1f %6.1f %6.1f %7.1f |", r, f.local_steps,
                  f.fwd_evals, f.bwd_evals, f.plain_us, f.graph_us, f.vjp_us, f.vjp_params_us);
      for (const Phase& p : {f.fwd, f.bwd})
        std::printf(" %17.1f %6.1f %5.3f %5.3f %5.3f %5.1f |", p.wall, p.bound, p.cpu_ratio,
                    p.ratio, p.busy_ratio, p.wait);
      const double overhead = f.fwd.overhead + f.bwd.overhead;
      const double outside = f.fwd.outside + f.bwd.outside;
      const double messages = (f.fwd_messages + f.bwd_messages) * 1e3 * message_s;
      std::printf(" %17.1f %7.1f %8.1f\n", 1e3 * overhead / f.local_steps,
                  1e3 * outside / f.local_steps, 1e3 * messages / f.local_steps);
    }
    const RankFigures& f = all[0];
    char torch_text[64] = "\"torch_ms\": null, \"ratio\": null";
    if (baseline)
      std::snprintf(torch_text, sizeof torch_text, "\"torch_ms\": %.3f, \"ratio\": %.3f", 1e3 * t,
                    w / t);
    std::printf(
        "{\"cell\": \"%s\", \"ranks\": %d, \"levels\": %d, \"cf\": %d, \"steps\": %lld, "
        "\"batch\": %lld, \"hidden\": %lld, \"layers\": %lld, \"weft_ms\": %.3f, %s, "
        "\"rank0_fwd_bound_ratio\": %.3f, \"rank0_bwd_bound_ratio\": "
        "%.3f, \"rank0_fwd_cpu_ratio\": %.3f, \"rank0_bwd_cpu_ratio\": %.3f, \"message_us\": "
        "%.2f}\n",
        cell.c_str(), ranks, levels, cf, static_cast<long long>(steps),
        static_cast<long long>(batch), static_cast<long long>(hidden),
        static_cast<long long>(layers), 1e3 * w, torch_text, f.fwd.ratio, f.bwd.ratio,
        f.fwd.cpu_ratio, f.bwd.cpu_ratio, 1e6 * message_s);
  }
  return 0;
}
