#include "json_records.hpp"

#include <algorithm>
#include <stdexcept>

namespace weft::train {

using json = nlohmann::json;

json model_json(const ModelConfig& m) {
  json j = {{"kind", m.kind}, {"T", m.t_final}, {"seed", m.seed}};
  if (m.classes != 10) j["classes"] = m.classes;  // checkpoints without it have 10
  if (is_custom(m)) return j;
  if (is_recurrent(m)) {
    j["hidden"] = m.hidden;
    j["rnn_layers"] = m.rnn_layers;
    j["sequence"] = m.sequence;
    j["coarse_input"] = m.coarse_input;
    j["implicit_step"] = m.implicit_step;
    j["implicit_iterations"] = m.implicit_iterations;
  } else if (is_staged(m)) {
    j["stage_channels"] = m.stage_channels;
    j["stage_steps"] = m.stage_steps;
    j["batchnorm"] = m.batchnorm;
    j["dropout"] = m.dropout;
    // Since 3 Dec 2026 the convolutions before a batch norm have no bias (stages_net.hpp):
    // checkpoints without this key hold parameters this network does not have.
    if (m.batchnorm) j["conv_bias_before_bn"] = false;
    if (m.stem != "conv") j["stem"] = m.stem;
  } else {
    j["channels"] = m.channels;
    j["steps"] = m.steps;
    j["open"] = m.open;
  }
  return j;
}

ModelConfig model_from_json(const json& j) {
  ModelConfig m;
  m.kind = j.value("kind", std::string("resnet"));  // checkpoints from before stages existed
  m.t_final = j.at("T").get<double>();
  m.seed = j.at("seed").get<std::uint64_t>();
  m.classes = j.value("classes", 10);
  if (is_custom(m)) return m;
  if (is_recurrent(m)) {
    m.hidden = j.at("hidden").get<std::int64_t>();
    m.rnn_layers = j.at("rnn_layers").get<std::int64_t>();
    m.sequence = j.at("sequence").get<std::string>();
    // Checkpoints from before these options existed: torch's cell, coarse input start.
    m.coarse_input = j.value("coarse_input", std::string("start"));
    m.implicit_step = j.value("implicit_step", 0.0);
    m.implicit_iterations = j.value("implicit_iterations", 3);
  } else if (is_staged(m)) {
    m.stage_channels = j.at("stage_channels").get<std::vector<std::int64_t>>();
    m.stage_steps = j.at("stage_steps").get<std::vector<std::int64_t>>();
    m.batchnorm = j.at("batchnorm").get<bool>();
    m.dropout = j.at("dropout").get<double>();
    m.stem = j.value("stem", std::string("conv"));
  } else {
    m.channels = j.at("channels").get<int>();
    m.steps = j.at("steps").get<std::int64_t>();
    m.open = j.at("open").get<std::string>();
  }
  return m;
}

json normalization_json(const Normalization& n) {
  if (n.per_channel()) return {{"mean", n.channel_mean}, {"std", n.channel_std}};
  return {{"mean", n.mean}, {"std", n.std}};
}

Normalization normalization_from_json(const json& j) {
  Normalization n;
  if (j.at("mean").is_array()) {
    n.channel_mean = j.at("mean").get<std::vector<double>>();
    n.channel_std = j.at("std").get<std::vector<double>>();
    if (n.channel_mean.empty() || n.channel_mean.size() != n.channel_std.size())
      throw std::domain_error("normalization: mean and std of unequal lengths");
    n.mean = n.std = 0;
    for (std::size_t c = 0; c < n.channel_mean.size(); ++c) {
      n.mean += n.channel_mean[c] / static_cast<double>(n.channel_mean.size());
      n.std += n.channel_std[c] / static_cast<double>(n.channel_std.size());
    }
  } else {
    n.mean = j.at("mean").get<double>();
    n.std = j.at("std").get<double>();
  }
  for (std::size_t c = 0; c < std::max<std::size_t>(1, n.channel_std.size()); ++c)
    if (!(n.std_of(c) > 0)) throw std::domain_error("normalization: std must be > 0");
  return n;
}

json example_json(const ExampleShape& e) {
  json j = {{"rows", e.rows}, {"cols", e.cols}};
  if (e.volume) j["depth"] = e.depth;
  if (e.channels != 1) j["channels"] = e.channels;
  return j;
}

namespace {
json optional_number(const std::optional<double>& v) {
  return v ? json(*v) : json(nullptr);
}
}  // namespace

json metrics_json(const EpochMetrics& m) {
  json record = {{"epoch", m.epoch},
                 {"train_loss", m.train_loss},
                 {"train_accuracy", m.train_accuracy},
                 {"test_loss", m.test_loss},
                 {"test_accuracy", m.test_accuracy},
                 {"epoch_seconds", m.epoch_seconds},
                 {"forward_ms", m.forward_ms},
                 {"backward_ms", m.backward_ms},
                 {"optimizer_ms", m.optimizer_ms},
                 {"batch_ms", m.batch_ms},
                 {"data_wait_ms", m.data_wait_ms},
                 {"data_wait_fraction", m.data_wait_fraction},
                 {"fwd_iterations", optional_number(m.fwd_iterations)},
                 {"fwd_residual", optional_number(m.fwd_residual)},
                 {"bwd_iterations", optional_number(m.bwd_iterations)},
                 {"bwd_residual", optional_number(m.bwd_residual)},
                 {"ranks", m.ranks},
                 {"fwd_levels", m.fwd_levels},
                 {"bwd_levels", m.bwd_levels},
                 {"data_ranks", m.data_ranks},
                 {"lr_end", m.lr_end},
                 {"model", m.model},
                 {"serial", m.serial}};
  if (m.depth) record["depth"] = *m.depth;
  if (m.fwd_iterations) {
    record["fwd_iterations_mean"] = *m.fwd_iterations;
    record["bwd_iterations_mean"] = optional_number(m.bwd_iterations);
    record["fwd_iterations_max"] = optional_number(m.fwd_iterations_max);
    record["bwd_iterations_max"] = optional_number(m.bwd_iterations_max);
  }
  if (m.step_evaluations) record["step_evaluations"] = *m.step_evaluations;
  if (m.iteration_control) {
    record["fallbacks"] = m.fallbacks.value_or(0);
    record["gradient_checks"] = m.gradient_checks.value_or(0);
    record["gradient_error"] = optional_number(m.gradient_error);
    record["control_ms"] = optional_number(m.control_ms);
  }
  if (m.mgopt_levels) {
    record["mgopt_levels"] = *m.mgopt_levels;
    record["mgopt_corrections"] = m.mgopt_corrections.value_or(0);
    record["mgopt_rejected"] = m.mgopt_rejected.value_or(0);
    record["mgopt_step_mean"] = optional_number(m.mgopt_step_mean);
  }
  if (!m.per_rank.empty()) {
    json per_rank = json::array();
    for (const RankTiming& r : m.per_rank)
      per_rank.push_back({{"rank", r.rank},
                          {"steps_ms", r.steps_ms},
                          {"waiting_ms", r.waiting_ms},
                          {"bookkeeping_ms", r.bookkeeping_ms},
                          {"outside_ms", r.outside_ms}});
    record["per_rank"] = per_rank;
  }
  return record;
}

std::string to_json(const EpochMetrics& m) {
  return metrics_json(m).dump();
}

std::string checkpoint_metadata(const ModelConfig& model, const ExampleShape& example, int epoch,
                                const Normalization& normalization, const std::string& optimizer,
                                const EpochMetrics& metrics, const DepthGrowth& growth,
                                int growth_level) {
  json meta = {{"model", model_json(model)},
               {"image", example_json(example)},
               {"epoch", epoch},
               {"normalization", normalization_json(normalization)},
               {"optimizer", optimizer},
               {"metrics", metrics_json(metrics)}};
  // Nested iteration: "model" is the network at `level` (what the parameters fit), so the
  // checkpoint evaluates as it is and a resumed run continues the schedule.
  if (growth.active())
    meta["growth"] = {{"factor", growth.factor},
                      {"refinements", growth.refinements},
                      {"epochs", growth_epochs(growth)},
                      {"interpolation", nn::to_string(growth.interpolation)},
                      {"level", growth_level}};
  return meta.dump();
}

}  // namespace weft::train
