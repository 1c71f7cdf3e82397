#pragma once
// `weft train`: trains the residual image classifier (weft::models::image_resnet) on an
// MNIST-format data set (default Fashion-MNIST) layer-parallel over the ranks, forward and
// backward by MGRIT; `--serial` trains the same network with plain LibTorch as the reference.
// `weft eval`: evaluates a checkpoint on the test set at any rank count.
#include <memory>

#include "cli_support.hpp"
#include "training.hpp"

namespace weft::cli {

/// The network, data, optimizer and MGRIT flags of `weft train` (shared with `weft predict`).
struct TrainFlags;
std::shared_ptr<TrainFlags> add_network_flags(CLI::App& command);
/// Flags `command` did not register keep their defaults.
TrainConfig resolve_network_flags(const TrainFlags& flags);

Subcommand add_train_command(CLI::App& weft);
Subcommand add_eval_command(CLI::App& weft);

}  // namespace weft::cli
