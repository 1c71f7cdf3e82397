#pragma once
// The JSON forms of the Trainer's records: the model in checkpoint metadata, the example
// shape, the epoch metrics. Private to weft_train (nlohmann::json stays out of public headers).
#include <nlohmann/json.hpp>
#include <string>

#include "weft/train/checkpoint_info.hpp"
#include "weft/train/metrics.hpp"
#include "weft/train/model_config.hpp"

namespace weft::train {

nlohmann::json model_json(const ModelConfig& m);
/// Accepts checkpoints written before stages existed (no "kind": resnet).
ModelConfig model_from_json(const nlohmann::json& j);
/// rows, cols, and depth for volumes.
nlohmann::json example_json(const ExampleShape& e);
/// {"mean": m, "std": s}, or per channel {"mean": [...], "std": [...]}.
nlohmann::json normalization_json(const Normalization& n);
/// Throws json exceptions for missing fields, std::domain_error for invalid values.
Normalization normalization_from_json(const nlohmann::json& j);
nlohmann::json metrics_json(const EpochMetrics& m);

/// The metadata a Trainer writes with each checkpoint: what `info` says (read back by
/// read_checkpoint_info) and the epoch's metrics.
std::string checkpoint_metadata(const CheckpointInfo& info, const EpochMetrics& metrics);
/// Throws json exceptions for missing fields, std::domain_error for invalid values.
MGOpt mgopt_from_json(const nlohmann::json& j);
IterationController::State iteration_state_from_json(const nlohmann::json& j);

}  // namespace weft::train
