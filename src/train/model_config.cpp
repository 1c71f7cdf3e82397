#include "weft/train/model_config.hpp"

#include <fmt/format.h>

#include "weft/train/model_registry.hpp"

namespace weft::train {

bool is_recurrent(const ModelConfig& m) {
  return model_kind(m).recurrent();
}
bool is_staged(const ModelConfig& m) {
  return model_kind(m).staged();
}
bool is_custom(const ModelConfig& m) {
  return model_kind(m).family == ModelKind::Family::Custom;
}

std::string describe(const ModelConfig& m, std::int64_t rows, std::int64_t cols) {
  if (is_custom(m))
    return fmt::format("a network of the user's own; T {}; seed {}", m.t_final, m.seed);
  if (is_recurrent(m))
    return fmt::format(
        "{} {} layer(s), hidden {}, {}, over the image as a sequence of {} ({} steps of {}); "
        "coarse input {}; close linear({}->{}) on the final hidden state; seed {}",
        m.kind, m.rnn_layers, m.hidden,
        m.implicit_step > 0 ? fmt::format("implicit cell (backward Euler, step {}, {} fixed-point "
                                          "iteration(s))",
                                          m.implicit_step, m.implicit_iterations)
                            : std::string("torch's cell"),
        m.sequence, m.sequence == "rows" ? rows : rows * cols, m.sequence == "rows" ? cols : 1,
        m.coarse_input, m.hidden, m.classes, m.seed);
  if (is_staged(m)) {
    const char* conv = model_kind(m).spatial_dims == 3 ? "conv3x3x3" : "conv3x3";
    std::string text =
        m.kind + (m.stem == "imagenet"
                      ? std::string(" open conv7x7 stride 2-BN-ReLU-max pool 3x3 stride 2;")
                      : std::string());
    for (size_t s = 0; s < m.stage_channels.size(); ++s)
      text += fmt::format("{} {}x({}{}-ReLU{}-{}{}) at {} channels", s ? "," : "", m.stage_steps[s],
                          conv, m.batchnorm ? "-BN" : "",
                          m.dropout > 0 ? fmt::format("-dropout {}", m.dropout) : "", conv,
                          m.batchnorm ? "-BN" : "", m.stage_channels[s]);
    return text + fmt::format(
                      "; transitions {} stride 2{}-ReLU; close global pooling-"
                      "linear({}->{}); T {} per stage; seed {}",
                      conv, m.batchnorm ? "-BN" : "", m.stage_channels.back(), m.classes, m.t_final,
                      m.seed);
  }
  return fmt::format(
      "open {}, {} steps of conv3x3-ReLU-conv3x3-ReLU at {} channels, T {}, close "
      "linear({}->32)-ReLU-linear(32->{}); seed {}",
      m.open, m.steps, m.channels, m.t_final, m.channels * rows * cols, m.classes, m.seed);
}

std::int64_t state_downsampling(const ModelConfig& m) {
  return is_staged(m) && m.stem == "imagenet" ? 4 : 1;
}

ModelConfig tiny_imagenet_stages(std::int64_t steps) {
  ModelConfig m;
  m.kind = "stages";
  m.stage_channels = {64, 128, 256, 512};
  m.stage_steps.assign(4, steps);
  m.stem = "imagenet";
  m.classes = 200;
  return m;
}

}  // namespace weft::train
