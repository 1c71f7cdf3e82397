#include "weft/train/options.hpp"

#include <cmath>
#include <string>

#include "weft/train/model_registry.hpp"

namespace weft::train {

namespace {
[[noreturn]] void invalid(const std::string& field, const std::string& detail) {
  throw InvalidOption("Trainer", field, detail);
}
}  // namespace

const char* to_string(EvaluationForward forward) {
  switch (forward) {
    case EvaluationForward::exact:
      return "exact";
    case EvaluationForward::solver:
      return "solver";
    case EvaluationForward::both:
      break;
  }
  return "both";
}

void validate(const TrainerOptions& o, int ranks) {
  model_kind(o.model);  // an unknown kind: InvalidOption("ModelConfig", "kind", ...)
  if (o.batch < 1) invalid("batch", std::to_string(o.batch) + " is invalid; accepted: >= 1");
  if (o.epochs < 1) invalid("epochs", std::to_string(o.epochs) + " is invalid; accepted: >= 1");
  if (o.optimizer != "sgd" && o.optimizer != "adam")
    invalid("optimizer", "'" + o.optimizer + "' is invalid; accepted: sgd, adam");
  if (!(o.lr > 0) || !std::isfinite(o.lr))
    invalid("lr", number_text(o.lr) + " is invalid; accepted: a finite number > 0");
  if (o.lr_schedule != "constant" && o.lr_schedule != "cosine")
    invalid("lr_schedule", "'" + o.lr_schedule + "' is invalid; accepted: constant, cosine");
  if (o.eval_batch < 0)
    invalid("eval_batch", std::to_string(o.eval_batch) + " is invalid; accepted: >= 0");
  const int replicas = o.serial ? 1 : o.data_ranks;
  if (replicas < 1 || ranks % replicas != 0)
    invalid("data_ranks", std::to_string(o.data_ranks) + " is invalid (the " +
                              std::to_string(ranks) + " ranks do not split into " +
                              std::to_string(o.data_ranks) +
                              " replicas); accepted: a divisor of the ranks");
  validate(o.iterations);
  if (o.iterations.active() && o.serial)
    invalid("iteration_control",
            "chooses MGRIT iterations, and the sequential reference (serial) has no MGRIT solve");
  for (const bool forward : {true, false}) {
    const bool automatic = forward ? o.iterations.forward : o.iterations.backward;
    const int levels = (forward ? o.parallel.forward() : o.parallel.backward()).max_levels();
    if (automatic && levels < 2)
      invalid("iteration_control",
              std::string(forward ? "the forward" : "the adjoint") +
                  " solve's iterations cannot be chosen in exact mode (one level solves it "
                  "exactly); accepted: automatic iterations with 2 or more levels");
  }
  validate_growth(o.growth, o.model, o.epochs, o.serial ? 1 : ranks / replicas,
                  !o.checkpoint_dir.empty());
  validate_mgopt(o.mgopt, o.model, o.serial ? 1 : ranks / replicas);
  if (o.mgopt.active() && o.growth.active())
    invalid("mgopt_levels",
            "MG/Opt and nested iteration over depth (growth) are given together; "
            "accepted: one of them");
  if (o.mgopt.active() && o.iterations.active())
    invalid("mgopt_levels",
            "MG/Opt with automatic MGRIT iterations (iteration_control) is not supported; "
            "accepted: MG/Opt with fixed iteration counts");
  if (o.balance_cost && o.serial)
    invalid("balance_cost",
            "places the layers over the ranks, and the sequential reference (serial) runs on one");
  if (o.balance_cost && is_recurrent(o.model))
    invalid("balance_cost",
            "is not for '" + o.model.kind +
                "': its sequence steps cost alike (accepted: the convolutional models)");
  if (!o.parallel.layer_costs().empty())
    invalid("parallel",
            "has layer_costs set; accepted: balance_cost, which measures them for "
            "the model at each depth");
  if (o.trace_batches < 1)
    invalid("trace_batches", std::to_string(o.trace_batches) + " is invalid; accepted: >= 1");
}

double learning_rate(const TrainerOptions& o, std::int64_t k, std::int64_t batches_per_epoch) {
  if (o.lr_schedule == "constant") return o.lr;
  const double total = static_cast<double>(o.epochs) * static_cast<double>(batches_per_epoch);
  return o.lr * 0.5 * (1.0 + std::cos(M_PI * static_cast<double>(k) / total));
}

Diverged::Diverged(double loss)
    : Divergence("training diverged: the loss is " + number_text(loss)), loss_(loss) {}

}  // namespace weft::train
