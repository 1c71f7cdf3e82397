// The registry of model kinds: each kind once, with what front ends may ask of it.
#include "weft/train/model_registry.hpp"

#include <algorithm>
#include <functional>
#include <numeric>

#include "weft/util/error.hpp"

namespace weft::train {

namespace {

std::int64_t resnet_layers(const ModelConfig& m) {
  return m.steps;
}
std::int64_t resnet_channels(const ModelConfig& m) {
  return m.channels;
}

std::int64_t staged_layers(const ModelConfig& m) {
  return std::accumulate(m.stage_steps.begin(), m.stage_steps.end(), std::int64_t{0}) +
         static_cast<std::int64_t>(m.stage_steps.size()) - 1;
}
std::int64_t staged_channels(const ModelConfig& m) {
  return m.stage_channels.empty() ? 0 : m.stage_channels.front();
}

std::int64_t no_chain(const ModelConfig&) {
  return -1;
}
std::int64_t no_state(const ModelConfig&) {
  return 0;
}

using Shape = std::vector<std::int64_t>;

std::int64_t product(Shape::const_iterator begin, Shape::const_iterator end) {
  return std::accumulate(begin, end, std::int64_t{1}, std::multiplies<>());
}

// Parameter counts of the models the zoo builds (weft/models: image_resnet.cpp, stages_net.cpp,
// sequence_classifier.cpp); tests compare them with the built modules.
constexpr std::int64_t kResNetHidden = 32;  // ImageResNetSpec::hidden

ParameterCount resnet_parameters(const ModelConfig& m, const Shape& shape, std::int64_t classes) {
  const std::int64_t c = m.channels, conv = 9 * c * c + c;
  ParameterCount p;
  if (m.open == "conv") p.open = 9 * shape.front() * c + c;
  p.chain = m.steps * 2 * conv;
  const std::int64_t features = c * product(shape.end() - 2, shape.end());
  p.close = features * kResNetHidden + kResNetHidden + kResNetHidden * classes + classes;
  return p;
}

ParameterCount staged_parameters(const ModelConfig& m, const Shape& shape, std::int64_t classes) {
  const std::int64_t taps = shape.size() == 4 ? 27 : 9;
  const bool bn = m.batchnorm;
  // A 3x3(x3) convolution with a bias unless batch norm (weight and bias per channel) follows.
  auto conv = [&](std::int64_t in, std::int64_t out) {
    return taps * in * out + (bn ? 2 * out : out);
  };
  ParameterCount p;
  if (m.stage_channels.empty()) return p;
  p.open = conv(shape.front(), m.stage_channels.front());
  if (m.stem == "imagenet")  // a 7x7 convolution instead of the 3x3 one
    p.open += (49 - taps) * shape.front() * m.stage_channels.front();
  for (size_t s = 0; s < m.stage_channels.size(); ++s) {
    const std::int64_t c = m.stage_channels[s];
    p.chain += (s < m.stage_steps.size() ? m.stage_steps[s] : 0) * 2 * conv(c, c);
    if (s + 1 < m.stage_channels.size()) p.chain += conv(c, m.stage_channels[s + 1]);
  }
  p.close = m.stage_channels.back() * classes + classes;
  return p;
}

// torch::nn::GRU / LSTM (gates 3 / 4) over rows (input: a row) or pixels (input: one value),
// and the head Linear(hidden, classes).
ParameterCount recurrent_parameters(const ModelConfig& m, const Shape& shape, std::int64_t classes,
                                    std::int64_t gates) {
  const std::int64_t h = m.hidden, input = m.sequence == "rows" ? shape.back() : 1;
  ParameterCount p;
  for (std::int64_t l = 0; l < m.rnn_layers; ++l)
    p.chain += gates * h * ((l == 0 ? input : h) + h + 2);
  p.close = h * classes + classes;
  return p;
}
ParameterCount gru_parameters(const ModelConfig& m, const Shape& shape, std::int64_t classes) {
  return recurrent_parameters(m, shape, classes, 3);
}
ParameterCount lstm_parameters(const ModelConfig& m, const Shape& shape, std::int64_t classes) {
  return recurrent_parameters(m, shape, classes, 4);
}
ParameterCount unknown_parameters(const ModelConfig&, const Shape&, std::int64_t) {
  return {};
}

using Family = ModelKind::Family;
const std::vector<std::string> kResNetFields{"channels", "steps", "open", "t_final", "seed"};
const std::vector<std::string> kStagedFields{
    "stage_channels", "stage_steps", "batchnorm", "dropout", "stem", "t_final", "seed"};
const std::vector<std::string> kRecurrentFields{
    "hidden",        "rnn_layers",          "sequence", "coarse_input",
    "implicit_step", "implicit_iterations", "seed"};

// Exact mode by default; the stages network is the main job (README, docs/training.md §4):
// multilevel MGRIT both ways with a cosine decay, >= 90 % on Fashion-MNIST within 10 minutes at
// 2 ranks on 2 cores. The forward must be the network's: with one iteration that skips, the
// weights fit the one-iteration forward and the network itself (its exact forward) classified
// 25 % of the test set after 5 epochs (docs/training.md §4a). One iteration without skip is
// that exact forward for 2 steps per stage (f ~ 1e-7, as two with skip) and costs 24 step
// evaluations a batch instead of 28; with longer stages neither is exact and two with skip
// come closer (f 0.12-0.14 against 0.20-0.21 at 3 and 4 steps). The recurrent models' cost is
// mostly per step, so they get fewer epochs of a larger rate.
const ModelKind::Recipe kExact{};
const ModelKind::Recipe kStages = [] {
  ModelKind::Recipe r;
  r.levels = 2;
  r.cfactor = 2;
  r.forward_iterations = 1;
  r.forward_skip = false;
  r.short_stage_steps = 2;  // longer stages: the forward skips, 2 iterations
  r.backward_iterations = 1;
  r.epochs = 5;
  r.lr = 0.003;
  r.lr_schedule = "cosine";
  return r;
}();
const ModelKind::Recipe kRecurrent{1, 4, 2, 1, 3, 0.002, "constant"};

std::vector<ModelKind> registered() {
  return {
      {"resnet", "one stage of conv3x3 residual steps (exact mode by default)", Family::Chain, 2,
       true, kResNetFields, resnet_layers, resnet_channels, kExact, "", resnet_parameters},
      {"stages", "stages of conv3x3 residual steps with batch norm and stride-2 transitions",
       Family::Staged, 2, true, kStagedFields, staged_layers, staged_channels, kStages, "",
       staged_parameters},
      {"conv3d", "the stages network with 3x3x3 convolutions, for volumes", Family::Staged, 3, true,
       kStagedFields, staged_layers, staged_channels, kExact, "", staged_parameters},
      {"gru", "a GRU over the image as a sequence, parallel over the sequence", Family::Recurrent,
       2, true, kRecurrentFields, no_chain, no_state, kRecurrent, "gru", gru_parameters},
      {"lstm", "an LSTM over the image as a sequence, parallel over the sequence",
       Family::Recurrent, 2, true, kRecurrentFields, no_chain, no_state, kRecurrent, "lstm",
       lstm_parameters},
      {"custom",
       "a network given to the Trainer",
       Family::Custom,
       0,
       false,
       {"t_final", "seed"},
       no_chain,
       no_state,
       kExact,
       "",
       unknown_parameters},
  };
}

}  // namespace

bool ModelKind::has_field(const std::string& field) const {
  return std::find(fields.begin(), fields.end(), field) != fields.end();
}

const std::vector<ModelKind>& model_kinds() {
  static const std::vector<ModelKind> kinds = registered();
  return kinds;
}

const ModelKind& model_kind(const std::string& name) {
  for (const ModelKind& k : model_kinds())
    if (k.name == name) return k;
  std::string accepted;
  for (const std::string& n : model_kind_names()) accepted += (accepted.empty() ? "" : ", ") + n;
  throw InvalidOption("ModelConfig", "kind", "'" + name + "' is invalid; accepted: " + accepted);
}

ModelKind::Recipe recipe_for(const ModelConfig& m) {
  ModelKind::Recipe r = model_kind(m).recipe;
  const auto longer = [&](std::int64_t steps) { return steps > r.short_stage_steps; };
  if (r.short_stage_steps > 0 && std::any_of(m.stage_steps.begin(), m.stage_steps.end(), longer))
    r.forward_skip = true;
  return r;
}

std::vector<std::string> model_kind_names(int spatial_dims) {
  std::vector<std::string> names;
  for (const ModelKind& k : model_kinds())
    if (k.selectable && (spatial_dims == 0 || k.spatial_dims == spatial_dims))
      names.push_back(k.name);
  return names;
}

std::vector<std::string> model_kinds_with(const std::string& field) {
  std::vector<std::string> names;
  for (const ModelKind& k : model_kinds())
    if (k.selectable && k.has_field(field)) names.push_back(k.name);
  return names;
}

}  // namespace weft::train
