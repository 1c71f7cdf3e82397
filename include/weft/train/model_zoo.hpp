#pragma once
// The networks a Trainer builds from a ModelConfig, for other users of the same models
// (`weft predict` measures them; benchmarks time them).
#include <cstdint>
#include <vector>

#include "weft/models/sequence_classifier.hpp"
#include "weft/nn/network.hpp"
#include "weft/train/model_config.hpp"

namespace weft::train {

/// The layer chain of a resnet, stages or conv3d model for examples of `example_shape`
/// ([channels, rows, cols], or [channels, depth, rows, cols] for conv3d). Throws
/// weft::InvalidOption("ModelConfig", "kind", ...) for gru/lstm, which have no chain.
nn::Network build_network(const ModelConfig& m, const std::vector<std::int64_t>& example_shape);

/// The recurrent classifier of a gru or lstm model for images of `example_shape`.
models::SequenceClassifierSpec sequence_classifier_spec(
    const ModelConfig& m, const std::vector<std::int64_t>& example_shape,
    const nn::LayerParallelOptions& solver, bool serial);

}  // namespace weft::train
