#include "model_config.hpp"

#include <fmt/format.h>

#include "weft/nn/checkpoint.hpp"
#include "weft/util/error.hpp"

namespace weft::cli {

using json = nlohmann::json;

json to_json(const ModelConfig& m) {
  json j = {{"kind", m.kind}, {"T", m.t_final}, {"seed", m.seed}};
  if (m.kind == "gru" || m.kind == "lstm") {
    j["hidden"] = m.hidden;
    j["rnn_layers"] = m.rnn_layers;
    j["sequence"] = m.sequence;
    j["coarse_input"] = m.coarse_input;
    j["implicit_step"] = m.implicit_step;
    j["implicit_iterations"] = m.implicit_iterations;
  } else if (m.kind == "stages" || m.kind == "conv3d") {
    j["stage_channels"] = m.stage_channels;
    j["stage_steps"] = m.stage_steps;
    j["batchnorm"] = m.batchnorm;
    j["dropout"] = m.dropout;
    // Since 3 Dec 2026 the convolutions before a batch norm have no bias (stages_net.hpp):
    // checkpoints without this key hold parameters this network does not have.
    if (m.batchnorm) j["conv_bias_before_bn"] = false;
  } else {
    j["channels"] = m.channels;
    j["steps"] = m.steps;
    j["open"] = m.open;
  }
  return j;
}

json checkpoint_metadata(const std::string& dir) {
  json meta;
  try {
    meta = json::parse(nn::read_checkpoint_metadata(dir));
  } catch (const json::exception& e) {
    throw BadData("checkpoint " + dir + ": the metadata is not valid JSON: " + e.what());
  }
  for (const char* key : {"model", "image", "epoch", "normalization", "optimizer"})
    if (!meta.contains(key))
      throw BadData("checkpoint " + dir + ": the metadata has no '" + key +
                    "' (not written by weft train?)");
  try {
    const ModelConfig m = model_from_json(meta.at("model"));
    if (m.coarse_input != "start" && m.coarse_input != "mean")
      throw BadData("checkpoint " + dir + ": the model's coarse_input '" + m.coarse_input +
                    "' is not start or mean");
    const json& model = meta.at("model");
    if ((m.kind == "stages" || m.kind == "conv3d") && m.batchnorm &&
        !model.contains("conv_bias_before_bn"))
      throw BadData("checkpoint " + dir + ": written by a weft before 3 Dec 2026, whose " + m.kind +
                    " network had convolution biases before batch norm (this one has none, "
                    "docs/training.md §4); resume or evaluate it with the build that wrote it");
    if (!(m.implicit_step >= 0) || m.implicit_iterations < 1)
      throw BadData("checkpoint " + dir + ": the model's implicit_step " +
                    number_text(m.implicit_step) + " or implicit_iterations " +
                    std::to_string(m.implicit_iterations) + " is invalid");
    image_size(meta);
    image_depth(meta);
    meta.at("epoch").get<int>();
    meta.at("normalization").at("mean").get<double>();
    meta.at("normalization").at("std").get<double>();
    meta.at("optimizer").get<std::string>();
  } catch (const json::exception& e) {
    throw BadData("checkpoint " + dir + ": the metadata is not valid: " + e.what());
  }
  return meta;
}

std::pair<std::int64_t, std::int64_t> image_size(const json& meta) {
  return {meta.at("image").at("rows").get<std::int64_t>(),
          meta.at("image").at("cols").get<std::int64_t>()};
}

std::int64_t image_depth(const json& meta) {
  return meta.at("image").value("depth", std::int64_t{1});
}

json image_json(const data::ImageSet& set) {
  json j = {{"rows", set.rows}, {"cols", set.cols}};
  if (set.spatial_dims == 3) j["depth"] = set.depth;
  return j;
}

ModelConfig model_from_json(const json& j) {
  ModelConfig m;
  m.kind = j.value("kind", std::string("resnet"));  // checkpoints from before stages existed
  m.t_final = j.at("T").get<double>();
  m.seed = j.at("seed").get<std::uint64_t>();
  if (m.kind == "gru" || m.kind == "lstm") {
    m.hidden = j.at("hidden").get<std::int64_t>();
    m.rnn_layers = j.at("rnn_layers").get<std::int64_t>();
    m.sequence = j.at("sequence").get<std::string>();
    // Checkpoints from before these options existed: torch's cell, coarse input start.
    m.coarse_input = j.value("coarse_input", std::string("start"));
    m.implicit_step = j.value("implicit_step", 0.0);
    m.implicit_iterations = j.value("implicit_iterations", 3);
  } else if (m.kind == "stages" || m.kind == "conv3d") {
    m.stage_channels = j.at("stage_channels").get<std::vector<std::int64_t>>();
    m.stage_steps = j.at("stage_steps").get<std::vector<std::int64_t>>();
    m.batchnorm = j.at("batchnorm").get<bool>();
    m.dropout = j.at("dropout").get<double>();
  } else {
    m.channels = j.at("channels").get<int>();
    m.steps = j.at("steps").get<std::int64_t>();
    m.open = j.at("open").get<std::string>();
  }
  return m;
}

std::string describe(const ModelConfig& m, std::int64_t rows, std::int64_t cols) {
  if (m.kind == "gru" || m.kind == "lstm")
    return fmt::format(
        "{} {} layer(s), hidden {}, {}, over the image as a sequence of {} ({} steps of {}); "
        "coarse input {}; close linear({}->10) on the final hidden state; seed {}",
        m.kind, m.rnn_layers, m.hidden,
        m.implicit_step > 0 ? fmt::format("implicit cell (backward Euler, step {}, {} fixed-point "
                                          "iteration(s))",
                                          m.implicit_step, m.implicit_iterations)
                            : std::string("torch's cell"),
        m.sequence, m.sequence == "rows" ? rows : rows * cols, m.sequence == "rows" ? cols : 1,
        m.coarse_input, m.hidden, m.seed);
  if (m.kind == "stages" || m.kind == "conv3d") {
    const char* conv = m.kind == "conv3d" ? "conv3x3x3" : "conv3x3";
    std::string text = m.kind;
    for (size_t s = 0; s < m.stage_channels.size(); ++s)
      text += fmt::format("{} {}x({}{}-ReLU{}-{}{}) at {} channels", s ? "," : "", m.stage_steps[s],
                          conv, m.batchnorm ? "-BN" : "",
                          m.dropout > 0 ? fmt::format("-dropout {}", m.dropout) : "", conv,
                          m.batchnorm ? "-BN" : "", m.stage_channels[s]);
    return text + fmt::format(
                      "; transitions {} stride 2{}-ReLU; close global pooling-"
                      "linear({}->10); T {} per stage; seed {}",
                      conv, m.batchnorm ? "-BN" : "", m.stage_channels.back(), m.t_final, m.seed);
  }
  return fmt::format(
      "open {}, {} steps of conv3x3-ReLU-conv3x3-ReLU at {} channels, T {}, close "
      "linear({}->32)-ReLU-linear(32->10); seed {}",
      m.open, m.steps, m.channels, m.t_final, m.channels * rows * cols, m.seed);
}

}  // namespace weft::cli
