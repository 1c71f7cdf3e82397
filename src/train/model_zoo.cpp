// The models a ModelConfig names, built for a data set's example shape: the LibTorch half of the
// registry of model kinds (model_registry.cpp), one builder per kind.
#include "weft/train/model_zoo.hpp"

#include "weft/models/image_resnet.hpp"
#include "weft/models/stages_net.hpp"
#include "weft/train/model_registry.hpp"
#include "weft/util/error.hpp"

namespace weft::train {

namespace {

using Shape = std::vector<std::int64_t>;

nn::Network resnet(const ModelConfig& m, const Shape& shape) {
  models::ImageResNetSpec spec;
  spec.channels = m.channels;
  spec.steps = m.steps;
  spec.t_final = m.t_final;
  spec.open = models::parse_open_layer(m.open);
  spec.in_channels = shape.front();
  spec.height = shape[shape.size() - 2];
  spec.width = shape.back();
  spec.seed = m.seed;
  spec.classes = m.classes;
  return models::image_resnet(spec);
}

nn::Network stages(const ModelConfig& m, const Shape& shape) {
  models::StagesNetSpec spec;
  spec.dims = static_cast<int>(shape.size()) - 1;
  if (spec.dims == 3) spec.depth = shape[shape.size() - 3];
  spec.in_channels = shape.front();
  spec.channels = m.stage_channels;
  spec.steps = m.stage_steps;
  spec.t_final = m.t_final;
  spec.batchnorm = m.batchnorm;
  spec.dropout = m.dropout;
  spec.imagenet_stem = m.stem == "imagenet";
  spec.height = shape[shape.size() - 2];
  spec.width = shape.back();
  spec.seed = m.seed;
  spec.classes = m.classes;
  return models::stages_net(spec);
}

/// The builders of the registry's families with a chain of layers (model_registry.cpp): a new
/// kind of an existing family needs no line here.
struct ChainBuilder {
  ModelKind::Family family;
  nn::Network (*build)(const ModelConfig&, const Shape&);
};
constexpr ChainBuilder kChainBuilders[] = {
    {ModelKind::Family::Chain, resnet},
    {ModelKind::Family::Staged, stages},
};

}  // namespace

nn::Network build_network(const ModelConfig& m, const std::vector<std::int64_t>& shape) {
  const ModelKind& kind = model_kind(m);  // an unknown kind: InvalidOption
  if (shape.size() < 3)
    throw InvalidOption("ModelConfig", "example shape",
                        "of " + std::to_string(shape.size()) +
                            " dimensions is invalid; accepted: [channels, (depth,) rows, cols]");
  for (const ChainBuilder& b : kChainBuilders)
    if (kind.family == b.family) return b.build(m, shape);
  std::string accepted;
  for (const ModelKind& k : model_kinds())
    if (k.selectable && k.convolutional())
      accepted += std::string(accepted.empty() ? "" : ", ") + k.name;
  throw InvalidOption("ModelConfig", "kind",
                      "'" + m.kind + "' has no chain of layers to build; accepted: " + accepted);
}

models::SequenceClassifierSpec sequence_classifier_spec(const ModelConfig& m,
                                                        const std::vector<std::int64_t>& shape,
                                                        const nn::LayerParallelOptions& solver,
                                                        bool serial) {
  if (!is_recurrent(m))
    throw InvalidOption("ModelConfig", "kind",
                        "'" + m.kind + "' is not a recurrent model; accepted: gru, lstm");
  if (shape.front() != 1)
    throw InvalidOption(
        "ModelConfig", "kind",
        "'" + m.kind + "' reads one-channel images as sequences; the examples have " +
            std::to_string(shape.front()) + " channels; accepted with them: resnet, stages");
  models::SequenceClassifierSpec spec;
  spec.cell = model_kind(m).cell == "gru" ? nn::CellKind::GRU : nn::CellKind::LSTM;
  spec.order = models::parse_sequence_order(m.sequence);
  spec.hidden = m.hidden;
  spec.layers = m.rnn_layers;
  spec.height = shape[shape.size() - 2];
  spec.width = shape.back();
  spec.seed = m.seed;
  spec.classes = m.classes;
  spec.solver = solver;
  spec.coarse_input = m.coarse_input == "mean" ? nn::CoarseInput::Mean : nn::CoarseInput::Start;
  spec.implicit_step = m.implicit_step;
  spec.implicit_iterations = m.implicit_iterations;
  spec.serial = serial;
  return spec;
}

}  // namespace weft::train
