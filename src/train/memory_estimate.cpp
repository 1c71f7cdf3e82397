// The memory a run needs at its busiest rank (weft/train/memory_estimate.hpp).
#include "weft/train/memory_estimate.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "weft/train/model_registry.hpp"

namespace weft::train {

namespace {

// Bytes of one example's state at the input of each chain layer, in chain order. A staged
// network's stride-2 transitions halve every side and double the channels, so its states
// shrink along the chain; the other chains keep one state size.
std::vector<double> layer_state_bytes(const ModelConfig& m, const ModelKind& kind,
                                      std::int64_t chain, double pixels, std::size_t dims) {
  const double shrink = std::pow(static_cast<double>(state_downsampling(m)), dims);
  if (!is_staged(m))
    return std::vector<double>(static_cast<std::size_t>(chain),
                               4.0 * static_cast<double>(kind.state_channels(m)) * pixels / shrink);
  std::vector<double> bytes;
  double stage_pixels = pixels / shrink;
  for (std::size_t s = 0; s < m.stage_steps.size(); ++s) {
    const bool transition = s + 1 < m.stage_steps.size();
    const double state = 4.0 * static_cast<double>(m.stage_channels[s]) * stage_pixels;
    bytes.insert(bytes.end(), static_cast<std::size_t>(m.stage_steps[s]) + (transition ? 1 : 0),
                 state);
    stage_pixels /= std::pow(2.0, dims);
  }
  return bytes;
}

}  // namespace

std::int64_t evaluation_batch(const TrainerOptions& o) {
  return o.eval_batch > 0 ? o.eval_batch : std::max<std::int64_t>(o.batch, 500);
}

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
  e.eval_batch = std::min(evaluation_batch(o), test_examples);
  // Per layer: the forward state, the adjoint and one saved activation of a training batch, and
  // the state of an evaluation batch; one example's states on the busiest rank's layers, plus
  // its last point. A serial evaluation keeps no layer's state: its input and output only.
  double rank_states = 0, serial_eval_states = 0;
  if (chain > 0) {
    const std::vector<double> bytes =
        layer_state_bytes(o.model, kind, chain, pixels, shape.empty() ? 0 : shape.size() - 1);
    const double total = std::accumulate(bytes.begin(), bytes.end(), 0.0);
    const double largest = *std::max_element(bytes.begin(), bytes.end());
    serial_eval_states = 2 * largest;
    if (o.balance_cost && parts > 1) {
      // Any placement: some rank holds at least the average, and one rank the largest layer.
      rank_states = std::max(total / parts, largest);
    } else {
      // Equal numbers: the first rank holds at least floor(N / P) layers, the largest states.
      const auto held = static_cast<std::ptrdiff_t>(std::max<std::int64_t>(1, chain / parts));
      rank_states = std::accumulate(bytes.begin(), bytes.begin() + held, 0.0) + bytes[held - 1];
    }
  } else {  // replicated (recurrent: one state and the output) or no chain
    const double shrink = static_cast<double>(state_downsampling(o.model));
    rank_states = (chain < 0 ? 2 : 1) * 4.0 * static_cast<double>(kind.state_channels(o.model)) *
                  pixels / (shrink * shrink);
  }
  const double eval_states = o.serial && chain > 0 ? serial_eval_states : rank_states;
  e.states = rank_states * 3 * batch + eval_states * static_cast<double>(e.eval_batch);
  e.data = 4.0 * values * static_cast<double>(train_examples + test_examples);
  return e;
}

}  // namespace weft::train
