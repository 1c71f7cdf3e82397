#pragma once
// `weft train`: trains the residual image classifier (weft::models::image_resnet) on an
// MNIST-format data set (default Fashion-MNIST) layer-parallel over the ranks, forward and
// backward by MGRIT; `--serial` trains the same network with plain LibTorch as the reference.
// `weft eval`: evaluates a checkpoint on the test set at any rank count.
#include "cli_support.hpp"

namespace weft::cli {

Subcommand add_train_command(CLI::App& weft);
Subcommand add_eval_command(CLI::App& weft);

}  // namespace weft::cli
