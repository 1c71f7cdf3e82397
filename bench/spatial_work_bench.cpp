// Work of layer-parallel training with and without spatial coarsening, for the same MGRIT
// hierarchy, on a 2-D and a 3-D convolutional residual network (random inputs):
//   - step evaluations per level and direction (the solvers' statistics, summed over ranks);
//   - cost per evaluation on each level: a step layer (conv3x3-ReLU-conv3x3) applied without a
//     graph (forward) and with its vector-Jacobian product (adjoint, graph built) to a state of
//     that level's shape, medians of repeated timings;
//   - work = sum over levels of evaluations x cost, against the serial work N (forward + adjoint)
//     on the fine grid: the MGRIT-to-serial work ratio;
//   - measured time per batch (forward + backward) of exact mode, MGRIT and MGRIT with spatial
//     coarsening, interleaved round by round, medians;
//   - the relative gradient (and output) error against exact mode after 1 and 2 iterations
//     (2 levels, cf 2), with and without spatial coarsening.
// Run: bench/run_spatial_bench.sh (1 rank; work figures do not depend on the rank count).
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "weft/mgrit/options.hpp"
#include "weft/nn/layer_parallel.hpp"
#include "weft/util/clock.hpp"
#include "weft/util/memory.hpp"
#include "weft/util/mpi.hpp"

namespace {

namespace tnn = torch::nn;
using torch::Tensor;
using weft::nn::Layer;
using weft::nn::LayerParallel;
using weft::nn::LayerParallelOptions;

using weft::clock::now;
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

struct Case {
  const char* name;
  int dims;
  std::int64_t side, channels, steps, batch;
};

tnn::AnyModule conv(int dims, std::int64_t in, std::int64_t out) {
  if (dims == 2) return tnn::AnyModule(tnn::Conv2d(tnn::Conv2dOptions(in, out, 3).padding(1)));
  return tnn::AnyModule(tnn::Conv3d(tnn::Conv3dOptions(in, out, 3).padding(1)));
}

Layer make_step(const Case& c, std::int64_t n) {
  torch::manual_seed(100 + static_cast<std::uint64_t>(n));
  tnn::Sequential s;
  s->push_back(conv(c.dims, c.channels, c.channels));
  s->push_back(tnn::ReLU());
  s->push_back(conv(c.dims, c.channels, c.channels));
  return s;
}

weft::nn::Network make_network(const Case& c) {
  weft::nn::Network net;
  net.steps = c.steps;
  net.t_final = 1.0;
  net.step = [c](std::int64_t n) { return make_step(c, n); };
  net.close = [c] {
    torch::manual_seed(7);
    std::int64_t features = c.channels;
    for (int d = 0; d < c.dims; ++d) features *= c.side;
    return Layer(tnn::Sequential(tnn::Flatten(), tnn::Linear(features, 10)));
  };
  return net;
}

std::vector<std::int64_t> state_shape(const Case& c, int depth) {
  std::vector<std::int64_t> s{c.batch, c.channels};
  for (int d = 0; d < c.dims; ++d) s.push_back(c.side >> depth);
  return s;
}

/// Seconds per forward evaluation and per adjoint evaluation (graph + VJP) of one step layer.
std::pair<double, double> cost_per_evaluation(const Case& c, int depth, int reps) {
  Layer layer = make_step(c, 0);
  const Tensor x = torch::randn(state_shape(c, depth));
  const Tensor lambda = torch::randn(state_shape(c, depth));
  std::vector<double> f, a;
  for (int r = 0; r < reps; ++r) {
    double t = now();
    {
      torch::NoGradGuard no_grad;
      const Tensor y = layer.forward(x);
    }
    f.push_back(now() - t);
    t = now();
    const Tensor leaf = x.detach().requires_grad_(true);
    const Tensor y = layer.forward(leaf);
    const auto g = torch::autograd::grad({y}, {leaf}, {lambda});
    a.push_back(now() - t);
  }
  return {median(f), median(a)};
}

LayerParallelOptions hierarchy(int levels, int cf, int fwd_iters, int bwd_iters,
                               std::vector<int> spatial) {
  auto o = LayerParallelOptions::multilevel(levels, cf, fwd_iters, bwd_iters);
  if (!spatial.empty()) o.spatial_levels(std::move(spatial));
  return o;
}

std::vector<std::int64_t> summed(const std::vector<weft::mgrit::index_t>& mine) {
  std::vector<std::int64_t> sum(mine.size());
  MPI_Allreduce(mine.data(), sum.data(), static_cast<int>(mine.size()), MPI_INT64_T, MPI_SUM,
                MPI_COMM_WORLD);
  return sum;
}

/// One training batch (forward + backward) of `model`; its wall time.
double batch_seconds(LayerParallel& model, const Tensor& x, const Tensor& labels) {
  model->zero_grad();
  MPI_Barrier(MPI_COMM_WORLD);
  const double t = now();
  const Tensor out = model->forward(x);
  model
      ->loss(out,
             [&](const Tensor& logits) {
               return torch::nn::functional::cross_entropy(logits, labels);
             })
      .backward();
  MPI_Barrier(MPI_COMM_WORLD);
  return now() - t;
}

double global_rel(double diff2, double ref2) {
  double in[2] = {diff2, ref2}, out[2] = {0, 0};
  MPI_Allreduce(in, out, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return std::sqrt(out[0] / std::max(out[1], 1e-300));
}

/// Relative gradient error (all parameters together) and output error of `model` against
/// `exact` after one batch each.
std::pair<double, double> errors(LayerParallel& model, LayerParallel& exact, const Tensor& x,
                                 const Tensor& labels) {
  batch_seconds(model, x, labels);
  batch_seconds(exact, x, labels);
  double d2 = 0, r2 = 0;
  const auto ref = exact->named_parameters();
  for (const auto& p : model->named_parameters()) {
    const Tensor* r = ref.find(p.key());
    if (!r || !p.value().grad().defined() || !r->grad().defined()) continue;
    d2 += (p.value().grad() - r->grad()).pow(2).sum().item<double>();
    r2 += r->grad().pow(2).sum().item<double>();
  }
  const double grad = global_rel(d2, r2);
  torch::NoGradGuard no_grad;
  const Tensor a = model->forward(x), b = exact->forward(x);
  double o2 = 0, n2 = 0;
  if (model->owns_output()) {
    o2 = (a - b).pow(2).sum().item<double>();
    n2 = b.pow(2).sum().item<double>();
  }
  return {grad, global_rel(o2, n2)};
}

void run_case(const Case& c, int rank, int rounds) {
  const int levels = 3, cf = 2;
  const std::vector<int> flags{0, 1, 1};
  // Inputs smooth on the scale of a few pixels, as images are: random values on a grid 4 times
  // coarser, interpolated (white noise would have nothing a coarse grid can represent).
  torch::manual_seed(3);
  const Tensor x = [&] {
    std::vector<std::int64_t> s{c.batch, c.channels};
    for (int d = 0; d < c.dims; ++d) s.push_back(c.side / 4);
    const Tensor coarse = torch::randn(s);
    namespace F = torch::nn::functional;
    auto o = F::InterpolateFuncOptions()
                 .scale_factor(std::vector<double>(static_cast<size_t>(c.dims), 4.0))
                 .align_corners(false);
    if (c.dims == 2) return F::interpolate(coarse, o.mode(torch::kBilinear));
    return F::interpolate(coarse, o.mode(torch::kTrilinear));
  }();
  const Tensor labels = torch::randint(0, 10, {c.batch}, torch::kInt64);
  if (rank == 0)
    std::printf(
        "\n== %s: %lld steps, %lld channels, batch %lld; %d levels, cf %d, 2 forward / 1 "
        "backward iterations ==\n",
        c.name, static_cast<long long>(c.steps), static_cast<long long>(c.channels),
        static_cast<long long>(c.batch), levels, cf);

  // Cost per evaluation at each depth.
  std::vector<std::pair<double, double>> cost;
  for (int d = 0; d < levels; ++d) cost.push_back(cost_per_evaluation(c, d, 30));

  LayerParallel exact(MPI_COMM_WORLD, make_network(c), LayerParallelOptions::exact());
  LayerParallel plain(MPI_COMM_WORLD, make_network(c), hierarchy(levels, cf, 2, 1, {}));
  LayerParallel spatial(MPI_COMM_WORLD, make_network(c), hierarchy(levels, cf, 2, 1, flags));
  std::vector<double> t_exact, t_plain, t_spatial;
  for (int r = 0; r < rounds + 1; ++r) {
    const double a = batch_seconds(exact, x, labels);
    const double b = batch_seconds(plain, x, labels);
    const double s = batch_seconds(spatial, x, labels);
    if (r == 0) continue;  // warm-up
    t_exact.push_back(a);
    t_plain.push_back(b);
    t_spatial.push_back(s);
  }

  const double serial = static_cast<double>(c.steps) * (cost[0].first + cost[0].second);
  auto report = [&](const char* label, LayerParallel& m, const std::vector<int>& depth) {
    const auto fwd = summed(m->statistics().forward.statistics.steps_per_level);
    const auto bwd = summed(m->statistics().backward.statistics.steps_per_level);
    double work = 0;
    if (rank == 0)
      std::printf("%s\n  level  depth  fwd evals  bwd evals  fwd ms/eval  bwd ms/eval\n", label);
    for (size_t l = 0; l < std::max(fwd.size(), bwd.size()); ++l) {
      const int d = depth[std::min(l, depth.size() - 1)];
      const double nf = l < fwd.size() ? static_cast<double>(fwd[l]) : 0.0;
      const double nb = l < bwd.size() ? static_cast<double>(bwd[l]) : 0.0;
      work += nf * cost[static_cast<size_t>(d)].first + nb * cost[static_cast<size_t>(d)].second;
      if (rank == 0)
        std::printf("  %5zu  %5d  %9.0f  %9.0f  %11.3f  %11.3f\n", l, d, nf, nb,
                    1e3 * cost[static_cast<size_t>(d)].first,
                    1e3 * cost[static_cast<size_t>(d)].second);
    }
    if (rank == 0)
      std::printf("  work %.1f ms = %.3f x serial (%.1f ms)\n", 1e3 * work, work / serial,
                  1e3 * serial);
    return work / serial;
  };
  const double r_plain = report("MGRIT without spatial coarsening", plain, {0, 0, 0});
  const double r_spatial = report("MGRIT with spatial coarsening 0,1,1", spatial, {0, 1, 2});
  if (rank == 0) {
    std::printf("work ratio to serial: %.3f without, %.3f with spatial coarsening (%.1f%% less)\n",
                r_plain, r_spatial, 100.0 * (1.0 - r_spatial / r_plain));
    std::printf(
        "measured time per batch (forward+backward, median of %d): exact %.1f ms, MGRIT %.1f ms "
        "(%.3f x exact), MGRIT spatial %.1f ms (%.3f x exact)\n",
        rounds, 1e3 * median(t_exact), 1e3 * median(t_plain), median(t_plain) / median(t_exact),
        1e3 * median(t_spatial), median(t_spatial) / median(t_exact));
  }

  // Gradient error with the few iterations used in training: 2 levels, cf 2.
  const char* variants[] = {"no spatial", "spatial 0,1, same kernels",
                            "spatial 0,1, moment-scaled kernels", "spatial 0,1, galerkin kernels"};
  const weft::nn::SpatialKernels kernels[] = {
      weft::nn::SpatialKernels::same, weft::nn::SpatialKernels::same,
      weft::nn::SpatialKernels::moments, weft::nn::SpatialKernels::galerkin};
  for (int iters : {1, 2})
    for (int v : {0, 1, 2, 3}) {
      auto o = hierarchy(2, 2, iters, iters, v ? std::vector<int>{0, 1} : std::vector<int>{});
      o.spatial_kernels(kernels[v]);
      LayerParallel m(MPI_COMM_WORLD, make_network(c), o);
      const auto [g, out] = errors(m, exact, x, labels);
      if (rank == 0)
        std::printf(
            "2 levels cf 2, %d forward / %d backward iteration(s), %s: gradient error "
            "%.2e, output error %.2e\n",
            iters, iters, variants[v], g, out);
    }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string allocator = weft::keep_freed_memory();  // as the weft CLI does
  weft::mpi::Environment mpi_env(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int rounds = 7;
  for (int i = 1; i + 1 < argc; i += 2)
    if (std::string(argv[i]) == "--rounds") rounds = std::max(1, std::atoi(argv[i + 1]));
  torch::set_num_threads(1);
  if (rank == 0) std::printf("# %s\n", allocator.c_str());
  const std::vector<Case> cases{{"2-D 32x32", 2, 32, 8, 32, 16}, {"3-D 16^3", 3, 16, 4, 16, 4}};
  for (const Case& c : cases) run_case(c, rank, rounds);
  return 0;
}
