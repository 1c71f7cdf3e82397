#include "json_records.hpp"

#include <algorithm>
#include <cmath>
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
                 {"eval_seconds", m.eval_seconds},
                 {"eval_forward", m.eval_forward},
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
  if (m.mgrit_test_loss) {
    record["mgrit_test_loss"] = *m.mgrit_test_loss;
    record["mgrit_test_accuracy"] = optional_number(m.mgrit_test_accuracy);
  }
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
    record["gradient_error_layers"] = optional_number(m.gradient_error_layers);
    record["forward_error"] = optional_number(m.forward_error);
    record["control_ms"] = optional_number(m.control_ms);
    if (m.fwd_unskipped) record["fwd_unskipped_fraction"] = *m.fwd_unskipped;
    if (m.bwd_unskipped) record["bwd_unskipped_fraction"] = *m.bwd_unskipped;
    if (m.gradient_diagnostics) {
      record["gradient_noise"] = optional_number(m.gradient_noise);
      record["gradient_error_persistence"] = optional_number(m.gradient_error_persistence);
    }
  }
  if (m.mgopt_levels) {
    record["mgopt_levels"] = *m.mgopt_levels;
    record["mgopt_corrections"] = m.mgopt_corrections.value_or(0);
    record["mgopt_rejected"] = m.mgopt_rejected.value_or(0);
    record["mgopt_step_mean"] = optional_number(m.mgopt_step_mean);
    record["mgopt_transfer_kib"] = optional_number(m.mgopt_transfer_kib);
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

namespace {
nlohmann::json mgopt_json(const MGOpt& g) {
  return {{"levels", g.levels},
          {"factor", g.factor},
          {"pre", g.pre},
          {"post", g.post},
          {"coarse", g.coarse},
          {"line_search", g.line_search},
          {"restriction", nn::to_string(g.restriction)},
          {"interpolation", nn::to_string(g.interpolation)}};
}

nlohmann::json iteration_state_json(const IterationController::State& s) {
  json bars = json::array();
  for (const auto& b : s.bars) bars.push_back({b.forward, b.backward, b.until, b.failures});
  json j = {{"forward", s.forward},
            {"backward", s.backward},
            {"next_check", s.next_check},
            {"lower_backward_next", s.lower_backward_next},
            {"bars", bars},
            {"loss_mean", s.loss_mean},
            {"losses", s.losses},
            {"half_steps", {s.forward_half_steps, s.backward_half_steps}}};
  if (s.before_lowering)
    j["before_lowering"] = {s.before_lowering->first, s.before_lowering->second};
  return j;
}
}  // namespace

MGOpt mgopt_from_json(const json& j) {
  MGOpt g;
  g.levels = j.at("levels").get<int>();
  g.factor = j.at("factor").get<int>();
  g.pre = j.at("pre").get<int>();
  g.post = j.at("post").get<int>();
  g.coarse = j.at("coarse").get<int>();
  g.line_search = j.at("line_search").get<int>();
  g.restriction = nn::depth_restriction_from(j.at("restriction").get<std::string>(), "mgopt");
  g.interpolation = nn::depth_interpolation_from(j.at("interpolation").get<std::string>(), "mgopt");
  if (g.levels < 1 || g.factor < 2 || g.pre < 0 || g.post < 0 || g.coarse < 1 || g.line_search < 0)
    throw std::domain_error("the MG/Opt settings are not valid");
  return g;
}

IterationController::State iteration_state_from_json(const json& j) {
  IterationController::State s;
  s.forward = j.at("forward").get<int>();
  s.backward = j.at("backward").get<int>();
  s.next_check = j.at("next_check").get<std::int64_t>();
  s.lower_backward_next = j.at("lower_backward_next").get<bool>();
  for (const json& b : j.at("bars")) {
    const auto v = b.get<std::vector<std::int64_t>>();
    // Checkpoints before bars' lengths grew with each failure have no failure count: one.
    if (v.size() != 3 && v.size() != 4)
      throw std::domain_error("a barred setting is not [forward, backward, until, failures]");
    const std::int64_t failures = v.size() == 4 ? v[3] : 1;
    if (failures < 1 || failures > 6)
      throw std::domain_error("a barred setting's failure count is not in 1..6");
    s.bars.push_back(
        {static_cast<int>(v[0]), static_cast<int>(v[1]), v[2], static_cast<int>(failures)});
  }
  s.loss_mean = j.at("loss_mean").get<double>();
  s.losses = j.at("losses").get<std::int64_t>();
  // Checkpoints from before half steps count whole iterations.
  if (j.contains("half_steps")) {
    const auto v = j.at("half_steps").get<std::vector<bool>>();
    if (v.size() != 2) throw std::domain_error("half_steps is not [forward, backward]");
    s.forward_half_steps = v[0];
    s.backward_half_steps = v[1];
  }
  if (j.contains("before_lowering")) {
    const auto v = j.at("before_lowering").get<std::vector<int>>();
    if (v.size() != 2) throw std::domain_error("before_lowering is not [forward, backward]");
    s.before_lowering = std::make_pair(v[0], v[1]);
  }
  if (s.forward < 1 || s.backward < 1 || s.next_check < 0 || s.losses < 0 ||
      !std::isfinite(s.loss_mean))
    throw std::domain_error("the iteration controller's state is not valid");
  return s;
}

std::string checkpoint_metadata(const CheckpointInfo& info, const EpochMetrics& metrics) {
  json meta = {{"model", model_json(info.model)},
               {"image", example_json(info.example)},
               {"epoch", info.epoch},
               {"normalization", normalization_json(info.normalization)},
               {"optimizer", info.optimizer},
               {"metrics", metrics_json(metrics)}};
  // Nested iteration: "model" is the network at `level` (what the parameters fit), so the
  // checkpoint evaluates as it is and a resumed run continues the schedule.
  const DepthGrowth& growth = info.growth;
  if (growth.active())
    meta["growth"] = {{"factor", growth.factor},
                      {"refinements", growth.refinements},
                      {"epochs", growth_epochs(growth)},
                      {"interpolation", nn::to_string(growth.interpolation)},
                      {"level", info.growth_level}};
  if (info.mgopt.active()) meta["mgopt"] = mgopt_json(info.mgopt);
  if (info.iteration_control)
    meta["iteration_control"] = iteration_state_json(*info.iteration_control);
  return meta.dump();
}

}  // namespace weft::train
