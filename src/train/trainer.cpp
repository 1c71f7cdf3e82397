// The Trainer's loop: per-epoch shuffles, each replica's share of the global batch, learning
// rate schedules, MGRIT statistics, evaluation, metrics, checkpoints and the timeline.
#include "weft/train/trainer.hpp"

#include <fmt/format.h>
#include <torch/torch.h>

#include <unistd.h>
#include <algorithm>
#include <array>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "classifier.hpp"
#include "json_records.hpp"
#include "multilevel_optimizer.hpp"
#include "prefetcher.hpp"
#include "weft/nn/checkpoint.hpp"
#include "weft/train/cost_measurement.hpp"
#include "weft/train/memory_estimate.hpp"
#include "weft/train/model_zoo.hpp"
#include "weft/util/clock.hpp"
#include "weft/util/mpi.hpp"
#include "weft/util/trace.hpp"

namespace weft::train {

using weft::clock::now;

namespace {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainerOptions& o,
                                                        torch::nn::Module& module) {
  auto params = module.parameters();
  if (o.optimizer == "sgd")
    return std::make_unique<torch::optim::SGD>(params,
                                               torch::optim::SGDOptions(o.lr).momentum(o.momentum));
  return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(o.lr));
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

/// Mean over batches, skipping the first two (warm-up) when there are more.
double steady_mean(const std::vector<double>& v) {
  const size_t skip = v.size() > 2 ? 2 : 0;
  if (v.size() == skip) return 0;
  return std::accumulate(v.begin() + static_cast<long>(skip), v.end(), 0.0) /
         static_cast<double>(v.size() - skip);
}

std::optional<double> mean(const std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

/// o.parallel, with the layers of `net()` placed by their costs when o.balance_cost and the
/// chain has more than one rank: rank 0 of `agree` times them (measure_layer_costs), every rank
/// of `agree` (every replica) places by its figures.
nn::LayerParallelOptions placed(const TrainerOptions& o, const std::function<nn::Network()>& net,
                                const std::vector<std::int64_t>& example, MPI_Comm layer,
                                MPI_Comm agree) {
  constexpr int kRepeats = 5;
  nn::LayerParallelOptions p = o.parallel;
  if (!o.balance_cost || o.serial || mpi::size(layer) == 1) return p;
  std::vector<double> costs;
  std::exception_ptr failed;
  if (mpi::rank(agree) == 0) try {
      costs = measure_layer_costs(o, net(), example, kRepeats);
    } catch (...) {
      failed = std::current_exception();
    }
  mpi::agree_or_throw(agree, failed);
  int count = static_cast<int>(costs.size());
  mpi::check(MPI_Bcast(&count, 1, MPI_INT, 0, agree), "MPI_Bcast (layer costs)");
  costs.resize(static_cast<size_t>(count));
  mpi::check(MPI_Bcast(costs.data(), count, MPI_DOUBLE, 0, agree), "MPI_Bcast (layer costs)");
  p.layer_costs(std::move(costs));
  return p;
}

std::string shape_text(const ExampleShape& e) {
  return (e.channels != 1 ? std::to_string(e.channels) + "x" : std::string()) +
         (e.volume ? std::to_string(e.depth) + "x" : std::string()) + std::to_string(e.rows) + "x" +
         std::to_string(e.cols);
}

}  // namespace

void set_torch_threads(int requested, MPI_Comm comm) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = requested > 0 ? requested : std::max(1, cores / mpi::size(comm));
  torch::set_num_threads(threads);
  // Subnormal floats as zero: a recurrent adjoint over hundreds of steps decays through the
  // subnormal range, where each operation costs several times more (784-step GRU backward 5x;
  // docs/benchmarks.md). Values below 1e-38 change no trained result.
  at::globalContext().setFlushDenormal(true);
}

struct Trainer::State {
  TrainerOptions options;
  std::shared_ptr<const DataSource> train, test;
  MPI_Comm world;
  MPI_Comm comm;                  ///< this replica's layer ranks (MPI_COMM_SELF with serial)
  MPI_Comm data = MPI_COMM_NULL;  ///< the same layer rank in every replica
  MPI_Comm agree;                 ///< where events and results are agreed: world, or self
  std::unique_ptr<nn::ReplicaGroups> groups;
  int rank = 0, ranks = 1, replicas = 1, replica = 0;
  int start_epoch = 1;
  int level = 0;  ///< nested iteration: the depth level the model is at (depth_growth.hpp)
  /// Automatic iterations (iteration_control.hpp), and what it did in the current epoch.
  std::unique_ptr<IterationController> controller;
  /// MG/Opt's coarser levels and V-cycles (mgopt.hpp).
  std::unique_ptr<MultilevelOptimizer> mgopt;
  struct ControlTally {
    std::int64_t fallbacks = 0;
    std::vector<double> errors;
    /// The checks' relative errors of the MGRIT forward's logits against the exact forward's.
    std::vector<double> forward_errors;
    double seconds = 0;
    std::int64_t exact_steps = 0;  ///< step evaluations of the exact recomputations, this rank
    /// Batches, and those whose forward (adjoint) solve ran without skip by a half step.
    std::int64_t batches = 0, forward_unskipped = 0, backward_unskipped = 0;
    /// The checks' relative gradient errors over the chain layers' parameters alone.
    std::vector<double> layer_errors;
    /// IterationControl::diagnostics: the checks' sampling noises and error persistences.
    std::vector<double> noises, persistences;
  } tally;
  /// The last check's gradient error g − g* (this rank's parameters) and the setting it ran
  /// (forward iterations and skip, adjoint iterations and skip), for the persistence.
  std::vector<torch::Tensor> last_error;
  std::optional<std::array<int, 4>> last_error_setting;  ///< none before the first check
  /// The MGRIT solves of the last batch (a recomputation in exact mode replaces the module's).
  nn::SolveReport mgrit_forward, mgrit_backward;
  bool active = true;
  std::unique_ptr<Classifier> model;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::vector<std::shared_ptr<Observer>> observers;

  /// Calls `event` on every observer; what one throws ends the run on every rank of `agree`.
  template <class Event>
  void notify(Event&& event) {
    mpi::collectively(agree, [&] {
      for (auto& o : observers) event(*o);
    });
  }
  trace::Settings trace_settings;  ///< the timeline's window (trace_path)

  std::int64_t eval_batch() const { return evaluation_batch(options); }
  /// The model at the current depth level (options.model without growth).
  ModelConfig current_model() const {
    return options.growth.active() ? model_at_level(options.model, options.growth, level)
                                   : options.model;
  }
  /// Refines the model's depth by the growth factor before epoch `epoch` (collective).
  void refine(int epoch);
  /// One training batch under the iteration controller: MGRIT with its counts, then, at checks
  /// and after stalls or divergence, the exact-mode gradient of the same batch (collective).
  BatchOutcome controlled_batch(const Batch& batch, double weight, std::int64_t global_batch,
                                PhaseTimes& t);
  /// IterationControl::diagnostics at a check, the exact gradient in the parameters' grads
  /// (kept), `error` = g − g*, `before` the buffers before the batch: tallies the sampling
  /// noise and the error's persistence (collective).
  void diagnose_check(const Batch& batch, double weight, std::int64_t global_batch,
                      const nn::LayerParallelOptions& solver,
                      const std::vector<torch::Tensor>& before, std::vector<torch::Tensor> error,
                      const std::array<int, 4>& setting, double exact_norm_squared);
  void setup(TrainerOptions options, const nn::Network* network,
             std::shared_ptr<const DataSource> train, std::shared_ptr<const DataSource> test,
             MPI_Comm world);
  void train_epoch(int epoch, std::int64_t batches_per_epoch, std::int64_t& run_batch,
                   bool& trace_pending, const std::function<void()>& write_trace);
};

namespace {

/// BadData unless checkpoint `dir`'s examples are `data`'s and its model is custom exactly when
/// the caller gives a network.
void check_checkpoint_fits(const std::string& dir, const CheckpointInfo& info,
                           const DataSource& data, bool custom) {
  const ExampleShape stored = info.example, given = example_shape_of(data);
  if (stored.rows != given.rows || stored.cols != given.cols || stored.depth != given.depth ||
      stored.volume != given.volume || stored.channels != given.channels)
    throw BadData(fmt::format("examples of size {}: the model of checkpoint {} takes {}",
                              shape_text(given), dir, shape_text(stored)));
  if (custom && !is_custom(info.model))
    throw BadData("checkpoint " + dir + " holds a " + info.model.kind +
                  " model, not a network of the user's own: use it without a network (the "
                  "Trainer builds the model)");
  if (!custom && is_custom(info.model))
    throw BadData("checkpoint " + dir +
                  " holds a network of the user's own: use it with that network");
}

}  // namespace

Trainer::Trainer(TrainerOptions options, std::shared_ptr<const DataSource> train,
                 std::shared_ptr<const DataSource> test, MPI_Comm world)
    : state_(std::make_unique<State>()) {
  state_->setup(std::move(options), nullptr, std::move(train), std::move(test), world);
}

Trainer::Trainer(TrainerOptions options, nn::Network network,
                 std::shared_ptr<const DataSource> train, std::shared_ptr<const DataSource> test,
                 MPI_Comm world)
    : state_(std::make_unique<State>()) {
  options.model.kind = "custom";
  state_->setup(std::move(options), &network, std::move(train), std::move(test), world);
}

void Trainer::State::setup(TrainerOptions options_in, const nn::Network* network,
                           std::shared_ptr<const DataSource> train_in,
                           std::shared_ptr<const DataSource> test_in, MPI_Comm world_in) {
  State& s = *this;
  s.world = world_in;
  s.rank = mpi::rank(world);
  s.ranks = mpi::size(world);
  if (!train_in || !test_in)
    throw InvalidOption("Trainer", "data", "is missing; accepted: a training and a test source");
  std::optional<IterationController::State> controller_state;
  if (!options_in.resume_dir.empty()) {
    CheckpointInfo info;
    mpi::collectively(world, [&] {  // every rank reads it: one agreed error, no abort
      info = read_checkpoint_info(options_in.resume_dir);
      check_checkpoint_fits(options_in.resume_dir, info, *train_in, network != nullptr);
    });
    // The optimizer state in the checkpoint is of its kind only.
    if (options_in.optimizer != info.optimizer)
      throw InvalidOption("Trainer", "optimizer",
                          fmt::format("'{}' differs from the optimizer of checkpoint {} ('{}'), "
                                      "whose state only that optimizer continues",
                                      options_in.optimizer, options_in.resume_dir, info.optimizer));
    controller_state = info.iteration_control;
    if (options_in.epochs <= info.epoch)
      throw InvalidOption("Trainer", "epochs",
                          fmt::format("{} leaves nothing to train: checkpoint {} is at epoch {}",
                                      options_in.epochs, options_in.resume_dir, info.epoch));
    // The checkpoint's model is at its growth level: the full depth is r^(K - level) deeper.
    options_in.growth = info.growth;
    options_in.model = info.growth.active()
                           ? full_depth_model(info.model, info.growth, info.growth_level)
                           : info.model;
    s.level = info.growth_level;
    s.start_epoch = info.epoch + 1;
  }
  validate(options_in, s.ranks);
  set_torch_threads(options_in.threads, world);
  s.options = std::move(options_in);
  s.train = std::move(train_in);
  s.test = std::move(test_in);
  const TrainerOptions& o = s.options;

  // serial: the reference, plain LibTorch on rank 0; the other ranks have nothing to do.
  // data_ranks D: D replicas of P/D layer-parallel ranks.
  s.replicas = o.serial ? 1 : o.data_ranks;
  s.comm = world;
  if (s.replicas > 1) {
    s.groups = std::make_unique<nn::ReplicaGroups>(world, s.replicas);
    s.comm = s.groups->layer_comm();
    s.data = s.groups->data_comm();
    s.replica = s.groups->replica();
  }
  s.agree = world;
  if (o.serial) {
    s.active = s.rank == 0;
    s.comm = s.agree = MPI_COMM_SELF;
    if (!s.active) return;
  }
  const nn::LayerParallelOptions parallel = placed(
      o,
      [&] {
        return network ? *network : build_network(s.current_model(), s.train->example_shape());
      },
      s.train->example_shape(), s.comm, s.agree);
  s.model = network ? std::make_unique<Classifier>(*network, o.model.classes, s.comm, s.data,
                                                   o.serial, parallel)
                    : std::make_unique<Classifier>(s.current_model(), s.train->example_shape(),
                                                   s.comm, s.data, o.serial, parallel);
  s.optimizer = make_optimizer(o, s.model->module());
  if (o.iterations.active()) {
    s.controller = std::make_unique<IterationController>(
        o.iterations, o.parallel.forward().max_iterations(), o.parallel.backward().max_iterations(),
        skips_first_relaxation(o.parallel.forward()),
        skips_first_relaxation(o.parallel.backward()));
    if (controller_state) s.controller->restore(*controller_state);
  }
  if (o.mgopt.active())
    s.mgopt = std::make_unique<MultilevelOptimizer>(
        o.mgopt, o.model, s.train->example_shape(), s.comm, s.data, s.agree, o.serial, o.parallel,
        [&o](torch::nn::Module& module) { return make_optimizer(o, module); });
  if (!o.resume_dir.empty())
    mpi::collectively(s.comm, [&] {
      nn::load_checkpoint(o.resume_dir, s.model->checkpoint_comm(), s.model->module(),
                          s.optimizer.get());
    });
}

Trainer::~Trainer() = default;

void Trainer::add_observer(std::shared_ptr<Observer> observer) {
  if (observer) state_->observers.push_back(std::move(observer));
}

const TrainerOptions& Trainer::options() const {
  return state_->options;
}
int Trainer::start_epoch() const {
  return state_->start_epoch;
}
bool Trainer::active() const {
  return state_->active;
}
torch::nn::Module* Trainer::module() {
  return state_->model ? &state_->model->module() : nullptr;
}
torch::optim::Optimizer* Trainer::optimizer() {
  return state_->optimizer.get();
}

Evaluation Trainer::evaluate(const DataSource& data) {
  State& s = *state_;
  if (!s.active) return {};
  return train::evaluate(*s.model, data, s.eval_batch(), s.agree, s.data,
                         s.options.evaluation_forward);
}

void Trainer::fit() {
  State& s = *state_;
  if (!s.active) return;
  const TrainerOptions& o = s.options;
  const std::int64_t batches_per_epoch = (s.train->size() + o.batch - 1) / o.batch;
  RunStarted started;
  started.rank = s.rank;
  started.start_epoch = s.start_epoch;
  started.epochs = o.epochs;
  started.train_examples = s.train->size();
  started.test_examples = s.test->size();
  started.batches_per_epoch = batches_per_epoch;
  started.ranks = o.serial ? 1 : s.ranks;
  started.layer_ranks = mpi::size(s.comm);
  started.replicas = s.replicas;
  started.serial = o.serial;
  started.torch_threads = torch::get_num_threads();
  if (!o.serial && !s.model->replicated()) {
    const auto [first, end] = s.model->local_layers();
    started.layers_per_rank.resize(static_cast<size_t>(started.layer_ranks));
    const std::int64_t mine = end - first;
    mpi::check(MPI_Allgather(&mine, 1, MPI_INT64_T, started.layers_per_rank.data(), 1, MPI_INT64_T,
                             s.comm),
               "MPI_Allgather (layers per rank)");
    const std::vector<double> costs = s.model->solver_options().layer_costs();
    std::int64_t n = 0;
    for (const std::int64_t count : started.layers_per_rank) {
      if (costs.empty()) break;
      started.cost_per_rank.push_back(
          std::accumulate(costs.begin() + n, costs.begin() + n + count, 0.0));
      n += count;
    }
  }
  s.notify([&](Observer& obs) { obs.run_started(started); });

  // The timeline: batches first_batch .. first_batch + trace_batches - 1 of this run (counted
  // over epochs), written as soon as the last of them ends.
  std::int64_t run_batch = 0;
  bool trace_pending = !o.trace_path.empty();
  s.trace_settings = trace::Settings{};
  s.trace_settings.batches = o.trace_batches;
  const trace::Settings& trace_settings = s.trace_settings;
  auto write_trace = [&]() {
    trace_pending = false;
    trace::write(o.trace_path, s.agree,
                 fmt::format("\"source\": \"{}\", \"model\": \"{}\", \"serial\": {}, "
                             "\"layer_ranks\": {}, \"data_ranks\": {}, \"torch_threads\": {}",
                             o.trace_source, o.model.kind, o.serial ? "true" : "false",
                             mpi::size(s.comm), s.replicas, torch::get_num_threads()));
    s.notify([&](Observer& obs) { obs.trace_written({s.rank, o.trace_path}); });
  };
  if (trace_pending) trace::start(trace_settings);
  for (int epoch = s.start_epoch; epoch <= o.epochs; ++epoch) {
    if (o.growth.active())
      while (s.level < growth_level(o.growth, epoch)) s.refine(epoch);
    s.train_epoch(epoch, batches_per_epoch, run_batch, trace_pending, write_trace);
  }
  if (trace_pending) write_trace();  // the run had fewer batches than the traced window
}

void Trainer::State::train_epoch(int epoch, std::int64_t batches_per_epoch, std::int64_t& run_batch,
                                 bool& trace_pending, const std::function<void()>& write_trace) {
  const TrainerOptions& o = options;
  const std::int64_t count = train->size();
  const double epoch_start = now();
  // The same shuffle on every rank, and on resume: it depends on (seed, epoch) only.
  std::vector<std::int64_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(o.model.seed * 7919 + static_cast<std::uint64_t>(epoch));
  std::shuffle(order.begin(), order.end(), rng);
  const torch::Tensor perm = torch::from_blob(order.data(), {count}, torch::kInt64);
  for (auto& obs : observers) obs->epoch_started({rank, epoch, count});

  std::vector<double> fwd_ms, bwd_ms, opt_ms, fwd_it, bwd_it, fwd_res, bwd_res;
  // Wall time of each loop iteration: the time per batch. forward_ms and backward_ms are each
  // the slowest rank's phase, which in a chain over ranks includes waiting for the other
  // ranks' previous phase, so their sum overstates the time per batch.
  std::vector<double> batch_ms;
  double batch_start = now();
  // This rank's solver time per batch, forward + backward: steps, waiting, bookkeeping,
  // outside the solve (ghost exchange, open/close layers) [ms] (`weft plot timing`).
  std::array<double, 4> split_ms{};
  double loss_sum = 0, correct_sum = 0;
  std::int64_t seen = 0, fwd_levels = 1, bwd_levels = 1;
  std::int64_t steps = 0;  // step evaluations on this rank
  tally = ControlTally{};
  if (mgopt) mgopt->take_tally();
  std::int64_t mgopt_steps = 0;  // mgopt's tally.steps before this batch
  // This replica's share of each global batch (the first n % D replicas one row more), loaded
  // ahead on a background thread while the solves run; ranks that do not take the inputs load
  // the labels alone. A last batch too small to split is dropped on every rank.
  struct Share {
    std::int64_t k, n, mine;
    torch::Tensor idx;
  };
  std::vector<Share> shares;
  for (std::int64_t start = 0, k = 0; start < count; start += o.batch, ++k) {
    const std::int64_t n = std::min(count, start + o.batch) - start;
    if (n < replicas) continue;
    const std::int64_t base = n / replicas, extra = n % replicas;
    const std::int64_t mine = base + (replica < extra ? 1 : 0);
    const std::int64_t first = start + replica * base + std::min<std::int64_t>(replica, extra);
    shares.push_back({k, n, mine, perm.slice(0, first, first + mine)});
  }
  const bool inputs = model->needs_inputs();
  Prefetcher ahead(static_cast<std::int64_t>(shares.size()), [&](std::int64_t j) {
    const Share& share = shares[static_cast<std::size_t>(j)];
    return inputs ? train->examples(share.idx, epoch)
                  : Batch{torch::Tensor(), train->labels(share.idx)};
  });
  double wait_seconds = 0;
  for (const Share& share : shares) {
    const std::int64_t k = share.k, n = share.n, mine = share.mine;
    trace::batch_begin(run_batch);
    const std::int64_t global_batch = static_cast<std::int64_t>(epoch - 1) * batches_per_epoch + k;
    model->set_batch_index(global_batch);
    const double lr = learning_rate(o, global_batch, batches_per_epoch);
    set_learning_rate(*optimizer, lr);
    PhaseTimes t;
    Batch batch;
    // The wait for the batch (this rank's alone: the agreement after it is neither in the load
    // span nor in the waiting time); a damaged example, known to the loading rank, ends every
    // rank.
    std::exception_ptr failed;
    {
      trace::Span load("load", "train");
      const double wait_start = now();
      try {
        batch = ahead.next();
      } catch (...) {
        failed = std::current_exception();
      }
      wait_seconds += now() - wait_start;
    }
    mpi::agree_or_throw(agree, failed);
    BatchOutcome b;
    const double weight = static_cast<double>(mine * replicas) / static_cast<double>(n);
    try {
      if (controller)
        b = controlled_batch(batch, weight, global_batch, t);
      else if (mgopt)
        b = mgopt->cycle(*model, *optimizer, batch, weight, global_batch, lr, t);
      else
        b = model->train(batch.inputs, batch.labels, *optimizer, t, weight);
    } catch (const Diverged& e) {
      for (auto& obs : observers) obs->divergence({rank, epoch, k, e.loss()});
      throw;
    }
    if (replicas > 1) {
      double sums[2] = {b.loss * static_cast<double>(mine), b.correct};
      trace::Span reduce("allreduce", "mpi", trace::Kind::Reduce);
      reduce.reduction(data, sizeof(sums));
      mpi::check(MPI_Allreduce(MPI_IN_PLACE, sums, mpi::count_of(sums), MPI_DOUBLE, MPI_SUM, data),
                 "MPI_Allreduce (batch loss)");
      b.loss = sums[0] / static_cast<double>(n);
      b.correct = sums[1];
    }
    if (controller) controller->observe_loss(global_batch, b.loss);  // the same on every rank
    fwd_ms.push_back(1e3 * t.forward);
    bwd_ms.push_back(1e3 * t.backward);
    opt_ms.push_back(1e3 * t.optimizer);
    if (model->solve_report(true)) {
      const nn::SolveReport& forward = controller ? mgrit_forward : *model->solve_report(true);
      const nn::SolveReport& backward = controller ? mgrit_backward : *model->solve_report(false);
      // MG/Opt runs many solves per batch, on every level: it counts them.
      steps += mgopt ? mgopt->tally().steps - std::exchange(mgopt_steps, mgopt->tally().steps)
                     : forward.statistics.total_steps() + backward.statistics.total_steps();
      fwd_it.push_back(forward.result.iterations);
      bwd_it.push_back(backward.result.iterations);
      if (auto r = forward.result.final_residual()) fwd_res.push_back(*r);
      if (auto r = backward.result.final_residual()) bwd_res.push_back(*r);
      fwd_levels = static_cast<std::int64_t>(forward.statistics.intervals_per_level.size());
      bwd_levels = static_cast<std::int64_t>(backward.statistics.intervals_per_level.size());
      for (const nn::SolveReport* r : {&forward, &backward}) {
        const auto& st = r->statistics;
        split_ms[0] += 1e3 * st.step_seconds;
        split_ms[1] += 1e3 * st.comm_seconds;
        split_ms[2] += 1e3 * st.other_seconds();
        split_ms[3] += 1e3 * (r->seconds - st.solve_seconds);
      }
    }
    const double batch_end = now();
    batch_ms.push_back(1e3 * (batch_end - batch_start));
    batch_start = batch_end;
    seen += n;
    loss_sum += b.loss * static_cast<double>(n);
    correct_sum += b.correct;
    BatchDone done;
    done.rank = rank;
    done.epoch = epoch;
    done.batch = k;
    done.global_batch = global_batch;
    done.seen = seen;
    done.examples = count;
    done.loss = b.loss;
    done.correct = b.correct;
    done.mean_loss = loss_sum / static_cast<double>(seen);
    done.mean_accuracy = correct_sum / static_cast<double>(seen);
    done.learning_rate = lr;
    for (auto& obs : observers) obs->batch_done(done);
    trace::batch_end(run_batch);
    if (trace_pending && run_batch + 1 == trace_settings.first_batch + trace_settings.batches)
      write_trace();
    ++run_batch;
  }
  const double training_seconds = now() - epoch_start;
  double times[5] = {steady_mean(fwd_ms), steady_mean(bwd_ms), steady_mean(opt_ms),
                     steady_mean(batch_ms), wait_seconds},
         slowest[5];
  mpi::check(MPI_Allreduce(times, slowest, mpi::count_of(times), MPI_DOUBLE, MPI_MAX, agree),
             "MPI_Allreduce");
  const double eval_start = now();
  // The solve's forward differs from the network's only where it is multilevel.
  const EvaluationForward chosen = o.serial || is_exact(model->solver_options())
                                       ? EvaluationForward::exact
                                       : options.evaluation_forward;
  const Evaluation ev = train::evaluate(*model, *test, eval_batch(), agree, data, chosen);
  std::optional<Evaluation> by_solve;
  if (chosen == EvaluationForward::both)
    by_solve = train::evaluate(*model, *test, eval_batch(), agree, data, EvaluationForward::solver);
  const double epoch_end = now(), epoch_seconds = epoch_end - epoch_start;
  EpochMetrics m;
  if (model->solve_report(true)) {
    const double batches = static_cast<double>(fwd_it.size());
    for (double& v : split_ms) v /= batches;
    const int layer_ranks = mpi::size(comm);  // this replica's ranks
    std::vector<double> all(4 * static_cast<size_t>(layer_ranks));
    mpi::check(MPI_Gather(split_ms.data(), 4, MPI_DOUBLE, all.data(), 4, MPI_DOUBLE, 0, comm),
               "MPI_Gather (per-rank timing)");
    for (int r = 0; r < layer_ranks; ++r) {
      const double* v = &all[4 * static_cast<size_t>(r)];
      m.per_rank.push_back({r, v[0], v[1], v[2], v[3]});
    }
  }
  m.epoch = epoch;
  m.train_loss = loss_sum / static_cast<double>(seen);
  m.train_accuracy = correct_sum / static_cast<double>(seen);
  m.test_loss = ev.loss;
  m.test_accuracy = ev.accuracy;
  m.epoch_seconds = epoch_seconds;
  m.eval_seconds = epoch_end - eval_start;
  m.eval_forward = to_string(chosen);
  if (by_solve) {
    m.mgrit_test_loss = by_solve->loss;
    m.mgrit_test_accuracy = by_solve->accuracy;
  }
  m.forward_ms = slowest[0];
  m.backward_ms = slowest[1];
  m.optimizer_ms = slowest[2];
  m.batch_ms = slowest[3];
  m.data_wait_ms = 1e3 * slowest[4];
  m.data_wait_fraction = slowest[4] / std::max(1e-9, training_seconds);
  m.fwd_iterations = mean(fwd_it);
  m.fwd_residual = mean(fwd_res);
  m.bwd_iterations = mean(bwd_it);
  m.bwd_residual = mean(bwd_res);
  if (!fwd_it.empty()) {
    m.fwd_iterations_max = *std::max_element(fwd_it.begin(), fwd_it.end());
    m.bwd_iterations_max = *std::max_element(bwd_it.begin(), bwd_it.end());
    // Over the replica's ranks; a replicated (recurrent) model's ranks each solve a share.
    double evaluations = static_cast<double>(steps + tally.exact_steps);
    mpi::check(MPI_Allreduce(MPI_IN_PLACE, &evaluations, 1, MPI_DOUBLE, MPI_SUM, comm),
               "MPI_Allreduce (step evaluations)");
    m.step_evaluations = evaluations / static_cast<double>(fwd_it.size());
  }
  if (controller) {
    m.iteration_control = true;
    m.fallbacks = tally.fallbacks;
    m.gradient_checks = static_cast<std::int64_t>(tally.errors.size());
    m.gradient_error = mean(tally.errors);
    m.gradient_error_layers = mean(tally.layer_errors);
    m.forward_error = mean(tally.forward_errors);
    // A direction has a share where it has half steps: where the controller chooses its skip.
    auto fraction = [&](std::int64_t n, std::optional<bool> skips) {
      return skips.has_value() && tally.batches > 0
                 ? std::optional<double>(static_cast<double>(n) /
                                         static_cast<double>(tally.batches))
                 : std::nullopt;
    };
    m.fwd_unskipped = fraction(tally.forward_unskipped, controller->forward_skips());
    m.bwd_unskipped = fraction(tally.backward_unskipped, controller->backward_skips());
    if (o.iterations.diagnostics) {
      m.gradient_diagnostics = true;
      m.gradient_noise = mean(tally.noises);
      m.gradient_error_persistence = mean(tally.persistences);
    }
    double ms = 1e3 * tally.seconds;
    mpi::check(MPI_Allreduce(MPI_IN_PLACE, &ms, 1, MPI_DOUBLE, MPI_MAX, agree),
               "MPI_Allreduce (control time)");
    m.control_ms = ms;
  }
  if (mgopt) {
    const MGOptTally mt = mgopt->take_tally();
    m.mgopt_levels = o.mgopt.levels;
    m.mgopt_corrections = mt.corrections;
    m.mgopt_rejected = mt.rejected;
    if (mt.corrections > mt.rejected)
      m.mgopt_step_mean = mt.step_sum / static_cast<double>(mt.corrections - mt.rejected);
    double kib = static_cast<double>(mt.received_bytes) / 1024.0 /
                 static_cast<double>(std::max<std::size_t>(fwd_ms.size(), 1));
    mpi::check(MPI_Allreduce(MPI_IN_PLACE, &kib, 1, MPI_DOUBLE, MPI_MAX, agree),
               "MPI_Allreduce (MG/Opt transfers)");
    m.mgopt_transfer_kib = kib;
  }
  m.ranks = o.serial ? 1 : ranks;
  m.fwd_levels = fwd_levels;
  m.bwd_levels = bwd_levels;
  m.data_ranks = replicas;
  m.lr_end =
      learning_rate(o, static_cast<std::int64_t>(epoch) * batches_per_epoch - 1, batches_per_epoch);
  m.model = o.model.kind;
  m.serial = o.serial;
  if (o.growth.active()) m.depth = step_layers(current_model());
  notify([&](Observer& obs) { obs.evaluation_done({rank, epoch, ev}); });
  notify([&](Observer& obs) { obs.epoch_done({rank, m}); });
  if (!o.checkpoint_dir.empty()) {
    CheckpointInfo info;
    info.model = current_model();
    info.example = example_shape_of(*train);
    info.epoch = epoch;
    info.normalization = train->normalization();
    info.optimizer = o.optimizer;
    info.growth = o.growth;
    info.growth_level = level;
    info.mgopt = o.mgopt;
    if (controller) info.iteration_control = controller->state();
    const std::string meta = checkpoint_metadata(info, m);
    // One checkpoint, written by the first replica (the replicas hold the same parameters);
    // it loads at any (replicas, ranks per replica).
    if (replica == 0)
      mpi::collectively(comm, [&] {
        if (model->replicated() && mpi::rank(comm) != 0) return;
        nn::save_checkpoint(o.checkpoint_dir, model->checkpoint_comm(), model->module(),
                            optimizer.get(), meta);
      });
    if (!o.serial && replicas > 1) mpi::check(MPI_Barrier(world), "MPI_Barrier (checkpoint)");
    notify([&](Observer& obs) { obs.checkpoint_written({rank, epoch, o.checkpoint_dir}); });
  }
}

namespace {
/// Copies of the tensors (buffers), or of the parameters' gradients (undefined where none).
std::vector<torch::Tensor> clones(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.defined() ? t.clone() : torch::Tensor());
  return out;
}
std::vector<torch::Tensor> gradient_clones(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  for (const auto& p : params)
    out.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  return out;
}
/// Puts `values` back into the module's buffers (batch norm's running statistics).
void restore_buffers(torch::nn::Module& module, const std::vector<torch::Tensor>& values) {
  torch::NoGradGuard no_grad;
  const auto buffers = module.buffers();
  for (std::size_t i = 0; i < values.size(); ++i) buffers[i].copy_(values[i]);
}
}  // namespace

BatchOutcome Trainer::State::controlled_batch(const Batch& batch, double weight,
                                              std::int64_t global_batch, PhaseTimes& t) {
  IterationController& c = *controller;
  const IterationControl& control = options.iterations;
  nn::LayerParallelOptions solver = model->solver_options();
  // The controller's setting of one direction: its iterations, and its skip with half steps.
  auto chosen = [](const mgrit::Options& o, int iterations, std::optional<bool> skips) {
    mgrit::Options setting(o);
    setting.max_iterations(iterations);
    if (skips)
      setting.initial_phase(*skips ? mgrit::InitialPhase::Skip : mgrit::InitialPhase::None);
    return setting;
  };
  auto differs = [](const mgrit::Options& a, const mgrit::Options& b) {
    return a.max_iterations() != b.max_iterations() ||
           a.effective_initial_phase() != b.effective_initial_phase();
  };
  const mgrit::Options forward =
      chosen(solver.forward(), c.forward_iterations(), c.forward_skips());
  const mgrit::Options backward =
      chosen(solver.backward(), c.backward_iterations(), c.backward_skips());
  ++tally.batches;
  if (c.forward_skips() == false) ++tally.forward_unskipped;
  if (c.backward_skips() == false) ++tally.backward_unskipped;
  if ((control.forward && differs(forward, solver.forward())) ||
      (control.backward && differs(backward, solver.backward()))) {
    if (control.forward) solver.forward(forward);
    if (control.backward) solver.backward(backward);
    model->set_solver_options(solver);
  }
  // Batch norm's running statistics as before the batch: a recomputation starts from them.
  const std::vector<torch::Tensor> buffers = clones(model->module().buffers());
  optimizer->zero_grad();
  BatchOutcome out;
  bool nan_loss = false;  // the MGRIT solve's logits made the loss NaN or infinite
  try {
    out = model->gradients(batch.inputs, batch.labels, t, weight);
  } catch (const Diverged&) {
    nan_loss = true;
  }
  mgrit_forward = *model->solve_report(true);
  mgrit_backward = *model->solve_report(false);
  // Agreed over every rank (replicas see other batches): the verdicts and whether to check.
  int flags[3] = {
      static_cast<int>(nan_loss ? SolveVerdict::Diverged : judge(mgrit_forward.result.residuals)),
      static_cast<int>(nan_loss ? SolveVerdict::Converging
                                : judge(mgrit_backward.result.residuals)),
      c.check_due(global_batch) ? 1 : 0};
  mpi::check(MPI_Allreduce(MPI_IN_PLACE, flags, mpi::count_of(flags), MPI_INT, MPI_MAX, agree),
             "MPI_Allreduce (iteration control)");
  const bool fallback = c.observe_solves(global_batch, static_cast<SolveVerdict>(flags[0]),
                                         static_cast<SolveVerdict>(flags[1]));
  // A batch that falls back is not checked (its MGRIT gradient is not worth measuring): the
  // check moves to the next batch.
  const bool check = flags[2] != 0 && !fallback;
  if (fallback || check) {
    const double start = now();
    std::vector<torch::Tensor> approximate;
    const auto params = model->module().parameters();
    if (check) approximate = gradient_clones(params);
    const torch::Tensor approximate_logits = out.logits;
    restore_buffers(model->module(), buffers);
    model->set_batch_index(global_batch);  // the same dropout masks
    model->set_solver_options(exact_version(solver));
    optimizer->zero_grad();
    PhaseTimes exact_times;
    try {
      out = model->gradients(batch.inputs, batch.labels, exact_times, weight);
    } catch (...) {
      model->set_solver_options(solver);
      throw;
    }
    tally.exact_steps += model->solve_report(true)->statistics.total_steps() +
                         model->solve_report(false)->statistics.total_steps();
    model->set_solver_options(solver);
    if (check) {
      // ‖g − g*‖², ‖g*‖² over this rank's parameters, then over its chain layers' alone
      double sums[4] = {0, 0, 0, 0};
      const std::vector<bool> chain = model->chain_parameters();
      std::vector<torch::Tensor> errors(params.size());
      for (std::size_t i = 0; i < params.size(); ++i) {
        const torch::Tensor exact = params[i].grad();
        if (!exact.defined()) continue;
        errors[i] = approximate[i].defined() ? approximate[i] - exact : -exact;
        const double error_squared = errors[i].pow(2).sum().item<double>();
        const double exact_squared = exact.pow(2).sum().item<double>();
        sums[0] += error_squared;
        sums[1] += exact_squared;
        if (chain.at(i)) {
          sums[2] += error_squared;
          sums[3] += exact_squared;
        }
      }
      mpi::check(MPI_Allreduce(MPI_IN_PLACE, sums, mpi::count_of(sums), MPI_DOUBLE, MPI_SUM, comm),
                 "MPI_Allreduce (gradient error)");
      auto relative = [](double error_squared, double exact_squared) {
        return exact_squared > 0 ? std::sqrt(error_squared / exact_squared)
                                 : (error_squared > 0 ? 1.0 : 0.0);
      };
      const double error = relative(sums[0], sums[1]);
      if (sums[3] > 0 || sums[2] > 0) tally.layer_errors.push_back(relative(sums[2], sums[3]));
      // ‖z − z*‖², ‖z*‖² of the logits over every replica's rows, where they are (a replicated
      // model's once per replica): one value on every rank.
      double logit_sums[2] = {0, 0};
      const bool owns_logits = out.logits.defined() && approximate_logits.defined() &&
                               (!model->replicated() || mpi::rank(model->layer_comm()) == 0);
      if (owns_logits) {
        logit_sums[0] = (approximate_logits - out.logits).pow(2).sum().item<double>();
        logit_sums[1] = out.logits.pow(2).sum().item<double>();
      }
      mpi::check(MPI_Allreduce(MPI_IN_PLACE, logit_sums, mpi::count_of(logit_sums), MPI_DOUBLE,
                               MPI_SUM, agree),
                 "MPI_Allreduce (forward error)");
      const double forward_error = relative(logit_sums[0], logit_sums[1]);
      if (control.diagnostics) {
        const std::array<int, 4> setting = {
            forward.max_iterations(), static_cast<int>(forward.effective_initial_phase()),
            backward.max_iterations(), static_cast<int>(backward.effective_initial_phase())};
        diagnose_check(batch, weight, global_batch, solver, buffers, std::move(errors), setting,
                       sums[1]);
      }
      c.observe_check(global_batch, error, forward_error);
      tally.errors.push_back(error);
      tally.forward_errors.push_back(forward_error);
    }
    if (fallback) ++tally.fallbacks;
    tally.seconds += now() - start;
  }
  model->step(*optimizer, t);
  return out;
}

void Trainer::State::diagnose_check(const Batch& batch, double weight, std::int64_t global_batch,
                                    const nn::LayerParallelOptions& solver,
                                    const std::vector<torch::Tensor>& before,
                                    std::vector<torch::Tensor> error,
                                    const std::array<int, 4>& setting, double exact_norm_squared) {
  const auto params = model->module().parameters();
  // Persistence: the cosine with the previous check's error, where it ran the same setting on
  // the same parameters (a refined depth has others).
  bool comparable = last_error_setting == setting && last_error.size() == error.size();
  for (std::size_t i = 0; comparable && i < error.size(); ++i)
    comparable = error[i].defined() == last_error[i].defined() &&
                 (!error[i].defined() || error[i].sizes() == last_error[i].sizes());
  int agreed = comparable ? 1 : 0;  // a rank without parameters compares nothing
  mpi::check(MPI_Allreduce(MPI_IN_PLACE, &agreed, 1, MPI_INT, MPI_MIN, agree),
             "MPI_Allreduce (error persistence)");
  if (agreed) {
    double dots[3] = {0, 0, 0};  // e·e', ‖e‖², ‖e'‖²
    for (std::size_t i = 0; i < error.size(); ++i) {
      if (!error[i].defined()) continue;
      dots[0] += (error[i] * last_error[i]).sum().item<double>();
      dots[1] += error[i].pow(2).sum().item<double>();
      dots[2] += last_error[i].pow(2).sum().item<double>();
    }
    mpi::check(MPI_Allreduce(MPI_IN_PLACE, dots, mpi::count_of(dots), MPI_DOUBLE, MPI_SUM, comm),
               "MPI_Allreduce (error persistence)");
    if (dots[1] > 0 && dots[2] > 0)
      tally.persistences.push_back(dots[0] / std::sqrt(dots[1] * dots[2]));
  }
  last_error = std::move(error);
  last_error_setting = setting;
  // Sampling noise: exact gradients of the two halves of the batch, from the state before it
  // (buffers, dropout masks), then the full batch's exact gradient and buffers put back. Every
  // rank of every replica agrees whether the halves hold an example each.
  auto examples = [](const torch::Tensor& t) { return t.defined() ? t.size(0) : std::int64_t{-1}; };
  const std::int64_t own = std::max(examples(batch.inputs), examples(batch.labels));
  std::int64_t fewest = own < 0 ? std::numeric_limits<std::int64_t>::max() : own;
  mpi::check(MPI_Allreduce(MPI_IN_PLACE, &fewest, 1, MPI_INT64_T, MPI_MIN, agree),
             "MPI_Allreduce (sampling noise)");
  if (fewest < 2) return;
  const std::vector<torch::Tensor> exact = gradient_clones(params);
  const std::vector<torch::Tensor> after = clones(model->module().buffers());
  auto half = [&](const torch::Tensor& t, int h) {
    return t.defined() ? t.narrow(0, h * (t.size(0) / 2), t.size(0) / 2) : t;
  };
  std::vector<torch::Tensor> first;
  double noise_squared[1] = {0};
  model->set_solver_options(exact_version(solver));
  try {
    for (int h = 0; h < 2; ++h) {
      restore_buffers(model->module(), before);
      model->set_batch_index(global_batch);
      optimizer->zero_grad();
      PhaseTimes times;
      model->gradients(half(batch.inputs, h), half(batch.labels, h), times, weight);
      tally.exact_steps += model->solve_report(true)->statistics.total_steps() +
                           model->solve_report(false)->statistics.total_steps();
      if (h == 0) {
        first = gradient_clones(params);
        continue;
      }
      for (std::size_t i = 0; i < params.size(); ++i) {
        const torch::Tensor g = params[i].grad();
        if (g.defined() && first[i].defined())
          noise_squared[0] += (g - first[i]).pow(2).sum().item<double>() / 4;
      }
    }
  } catch (...) {
    model->set_solver_options(solver);
    throw;
  }
  model->set_solver_options(solver);
  restore_buffers(model->module(), after);
  {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < params.size(); ++i)
      if (exact[i].defined()) params[i].mutable_grad().copy_(exact[i]);
  }
  mpi::check(MPI_Allreduce(MPI_IN_PLACE, noise_squared, 1, MPI_DOUBLE, MPI_SUM, comm),
             "MPI_Allreduce (sampling noise)");
  if (exact_norm_squared > 0)
    tally.noises.push_back(std::sqrt(noise_squared[0] / exact_norm_squared));
}

void Trainer::State::refine(int epoch) {
  namespace fs = std::filesystem;
  const TrainerOptions& o = options;
  const ModelConfig coarse = current_model();
  const ModelConfig fine = model_at_level(o.model, o.growth, level + 1);
  // The parameters travel through a checkpoint, which loads at any layout of ranks: each rank
  // reads the coarse layers its fine layers interpolate. The folder lies beside the checkpoint
  // folder when there is one (shared by every node, as checkpoints must be), else in the
  // temporary folder; it is named after rank 0's process and removed afterwards.
  int job = static_cast<int>(getpid());
  mpi::check(MPI_Bcast(&job, 1, MPI_INT, 0, agree), "MPI_Bcast (depth refinement)");
  const fs::path base = o.checkpoint_dir.empty()
                            ? fs::temp_directory_path()
                            : fs::absolute(fs::path(o.checkpoint_dir)).parent_path();
  const std::string staging = (base / fmt::format(".weft-grow-{}-epoch{}", job, epoch)).string();
  // Every rank of `agree` agrees after the save (the other replicas wait for the first's) and
  // after the load (then every rank has read what it needs and rank 0 removes the folder).
  auto agreed = [&](std::exception_ptr error) {
    try {
      mpi::agree_or_throw(agree, error);
    } catch (...) {
      std::error_code ignored;
      if (rank == 0) fs::remove_all(staging, ignored);
      throw;
    }
  };
  std::exception_ptr failed;
  try {
    if (replica == 0)
      nn::save_checkpoint(staging, model->checkpoint_comm(), model->module(), optimizer.get(),
                          "{}");
  } catch (...) {
    failed = std::current_exception();
  }
  agreed(failed);
  const nn::LayerParallelOptions parallel = placed(
      o, [&] { return build_network(fine, train->example_shape()); }, train->example_shape(), comm,
      agree);
  auto finer =
      std::make_unique<Classifier>(fine, train->example_shape(), comm, data, o.serial, parallel);
  auto finer_optimizer = make_optimizer(o, finer->module());
  nn::DepthRefinement refinement;
  refinement.coarse_steps = residual_steps(coarse);
  refinement.factor = o.growth.factor;
  refinement.interpolation = o.growth.interpolation;
  try {
    nn::load_checkpoint(staging, finer->checkpoint_comm(), finer->module(), finer_optimizer.get(),
                        refinement.key_sources());
  } catch (...) {
    failed = std::current_exception();
  }
  agreed(failed);
  if (rank == 0) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
  }
  model = std::move(finer);
  optimizer = std::move(finer_optimizer);
  last_error_setting.reset();  // other parameters: no error to compare with
  ++level;
  DepthRefined refined;
  refined.rank = rank;
  refined.epoch = epoch;
  refined.level = level;
  refined.from_steps = step_layers(coarse);
  refined.to_steps = step_layers(fine);
  notify([&](Observer& obs) { obs.depth_refined(refined); });
}

namespace {
Evaluation evaluate_stored(const std::string& dir, const nn::Network* network,
                           const DataSource& data, std::int64_t batch, MPI_Comm comm) {
  if (batch < 1)
    throw InvalidOption("evaluate_checkpoint", "batch",
                        std::to_string(batch) + " is invalid; accepted: >= 1");
  CheckpointInfo info;
  mpi::collectively(comm, [&] {  // every rank reads it: one agreed error, no abort
    info = read_checkpoint_info(dir);
    check_checkpoint_fits(dir, info, data, network != nullptr);
  });
  const auto exact = nn::LayerParallelOptions::exact();
  Classifier model =
      network ? Classifier(*network, info.model.classes, comm, MPI_COMM_NULL, false, exact)
              : Classifier(info.model, data.example_shape(), comm, MPI_COMM_NULL, false, exact);
  mpi::collectively(
      comm, [&] { nn::load_checkpoint(dir, model.checkpoint_comm(), model.module(), nullptr); });
  return evaluate(model, data, batch, comm);
}
}  // namespace

Evaluation evaluate_checkpoint(const std::string& dir, const DataSource& data, std::int64_t batch,
                               MPI_Comm comm) {
  return evaluate_stored(dir, nullptr, data, batch, comm);
}

Evaluation evaluate_checkpoint(const std::string& dir, const nn::Network& network,
                               const DataSource& data, std::int64_t batch, MPI_Comm comm) {
  return evaluate_stored(dir, &network, data, batch, comm);
}

}  // namespace weft::train
