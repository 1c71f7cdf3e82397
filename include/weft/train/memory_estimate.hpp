#pragma once
// What a training run needs in memory at its busiest rank, counted from the sizes alone (no
// LibTorch, nothing allocated), so that a front end can refuse a run that cannot fit before
// any work: `weft train` compares it with the memory the machine has per rank.
#include <cstdint>
#include <vector>

#include "weft/train/options.hpp"

namespace weft::train {

struct MemoryEstimate {
  double parameters = 0;  ///< bytes: the busiest rank's parameters, gradients, optimizer moments
  double states = 0;      ///< bytes: MGRIT states and saved activations of a training batch and
                          ///< an evaluation batch on its layers
  double data = 0;        ///< bytes: both data sets as float tensors
  std::int64_t eval_batch = 0;  ///< examples per evaluation batch counted in `states`
  double total() const { return parameters + states + data; }
};

/// The examples per evaluation batch of a Trainer with `options`: eval_batch, or
/// max(batch, 500) when 0 (the test set's size bounds it further).
std::int64_t evaluation_batch(const TrainerOptions& options);

/// A lower bound for a run of `options` (model, batch, eval_batch, optimizer, serial) at `ranks`
/// layer-parallel ranks on data sets of `train_examples` and `test_examples` examples of
/// `example_shape` ([channels, (depth,) rows, cols]) with the model's classes (`classes` when
/// > 0 overrides ModelConfig::classes). The model's parameters come from its registry entry
/// (ModelKind::parameters): its chain's share for the rank with the most layers, with the open
/// and close layers. States are counted per layer at its own size (a staged network's stages
/// shrink by its transitions) on the layers a rank holds at least: the first floor(N / P) with
/// equal numbers, the average share (or the largest layer) with `balance_cost`; a serial
/// evaluation batch at its input and output only. Refusing a run on it is safe: the run would
/// need at least this much.
MemoryEstimate estimate_memory(const TrainerOptions& options,
                               const std::vector<std::int64_t>& example_shape,
                               std::int64_t train_examples, std::int64_t test_examples, int ranks,
                               std::int64_t classes = 0);

}  // namespace weft::train
