// The hierarchy of MG/Opt over depth: each level's network and what is refused (mgopt.hpp).
#include <fmt/format.h>

#include "weft/train/depth_growth.hpp"
#include "weft/train/mgopt.hpp"
#include "weft/train/model_registry.hpp"
#include "weft/util/error.hpp"

namespace weft::train {

namespace {
[[noreturn]] void invalid(const std::string& field, const std::string& detail) {
  throw InvalidOption("Trainer", field, detail);
}

/// The same hierarchy as a depth growth: level l of MG/Opt is growth level levels − 1 − l.
DepthGrowth as_growth(const MGOpt& m) {
  DepthGrowth g;
  g.factor = m.factor;
  g.refinements = m.levels - 1;
  return g;
}
}  // namespace

ModelConfig mgopt_level_model(const ModelConfig& full, const MGOpt& mgopt, int level) {
  return model_at_level(full, as_growth(mgopt), mgopt.levels - 1 - level);
}

void validate_mgopt(const MGOpt& m, const ModelConfig& full, int layer_ranks) {
  if (m.levels < 0 || m.levels > 16)
    invalid("mgopt_levels", std::to_string(m.levels) + " is invalid; accepted: 0 to 16");
  if (!m.active()) return;
  if (m.factor < 2 || m.factor > 64)
    invalid("mgopt_factor", std::to_string(m.factor) + " is invalid; accepted: 2 to 64");
  if (m.pre < 0 || m.post < 0 || m.coarse < 1)
    invalid("mgopt_relax", fmt::format("{},{},{} is invalid; accepted: pre >= 0, post >= 0, "
                                       "coarse >= 1 optimizer steps",
                                       m.pre, m.post, m.coarse));
  if (m.line_search < 0 || m.line_search > 30)
    invalid("mgopt_line_search",
            std::to_string(m.line_search) + " is invalid; accepted: 0 to 30 halvings");
  const std::vector<std::int64_t> steps = residual_steps(full);
  if (steps.empty())
    invalid("mgopt_levels",
            fmt::format("the {} model has no depth hierarchy{}; accepted: with {}", full.kind,
                        is_recurrent(full) ? " (its steps are the sequence)" : "",
                        "resnet, stages, conv3d"));
  std::int64_t divisor = 1;
  for (int l = 1; l < m.levels; ++l) divisor *= m.factor;
  for (std::size_t s = 0; s < steps.size(); ++s)
    if (steps[s] % divisor != 0)
      invalid("mgopt_levels",
              fmt::format("level {} would have {}/{} steps in {}, not a whole number (a level "
                          "without steps); accepted: levels L and factor R with R^(L-1) "
                          "dividing every stage's steps",
                          m.levels - 1, steps[s], divisor,
                          steps.size() > 1 ? fmt::format("stage {}", s + 1) : "the network"));
  const ModelConfig coarsest = mgopt_level_model(full, m, m.levels - 1);
  const std::int64_t layers = model_kind(coarsest).chain_layers(coarsest);
  if (layers < layer_ranks)
    invalid("mgopt_levels",
            fmt::format("{} levels by factor {} leave the coarsest network {} chain layers, fewer "
                        "than the {} layer-parallel ranks; accepted: fewer levels or ranks",
                        m.levels, m.factor, layers, layer_ranks));
}

}  // namespace weft::train
