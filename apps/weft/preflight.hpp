#pragma once
// Checks of `weft train` that run before any work (preflight.cpp).
#include <string>

#include "training.hpp"
#include "weft/data/idx.hpp"

namespace weft::cli {

/// Throws weft::InvalidOption naming --channels, --steps, --batch, the rank count and the
/// estimate when a lower bound of the memory the busiest rank needs (parameters with gradients
/// and optimizer moments, MGRIT states and saved activations of a training and an evaluation
/// batch, the data as floats) exceeds this machine's available memory shared by its ranks.
void check_memory(const TrainConfig& c, const data::ImageSet& train, const data::ImageSet& test,
                  int ranks);

/// Throws weft::InvalidOption (exit 2) naming --model and --data when the model does not take
/// the data's kind: conv3d takes volumes (spatial_dims 3), resnet and stages take images.
void check_model_data(const ModelConfig& model, int spatial_dims, std::int64_t channels,
                      const std::string& data_dir);

/// With --resume: throws weft::InvalidOption for a flag in `c.given` whose value differs from
/// the checkpoint's (`stored`, `optimizer`), and for --epochs not beyond the checkpoint's `epoch`.
void check_resume(const TrainConfig& c, const ModelConfig& stored, const std::string& optimizer,
                  int epoch);
/// With --resume and --grow-depth given: throws weft::InvalidOption when it differs from the
/// checkpoint's depth growth (`stored`; none when the checkpoint has none).
void check_resume_growth(const TrainConfig& c, const train::DepthGrowth& stored);

}  // namespace weft::cli
