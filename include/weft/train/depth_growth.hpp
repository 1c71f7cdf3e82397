#pragma once
// Nested iteration over depth: train a shallow network first and refine its depth by a factor r,
// K times, to the depth the ModelConfig names (Cyr, Günther, Schroder, "Multilevel
// initialization for layer-parallel deep neural network training"). Level k (0 ≤ k ≤ K) has
// N_s / r^(K−k) residual steps in every stage, with the same T_s, so its h is r^(K−k) times the
// full network's; refinement interpolates the step parameters in time (nn/depth.hpp). No
// LibTorch.
#include <cstdint>
#include <string>
#include <vector>

#include "weft/nn/depth.hpp"
#include "weft/train/model_config.hpp"

namespace weft::train {

struct DepthGrowth {
  int factor = 2;       ///< r: each refinement multiplies the steps of every stage by r
  int refinements = 0;  ///< K; 0: no growth, the network trains at its depth from the start
  /// Epochs at each of the K shallower depths, shallowest first (empty: one each); the full
  /// depth trains the remaining epochs.
  std::vector<int> epochs;
  nn::DepthInterpolation interpolation = nn::DepthInterpolation::Constant;

  bool active() const { return refinements > 0; }
};

/// The level epoch `epoch` (1-based) trains at: 0 the shallowest, K the full depth.
int growth_level(const DepthGrowth& growth, int epoch);
/// The epochs at each shallower depth (growth.epochs, or one each).
std::vector<int> growth_epochs(const DepthGrowth& growth);

/// Residual steps per stage (one entry for a one-stage model); empty for kinds without depth.
std::vector<std::int64_t> residual_steps(const ModelConfig& m);
/// Their sum: the `depth` of the metrics.
std::int64_t step_layers(const ModelConfig& m);
/// `full` at level `level`: every stage's steps divided by r^(K − level).
ModelConfig model_at_level(const ModelConfig& full, const DepthGrowth& growth, int level);
/// The inverse: the full-depth model of `at_level` (a checkpoint's model at its level).
ModelConfig full_depth_model(const ModelConfig& at_level, const DepthGrowth& growth, int level);

/// weft::InvalidOption("Trainer", "grow_factor" | "grow_refinements" | "grow_epochs", ...):
/// a kind without depth (recurrent, custom), r^K not dividing a stage's steps, a schedule that
/// leaves the full depth none of the `epochs` (unless `checkpointed`: the run may then stop at a
/// shallower depth and be resumed with more epochs), a shallowest network with fewer chain
/// layers than `layer_ranks`.
void validate_growth(const DepthGrowth& growth, const ModelConfig& full, int epochs,
                     int layer_ranks, bool checkpointed = false);

}  // namespace weft::train
