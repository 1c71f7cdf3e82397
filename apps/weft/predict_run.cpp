// `weft predict` as weft-nn runs it: the link costs, the measured costs, the predictions.
#include "predict_command.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "predict.hpp"
#include "spatial_flags.hpp"
#include "train_command.hpp"
#include "weft/train/cost_measurement.hpp"
#include "weft/train/model_registry.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace weft::cli {
namespace {

using json = nlohmann::json;

constexpr double kMiB = 1024.0 * 1024.0;

LinkCosts link_costs(const PredictConfig& p, MPI_Comm comm, std::size_t state_bytes) {
  if (p.latency < 0 && p.bandwidth <= 0) return nn::measure_link(comm, state_bytes);
  LinkCosts link;
  link.latency = p.latency >= 0 ? p.latency : nn::kDefaultLatency;
  link.bandwidth = p.bandwidth > 0 ? p.bandwidth : nn::kDefaultBandwidth;
  link.source = "flags (defaults for the rest)";
  return link;
}

/// N chain layers of the model the flags describe, where known without building it.
std::int64_t layers_of(const ModelConfig& m) {
  return train::model_kind(m).chain_layers(m);
}

std::vector<int> rank_counts(const PredictConfig& p, std::int64_t layers) {
  std::vector<int> out = p.ranks;
  if (out.empty())
    for (std::int64_t r = 1; r <= std::min<std::int64_t>(1024, layers); r *= 2)
      out.push_back(static_cast<int>(r));
  for (int r : out)
    if (r > layers)
      invalid_value("--ranks", std::to_string(r), fmt::format("rank counts in 1..{}", layers),
                    fmt::format("the network has {} layers; layer parallelism needs at least one "
                                "layer per rank",
                                layers));
  return out;
}

/// The rank counts a prediction prices: --ranks, else 1, 2, 4, ... (up to min(1024, N) for
/// strong scaling, 64 for --weak).
std::vector<int> predicted_counts(const PredictConfig& p, std::int64_t layers) {
  if (p.weak == 0) return rank_counts(p, layers);
  std::vector<int> out = p.ranks;
  if (out.empty())
    for (int r = 1; r <= 64; r *= 2) out.push_back(r);
  return out;
}

/// How much slower every rank computes at P ranks than one rank alone (--contention).
struct Contention {
  std::string source = "measured";  ///< "measured", "off" or "--contention"
  int cores = 1;                    ///< this machine's, for ranks of `threads` torch threads
  int threads = 1;
  double fixed = 1;                ///< --contention X
  std::map<int, double> measured;  ///< by busy cores

  /// The cores P ranks keep busy here: one per rank, as many as there are.
  int busy(int ranks) const { return std::max(1, std::min(ranks, cores / threads)); }
  double factor(int ranks) const {
    if (ranks == 1 || source == "off") return 1;
    if (source != "measured") return fixed;
    const int b = busy(ranks);
    return b == 1 ? 1.0 : measured.at(b);
  }
  /// One line for the output.
  std::string describe() const {
    if (source == "off") return "not priced (--contention off): every rank computes as one alone";
    if (source != "measured")
      return fmt::format("every rank computes {:.3f}x as long at P > 1 (--contention)", fixed);
    if (measured.empty()) {
      const unsigned machine = std::thread::hardware_concurrency();
      const std::string bound =
          machine > static_cast<unsigned>(cores)
              ? fmt::format(
                    "; this process may use {} of the machine's {} cores (a launcher's "
                    "binding?): run weft predict alone or with mpirun --bind-to none to "
                    "measure busy cores",
                    cores, machine)
              : "";
      return fmt::format(
          "not measured: one core busy at every P listed ({} core{}, {} torch thread{} per "
          "rank{})",
          cores, cores == 1 ? "" : "s", threads, threads == 1 ? "" : "s", bound);
    }
    std::string counts, factors;
    for (const auto& [b, f] : measured) {
      counts += (counts.empty() ? "" : " / ") + std::to_string(b);
      factors += (factors.empty() ? "" : " / ") + fmt::format("{:.3f}", f);
    }
    return fmt::format(
        "with {} cores busy a rank computes {}x as long as with one (the serial batch timed "
        "beside copies of itself; {} cores here, {} torch thread{} per rank: more ranks are "
        "priced at {} busy)",
        counts, factors, cores, threads, threads == 1 ? "" : "s", busy(1 << 30));
  }
  json to_json() const {
    json by = json::object();
    for (const auto& [b, f] : measured) by[std::to_string(b)] = f;
    json out = {{"source", source}, {"cores", cores}, {"threads_per_rank", threads}};
    if (source == "measured") out["slowdown_by_busy_cores"] = by;
    if (source == "--contention") out["slowdown"] = fixed;
    return out;
  }
};

/// On the measuring rank, after the costs (the same threads and model).
Contention measure_contention(const PredictConfig& p, const std::vector<int>& counts, int threads) {
  Contention c;
  c.cores = train::available_cores();
  c.threads = threads;
  if (p.contention == 0) c.source = "off";
  if (p.contention >= 1) {
    c.source = "--contention";
    c.fixed = p.contention;
  }
  if (c.source != "measured") return c;
  std::vector<int> busy;
  for (int r : counts)
    if (c.busy(r) > 1) busy.push_back(c.busy(r));
  std::sort(busy.begin(), busy.end());
  busy.erase(std::unique(busy.begin(), busy.end()), busy.end());
  if (busy.empty()) return c;
  const std::vector<double> f = train::measure_busy_slowdown(
      p.train, training_example_shape(p.train), busy, std::max(3, p.repeats / 2));
  for (size_t i = 0; i < busy.size(); ++i) c.measured[busy[i]] = f[i];
  return c;
}

/// The prediction at `ranks` with every computing figure slowed by the contention there.
Prediction predict_at(const nn::LayerParallelOptions& options, const MeasuredCosts& m,
                      const LinkCosts& link, const Contention& contention, int ranks) {
  const double f = contention.factor(ranks);
  return nn::predict_batch(options, f == 1 ? m : nn::slowed(m, f), link, ranks);
}

json costs_json(const MeasuredCosts& m) {
  auto ms = [](const std::vector<double>& v) {
    json a = json::array();
    for (double s : v) a.push_back(1e3 * s);
    return a;
  };
  json spatial = json::array();
  for (size_t d = 0; d < m.spatial.size(); ++d) {
    const SpatialCosts& sc = m.spatial[d];
    spatial.push_back({{"depth", d + 1},
                       {"state_bytes", sc.state_bytes},
                       {"forward_ms", ms(sc.forward)},
                       {"adjoint_build_ms", ms(sc.adjoint_build)},
                       {"adjoint_reuse_ms", ms(sc.adjoint_reuse)},
                       {"axpy_ms", ms(sc.axpy)},
                       {"restriction_ms", ms(sc.restriction)},
                       {"interpolation_ms", ms(sc.interpolation)}});
  }
  return {{"threads", m.threads},
          {"layers", m.layers},
          {"forward_depth_per_level", m.forward_depth},
          {"adjoint_depth_per_level", m.adjoint_depth},
          {"spatial", spatial},
          {"forward_ms", ms(m.forward)},
          {"forward_record_ms", ms(m.forward_record)},
          {"adjoint_reuse_ms", ms(m.adjoint_reuse)},
          {"adjoint_final_ms", ms(m.adjoint_final)},
          {"adjoint_build_ms", ms(m.adjoint_build)},
          {"open_forward_ms", 1e3 * m.open_forward},
          {"open_backward_ms", 1e3 * m.open_backward},
          {"close_ms", 1e3 * m.close},
          {"optimizer_ms", 1e3 * m.optimizer},
          {"state_bytes", m.state_bytes},
          {"process_mib", m.process_bytes / kMiB},
          {"model_mib", m.model_bytes / kMiB},
          {"fixed_forward_ms", 1e3 * m.fixed_forward},
          {"fixed_backward_ms", 1e3 * m.fixed_backward},
          {"fixed_optimizer_ms", 1e3 * m.fixed_optimizer},
          {"forward_in_situ_per_level", m.forward_in_situ},
          {"adjoint_in_situ_per_level", m.adjoint_in_situ}};
}

/// `weft predict --weak L`: the batch at P ranks of the network of L x P layers, against one
/// rank's exact mode on the same network (predicted from the same costs).
int run_weak_prediction(const PredictConfig& p, const MeasuredCosts& m, const LinkCosts& link,
                        const Contention& contention) {
  const TrainConfig& c = p.train;
  const std::vector<int> counts = predicted_counts(p, m.layers);
  TrainConfig exact = c;
  exact.parallel = nn::LayerParallelOptions::exact();
  std::printf(
      "weft predict --weak %lld: %s, %lld layers per rank (costs measured on %lld "
      "layers), batch %lld, %d torch thread%s per rank\n",
      static_cast<long long>(p.weak), c.model.kind.c_str(), static_cast<long long>(p.weak),
      static_cast<long long>(m.layers), static_cast<long long>(c.batch), m.threads,
      m.threads == 1 ? "" : "s");
  std::printf("messages: latency %.2f us, bandwidth %.2f GB/s (%s)\n", 1e6 * link.latency,
              1e-9 * link.bandwidth, link.source.c_str());
  std::printf("busy cores: %s\n", contention.describe().c_str());
  std::printf("%8s  %8s  %12s  %14s  %22s  %14s\n", "ranks", "layers", "batch ms",
              "weak efficiency", "1-rank exact mode ms", "MiB per rank");
  json list = json::array();
  double first = 0;
  for (int r : counts) {
    const std::int64_t layers = p.weak * r;
    const MeasuredCosts mr = nn::with_layers(m, layers, c.model.t_final);
    const Prediction q = predict_at(c.parallel, mr, link, contention, r);
    const Prediction one = nn::predict_batch(exact.parallel, mr, link, 1);
    if (first == 0) first = q.batch_seconds;
    const double efficiency = first / q.batch_seconds;
    std::printf("%8d  %8lld  %12.3f  %14.3f  %22.3f  %14.1f\n", r, static_cast<long long>(layers),
                1e3 * q.batch_seconds, efficiency, 1e3 * one.batch_seconds, q.memory_bytes / kMiB);
    list.push_back({{"ranks", r},
                    {"layers", layers},
                    {"batch_ms", 1e3 * q.batch_seconds},
                    {"weak_efficiency", efficiency},
                    {"forward_ms", 1e3 * q.forward_seconds},
                    {"backward_ms", 1e3 * q.backward_seconds},
                    {"optimizer_ms", 1e3 * q.optimizer_seconds},
                    {"exact_one_rank_ms", 1e3 * one.batch_seconds},
                    {"busy_cores", contention.busy(r)},
                    {"slowdown", contention.factor(r)},
                    {"memory_per_rank_mib", q.memory_bytes / kMiB}});
  }
  std::fflush(stdout);
  if (!p.json_path.empty()) {
    const json out = {{"weak_layers_per_rank", p.weak},
                      {"predictions", list},
                      {"model", c.model.kind},
                      {"batch", c.batch},
                      {"latency_us", 1e6 * link.latency},
                      {"bandwidth_gbs", 1e-9 * link.bandwidth},
                      {"contention", contention.to_json()},
                      {"costs", costs_json(m)}};
    std::ofstream f(p.json_path);
    f << out.dump(2) << "\n";
    if (!f) throw BadData("--json " + p.json_path + ": cannot write");
  }
  return kExitOk;
}

}  // namespace

int run_prediction(const PredictConfig& p, MPI_Comm comm) {
  const TrainConfig& c = p.train;
  if (p.weak > 0 && train::model_kind(c.model).family != train::ModelKind::Family::Chain)
    invalid_value("--weak", std::to_string(p.weak), "a layer count with --model resnet",
                  "weak scaling extends a network whose layers cost alike");
  if (p.weak > 0 && c.balance_cost)
    invalid_value("--balance", "cost", "layers with --weak",
                  "weak scaling extends a network whose layers cost alike");
  if (c.data_ranks > 1)
    invalid_value("--data-ranks", std::to_string(c.data_ranks), "1 with weft predict",
                  "data x layer parallelism is not modelled");
  const std::int64_t known = layers_of(c.model);
  if (known > 0 && p.weak == 0) rank_counts(p, known);  // bad --ranks fails before measuring
  if (!p.json_path.empty())
    mpi::collectively(comm, [&] {
      if (mpi::rank(comm) == 0) check_output_file("--json", p.json_path);
    });
  // Rank 0 measures alone, so that the figures are one rank's on its core; the others wait
  // without spinning (a blocking MPI call polls and would take a core from rank 0).
  MeasuredCosts m;
  Contention contention;
  std::exception_ptr error;
  if (mpi::rank(comm) == 0) try {
      std::vector<std::int64_t> shape;
      try {
        shape = training_example_shape(c);
      } catch (const BadData& e) {  // a data set found bad before any work: rejected input
        throw InvalidOption(e.what());
      }
      m = train::measure_costs(c, shape, p.repeats);
      contention = measure_contention(p, predicted_counts(p, m.layers), m.threads);
    } catch (const InvalidOption& e) {  // the library's option, as the flags given for it
      std::string flags;
      for (const char* flag : kSpatialLevelFlags)
        if (c.given.count(flag)) flags += (flags.empty() ? "" : ", ") + std::string(flag);
      error = std::make_exception_ptr(e.option() == "spatial_levels"
                                          ? InvalidOption("option " + flags + ": " + e.detail())
                                          : e);
    } catch (...) {
      error = std::current_exception();
    }
  MPI_Request barrier = MPI_REQUEST_NULL;
  mpi::check(MPI_Ibarrier(comm, &barrier), "MPI_Ibarrier");
  mpi::wait_politely(barrier, "the measuring rank");
  mpi::agree_or_throw(comm, error);
  std::size_t bytes = 0;
  if (mpi::rank(comm) == 0) bytes = m.state_bytes.empty() ? 8 : m.state_bytes.back();
  unsigned long long b = bytes;
  mpi::check(MPI_Bcast(&b, 1, MPI_UNSIGNED_LONG_LONG, 0, comm), "MPI_Bcast (state bytes)");
  const LinkCosts link = link_costs(p, comm, static_cast<std::size_t>(b));
  if (mpi::rank(comm) != 0) return kExitOk;
  if (p.weak > 0) return run_weak_prediction(p, m, link, contention);

  const std::vector<int> counts = rank_counts(p, m.layers);
  std::vector<Prediction> predictions, equal_layers;
  // --balance cost: the layers placed as weft train places them, by these figures; and, from
  // the same figures, equal numbers of layers per rank (the column that shows what it gains).
  nn::LayerParallelOptions parallel = c.parallel;
  if (c.balance_cost) parallel.layer_costs(nn::layer_costs(m));
  for (int r : counts) {
    predictions.push_back(predict_at(parallel, m, link, contention, r));
    if (c.balance_cost) equal_layers.push_back(predict_at(c.parallel, m, link, contention, r));
  }
  const double serial = m.serial_batch;
  int break_even = 0;
  for (const Prediction& q : predictions)
    if (q.ranks > 1 && q.batch_seconds < serial) {
      break_even = q.ranks;
      break;
    }

  std::printf("weft predict: %s, %lld layers, batch %lld, %d torch thread%s per rank\n",
              c.model.kind.c_str(), static_cast<long long>(m.layers),
              static_cast<long long>(c.batch), m.threads, m.threads == 1 ? "" : "s");
  std::printf("messages: latency %.2f us, bandwidth %.2f GB/s (%s)\n", 1e6 * link.latency,
              1e-9 * link.bandwidth, link.source.c_str());
  std::printf("serial LibTorch batch (forward, loss, backward, optimizer): %.2f ms\n",
              1e3 * serial);
  std::printf("busy cores: %s\n", contention.describe().c_str());
  std::printf("layers per rank: %s\n",
              c.balance_cost ? "blocks of equal cost (--balance cost; each layer's fine steps as "
                               "measured above)"
                             : "equal numbers (--balance layers)");
  if (m.recurrent)
    std::printf(
        "%lld sequence steps; one %s step: %.3f ms forward, %.3f ms adjoint (build + vjp)\n",
        static_cast<long long>(m.layers),
        c.model.implicit_step > 0
            ? fmt::format("implicit-cell ({} iterations)", c.model.implicit_iterations).c_str()
            : "cell",
        1e3 * m.forward.front(), 1e3 * m.adjoint_build.front());
  if (!m.forward_in_situ.empty()) {
    auto list = [](const std::vector<double>& v) {
      std::string out;
      for (double f : v) out += (out.empty() ? "" : ", ") + fmt::format("{:.3f}", f);
      return out;
    };
    std::printf(
        "in situ, per level (the solvers' own time training at one rank / the same steps "
        "priced from the isolated figures): forward %s; adjoint %s\n",
        list(m.forward_in_situ).c_str(), list(m.adjoint_in_situ).c_str());
  }
  std::printf(
      "per rank and batch, outside the priced events (one-rank batch less its prediction): "
      "forward %.3f ms, backward %.3f ms, optimizer %.3f ms\n",
      1e3 * m.fixed_forward, 1e3 * m.fixed_backward, 1e3 * m.fixed_optimizer);
  auto total = [](const std::vector<double>& v) {
    return std::accumulate(v.begin(), v.end(), 0.0);
  };
  for (size_t d = 0; d < m.spatial.size(); ++d) {
    const SpatialCosts& sc = m.spatial[d];
    std::printf(
        "spatial depth %zu: final state %zu B (fine %zu B); all layers once: forward %.3f ms "
        "(fine %.3f), adjoint %.3f ms (fine %.3f); restriction %.3f ms, interpolation %.3f ms "
        "per final state\n",
        d + 1, sc.state_bytes.back(), m.state_bytes.back(), 1e3 * total(sc.forward),
        1e3 * total(m.forward), 1e3 * total(sc.adjoint_build), 1e3 * total(m.adjoint_build),
        1e3 * sc.restriction.back(), 1e3 * sc.interpolation.back());
  }
  std::printf(
      "memory per rank: the process %.1f MiB before any model, plus its share of the model's "
      "%.1f MiB (one rank's training batch at its peak; the data set not included)\n",
      m.process_bytes / kMiB, m.model_bytes / kMiB);
  std::printf("%8s  %12s  %10s  %16s  %28s  %14s%s\n", "ranks", "batch ms", "speedup",
              "busiest rank ms", "forward / backward / rest ms", "MiB per rank",
              c.balance_cost ? "  equal numbers: batch ms / speedup" : "");
  for (size_t k = 0; k < predictions.size(); ++k) {
    const Prediction& q = predictions[k];
    std::printf("%8d  %12.3f  %10.3f  %16.3f  %8.3f / %8.3f / %6.3f  %14.1f", q.ranks,
                1e3 * q.batch_seconds, serial / q.batch_seconds, 1e3 * q.busiest_seconds,
                1e3 * q.forward_seconds, 1e3 * q.backward_seconds, 1e3 * q.optimizer_seconds,
                q.memory_bytes / kMiB);
    if (c.balance_cost)
      std::printf("  %12.3f / %6.3f", 1e3 * equal_layers[k].batch_seconds,
                  serial / equal_layers[k].batch_seconds);
    std::printf("\n");
  }
  if (break_even > 0)
    std::printf("break-even: %d ranks (the fewest listed that beat serial LibTorch)\n", break_even);
  else
    std::printf("break-even: none up to %d ranks\n", counts.back());
  std::fflush(stdout);

  if (!p.json_path.empty()) {
    json list = json::array();
    for (size_t k = 0; k < predictions.size(); ++k) {
      const Prediction& q = predictions[k];
      list.push_back({{"ranks", q.ranks},
                      {"batch_ms", 1e3 * q.batch_seconds},
                      {"speedup_vs_serial", serial / q.batch_seconds},
                      {"busiest_rank_ms", 1e3 * q.busiest_seconds},
                      {"forward_ms", 1e3 * q.forward_seconds},
                      {"backward_ms", 1e3 * q.backward_seconds},
                      {"optimizer_ms", 1e3 * q.optimizer_seconds},
                      {"memory_per_rank_mib", q.memory_bytes / kMiB},
                      {"busy_cores", contention.busy(q.ranks)},
                      {"slowdown", contention.factor(q.ranks)}});
      if (c.balance_cost)
        list.back()["equal_layers_batch_ms"] = 1e3 * equal_layers[k].batch_seconds;
    }
    const json out = {{"predictions", list},
                      {"balance", c.balance_cost ? "cost" : "layers"},
                      {"serial_batch_ms", 1e3 * serial},
                      {"break_even_ranks", break_even > 0 ? json(break_even) : json(nullptr)},
                      {"model", c.model.kind},
                      {"batch", c.batch},
                      {"latency_us", 1e6 * link.latency},
                      {"bandwidth_gbs", 1e-9 * link.bandwidth},
                      {"link_source", link.source},
                      {"contention", contention.to_json()},
                      {"costs", costs_json(m)}};
    std::ofstream f(p.json_path);
    f << out.dump(2) << "\n";
    if (!f) throw BadData("--json " + p.json_path + ": cannot write");
  }
  return kExitOk;
}

}  // namespace weft::cli
