// The weft-nn program: train, eval and predict run here (programs.hpp).
#include "predict.hpp"
#include "programs.hpp"
#include "training.hpp"

namespace weft::cli {
namespace {
[[maybe_unused]] const bool kRegistered = [] {
  network_runners() = {run_training, run_evaluation, run_prediction};
  return true;
}();
}  // namespace
}  // namespace weft::cli
