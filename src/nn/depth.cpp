// The name and weight map of a depth refinement (depth.hpp).
#include "weft/nn/depth.hpp"

#include <string>
#include <utility>

#include "weft/util/error.hpp"

namespace weft::nn {

DepthInterpolation depth_interpolation_from(const std::string& name, const std::string& owner) {
  if (name == "constant") return DepthInterpolation::Constant;
  if (name == "linear") return DepthInterpolation::Linear;
  throw InvalidOption(owner, "depth_interpolation",
                      "'" + name + "' is invalid; accepted: constant, linear");
}

std::string to_string(DepthInterpolation interpolation) {
  return interpolation == DepthInterpolation::Linear ? "linear" : "constant";
}

DepthRestriction depth_restriction_from(const std::string& name, const std::string& owner) {
  if (name == "injection") return DepthRestriction::Injection;
  if (name == "averaging") return DepthRestriction::Averaging;
  throw InvalidOption(owner, "restriction",
                      "'" + name + "' is invalid; accepted: injection, averaging");
}

std::string to_string(DepthRestriction restriction) {
  return restriction == DepthRestriction::Averaging ? "averaging" : "injection";
}

void DepthRefinement::validate() const {
  if (factor < 2)
    throw InvalidOption("DepthRefinement", "factor",
                        std::to_string(factor) + " is invalid; accepted: >= 2");
  if (coarse_steps.empty())
    throw InvalidOption("DepthRefinement", "coarse_steps", "is empty; accepted: >= 1 stage");
  for (std::int64_t n : coarse_steps)
    if (n < 1)
      throw InvalidOption("DepthRefinement", "coarse_steps",
                          "a stage has " + std::to_string(n) + " steps; accepted: >= 1");
}

std::vector<std::int64_t> DepthRefinement::fine_steps() const {
  std::vector<std::int64_t> fine;
  for (std::int64_t n : coarse_steps) fine.push_back(n * factor);
  return fine;
}

std::vector<std::pair<std::int64_t, double>> DepthRefinement::layer_sources(
    std::int64_t fine_layer) const {
  std::int64_t fine_first = 0, coarse_first = 0;  // the stage's first chain layer
  for (std::size_t s = 0; s < coarse_steps.size(); ++s) {
    const std::int64_t coarse = coarse_steps[s];
    const std::int64_t fine = coarse * factor;
    if (fine_layer < fine_first + fine) {
      const std::int64_t j = fine_layer - fine_first, i = j / factor;
      const double w = static_cast<double>(j - i * factor) / static_cast<double>(factor);
      if (interpolation == DepthInterpolation::Constant || w == 0 || i + 1 == coarse)
        return {{coarse_first + i, 1.0}};
      return {{coarse_first + i, 1.0 - w}, {coarse_first + i + 1, w}};
    }
    if (fine_layer == fine_first + fine && s + 1 < coarse_steps.size())
      return {{coarse_first + coarse, 1.0}};  // the transition to the next stage
    fine_first += fine + 1;
    coarse_first += coarse + 1;
  }
  throw InvalidOption("DepthRefinement", "layer",
                      std::to_string(fine_layer) + " is beyond the fine network's chain");
}

std::vector<std::pair<std::int64_t, double>> DepthRefinement::restriction_sources(
    std::int64_t coarse_layer, DepthRestriction restriction) const {
  std::int64_t fine_first = 0, coarse_first = 0;  // the stage's first chain layer
  for (std::size_t s = 0; s < coarse_steps.size(); ++s) {
    const std::int64_t coarse = coarse_steps[s];
    if (coarse_layer < coarse_first + coarse) {
      const std::int64_t first = fine_first + (coarse_layer - coarse_first) * factor;
      if (restriction == DepthRestriction::Injection) return {{first, 1.0}};
      std::vector<std::pair<std::int64_t, double>> spanned;
      for (std::int64_t k = 0; k < factor; ++k)
        spanned.emplace_back(first + k, 1.0 / static_cast<double>(factor));
      return spanned;
    }
    if (coarse_layer == coarse_first + coarse && s + 1 < coarse_steps.size())
      return {{fine_first + coarse * factor, 1.0}};  // the transition to the next stage
    fine_first += coarse * factor + 1;
    coarse_first += coarse + 1;
  }
  throw InvalidOption("DepthRefinement", "layer",
                      std::to_string(coarse_layer) + " is beyond the coarse network's chain");
}

namespace {
/// Keys "step_<n>.x" and "transition_<n>.x" renamed by the chain layers `layers` gives for n;
/// every other key from itself.
KeySources chain_key_sources(
    std::function<std::vector<std::pair<std::int64_t, double>>(std::int64_t)> layers) {
  return [layers = std::move(layers)](const std::string& key) {
    std::vector<std::pair<std::string, double>> sources;
    for (const std::string prefix : {"step_", "transition_"}) {
      if (key.compare(0, prefix.size(), prefix) != 0) continue;
      const std::size_t dot = key.find('.', prefix.size());
      const std::string index = key.substr(prefix.size(), dot - prefix.size());
      if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos) continue;
      const std::string rest = dot == std::string::npos ? std::string() : key.substr(dot);
      for (const auto& [layer, w] : layers(std::stoll(index)))
        sources.emplace_back(prefix + std::to_string(layer) + rest, w);
      return sources;
    }
    sources.emplace_back(key, 1.0);
    return sources;
  };
}
}  // namespace

KeySources DepthRefinement::key_sources() const {
  validate();
  return chain_key_sources(
      [refinement = *this](std::int64_t layer) { return refinement.layer_sources(layer); });
}

KeySources DepthRefinement::restriction_key_sources(DepthRestriction restriction) const {
  validate();
  return chain_key_sources([refinement = *this, restriction](std::int64_t layer) {
    return refinement.restriction_sources(layer, restriction);
  });
}

}  // namespace weft::nn
