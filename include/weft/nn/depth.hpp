#pragma once
// Refining a network's depth (nested iteration over depth): a network of N_s residual steps per
// stage becomes one of r·N_s steps per stage with the same T_s, so h_s shrinks by r. The fine
// network's parameters come from the coarse one's by name (checkpoint keys "step_<n>.*",
// "transition_<n>.*", "open.*", "close.*"), so the refinement works between any two layouts of
// ranks: nn::load_checkpoint(dir, comm, module, optimizer, refinement.key_sources()). No LibTorch.
//
// Fine step j of a stage takes the parameters of the coarse step at the same time t = j·h_f:
//   constant  θ_f[j] = θ_c[⌊j/r⌋]                                 (piecewise constant in time)
//   linear    θ_f[j] = (1−w)·θ_c[i] + w·θ_c[i+1], i = ⌊j/r⌋, w = j/r − i  (the last coarse
//             step's r fine steps take θ_c[N−1]: nothing lies beyond it)
// Fine step r·i takes θ_c[i] exactly either way, so injection (what MGRIT's coarse levels and
// MG/Opt's restriction use) gives the coarse network back. Transitions, open and close layers
// are copied; buffers (batch norm's running statistics) and optimizer state (momenta, Adam's
// moments) follow the same weights.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace weft::nn {

enum class DepthInterpolation { Constant, Linear };
/// How a coarse step's parameters come from the fine network (MG/Opt's restriction):
///   injection  θ_c[i] = θ_f[r·i]                       (the fine step at the same time)
///   averaging  θ_c[i] = (θ_f[r·i] + … + θ_f[r·i+r−1]) / r  (the fine steps it spans)
enum class DepthRestriction { Injection, Averaging };

/// "constant" | "linear"; weft::InvalidOption(owner, "depth_interpolation", ...) otherwise.
DepthInterpolation depth_interpolation_from(const std::string& name, const std::string& owner);
std::string to_string(DepthInterpolation interpolation);
/// "injection" | "averaging"; weft::InvalidOption(owner, "restriction", ...) otherwise.
DepthRestriction depth_restriction_from(const std::string& name, const std::string& owner);
std::string to_string(DepthRestriction restriction);

/// For a key of the network being loaded, the stored keys and the weights of their sum.
using KeySources =
    std::function<std::vector<std::pair<std::string, double>>(const std::string& key)>;

struct DepthRefinement {
  std::vector<std::int64_t> coarse_steps;  ///< residual steps per stage of the coarse network
  std::int64_t factor = 2;                 ///< r >= 2
  DepthInterpolation interpolation = DepthInterpolation::Constant;

  /// Residual steps per stage of the fine network (r·N_s).
  std::vector<std::int64_t> fine_steps() const;
  /// For fine chain layer m (transitions included), the coarse chain layers and weights.
  std::vector<std::pair<std::int64_t, double>> layer_sources(std::int64_t fine_layer) const;
  /// The names as checkpoints key them: step_<m>.x from step_<n>.x, transition_<m>.x from
  /// transition_<n>.x, every other key from itself. weft::InvalidOption when the refinement is
  /// invalid (factor < 2, a stage without steps).
  KeySources key_sources() const;
  /// The other way: for coarse chain layer c, the fine chain layers and weights (transitions
  /// copied).
  std::vector<std::pair<std::int64_t, double>> restriction_sources(
      std::int64_t coarse_layer, DepthRestriction restriction) const;
  /// Names of the coarse network from names of the fine one, as key_sources().
  KeySources restriction_key_sources(DepthRestriction restriction) const;
  void validate() const;
};

}  // namespace weft::nn
