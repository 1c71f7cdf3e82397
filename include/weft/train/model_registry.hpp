#pragma once
// Every kind of model a Trainer builds, listed once (model_registry.cpp): its name, family,
// the examples it takes, the ModelConfig fields that apply, and what front ends ask of it
// without building it (chain length, state width, a description). No LibTorch: the builders
// are in model_zoo.cpp. Adding a model: docs/architecture.md, "Add a model".
#include <cstdint>
#include <string>
#include <vector>

#include "weft/train/model_config.hpp"

namespace weft::train {

/// Trainable parameters of a model, by part (open layer, chain layers together, close layer or
/// head); a recurrent model's cell counts as its chain.
struct ParameterCount {
  std::int64_t open = 0, chain = 0, close = 0;
  std::int64_t total() const { return open + chain + close; }
};

struct ModelKind {
  enum class Family {
    Chain,      ///< one stage of residual steps between open and close layers
    Staged,     ///< stages of residual steps joined by transitions (batch norm, dropout)
    Recurrent,  ///< a recurrent cell over the image as a sequence, replicated on every rank
    Custom,     ///< a network given to the Trainer itself
  };
  std::string name;
  std::string summary;  ///< one line for help texts
  Family family = Family::Chain;
  int spatial_dims = 2;    ///< the examples it takes: 2 images, 3 volumes (0: any)
  bool selectable = true;  ///< front ends offer it by name (custom is not)
  /// The ModelConfig fields that apply (front ends refuse the others' flags).
  std::vector<std::string> fields;
  /// N chain layers (transitions included); -1 where there is no chain.
  std::int64_t (*chain_layers)(const ModelConfig&) = nullptr;
  /// Channels of the full-resolution state (the memory preflight's lower bound); 0 if none.
  std::int64_t (*state_channels)(const ModelConfig&) = nullptr;
  /// The training defaults front ends offer for the kind (options given win): MGRIT levels,
  /// coarsening factor and iterations of both solves, epochs, the learning rate and schedule,
  /// and whether each solve skips the relaxation of its first down-cycle. A forward that
  /// skips (so chosen, or in a network with a stage of more than `short_stage_steps` steps,
  /// where the recipe's forward skips; 0: no limit) takes `forward_iterations_skipping`.
  struct Recipe {
    int levels = 1, cfactor = 4, forward_iterations = 2, backward_iterations = 1, epochs = 2;
    double lr = 1e-3;
    std::string lr_schedule = "constant";
    bool forward_skip = true, backward_skip = true;
    int short_stage_steps = 0, forward_iterations_skipping = 2;
  };
  Recipe recipe;
  std::string cell;  ///< recurrent kinds: the cell, "gru" or "lstm"
  /// Its trainable parameters for examples of `example_shape` ([channels, (depth,) rows, cols])
  /// and `classes` classes, counted from the configuration (nothing is built).
  ParameterCount (*parameters)(const ModelConfig&, const std::vector<std::int64_t>& example_shape,
                               std::int64_t classes) = nullptr;

  bool recurrent() const { return family == Family::Recurrent; }
  bool staged() const { return family == Family::Staged; }
  /// Convolutional states (spatial coarsening applies).
  bool convolutional() const { return family == Family::Chain || family == Family::Staged; }
  bool has_field(const std::string& field) const;
};

/// Every kind, in the order front ends list them.
const std::vector<ModelKind>& model_kinds();
/// The kind named `name`; weft::InvalidOption("ModelConfig", "kind", ...) listing the accepted.
const ModelKind& model_kind(const std::string& name);
inline const ModelKind& model_kind(const ModelConfig& m) {
  return model_kind(m.kind);
}
/// The recipe of `m`'s kind for that network: where a stage has more than the recipe's
/// `short_stage_steps` steps, a forward that skips.
ModelKind::Recipe recipe_for(const ModelConfig& m);
/// The selectable kinds' names; with spatial_dims 2 or 3 only those taking such examples.
std::vector<std::string> model_kind_names(int spatial_dims = 0);
/// The selectable kinds with `field`.
std::vector<std::string> model_kinds_with(const std::string& field);

}  // namespace weft::train
