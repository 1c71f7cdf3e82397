// The memory a run needs at its busiest rank (weft/train/memory_estimate.hpp).
#include "weft/train/memory_estimate.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "weft/train/model_registry.hpp"

namespace weft::train {

MemoryEstimate estimate_memory(const TrainerOptions& o, const std::vector<std::int64_t>& shape,
                               std::int64_t train_examples, std::int64_t test_examples, int ranks,
                               std::int64_t classes) {
  const ModelKind& kind = model_kind(o.model);
  const int parts = o.serial ? 1 : std::max(1, ranks);
  const std::int64_t chain = kind.chain_layers(o.model);
  // The rank with the most layers holds at least ceil(N / P) of them (replicated models: all).
  const double layers =
      chain > 0 ? std::ceil(static_cast<double>(chain) / parts) : static_cast<double>(chain < 0);
  const ParameterCount p = kind.parameters(o.model, shape, classes > 0 ? classes : o.model.classes);
  const double share = chain > 0
                           ? static_cast<double>(p.chain) * layers / static_cast<double>(chain)
                           : static_cast<double>(p.chain);
  const double copies = o.optimizer == "adam" ? 4 : 3;  // value, gradient, moment(s)
  MemoryEstimate e;
  e.parameters = 4.0 * copies * (share + static_cast<double>(p.open + p.close));

  const double values = static_cast<double>(
      std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>()));
  const double pixels = shape.empty() ? 0.0 : values / static_cast<double>(shape.front());
  const double batch = static_cast<double>(std::min(o.batch, train_examples));
  const std::int64_t eval = o.eval_batch > 0 ? o.eval_batch : std::max<std::int64_t>(o.batch, 500);
  const double eval_batch = static_cast<double>(std::min(eval, test_examples));
  const auto shrink = static_cast<double>(state_downsampling(o.model));
  const double state =
      4.0 * static_cast<double>(kind.state_channels(o.model)) * pixels / (shrink * shrink);
  // Per layer: the forward state, the adjoint and one saved activation of a training batch, and
  // the state of an evaluation batch.
  e.states = state * (std::max(layers, 0.0) + 1) * (3 * batch + eval_batch);
  e.data = 4.0 * values * static_cast<double>(train_examples + test_examples);
  return e;
}

}  // namespace weft::train
