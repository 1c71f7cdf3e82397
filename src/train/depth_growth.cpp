// The depth schedule of nested iteration (depth_growth.hpp).
#include "weft/train/depth_growth.hpp"

#include <fmt/format.h>

#include <numeric>

#include "weft/train/model_registry.hpp"
#include "weft/util/error.hpp"

namespace weft::train {

namespace {
[[noreturn]] void invalid(const std::string& field, const std::string& detail) {
  throw InvalidOption("Trainer", field, detail);
}

std::int64_t power(std::int64_t base, int exponent) {
  std::int64_t p = 1;
  for (int i = 0; i < exponent; ++i) p *= base;
  return p;
}

ModelConfig scaled(ModelConfig m, std::int64_t multiply, std::int64_t divide) {
  if (is_staged(m))
    for (std::int64_t& n : m.stage_steps) n = n * multiply / divide;
  else
    m.steps = m.steps * multiply / divide;
  return m;
}
}  // namespace

std::vector<int> growth_epochs(const DepthGrowth& growth) {
  if (!growth.epochs.empty()) return growth.epochs;
  return std::vector<int>(static_cast<std::size_t>(std::max(0, growth.refinements)), 1);
}

int growth_level(const DepthGrowth& growth, int epoch) {
  int level = 0, last = 0;
  for (int e : growth_epochs(growth)) {
    last += e;
    if (epoch <= last) return level;
    ++level;
  }
  return level;
}

std::vector<std::int64_t> residual_steps(const ModelConfig& m) {
  const ModelKind& kind = model_kind(m);
  if (kind.staged()) return m.stage_steps;
  if (kind.family == ModelKind::Family::Chain) return {m.steps};
  return {};
}

std::int64_t step_layers(const ModelConfig& m) {
  const auto steps = residual_steps(m);
  return std::accumulate(steps.begin(), steps.end(), std::int64_t{0});
}

ModelConfig model_at_level(const ModelConfig& full, const DepthGrowth& growth, int level) {
  return scaled(full, 1, power(growth.factor, growth.refinements - level));
}

ModelConfig full_depth_model(const ModelConfig& at_level, const DepthGrowth& growth, int level) {
  return scaled(at_level, power(growth.factor, growth.refinements - level), 1);
}

void validate_growth(const DepthGrowth& g, const ModelConfig& full, int epochs, int layer_ranks,
                     bool checkpointed) {
  if (g.refinements < 0)
    invalid("grow_refinements", std::to_string(g.refinements) + " is invalid; accepted: >= 0");
  if (!g.active()) {
    if (!g.epochs.empty())
      invalid("grow_epochs", "is given without refinements; accepted: with grow_refinements >= 1");
    return;
  }
  if (g.factor < 2 || g.factor > 64)
    invalid("grow_factor", std::to_string(g.factor) + " is invalid; accepted: 2 to 64");
  if (g.refinements > 16)
    invalid("grow_refinements", std::to_string(g.refinements) + " is invalid; accepted: 0 to 16");
  const std::vector<std::int64_t> steps = residual_steps(full);
  if (steps.empty())
    invalid("grow_refinements",
            fmt::format("the {} model has no depth to grow{}; accepted: with {}", full.kind,
                        is_recurrent(full) ? " (its steps are the sequence)" : "",
                        "resnet, stages, conv3d"));
  const std::int64_t divisor = power(g.factor, g.refinements);
  for (std::size_t s = 0; s < steps.size(); ++s)
    if (steps[s] % divisor != 0)
      invalid("grow_factor",
              fmt::format("{}^{} = {} does not divide the {} steps of {}; accepted: a factor R "
                          "and refinements K with R^K dividing every stage's steps",
                          g.factor, g.refinements, divisor, steps[s],
                          steps.size() > 1 ? fmt::format("stage {}", s + 1) : "the network"));
  const std::vector<int> at = growth_epochs(g);
  if (static_cast<int>(at.size()) != g.refinements)
    invalid("grow_epochs", fmt::format("has {} entries for {} refinements; accepted: one per "
                                       "shallower depth",
                                       at.size(), g.refinements));
  int shallow = 0;
  for (int e : at) {
    if (e < 1) invalid("grow_epochs", fmt::format("has {}; accepted: entries >= 1", e));
    shallow += e;
  }
  if (shallow >= epochs && !checkpointed)
    invalid("grow_epochs",
            fmt::format("trains {} epochs at the shallower depths, which leaves none of the {} "
                        "epochs to the full depth; accepted: a sum below the epochs (or a "
                        "checkpoint to resume from with more epochs)",
                        shallow, epochs));
  const ModelConfig shallowest = model_at_level(full, g, 0);
  const std::int64_t layers = model_kind(shallowest).chain_layers(shallowest);
  if (layers < layer_ranks)
    invalid("grow_refinements",
            fmt::format("{} refinements by {} leave the shallowest network {} chain layers, fewer "
                        "than the {} layer-parallel ranks; accepted: fewer refinements or ranks",
                        g.refinements, g.factor, layers, layer_ranks));
}

}  // namespace weft::train
