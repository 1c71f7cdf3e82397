// MG/Opt's V-cycle (multilevel_optimizer.hpp): smoothing steps, restriction with the coherence
// correction, prolongation and the backtracking line search.
#include "multilevel_optimizer.hpp"

#include <torch/torch.h>

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "weft/nn/optimizer_state.hpp"
#include "weft/train/depth_growth.hpp"
#include "weft/train/options.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace weft::train {

namespace {

using Named = NamedTensors;

const torch::Tensor& gathered(const Named& all, const std::string& key) {
  const auto it = all.find(key);
  if (it == all.end())
    throw Error("MG/Opt: no tensor '" + key +
                "' on any rank of the other level (a network "
                "whose names do not follow the depth hierarchy?)");
  return it->second;
}

}  // namespace

/// Between level l and l+1: which parameters each transfer sums, parsed from their names once,
/// and who sends whom what.
struct MultilevelOptimizer::Transfers {
  using Sources = std::vector<std::pair<std::string, double>>;
  const Classifier* fine = nullptr;   ///< the level-l network this was made for
  std::vector<Sources> restriction;   ///< per coarse parameter: the fine ones Rθ sums
  std::vector<Sources> transposed;    ///< per coarse parameter: the fine gradients Pᵀg sums
  std::vector<Sources> prolongation;  ///< per fine parameter: the coarse ones P sums
  NamedExchange down;                 ///< fine parameters, gradients, optimizer state
  NamedExchange up;                   ///< coarse corrections
};

struct MultilevelOptimizer::Level {
  Classifier* model = nullptr;
  torch::optim::Optimizer* optimizer = nullptr;
  std::unique_ptr<Classifier> own;
  std::unique_ptr<torch::optim::Optimizer> own_optimizer;
  std::vector<torch::Tensor> coherence;  ///< v_l, in the order of the parameters
  /// The parameters' gradients hold ∇F_l at the current point (set by coarse_problem: Pᵀg),
  /// so the first smoothing step needs no evaluation.
  bool gradient_ready = false;
  std::vector<torch::Tensor> saved_buffers;  ///< batch norm's statistics over a coarse cycle
};

MultilevelOptimizer::MultilevelOptimizer(const MGOpt& mgopt, const ModelConfig& model,
                                         const std::vector<std::int64_t>& example_shape,
                                         MPI_Comm comm, MPI_Comm data, MPI_Comm agree, bool serial,
                                         const nn::LayerParallelOptions& solver,
                                         const OptimizerFactory& make_optimizer)
    : mgopt_(mgopt), comm_(comm), data_(data), agree_(agree) {
  levels_.push_back(std::make_unique<Level>());
  for (int l = 1; l < mgopt.levels; ++l) {
    auto level = std::make_unique<Level>();
    level->own = std::make_unique<Classifier>(mgopt_level_model(model, mgopt, l), example_shape,
                                              comm, data, serial, solver);
    level->own_optimizer = make_optimizer(level->own->module());
    level->model = level->own.get();
    level->optimizer = level->own_optimizer.get();
    levels_.push_back(std::move(level));
    nn::DepthRefinement between;
    between.coarse_steps = residual_steps(mgopt_level_model(model, mgopt, l));
    between.factor = mgopt.factor;
    between.interpolation = mgopt.interpolation;
    between_.push_back(between);
  }
}

MultilevelOptimizer::~MultilevelOptimizer() = default;

MultilevelOptimizer::Transfers& MultilevelOptimizer::transfers(int l) {
  if (transfers_.size() < between_.size()) transfers_.resize(between_.size());
  auto& slot = transfers_[static_cast<std::size_t>(l)];
  const Level& fine = *levels_[static_cast<std::size_t>(l)];
  const Level& coarse = *levels_[static_cast<std::size_t>(l) + 1];
  if (slot && slot->fine == fine.model) return *slot;
  auto plan = std::make_unique<Transfers>();
  plan->fine = fine.model;
  const nn::DepthRefinement& between = between_[static_cast<std::size_t>(l)];
  const nn::KeySources restriction = between.restriction_key_sources(mgopt_.restriction);
  const nn::KeySources prolongation = between.key_sources();
  std::set<std::string> fine_names, coarse_names;
  for (const auto& item : fine.model->module().named_parameters()) {
    fine_names.insert(item.key());
    plan->prolongation.push_back(prolongation(item.key()));
  }
  std::map<std::string, std::size_t> position;
  for (const auto& item : coarse.model->module().named_parameters()) {
    position[item.key()] = plan->restriction.size();
    coarse_names.insert(item.key());
    plan->restriction.push_back(restriction(item.key()));
  }
  // Pᵀg: each fine gradient, from whichever rank, goes to the coarse parameters its prolongation
  // reads. The fine names of every rank, in name order (the order the sums take).
  std::set<std::string> every_fine;
  for (const auto& names : gather_keys(comm_, {fine_names.begin(), fine_names.end()}))
    every_fine.insert(names.begin(), names.end());
  plan->transposed.resize(plan->restriction.size());
  for (const std::string& name : every_fine)
    for (const auto& [source, w] : prolongation(name))
      if (const auto it = position.find(source); it != position.end())
        plan->transposed[it->second].emplace_back(name, w);
  std::vector<std::string> reads_down, reads_up;
  for (std::size_t i = 0; i < plan->restriction.size(); ++i) {
    for (const auto& source : plan->restriction[i]) {
      reads_down.push_back("p/" + source.first);
      for (const char* field : nn::kOptimizerFields)
        reads_down.push_back("o/" + std::string(field) + "/" + source.first);
    }
    for (const auto& source : plan->transposed[i]) reads_down.push_back("g/" + source.first);
  }
  for (const auto& sources : plan->prolongation)
    for (const auto& source : sources) reads_up.push_back(source.first);
  // Keys "p/name", "g/name", "o/field/name": the parameter's name follows the last '/'.
  plan->down = NamedExchange(comm_, reads_down, [&](const std::string& key) {
    return fine_names.count(key.substr(key.rfind('/') + 1)) > 0;
  });
  plan->up = NamedExchange(comm_, reads_up,
                           [&](const std::string& key) { return coarse_names.count(key) > 0; });
  slot = std::move(plan);
  return *slot;
}

void MultilevelOptimizer::bind_fine(Classifier& fine, torch::optim::Optimizer& optimizer) {
  levels_[0]->model = &fine;
  levels_[0]->optimizer = &optimizer;
}

Classifier& MultilevelOptimizer::level_model(int level) {
  return *levels_.at(static_cast<std::size_t>(level))->model;
}

const std::vector<torch::Tensor>& MultilevelOptimizer::coherence(int level) const {
  return levels_.at(static_cast<std::size_t>(level))->coherence;
}

MGOptTally MultilevelOptimizer::take_tally() {
  return std::exchange(tally_, MGOptTally{});
}

double MultilevelOptimizer::objective(int l, const Batch& batch, double weight,
                                      std::int64_t global_batch, bool with_gradient, PhaseTimes& t,
                                      BatchOutcome* first) {
  Level& level = *levels_[static_cast<std::size_t>(l)];
  Classifier& model = *level.model;
  model.set_batch_index(global_batch);  // the same dropout masks: one objective per batch
  PhaseTimes phase;
  double value = 0;
  if (with_gradient) {
    level.gradient_ready = false;
    level.optimizer->zero_grad();
    const BatchOutcome out = model.gradients(batch.inputs, batch.labels, phase, weight);
    if (first) *first = out;
    value = out.loss * weight;
    if (const nn::SolveReport* r = model.solve_report(true))
      tally_.steps +=
          r->statistics.total_steps() + model.solve_report(false)->statistics.total_steps();
    if (!level.coherence.empty()) {
      torch::NoGradGuard no_grad;
      const auto params = model.module().parameters();
      for (std::size_t i = 0; i < params.size(); ++i) {
        torch::Tensor p = params[i];
        if (p.grad().defined())
          p.mutable_grad().add_(level.coherence[i]);
        else
          p.mutable_grad() = level.coherence[i].clone();
      }
    }
  } else {
    value = model.loss(batch.inputs, batch.labels, phase, weight);
    if (const nn::SolveReport* r = model.solve_report(true))
      tally_.steps += r->statistics.total_steps();
  }
  t.forward += phase.forward;
  t.backward += phase.backward;
  // The global batch's mean loss: the replicas' weighted losses average to it.
  if (data_ != MPI_COMM_NULL) {
    mpi::check(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_SUM, data_),
               "MPI_Allreduce (MG/Opt objective)");
    value /= mpi::size(data_);
  }
  if (!level.coherence.empty()) {  // + ⟨v_l, θ⟩ over the chain's parameters
    torch::NoGradGuard no_grad;
    double inner = 0;
    const auto params = model.module().parameters();
    for (std::size_t i = 0; i < params.size(); ++i)
      inner += (level.coherence[i].to(torch::kFloat64) * params[i].to(torch::kFloat64))
                   .sum()
                   .item<double>();
    mpi::check(MPI_Allreduce(MPI_IN_PLACE, &inner, 1, MPI_DOUBLE, MPI_SUM, comm_),
               "MPI_Allreduce (MG/Opt coherence term)");
    value += inner;
  }
  return value;
}

double MultilevelOptimizer::gradient(int level, const Batch& batch, double weight,
                                     std::int64_t global_batch) {
  PhaseTimes t;
  return objective(level, batch, weight, global_batch, true, t, nullptr);
}

void MultilevelOptimizer::smooth(int l, int steps, const Batch& batch, double weight,
                                 std::int64_t global_batch, PhaseTimes& t, BatchOutcome* first) {
  Level& level = *levels_[static_cast<std::size_t>(l)];
  for (int i = 0; i < steps; ++i) {
    if (i == 0 && level.gradient_ready)
      level.gradient_ready = false;  // ∇F_l = Pᵀg here: the coherence's very point
    else
      objective(l, batch, weight, global_batch, true, t, i == 0 ? first : nullptr);
    PhaseTimes phase;
    level.model->step(*level.optimizer, phase);
    t.optimizer += phase.optimizer;
  }
}

std::vector<torch::Tensor> MultilevelOptimizer::restrict_to(int l) {
  Level& fine = *levels_[static_cast<std::size_t>(l)];
  Level& coarse = *levels_[static_cast<std::size_t>(l) + 1];
  const Transfers& plan = transfers(l);
  // Level l's parameters, gradients and optimizer state that this rank's coarse layers read.
  Named mine;
  for (const auto& item : fine.model->module().named_parameters()) {
    const torch::Tensor& p = item.value();
    mine["p/" + item.key()] = p.detach();
    if (p.grad().defined()) mine["g/" + item.key()] = p.grad().detach();
    for (const auto& [field, value] : nn::optimizer_fields(*fine.optimizer, p))
      mine["o/" + field + "/" + item.key()] = value.detach();
  }
  const Named all = plan.down(mine, tally_.received_bytes);
  torch::NoGradGuard no_grad;
  coarse.optimizer->state().clear();
  const auto named = coarse.model->module().named_parameters();
  std::vector<torch::Tensor> transposed(named.size());
  for (std::size_t i = 0; i < named.size(); ++i) {
    torch::Tensor p = named[i].value();
    const auto& sources = plan.restriction[i];
    p.zero_();
    Named fields;
    std::map<std::string, std::size_t> counted;
    for (const auto& [key, w] : sources) {
      p.add_(gathered(all, "p/" + key).to(p.device(), p.scalar_type()), w);
      for (const char* field : nn::kOptimizerFields) {
        const auto it = all.find("o/" + std::string(field) + "/" + key);
        if (it == all.end()) continue;
        torch::Tensor& acc = fields[field];
        const torch::Tensor v = it->second.to(p.device());
        if (std::string(field) == "step")
          acc = acc.defined() ? acc : v;  // every source has taken the same steps
        else
          acc = acc.defined() ? acc.add(v, w) : v.mul(w);
        ++counted[field];
      }
    }
    for (auto it = fields.begin(); it != fields.end();)  // a field some source lacks: none
      it = counted[it->first] == sources.size() ? std::next(it) : fields.erase(it);
    nn::set_optimizer_fields(*coarse.optimizer, p, fields);
    // Pᵀ g: the fine gradients whose prolongation reads this parameter, weighted.
    torch::Tensor& acc = transposed[i];
    for (const auto& [key, w] : plan.transposed[i]) {
      const auto it = all.find("g/" + key);
      if (it == all.end()) continue;
      const torch::Tensor part = it->second.to(p.device(), p.scalar_type()).mul(w);
      acc = acc.defined() ? acc.add(part) : part;
    }
    if (!acc.defined()) acc = torch::zeros_like(p);
  }
  return transposed;
}

void MultilevelOptimizer::correct(int l, const std::vector<torch::Tensor>& start, double f0,
                                  const Batch& batch, double weight, std::int64_t global_batch,
                                  PhaseTimes& t) {
  Level& fine = *levels_[static_cast<std::size_t>(l)];
  Level& coarse = *levels_[static_cast<std::size_t>(l) + 1];
  // e = P(θ⁺ − θ_{l+1}), prolonged by name from every rank's coarse layers.
  Named mine;
  {
    const auto named = coarse.model->module().named_parameters();
    for (std::size_t i = 0; i < named.size(); ++i)
      mine[named[i].key()] = (named[i].value().detach() - start[i]);
  }
  const Transfers& plan = transfers(l);
  const Named all = plan.up(mine, tally_.received_bytes);
  const auto named = fine.model->module().named_parameters();
  std::vector<torch::Tensor> base, direction;
  {
    torch::NoGradGuard no_grad;
    for (std::size_t j = 0; j < named.size(); ++j) {
      const torch::Tensor& p = named[j].value();
      torch::Tensor e = torch::zeros_like(p);
      for (const auto& [key, w] : plan.prolongation[j])
        e.add_(gathered(all, key).to(p.device(), p.scalar_type()), w);
      base.push_back(p.detach().clone());
      direction.push_back(e);
    }
  }
  // Backtracking: α = 1, 1/2, … until F_l decreases; the decision is agreed on every rank.
  double alpha = 1;
  bool accepted = false;
  for (int k = 0; k <= mgopt_.line_search && !accepted; ++k) {
    {
      torch::NoGradGuard no_grad;
      for (std::size_t i = 0; i < named.size(); ++i)
        named[i].value().copy_(base[i] + alpha * direction[i]);
    }
    const double f = objective(l, batch, weight, global_batch, false, t, nullptr);
    int decreased = std::isfinite(f) && f < f0 ? 1 : 0;
    mpi::check(MPI_Allreduce(MPI_IN_PLACE, &decreased, 1, MPI_INT, MPI_MIN, agree_),
               "MPI_Allreduce (MG/Opt line search)");
    accepted = decreased != 0;
    if (!accepted) alpha /= 2;
  }
  ++tally_.corrections;
  if (accepted) {
    tally_.step_sum += alpha;
    return;
  }
  ++tally_.rejected;
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < named.size(); ++i) named[i].value().copy_(base[i]);
}

double MultilevelOptimizer::coarse_problem(int l, const Batch& batch, double weight,
                                           std::int64_t global_batch,
                                           std::vector<torch::Tensor>* transposed) {
  PhaseTimes t;
  return coarse_problem(l, batch, weight, global_batch, t, nullptr, transposed);
}

double MultilevelOptimizer::coarse_problem(int l, const Batch& batch, double weight,
                                           std::int64_t global_batch, PhaseTimes& t,
                                           BatchOutcome* first,
                                           std::vector<torch::Tensor>* transposed_out) {
  Level& coarse = *levels_[static_cast<std::size_t>(l) + 1];
  const double f0 = objective(l, batch, weight, global_batch, true, t, first);
  const std::vector<torch::Tensor> transposed = restrict_to(l);
  // v_{l+1} = Pᵀ ∇F_l − ∇f_{l+1}(R θ_l): the coarse objective's gradient there is Pᵀ ∇F_l.
  coarse.coherence.clear();
  objective(l + 1, batch, weight, global_batch, true, t, nullptr);
  torch::NoGradGuard no_grad;
  const auto params = coarse.model->module().parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    torch::Tensor p = params[i];
    coarse.coherence.push_back(p.grad().defined() ? transposed[i] - p.grad() : transposed[i]);
    p.mutable_grad() = transposed[i].clone();  // ∇F_{l+1} at θ_{l+1}: the first coarse step's
  }
  coarse.gradient_ready = true;
  if (transposed_out) *transposed_out = transposed;
  return f0;
}

void MultilevelOptimizer::vcycle(int l, const Batch& batch, double weight,
                                 std::int64_t global_batch, PhaseTimes& t, BatchOutcome* first) {
  const bool coarsest = l + 1 == mgopt_.levels;
  smooth(l, coarsest ? mgopt_.coarse : mgopt_.pre, batch, weight, global_batch, t, first);
  if (coarsest) return;
  if (mgopt_.pre > 0) first = nullptr;
  Level& fine = *levels_[static_cast<std::size_t>(l)];
  Level& coarse = *levels_[static_cast<std::size_t>(l) + 1];
  // The running statistics of batch norm advance with the optimizer steps only.
  std::vector<torch::Tensor>& buffers = fine.saved_buffers;
  {
    torch::NoGradGuard no_grad;
    const auto now_buffers = fine.model->module().buffers();
    if (buffers.size() != now_buffers.size()) buffers.assign(now_buffers.size(), torch::Tensor());
    for (std::size_t i = 0; i < buffers.size(); ++i)
      if (buffers[i].defined() && buffers[i].sizes() == now_buffers[i].sizes() &&
          buffers[i].device() == now_buffers[i].device())
        buffers[i].copy_(now_buffers[i]);
      else
        buffers[i] = now_buffers[i].clone();
  }
  const double f0 = coarse_problem(l, batch, weight, global_batch, t, first, nullptr);
  std::vector<torch::Tensor> start;
  for (const auto& p : coarse.model->module().parameters()) start.push_back(p.detach().clone());
  vcycle(l + 1, batch, weight, global_batch, t, nullptr);
  correct(l, start, f0, batch, weight, global_batch, t);
  {
    torch::NoGradGuard no_grad;
    const auto now_buffers = fine.model->module().buffers();
    for (std::size_t i = 0; i < buffers.size(); ++i) now_buffers[i].copy_(buffers[i]);
  }
  smooth(l, mgopt_.post, batch, weight, global_batch, t, nullptr);
}

BatchOutcome MultilevelOptimizer::cycle(Classifier& fine, torch::optim::Optimizer& optimizer,
                                        const Batch& batch, double weight,
                                        std::int64_t global_batch, double lr, PhaseTimes& t) {
  bind_fine(fine, optimizer);
  for (auto& level : levels_)
    for (auto& group : level->optimizer->param_groups()) group.options().set_lr(lr);
  BatchOutcome first;
  if (mgopt_.levels == 1)
    smooth(0, 1, batch, weight, global_batch, t, &first);  // plain training
  else
    vcycle(0, batch, weight, global_batch, t, &first);
  return first;
}

}  // namespace weft::train
