#include "train_observers.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "weft/train/model_registry.hpp"
#include "weft/util/clock.hpp"
#include "weft/util/error.hpp"

namespace weft::cli {

namespace {
using weft::clock::now;

// A rank started by Open MPI's mpirun writes into a pseudo-terminal even when mpirun's own
// output goes to a file or a pipe; then mpirun's (the parent's) standard output decides.
bool output_is_terminal() {
  if (isatty(STDOUT_FILENO) == 0) return false;
  if (!std::getenv("OMPI_COMM_WORLD_SIZE")) return true;
  char target[256] = {};
  const std::string link = "/proc/" + std::to_string(getppid()) + "/fd/1";
  const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
  if (n <= 0) return true;  // cannot tell: keep the terminal's bar
  const std::string path(target, static_cast<size_t>(n));
  return path.rfind("/dev/pts/", 0) == 0 || path.rfind("/dev/tty", 0) == 0;
}
}  // namespace

Progress::Progress(bool enabled, int epoch, std::int64_t total)
    : enabled_(enabled), tty_(output_is_terminal()), epoch_(epoch), total_(total), start_(now()) {}

void Progress::update(std::int64_t done, double loss, double accuracy) {
  if (!enabled_) return;
  const double t = now();
  const bool last = done >= total_;
  if (tty_) {
    if (!last && t - shown_ < 0.2) return;
  } else if (!last && done < next_line_) {
    return;
  }
  shown_ = t;
  next_line_ = done + total_ / 5;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / std::max<std::int64_t>(1, total_));
  const std::string bar = std::string(static_cast<size_t>(filled), '#') +
                          std::string(static_cast<size_t>(kWidth - filled), '.');
  const double rate = static_cast<double>(done) / std::max(1e-9, t - start_);
  std::printf("%sepoch %d [%s] %lld/%lld  loss %.4f  acc %.4f  %.0f samples/s%s", tty_ ? "\r" : "",
              epoch_, bar.c_str(), static_cast<long long>(done), static_cast<long long>(total_),
              loss, accuracy, rate, tty_ && !last ? "" : "\n");
  std::fflush(stdout);
}

ConsoleReport::ConsoleReport(const TrainConfig& config, DataText data)
    : config_(config), data_(std::move(data)) {}

void ConsoleReport::run_started(const train::RunStarted& e) {
  if (e.rank != 0) return;
  const TrainConfig& c = config_;
  const std::string mode =
      c.serial && c.model.implicit_step > 0
          ? "sequential (--serial: weft's implicit cell on one rank, exact mode)"
      : c.serial ? "sequential LibTorch (--serial)"
      : e.replicas > 1
          ? fmt::format("{} replicas x layer-parallel on {} rank(s)", e.replicas, e.layer_ranks)
          : fmt::format("layer-parallel on {} rank(s)", e.ranks);
  std::printf("weft train: %s, %lld training / %lld test images %s (%s) from %s\n", mode.c_str(),
              static_cast<long long>(e.train_examples), static_cast<long long>(e.test_examples),
              data_.size.c_str(), data_.reader.c_str(), data_.folder.c_str());
  std::printf("  model: %s\n", train::describe(c.model, data_.rows, data_.cols).c_str());
  if (data_.augmentation != "none")
    std::printf("  augmentation: %s (per seed, epoch and image)\n", data_.augmentation.c_str());
  std::printf("  training: %s lr %g%s%s, batch %lld, epochs %d (from %d), %d torch thread(s)\n",
              c.optimizer.c_str(), c.lr, c.lr_schedule == "cosine" ? " (cosine decay)" : "",
              c.optimizer == "sgd" ? fmt::format(" momentum {}", c.momentum).c_str() : "",
              static_cast<long long>(c.batch), c.epochs, e.start_epoch, e.torch_threads);
  if (c.growth.active()) {
    std::string depths;
    for (int k = 0; k <= c.growth.refinements; ++k)
      depths += (k ? " -> " : "") +
                std::to_string(train::step_layers(train::model_at_level(c.model, c.growth, k)));
    std::string epochs;
    for (int n : train::growth_epochs(c.growth))
      epochs += (epochs.empty() ? "" : ", ") + std::to_string(n);
    std::printf(
        "  depth grows: %s steps (factor %d, %s interpolation), epochs %s at the "
        "shallower depths\n",
        depths.c_str(), c.growth.factor, nn::to_string(c.growth.interpolation).c_str(),
        epochs.c_str());
  }
  if (c.mgopt.active()) {
    std::string depths;
    for (int l = 0; l < c.mgopt.levels; ++l)
      depths += (l ? " -> " : "") +
                std::to_string(train::step_layers(train::mgopt_level_model(c.model, c.mgopt, l)));
    std::printf(
        "  MG/Opt: V-cycles over %s steps, %d,%d optimizer steps before,after each coarse "
        "correction and %d on the coarsest, %s restriction, %s prolongation, line search of "
        "%d halvings\n",
        depths.c_str(), c.mgopt.pre, c.mgopt.post, c.mgopt.coarse,
        nn::to_string(c.mgopt.restriction).c_str(), nn::to_string(c.mgopt.interpolation).c_str(),
        c.mgopt.line_search);
  }
  if (c.iterations.active()) {
    const bool half =
        train::uses_half_steps(c.iterations, c.parallel.forward(), c.parallel.backward());
    std::printf(
        "  iterations: %s chosen by the training, %d to %d, exact-gradient checks every "
        "%d batches, gradient error accepted %g%s%s%s\n",
        c.iterations.forward && c.iterations.backward ? "forward and adjoint"
        : c.iterations.forward                        ? "forward"
                                                      : "adjoint",
        c.iterations.min_iterations, c.iterations.max_iterations, c.iterations.check_every,
        c.iterations.gradient_tolerance,
        c.iterations.forward
            ? fmt::format(", forward error {:g}", c.iterations.forward_tolerance).c_str()
            : "",
        half ? ", half steps" : "",
        c.iterations.diagnostics ? ", sampling noise and error persistence measured" : "");
  }
  if (!c.serial) {
    std::string text =
        nn::to_string(c.parallel, train::model_kind(c.model).staged() && c.model.batchnorm);
    for (size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', at + 1))
      text.replace(at, 1, "\n    ");
    std::printf("  mgrit:\n    %s\n", text.c_str());
    if (c.parallel.forward().max_levels() > 1)
      std::printf("  evaluation: %s\n",
                  c.evaluation_forward == train::EvaluationForward::exact
                      ? "the network's exact forward, pipelined over the ranks"
                  : c.evaluation_forward == train::EvaluationForward::solver
                      ? "the training's MGRIT forward in evaluation mode"
                      : "the network's exact forward (test), then the training's MGRIT forward "
                        "in evaluation mode (mgrit)");
  }
  if (!e.layers_per_rank.empty() && e.layer_ranks > 1) {
    std::string counts;
    for (const std::int64_t n : e.layers_per_rank)
      counts += (counts.empty() ? "" : ", ") + std::to_string(n);
    if (e.cost_per_rank.empty()) {
      std::printf("  layers per rank: %s (equal numbers)\n", counts.c_str());
    } else {
      const auto [least, most] =
          std::minmax_element(e.cost_per_rank.begin(), e.cost_per_rank.end());
      std::printf(
          "  layers per rank: %s (--balance cost: %.2f to %.2f ms of measured step time per "
          "rank)\n",
          counts.c_str(), 1e3 * *least, 1e3 * *most);
    }
  }
  std::fflush(stdout);
}

void ConsoleReport::epoch_started(const train::EpochStarted& e) {
  progress_ = std::make_unique<Progress>(e.rank == 0 && config_.progress, e.epoch, e.examples);
}

void ConsoleReport::batch_done(const train::BatchDone& e) {
  if (progress_) progress_->update(e.seen, e.mean_loss, e.mean_accuracy);
}

void ConsoleReport::epoch_done(const train::EpochDone& e) {
  if (e.rank != 0) return;
  const train::EpochMetrics& m = e.metrics;
  std::printf(
      "epoch %d: train loss %.4f acc %.4f | test loss %.4f acc %.4f | %.1f s | "
      "per batch %.1f ms (forward %.1f ms, backward %.1f ms, optimizer %.2f ms)\n",
      m.epoch, m.train_loss, m.train_accuracy, m.test_loss, m.test_accuracy, m.epoch_seconds,
      m.batch_ms, m.forward_ms, m.backward_ms, m.optimizer_ms);
  if (m.mgrit_test_loss)
    std::printf("  mgrit forward: test loss %.4f acc %.4f\n", *m.mgrit_test_loss,
                m.mgrit_test_accuracy.value_or(0));
  if (m.iteration_control)
    std::printf(
        "  iterations: forward %.2f (at most %.0f), adjoint %.2f (at most %.0f); %lld "
        "exact-gradient checks%s; %lld fallbacks to exact mode; %.0f ms recomputing\n",
        m.fwd_iterations.value_or(0), m.fwd_iterations_max.value_or(0),
        m.bwd_iterations.value_or(0), m.bwd_iterations_max.value_or(0),
        static_cast<long long>(m.gradient_checks.value_or(0)),
        m.gradient_error ? fmt::format(", gradient error {:.3g} (chain layers {:.3g}), forward "
                                       "error {:.3g}",
                                       *m.gradient_error, m.gradient_error_layers.value_or(0),
                                       m.forward_error.value_or(0))
                               .c_str()
                         : "",
        static_cast<long long>(m.fallbacks.value_or(0)), m.control_ms.value_or(0));
  if (m.gradient_diagnostics) {
    auto value = [](const std::optional<double>& v) {
      return v ? fmt::format("{:.3g}", *v) : std::string("none");
    };
    std::printf("  checks: sampling noise %s, error persistence %s\n",
                value(m.gradient_noise).c_str(), value(m.gradient_error_persistence).c_str());
  }
  if (m.mgopt_levels)
    std::printf("  MG/Opt: %lld coarse corrections, %lld rejected by the line search%s\n",
                static_cast<long long>(m.mgopt_corrections.value_or(0)),
                static_cast<long long>(m.mgopt_rejected.value_or(0)),
                m.mgopt_step_mean
                    ? fmt::format(", mean step length {:.3g}", *m.mgopt_step_mean).c_str()
                    : "");
  std::fflush(stdout);
}

void ConsoleReport::depth_refined(const train::DepthRefined& e) {
  if (e.rank != 0) return;
  std::printf("depth refined before epoch %d: %lld -> %lld steps\n", e.epoch,
              static_cast<long long>(e.from_steps), static_cast<long long>(e.to_steps));
  std::fflush(stdout);
}

void ConsoleReport::trace_written(const train::TraceWritten& e) {
  if (e.rank == 0) std::printf("wrote the trace to %s\n", e.path.c_str());
}

void MetricsFile::run_started(const train::RunStarted& e) {
  if (e.rank != 0) return;
  out_.open(path_, e.start_epoch > 1 ? std::ios::app : std::ios::trunc);
  if (!out_) throw BadData("cannot write --metrics file " + path_);
}

void MetricsFile::epoch_done(const train::EpochDone& e) {
  if (!out_.is_open()) return;
  nlohmann::json line = nlohmann::json::parse(train::to_json(e.metrics));
  line.update(data_);
  out_ << line.dump() << "\n" << std::flush;
  if (!out_) throw BadData("cannot write --metrics file " + path_);
}

void print_confusion(const std::vector<std::int64_t>& confusion, int classes) {
  std::printf("confusion matrix (rows: true label, columns: predicted)\n      ");
  for (int c = 0; c < classes; ++c) std::printf("%6d", c);
  std::printf("\n");
  for (int r = 0; r < classes; ++r) {
    std::printf("%6d", r);
    for (int c = 0; c < classes; ++c)
      std::printf("%6lld", static_cast<long long>(confusion[static_cast<size_t>(r * classes + c)]));
    std::printf("\n");
  }
}

}  // namespace weft::cli
