// Checks of `weft train` that run before any work: the memory a run needs, and what --resume
// may change. No LibTorch here: sizes are counted, nothing is allocated.
#include "preflight.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "cli_support.hpp"
#include "weft/train/memory_estimate.hpp"
#include "weft/train/model_registry.hpp"
#include "weft/util/error.hpp"

namespace weft::cli {

namespace {

// Memory this machine can still give (Linux MemAvailable; physical memory elsewhere).
double available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024.0;
  return static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

std::string bytes_text(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (bytes >= 1000 && u < 5) {
    bytes /= 1000;
    ++u;
  }
  return fmt::format("{:.3g} {}", bytes, units[u]);
}

// The flags that set the network's size, as the user gave them (--model and its widths, depths).
std::string size_flags(const train::ModelConfig& m) {
  const auto list = [](const std::vector<std::int64_t>& values) {
    std::string text;
    for (const std::int64_t v : values) text += (text.empty() ? "" : ",") + std::to_string(v);
    return text;
  };
  if (train::is_staged(m))
    return fmt::format("--model {} --stage-channels {} --stage-steps {}", m.kind,
                       list(m.stage_channels), list(m.stage_steps));
  if (train::is_recurrent(m))
    return fmt::format("--model {} --hidden {} --rnn-layers {}", m.kind, m.hidden, m.rnn_layers);
  return fmt::format("--channels {} --steps {}", m.channels, m.steps);
}

}  // namespace

// The library's lower bound of what the busiest rank needs (train::estimate_memory) against
// this machine's available memory shared by its ranks: refusing on it is safe.
void check_memory(const TrainConfig& c, const data::ImageSet& train, const data::ImageSet& test,
                  int ranks) {
  std::vector<std::int64_t> example{train.channels, train.rows, train.cols};
  if (train.spatial_dims == 3) example.insert(example.begin() + 1, train.depth);
  const train::MemoryEstimate e =
      train::estimate_memory(c, example, train.count, test.count, ranks);
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int here = c.serial ? 1 : (local ? std::max(1, std::atoi(local)) : ranks);
  const double have = available_bytes() / here;
  if (e.total() > have)
    throw InvalidOption(fmt::format(
        "{} --batch {} (evaluation batches of {}) on {} rank(s) need about {} per rank "
        "(parameters {}, states {}, data {}), more than the {} available per rank; use a smaller "
        "network, --batch or --eval-batch",
        size_flags(c.model), c.batch, e.eval_batch, c.serial ? 1 : ranks, bytes_text(e.total()),
        bytes_text(e.parameters), bytes_text(e.states), bytes_text(e.data), bytes_text(have)));
}

void check_model_data(const ModelConfig& config, int spatial_dims, std::int64_t channels,
                      const std::string& data_dir) {
  const std::string& model = config.kind;
  if (channels != 1 && train::model_kind(model).has_field("open") && config.open == "copy")
    throw InvalidOption(fmt::format(
        "option --open: 'copy' repeats one channel, but --data {} holds {}-channel images; "
        "accepted with this data: conv",
        data_dir, channels));
  if (channels != 1 && train::model_kind(model).recurrent())
    throw InvalidOption(
        fmt::format("option --model: '{}' reads one-channel images as sequences, but --data {} "
                    "holds {}-channel "
                    "images; accepted with this data: resnet, stages",
                    model, data_dir, channels));
  const bool volumes = spatial_dims == 3;
  if (volumes == (train::model_kind(model).spatial_dims == 3)) return;
  if (volumes)
    throw InvalidOption(fmt::format(
        "option --model: '{}' takes 2-D images, but --data {} holds 3-D volumes; accepted with "
        "this data: {}",
        model, data_dir, join(train::model_kind_names(3))));
  throw InvalidOption(fmt::format(
      "option --model: '{}' takes 3-D volumes, but --data {} holds 2-D images; accepted "
      "with this data: {} (for volumes: --data shapes3d)",
      model, data_dir, join(train::model_kind_names(2))));
}

// With --resume the checkpoint fixes the architecture, the seed and the optimizer: a flag that
// names another value is refused, as is an --epochs that leaves nothing to train.
void check_resume(const TrainConfig& c, const ModelConfig& stored, const std::string& optimizer,
                  int epoch) {
  auto differs = [&](const char* flag, const std::string& given, const std::string& saved) {
    if (c.given.count(flag) && given != saved)
      throw InvalidOption(fmt::format(
          "option {}: '{}' differs from the {} of checkpoint {}; with --resume leave it out "
          "(the checkpoint fixes it) or start a new run",
          flag, given, saved, c.resume_dir));
  };
  auto list = [](const std::vector<std::int64_t>& v) {
    std::string text;
    for (std::int64_t x : v) text += (text.empty() ? "" : ",") + std::to_string(x);
    return text;
  };
  differs("--model", c.model.kind, stored.kind);
  differs("--stage-channels", list(c.model.stage_channels), list(stored.stage_channels));
  differs("--stage-steps", list(c.model.stage_steps), list(stored.stage_steps));
  differs("--batchnorm", c.model.batchnorm ? "1" : "0", stored.batchnorm ? "1" : "0");
  differs("--dropout", number_text(c.model.dropout), number_text(stored.dropout));
  differs("--stem", c.model.stem, stored.stem);
  differs("--channels", std::to_string(c.model.channels), std::to_string(stored.channels));
  differs("--steps", std::to_string(c.model.steps), std::to_string(stored.steps));
  differs("--T", number_text(c.model.t_final), number_text(stored.t_final));
  differs("--open", c.model.open, stored.open);
  differs("--seed", std::to_string(c.model.seed), std::to_string(stored.seed));
  differs("--hidden", std::to_string(c.model.hidden), std::to_string(stored.hidden));
  differs("--rnn-layers", std::to_string(c.model.rnn_layers), std::to_string(stored.rnn_layers));
  differs("--sequence", c.model.sequence, stored.sequence);
  differs("--coarse-input", c.model.coarse_input, stored.coarse_input);
  differs("--implicit-step", number_text(c.model.implicit_step), number_text(stored.implicit_step));
  differs("--implicit-iterations", std::to_string(c.model.implicit_iterations),
          std::to_string(stored.implicit_iterations));
  differs("--optimizer", c.optimizer, optimizer);
  if (c.epochs <= epoch)
    throw InvalidOption(fmt::format(
        "option --epochs: {} leaves nothing to train: checkpoint {} is at epoch {} (--epochs "
        "counts from the start of the run; give more than {})",
        c.epochs, c.resume_dir, epoch, epoch));
}

void check_resume_growth(const TrainConfig& c, const train::DepthGrowth& stored) {
  if (!c.given.count("--grow-depth")) return;
  const std::string given = fmt::format("{},{}", c.growth.factor, c.growth.refinements);
  const std::string saved = stored.active()
                                ? fmt::format("{},{}", stored.factor, stored.refinements)
                                : std::string("none");
  if (given != saved)
    throw InvalidOption(fmt::format(
        "option --grow-depth: '{}' differs from the depth growth of checkpoint {} ({}); with "
        "--resume leave it out (the checkpoint fixes it) or start a new run",
        given, c.resume_dir, saved));
}

}  // namespace weft::cli
