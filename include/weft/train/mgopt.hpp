#pragma once
// MG/Opt over depth (Nash, "A multigrid approach to discretized optimization problems", 2000;
// TorchBraid's mgopt): each batch is one V-cycle over a hierarchy of networks, level 0 the
// model, level l with every stage's steps divided by r^l (same T, h·r^l). At level l, with
// objective F_l(θ) = f_l(θ) + ⟨v_l, θ⟩ (v_0 = 0):
//   1. `pre` optimizer steps on F_l (`coarse` steps instead on the coarsest level, then return);
//   2. the gradient g = ∇F_l(θ_l); θ_{l+1} = R θ_l (restriction: injection or averaging of the
//      steps, nn/depth.hpp), the coarse optimizer's state restricted likewise;
//   3. v_{l+1} = Pᵀ g − ∇f_{l+1}(θ_{l+1}) (the first-order coherence correction: the coarse
//      objective's gradient at θ_{l+1} is Pᵀ g, the gradient of F_l along prolonged directions);
//   4. a V-cycle on level l+1 from θ_{l+1}, giving θ⁺;
//   5. e = P(θ⁺ − θ_{l+1}) (prolongation: piecewise constant or linear in time) and a
//      backtracking line search: θ_l + α e for α = 1, 1/2, … (`line_search` halvings) until
//      F_l decreases; when none does, the correction is rejected (α = 0);
//   6. `post` optimizer steps on F_l.
// One level is plain training: one optimizer step per batch. No LibTorch.
#include <cstdint>
#include <string>

#include "weft/nn/depth.hpp"
#include "weft/train/model_config.hpp"

namespace weft::train {

struct MGOpt {
  int levels = 0;       ///< 0: off; 1: plain training; >= 2: V-cycles over that many depths
  int factor = 2;       ///< r: each coarser level has 1/r of the steps of every stage
  int pre = 1;          ///< optimizer steps before the coarse correction
  int post = 1;         ///< optimizer steps after it
  int coarse = 2;       ///< optimizer steps on the coarsest level
  int line_search = 4;  ///< the most halvings of the correction's step; 0: α = 1 or rejected
  nn::DepthRestriction restriction = nn::DepthRestriction::Injection;
  nn::DepthInterpolation interpolation = nn::DepthInterpolation::Constant;

  bool active() const { return levels > 0; }
};

/// The network of level `level` (0 = `full`): every stage's steps divided by r^level.
ModelConfig mgopt_level_model(const ModelConfig& full, const MGOpt& mgopt, int level);

/// weft::InvalidOption("Trainer", "mgopt_levels" | "mgopt_factor" | "mgopt_relax" |
/// "mgopt_line_search", ...): a kind without depth (recurrent, custom), r^(levels−1) not
/// dividing a stage's steps (a level without steps), a coarsest network with fewer chain layers
/// than `layer_ranks`, negative step counts, no steps on the coarsest level.
void validate_mgopt(const MGOpt& mgopt, const ModelConfig& full, int layer_ranks);

}  // namespace weft::train
