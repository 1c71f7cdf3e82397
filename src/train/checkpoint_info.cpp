// Reading a checkpoint's metadata, with every field the Trainer relies on checked up front.
#include "weft/train/checkpoint_info.hpp"

#include "json_records.hpp"
#include "weft/nn/checkpoint.hpp"
#include "weft/train/model_registry.hpp"
#include "weft/util/error.hpp"

namespace weft::train {

using json = nlohmann::json;

CheckpointInfo read_checkpoint_info(const std::string& dir) {
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
  CheckpointInfo info;
  try {
    try {
      model_kind(meta.at("model").value("kind", std::string("resnet")));
    } catch (const InvalidOption& e) {
      throw BadData("checkpoint " + dir + ": " + e.what());
    }
    const ModelConfig m = model_from_json(meta.at("model"));
    if (m.coarse_input != "start" && m.coarse_input != "mean")
      throw BadData("checkpoint " + dir + ": the model's coarse_input '" + m.coarse_input +
                    "' is not start or mean");
    if (is_staged(m) && m.batchnorm && !meta.at("model").contains("conv_bias_before_bn"))
      throw BadData("checkpoint " + dir + ": written by a weft before 3 Dec 2026, whose " + m.kind +
                    " network had convolution biases before batch norm (this one has none, "
                    "docs/training.md §4); resume or evaluate it with the build that wrote it");
    if (!(m.implicit_step >= 0) || m.implicit_iterations < 1)
      throw BadData("checkpoint " + dir + ": the model's implicit_step " +
                    number_text(m.implicit_step) + " or implicit_iterations " +
                    std::to_string(m.implicit_iterations) + " is invalid");
    info.model = m;
    const json& image = meta.at("image");
    info.example.rows = image.at("rows").get<std::int64_t>();
    info.example.cols = image.at("cols").get<std::int64_t>();
    info.example.volume = image.contains("depth");
    info.example.depth = image.value("depth", std::int64_t{1});
    info.example.channels = image.value("channels", std::int64_t{1});  // older: one channel
    info.epoch = meta.at("epoch").get<int>();
    info.normalization = normalization_from_json(meta.at("normalization"));
    if (info.normalization.per_channel() &&
        static_cast<std::int64_t>(info.normalization.channel_mean.size()) != info.example.channels)
      throw BadData("checkpoint " + dir + ": the normalization has " +
                    std::to_string(info.normalization.channel_mean.size()) +
                    " channels, the examples " + std::to_string(info.example.channels));
    info.optimizer = meta.at("optimizer").get<std::string>();
    if (meta.contains("growth")) {
      const json& g = meta.at("growth");
      info.growth.factor = g.at("factor").get<int>();
      info.growth.refinements = g.at("refinements").get<int>();
      info.growth.epochs = g.at("epochs").get<std::vector<int>>();
      info.growth.interpolation = nn::depth_interpolation_from(
          g.at("interpolation").get<std::string>(), "checkpoint " + dir);
      info.growth_level = g.at("level").get<int>();
      if (!info.growth.active() || info.growth.factor < 2 || info.growth_level < 0 ||
          info.growth_level > info.growth.refinements ||
          static_cast<int>(info.growth.epochs.size()) != info.growth.refinements)
        throw BadData("checkpoint " + dir + ": the depth growth schedule is not valid");
    }
    if (meta.contains("mgopt")) info.mgopt = mgopt_from_json(meta.at("mgopt"));
    if (meta.contains("iteration_control"))
      info.iteration_control = iteration_state_from_json(meta.at("iteration_control"));
  } catch (const json::exception& e) {
    throw BadData("checkpoint " + dir + ": the metadata is not valid: " + e.what());
  } catch (const std::domain_error& e) {
    throw BadData("checkpoint " + dir + ": the metadata is not valid: " + e.what());
  } catch (const InvalidOption& e) {
    throw BadData("checkpoint " + dir + ": the metadata is not valid: " + e.what());
  }
  return info;
}

}  // namespace weft::train
