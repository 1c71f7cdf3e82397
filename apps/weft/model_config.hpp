#pragma once
// The architecture of `weft train` / `weft eval` as checkpoints store it (JSON), without
// LibTorch: written with every checkpoint, read back by --resume and weft eval.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "training.hpp"
#include "weft/data/idx.hpp"

namespace weft::cli {

nlohmann::json to_json(const ModelConfig& m);
/// Accepts checkpoints written before stages existed (no "kind": resnet).
ModelConfig model_from_json(const nlohmann::json& j);
/// The metadata of a checkpoint, with every field the CLI relies on checked up front
/// (weft::BadData naming the folder otherwise).
nlohmann::json checkpoint_metadata(const std::string& dir);
/// Rows and columns of the images the stored model takes.
std::pair<std::int64_t, std::int64_t> image_size(const nlohmann::json& meta);
/// Depth of the volumes the stored model takes; 1 for images (checkpoints of 2-D models).
std::int64_t image_depth(const nlohmann::json& meta);
/// The "image" entry of checkpoint metadata for `set`: rows, cols, and depth for volumes.
nlohmann::json image_json(const data::ImageSet& set);
/// One line describing the network (the run's header).
std::string describe(const ModelConfig& m, std::int64_t rows, std::int64_t cols);

}  // namespace weft::cli
