#pragma once
// The architecture a Trainer builds, as checkpoints store it. No LibTorch: front ends fill it
// from their own flags (the CLI from --model, --channels, ...).
#include <cstdint>
#include <string>
#include <vector>

namespace weft::train {

/// The network architecture; stored in checkpoints, so a resumed run and an evaluation rebuild
/// it. `kind` selects the model; the other fields apply to the kinds named beside them.
struct ModelConfig {
  /// resnet | stages | conv3d | gru | lstm, or custom: a network given to the Trainer itself
  /// (only t_final and seed are stored for it).
  std::string kind = "resnet";
  // resnet
  int channels = 4;
  std::int64_t steps = 8;
  std::string open = "conv";  ///< conv | copy
  // stages | conv3d
  std::vector<std::int64_t> stage_channels{8, 16, 32};
  std::vector<std::int64_t> stage_steps{2, 2, 2};
  bool batchnorm = true;
  double dropout = 0.0;
  /// stages: the open layer, conv (conv3x3) or imagenet (conv7x7 stride 2 + max pool stride 2:
  /// the states are 4x smaller per side than the images; models::StagesNetSpec::imagenet_stem).
  std::string stem = "conv";
  // gru | lstm (weft::models::SequenceClassifier)
  std::int64_t hidden = 64;
  std::int64_t rnn_layers = 1;
  std::string sequence = "rows";       ///< rows | pixels
  std::string coarse_input = "start";  ///< start | mean: the input of coarse MGRIT steps
  double implicit_step = 0.0;          ///< 0: torch's cell; > 0: the implicit cell's Δt
  int implicit_iterations = 3;         ///< fixed-point iterations of the implicit cell
  // all
  int classes = 10;      ///< logits of the close layer: the data set's classes
  double t_final = 1.0;  ///< T (per stage for stages)
  std::uint64_t seed = 1;
};

/// gru | lstm: a recurrent classifier, replicated on every rank and parallel over the sequence.
bool is_recurrent(const ModelConfig& m);
/// stages | conv3d: the multi-stage convolutional network (batch norm, dropout, transitions).
bool is_staged(const ModelConfig& m);

/// How much smaller than the input the first state is per side (4 with the imagenet stem).
std::int64_t state_downsampling(const ModelConfig& m);

/// The `--model stages` preset for 64x64 RGB images (Tiny-ImageNet): the stage widths of
/// TorchBraid's Tiny-ImageNet network (64, 128, 256, 512 channels) and its open layer (the
/// imagenet stem), 4 stages of `steps` residual steps each (its driver puts --steps - 1 per
/// stage; its default --steps 4 gives 3).
ModelConfig tiny_imagenet_stages(std::int64_t steps = 3);

/// custom: the network was given to the Trainer, not built from this configuration.
bool is_custom(const ModelConfig& m);

/// One line describing the network for images of rows x cols (a run's header).
std::string describe(const ModelConfig& m, std::int64_t rows, std::int64_t cols);

}  // namespace weft::train
