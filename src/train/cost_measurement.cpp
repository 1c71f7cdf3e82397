// The measured costs of weft/nn/cost_model.hpp for a model (weft/train/cost_measurement.hpp).
// The speed of a shared machine drifts by tens of percent over seconds, so a figure timed in one
// burst carries whatever speed that moment had, and figures timed at different moments do not
// add up to a batch. Hence passes: each pass times every figure (the median of a short burst
// after a warm-up), the passes follow one another over several seconds, and each figure is the
// median over the passes: every figure sees the same spread of moments, as the batches of a
// training epoch do. The chain's steps are timed through nn::ChainProbe and the recurrent cell
// through nn::CellProbe: the code the solvers run.
#include "weft/train/cost_measurement.hpp"

#include <dlfcn.h>
#include <malloc.h>
#include <sched.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <exception>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "weft/mgrit/hierarchy.hpp"
#include "weft/models/sequence_classifier.hpp"
#include "weft/nn/probes.hpp"
#include "weft/train/model_zoo.hpp"
#include "weft/util/clock.hpp"
#include "weft/util/error.hpp"

namespace weft::train {
namespace {

using nn::LinkCosts;
using nn::MeasuredCosts;
using nn::Prediction;
using nn::SpatialCosts;
using torch::Tensor;

using weft::clock::now;

/// Median seconds of `body` over `repeats` runs after a warm-up; `setup` runs untimed first.
/// Figures that take long (a deep network's serial batch) stop after a second of timings.
double median_seconds(int repeats, const std::function<void()>& setup,
                      const std::function<void()>& body) {
  constexpr double kBudget = 1.0;
  std::vector<double> t;
  const double start = now();
  for (int k = 0; k <= repeats; ++k) {
    setup();
    const double t0 = now();
    body();
    if (k > 0) t.push_back(now() - t0);
    if (k > 0 && now() - start > kBudget) break;
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
double median_seconds(int repeats, const std::function<void()>& body) {
  return median_seconds(
      repeats, [] {}, body);
}

double count_parameters(const torch::nn::Module& m) {
  double n = 0;
  for (const Tensor& p : m.parameters()) n += static_cast<double>(p.numel());
  return n;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainerOptions& c,
                                                        std::vector<Tensor> params) {
  if (c.optimizer == "sgd")
    return std::make_unique<torch::optim::SGD>(params,
                                               torch::optim::SGDOptions(c.lr).momentum(c.momentum));
  return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(c.lr));
}

/// Median seconds of `body` once per distinct shape of `states` (states of one stage share it).
std::vector<double> per_state(const std::vector<Tensor>& states,
                              const std::function<double(const Tensor&)>& body) {
  std::vector<double> out;
  std::vector<std::pair<std::vector<std::int64_t>, double>> seen;
  for (const Tensor& s : states) {
    const std::vector<std::int64_t> shape = s.sizes().vec();
    auto it =
        std::find_if(seen.begin(), seen.end(), [&](const auto& e) { return e.first == shape; });
    if (it == seen.end()) it = seen.insert(seen.end(), {shape, body(s)});
    out.push_back(it->second);
  }
  return out;
}

/// The figures of spatial depths 1, 2, ... that the solvers' levels use (spatial_levels): the
/// steps on the restricted states (as the solvers evaluate them on coarse levels), the coarse
/// states' sizes and FAS updates, and the transfers between depths.
void measure_spatial(const TrainerOptions& c, nn::ChainProbe& chain,
                     const std::vector<std::int64_t>& representative, std::vector<Tensor> x,
                     int repeats, MeasuredCosts& m) {
  const auto& o = c.parallel;
  // The levels the solvers build (fewer than asked for on short chains), as BatchSolve counts.
  const auto grid = mgrit::TimeGrid::uniform(0.0, static_cast<double>(m.layers), m.layers);
  auto levels = [&](const mgrit::Options& options) {
    return mgrit::Hierarchy::uniform(grid, options).levels();
  };
  if (!o.forward_spatial().empty())
    m.forward_depth =
        nn::SpatialProbe::depths(o.forward_spatial(), levels(o.forward_solver_options()));
  if (!o.backward_spatial().empty())
    m.adjoint_depth =
        nn::SpatialProbe::depths(o.backward_spatial(), levels(o.backward_solver_options()));
  int depths = 0;
  for (const auto* d : {&m.forward_depth, &m.adjoint_depth})
    if (!d->empty()) depths = std::max(depths, *std::max_element(d->begin(), d->end()));
  nn::SpatialProbe transfer;
  const auto N = static_cast<size_t>(m.layers);
  for (int d = 1; d <= depths; ++d) {
    for (size_t p = 0; p < x.size(); ++p) {
      const std::string why = nn::SpatialProbe::why_not_coarsenable(x[p].sizes().vec());
      if (!why.empty())
        throw InvalidOption("LayerParallelOptions", "spatial_levels",
                            "depth " + std::to_string(d) + ": the state at point " +
                                std::to_string(p) + " (shape " + c10::str(x[p].sizes()) + ") " +
                                why);
    }
    SpatialCosts sc;
    const std::vector<Tensor> fine = x;
    for (Tensor& s : x) s = transfer.restrict(s);
    for (const Tensor& s : x)
      sc.state_bytes.push_back(static_cast<std::size_t>(s.numel()) * s.element_size());
    sc.axpy = per_state(x, [&](const Tensor& s) {
      Tensor y = s.clone();
      return median_seconds(repeats, [&] { y.add_(s, 0.5); });
    });
    sc.restriction = per_state(fine, [&](const Tensor& s) {
      return median_seconds(repeats, [&] { transfer.restrict(s); });
    });
    sc.interpolation = per_state(x, [&](const Tensor& s) {
      return median_seconds(repeats, [&] { transfer.interpolate(s); });
    });
    sc.forward.assign(N, 0.0);
    sc.adjoint_build.assign(N, 0.0);
    sc.adjoint_reuse.assign(N, 0.0);
    for (size_t k = 0; k < N; ++k) {
      const auto r = static_cast<size_t>(representative[k]);
      if (r != k) {
        sc.forward[k] = sc.forward[r];
        sc.adjoint_build[k] = sc.adjoint_build[r];
        sc.adjoint_reuse[k] = sc.adjoint_reuse[r];
        continue;
      }
      const auto n = static_cast<std::int64_t>(k);
      const Tensor& xk = x[k];
      const Tensor lambda = torch::randn_like(x[k + 1]);
      sc.forward[k] = median_seconds(repeats, [&] { chain.step(n, n + 1, xk, d); });
      sc.adjoint_build[k] = median_seconds(repeats, [&] {
        nn::StepGraph fresh;
        chain.vjp(n, n + 1, xk, lambda, fresh, false, nullptr, d);
      });
      nn::StepGraph kept;
      chain.vjp(n, n + 1, xk, lambda, kept, true, nullptr, d);
      sc.adjoint_reuse[k] =
          median_seconds(repeats, [&] { chain.vjp(n, n + 1, xk, lambda, kept, true, nullptr, d); });
    }
    m.spatial.push_back(std::move(sc));
  }
}

/// The recurrent model's serial reference (what `weft train --serial` runs): torch::nn::GRU /
/// LSTM over the sequence (the implicit cell: its steps in sequence order, the code the solves
/// run), the linear head, the loss and its backward, and the optimizer over every parameter.
class RecurrentSerial {
 public:
  RecurrentSerial(const TrainerOptions& c, const std::vector<std::int64_t>& image)
      : rows_(models::parse_sequence_order(c.model.sequence) == models::SequenceOrder::Rows),
        T_(rows_ ? image[image.size() - 2] : image[image.size() - 2] * image.back()),
        input_(rows_ ? image.back() : 1),
        hidden_(c.model.hidden),
        L_(c.model.rnn_layers),
        cell_(sequence_classifier_spec(c.model, {image.begin() + 1, image.end()}, c.parallel, false)
                  .cell,
              L_, c.model.implicit_step, c.model.implicit_iterations),
        head_(hidden_, 10) {
    if (lstm())
      lstm_ = torch::nn::LSTM(torch::nn::LSTMOptions(input_, hidden_).num_layers(L_));
    else
      gru_ = torch::nn::GRU(torch::nn::GRUOptions(input_, hidden_).num_layers(L_));
    // weight_ih_l<k>, weight_hh_l<k>, bias_ih_l<k>, bias_hh_l<k>: StackedCell's order.
    params_ = lstm() ? lstm_->parameters() : gru_->parameters();
    x_ = torch::randn({T_, c.batch, input_});
    labels_ = torch::randint(0, 10, {c.batch}, torch::kInt64);
    for (std::int64_t k = 0; k < (lstm() ? 2 * L_ : L_); ++k)
      zero_state_.push_back(torch::zeros({c.batch, hidden_}));
    std::vector<Tensor> all = params_;
    for (const Tensor& p : head_->parameters()) all.push_back(p);
    optimizer_ = make_optimizer(c, all);
  }

  bool lstm() const { return cell_.kind() == nn::CellKind::LSTM; }
  std::int64_t steps() const { return T_; }
  const nn::CellProbe& cell() const { return cell_; }
  torch::nn::Linear& head() { return head_; }
  const Tensor& sequence() const { return x_; }
  const Tensor& labels() const { return labels_; }
  /// The recurrent module's parameters (StackedCell's order).
  const std::vector<Tensor>& parameters() const { return params_; }
  /// The state tuple's shapes (h, and c for LSTM, per layer), zeros.
  const std::vector<Tensor>& zero_state() const { return zero_state_; }

  /// zero_grad, the forward over the sequence, the loss and its backward.
  void backward() {
    optimizer_->zero_grad();
    Tensor top;              // the top layer's final hidden state
    if (cell_.implicit()) {  // --serial runs weft's cell on one rank: its sequential chain
      std::vector<Tensor> s = zero_state_;
      for (std::int64_t t = 0; t < T_; ++t) s = cell_.step(s, x_[t], params_);
      top = s[cell_.top_h()];
    } else if (lstm()) {
      top = std::get<0>(std::get<1>(lstm_->forward(x_)))[L_ - 1];
    } else {
      top = std::get<1>(gru_->forward(x_))[L_ - 1];
    }
    torch::nn::functional::cross_entropy(head_(top), labels_).backward();
  }
  void step() { optimizer_->step(); }

 private:
  bool rows_;
  std::int64_t T_, input_, hidden_, L_;
  nn::CellProbe cell_;
  torch::nn::Linear head_;
  torch::nn::LSTM lstm_{nullptr};
  torch::nn::GRU gru_{nullptr};
  std::vector<Tensor> params_, zero_state_;
  Tensor x_, labels_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

/// gru/lstm: one stacked-cell step (nn::CellProbe, as the MGRIT steps evaluate it,
/// the implicit cell with its iterations included) in each of the ways the Recurrent solves use
/// it, the head, the optimizer, and the serial reference (RecurrentSerial).
MeasuredCosts measure_recurrent(const TrainerOptions& c, const std::vector<std::int64_t>& image,
                                int repeats) {
  MeasuredCosts m;
  m.recurrent = true;
  m.threads = c.threads > 0 ? c.threads : 1;
  torch::set_num_threads(m.threads);
  torch::manual_seed(static_cast<std::uint64_t>(c.model.seed));
  RecurrentSerial serial(c, image);
  const nn::CellProbe& cell = serial.cell();
  const std::vector<Tensor>& params = serial.parameters();
  const Tensor& labels = serial.labels();
  const std::int64_t T = serial.steps();

  std::vector<Tensor> s0;
  for (const Tensor& z : serial.zero_state()) s0.push_back(torch::randn_like(z));
  std::vector<Tensor> detached, graph_params;
  for (const Tensor& p : params) {
    detached.push_back(p.detach());
    graph_params.push_back(p.detach().requires_grad_(true));
  }
  const std::vector<Tensor> lambda = s0;
  const Tensor xt = serial.sequence()[0];
  std::vector<Tensor> leaf, y;
  auto record = [&](const std::vector<Tensor>& with) {
    torch::AutoGradMode on(true);
    leaf.clear();
    for (const Tensor& t : s0) leaf.push_back(t.detach().requires_grad_(true));
    y = cell.step(leaf, xt, with);
  };
  auto vjp = [&](const std::vector<Tensor>& extra) {
    std::vector<Tensor> inputs = leaf;
    inputs.insert(inputs.end(), extra.begin(), extra.end());
    torch::autograd::grad(y, inputs, lambda, false, false, true);
  };
  const double forward = median_seconds(repeats, [&] {
    torch::NoGradGuard no_grad;
    cell.step(s0, xt, detached);
  });
  const double recorded = median_seconds(repeats, [&] { record(graph_params); });
  const double build = median_seconds(repeats, [&] {
    record(detached);
    vjp({});
  });
  // The final sweep reuses the forward's graphs in exact mode with graph caching, else builds.
  const bool cache =
      c.parallel.cache_graphs() && c.parallel.forward_solver_options().max_levels() == 1;
  const double final_vjp =
      cache ? median_seconds(
                  repeats, [&] { record(graph_params); }, [&] { vjp(graph_params); })
            : median_seconds(repeats, [&] {
                std::vector<Tensor> fresh;
                for (const Tensor& p : detached) fresh.push_back(p.detach().requires_grad_(true));
                record(fresh);
                vjp(fresh);
              });
  double axpy = 0;
  {
    std::vector<Tensor> acc = s0;
    for (Tensor& t : acc) t = t.clone();
    axpy = median_seconds(repeats, [&] {
      for (size_t i = 0; i < acc.size(); ++i) acc[i].add_(s0[i], 0.5);
    });
  }

  m.layers = T;
  const auto n = static_cast<size_t>(T);
  m.transition.assign(n, false);
  m.step_size.assign(n, 1.0);
  m.parameters.assign(n, 0.0);
  m.forward.assign(n, forward);
  m.forward_record.assign(n, cache ? recorded : forward);
  m.adjoint_reuse.assign(n, build);  // never used: no graph outlives an adjoint step
  m.adjoint_final.assign(n, final_vjp);
  m.adjoint_build.assign(n, build);
  m.axpy.assign(n + 1, axpy);
  std::size_t state = 0;
  for (const Tensor& t : s0) state += static_cast<std::size_t>(t.numel()) * t.element_size();
  m.state_bytes.assign(n + 1, state);
  double count = 0;
  for (const Tensor& p : params) count += static_cast<double>(p.numel());
  m.gradient_bytes = 4.0 * count;  // float32
  m.open_close_parameters = count + count_parameters(*serial.head());

  // The head, loss and backward on the final hidden state (every rank), the optimizer over
  // every parameter, and the serial batch.
  const Tensor h_top = s0[cell.top_h()];
  m.close = median_seconds(repeats, [&] {
    const Tensor h = h_top.detach().requires_grad_(true);
    torch::nn::functional::cross_entropy(serial.head()(h), labels).backward();
  });
  m.serial_batch = median_seconds(repeats, [&] {
    serial.backward();
    serial.step();
  });
  serial.backward();  // the gradients the optimizer steps with
  m.optimizer = median_seconds(repeats, [&] { serial.step(); });
  return m;
}

double allocated_bytes() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<double>(info.uordblks) + static_cast<double>(info.hblkhd);
}

/// This process's resident bytes now (/proc/self/statm; 0 where it cannot be read).
double resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  double pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return resident * static_cast<double>(sysconf(_SC_PAGESIZE));
}

/// The model as `weft train` runs it, at one rank (MPI_COMM_SELF), on one fixed batch: its
/// solvers time their own sweeps per level (mgrit::Statistics::step_seconds_per_level). gru/lstm:
/// the recurrent classifier, whose solves are over the sequence.
class InSituBatch {
 public:
  InSituBatch(const TrainerOptions& c, const std::vector<std::int64_t>& image) {
    std::vector<std::int64_t> shape = image;
    shape[0] = c.batch;
    torch::manual_seed(static_cast<std::uint64_t>(c.model.seed));
    if (is_recurrent(c.model)) {
      const models::SequenceClassifierSpec spec =
          sequence_classifier_spec(c.model, {shape.begin() + 1, shape.end()}, c.parallel, false);
      recurrent_ = models::SequenceClassifier(MPI_COMM_SELF, spec);
      module_ = recurrent_.ptr();
    } else {
      model_ = nn::LayerParallel(
          MPI_COMM_SELF, build_network(c.model, {shape.begin() + 1, shape.end()}), c.parallel);
      module_ = model_.ptr();
    }
    module_->train();
    optimizer_ = make_optimizer(c, module_->parameters());
    images_ = torch::randn(shape);
    labels_ = torch::randint(0, 10, {c.batch}, torch::kInt64);
  }
  /// What one solve spent on this rank: inside each level's sweeps (steps, the vector work
  /// around them, and on levels coarsened in space the adjoint's forward-state restrictions),
  /// and the rest of the solve outside messages (transfers between levels, interpolation,
  /// injection, norms).
  struct SolveTime {
    std::vector<double> sweeps;
    double other = 0;
  };
  /// One training batch: the forward and the adjoint solve's times, and the wall time of its
  /// phases as `weft train` times them (forward; loss and backward; zero_grad and step).
  struct Batch {
    SolveTime forward, adjoint;
    std::array<double, 3> phases{};
    double allocated_after_forward = 0;  ///< allocated_bytes() at the forward's end
  };
  Batch run() {
    Batch b;
    const double t0 = now();
    const Tensor logits = recurrent_ ? recurrent_->forward(images_) : model_->forward(images_);
    const double t1 = now();
    b.allocated_after_forward = allocated_bytes();
    const double t1_end = now();  // the count is not the model's time
    torch::nn::functional::cross_entropy(logits, labels_).backward();
    const double t2 = now();
    optimizer_->step();
    optimizer_->zero_grad();
    b.phases = {t1 - t0, t2 - t1_end, now() - t2};
    auto time = [](const mgrit::Statistics& st) {
      return SolveTime{st.step_seconds_per_level, std::max(0.0, st.other_seconds())};
    };
    const mgrit::Statistics& f = recurrent_
                                     ? recurrent_->recurrent()->statistics().forward.statistics
                                     : model_->statistics().forward.statistics;
    const mgrit::Statistics& a = recurrent_
                                     ? recurrent_->recurrent()->statistics().backward.statistics
                                     : model_->statistics().backward.statistics;
    b.forward = time(f);
    b.adjoint = time(a);
    return b;
  }

 private:
  nn::LayerParallel model_{nullptr};
  models::SequenceClassifier recurrent_{nullptr};
  std::shared_ptr<torch::nn::Module> module_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  Tensor images_, labels_;
};

/// The in-situ factors of `m` (MeasuredCosts::forward_in_situ), per direction: what the
/// one-rank solve spent on its steps, over the same steps priced from m's own figures. The
/// solve's time, less what the schedule prices as events of their own (transfers between
/// levels; the adjoint's forward-state restrictions, which run inside its sweeps), is the
/// steps' time: each level's sweeps, plus the rest of the solve's vector work shared among the
/// levels in proportion to their sweeps.
void set_in_situ(const TrainerOptions& c, MeasuredCosts& m, const InSituBatch::SolveTime& forward,
                 const InSituBatch::SolveTime& adjoint) {
  const mgrit::Schedule s = nn::batch_schedule(c.parallel, m, 1);
  struct Priced {
    std::vector<double> steps, inside;  // per level: steps; events priced inside its sweeps
    double outside = 0;                 // transfers, outside the sweeps
  };
  Priced pf{std::vector<double>(forward.sweeps.size()), std::vector<double>(forward.sweeps.size())};
  Priced pa{std::vector<double>(adjoint.sweeps.size()), std::vector<double>(adjoint.sweeps.size())};
  for (const mgrit::Event& e : s.front()) {
    Priced& p = e.direction == mgrit::Direction::Forward ? pf : pa;
    const auto l = static_cast<size_t>(e.level);
    if (l >= p.steps.size()) continue;
    const bool cache = c.parallel.cache_graphs();
    if (e.kind == mgrit::Event::Kind::Step) p.steps[l] += nn::step_seconds(m, e, cache, true);
    if (e.kind == mgrit::Event::Kind::Restrict || e.kind == mgrit::Event::Kind::Interpolate)
      p.outside += nn::step_seconds(m, e, cache, true);
    if (e.kind == mgrit::Event::Kind::Compute && e.level > 0) p.inside[l] += e.seconds;
  }
  auto factors = [](const InSituBatch::SolveTime& t, const Priced& p) {
    std::vector<double> steps(t.sweeps.size());
    double total = 0;
    for (size_t l = 0; l < steps.size(); ++l)
      total += steps[l] = std::max(0.0, t.sweeps[l] - p.inside[l]);
    const double share = total > 0 ? 1.0 + std::max(0.0, t.other - p.outside) / total : 1.0;
    std::vector<double> f;
    for (size_t l = 0; l < steps.size(); ++l)
      f.push_back(p.steps[l] > 0 && steps[l] > 0 ? steps[l] * share / p.steps[l] : 1.0);
    return f;
  };
  m.forward_in_situ = factors(forward, pf);
  m.adjoint_in_situ = factors(adjoint, pa);
}

/// The per-rank fixed costs of `m` (MeasuredCosts::fixed_forward, ...): the one-rank batch's
/// phases less the same phases predicted at one rank, where every event is the rank's own work.
void set_fixed(const TrainerOptions& c, MeasuredCosts& m, const std::array<double, 3>& phases) {
  m.fixed_forward = m.fixed_backward = m.fixed_optimizer = 0;
  const Prediction one = nn::predict_batch(c.parallel, m, LinkCosts{}, 1);
  m.fixed_forward = std::max(0.0, phases[0] - one.forward_seconds);
  m.fixed_backward = std::max(0.0, phases[1] - one.backward_seconds);
  m.fixed_optimizer = std::max(0.0, phases[2] - one.optimizer_seconds);
}

/// The fine steps' figures of every chain layer (transition, step_size, forward,
/// forward_record, adjoint_reuse, adjoint_final, adjoint_build) at the states `x` of a forward.
/// Each stage's layers share one structure: the first residual layer of each stage and every
/// transition are measured, the others take their stage's figures. Returns each layer's
/// measured representative.
std::vector<std::int64_t> measure_chain_layers(nn::ChainProbe& chain, const std::vector<Tensor>& x,
                                               int repeats, MeasuredCosts& m) {
  const std::int64_t N = chain.layers();
  m.layers = N;
  std::vector<std::int64_t> representative(static_cast<size_t>(N));
  for (std::int64_t n = 0; n < N; ++n) {
    const bool first_of_stage = n == 0 || chain.is_transition(n - 1);
    representative[static_cast<size_t>(n)] =
        chain.is_transition(n) || first_of_stage ? n : representative[static_cast<size_t>(n - 1)];
  }
  m.transition.resize(static_cast<size_t>(N));
  m.step_size.resize(static_cast<size_t>(N));
  for (auto* v :
       {&m.forward, &m.forward_record, &m.adjoint_reuse, &m.adjoint_final, &m.adjoint_build})
    v->assign(static_cast<size_t>(N), 0.0);
  for (std::int64_t n = 0; n < N; ++n) {
    const auto k = static_cast<size_t>(n);
    const bool tr = chain.is_transition(n);
    m.transition[k] = tr;
    m.step_size[k] = tr ? 0.0 : chain.step_size(n);
    const auto r = static_cast<size_t>(representative[k]);
    if (r != k) {
      m.forward[k] = m.forward[r];
      m.forward_record[k] = m.forward_record[r];
      m.adjoint_reuse[k] = m.adjoint_reuse[r];
      m.adjoint_final[k] = m.adjoint_final[r];
      m.adjoint_build[k] = m.adjoint_build[r];
      continue;
    }
    const Tensor& xn = x[k];
    const Tensor lambda = torch::randn_like(x[k + 1]);
    m.forward[k] = median_seconds(repeats, [&] { chain.step(n, n + 1, xn); });
    nn::StepGraph graph;
    m.forward_record[k] = median_seconds(repeats, [&] { chain.record(n, xn, graph); });
    chain.record(n, xn, graph);
    m.adjoint_reuse[k] =
        median_seconds(repeats, [&] { chain.vjp(n, n + 1, xn, lambda, graph, true); });
    std::vector<Tensor> grads;
    m.adjoint_final[k] = median_seconds(
        repeats, [&] { chain.record(n, xn, graph); },
        [&] { chain.vjp(n, n + 1, xn, lambda, graph, false, &grads); });
    m.adjoint_build[k] = median_seconds(repeats, [&] {
      nn::StepGraph fresh;
      chain.vjp(n, n + 1, xn, lambda, fresh, false);
    });
  }
  return representative;
}

MeasuredCosts measure_pass(const TrainerOptions& c, const std::vector<std::int64_t>& image,
                           int repeats) {
  if (is_recurrent(c.model)) return measure_recurrent(c, image, repeats);
  MeasuredCosts m;
  m.threads = c.threads > 0 ? c.threads : 1;  // one core per rank unless --threads says
  torch::set_num_threads(m.threads);
  torch::manual_seed(static_cast<std::uint64_t>(c.model.seed));
  std::vector<std::int64_t> shape = image;
  shape[0] = c.batch;
  const std::vector<std::int64_t> example(shape.begin() + 1, shape.end());
  // The sequential network: open, close, the optimizer and the serial batch; the probe's
  // one-rank module: the chain's steps as the solvers evaluate them.
  nn::SequentialNetwork net(build_network(c.model, example), c.parallel.seed());
  net->train();
  nn::ChainProbe chain(
      nn::LayerParallel(MPI_COMM_SELF, build_network(c.model, example), c.parallel));
  chain.module()->train();
  const std::int64_t N = net->steps();
  const Tensor images = torch::randn(shape);
  const Tensor labels = torch::randint(0, 10, {c.batch}, torch::kInt64);

  // The states the chain produces.
  const std::vector<Tensor> x = chain.states(images);
  for (const Tensor& s : x)
    m.state_bytes.push_back(static_cast<std::size_t>(s.numel()) * s.element_size());
  for (const Tensor& s : x) {
    Tensor y = s.clone();
    m.axpy.push_back(median_seconds(repeats, [&] { y.add_(s, 0.5); }));
  }
  const std::vector<std::int64_t> representative = measure_chain_layers(chain, x, repeats, m);
  m.parameters.assign(static_cast<size_t>(N), 0.0);
  for (std::int64_t n = 0; n < N; ++n)
    m.parameters[static_cast<size_t>(n)] = count_parameters(net->step(n).module());

  // Open, close and loss on their ranks.
  if (!net->open().is_empty()) {
    m.open_parameters = count_parameters(net->open().module());
    Tensor out;
    m.open_forward = median_seconds(repeats, [&] { out = net->open().forward(images); });
    const Tensor lambda0 = torch::randn_like(x.front());
    if (out.requires_grad())  // an open layer without parameters (--open copy) has no backward
      m.open_backward = median_seconds(
          repeats, [&] { out = net->open().forward(images); }, [&] { out.backward(lambda0); });
  }
  m.open_close_parameters = m.open_parameters;
  m.close = median_seconds(repeats, [&] {
    const Tensor xN = x.back().detach().requires_grad_(true);
    const Tensor logits = net->close().is_empty() ? xN.flatten(1) : net->close().forward(xN);
    torch::nn::functional::cross_entropy(logits, labels).backward();
  });
  if (!net->close().is_empty()) m.open_close_parameters += count_parameters(net->close().module());
  for (const auto& b : net->buffers())
    if (b.defined()) m.has_buffers = true;

  // The optimizer over every parameter, and the plain LibTorch batch (`weft train --serial`).
  auto optimizer = make_optimizer(c, net->parameters());
  auto serial_step = [&] {
    optimizer->zero_grad();
    const Tensor logits = net->forward(images);
    torch::nn::functional::cross_entropy(logits, labels).backward();
  };
  m.serial_batch = median_seconds(repeats, [&] {
    serial_step();
    optimizer->step();
  });
  serial_step();  // the gradients the optimizer steps with; their values do not change its cost
  m.optimizer = median_seconds(repeats, [&] { optimizer->step(); });
  measure_spatial(c, chain, representative, x, repeats, m);
  return m;
}

/// One plain LibTorch training batch of the model (`weft train --serial`: forward, loss,
/// backward, optimizer step) on its own copy of the model and a random batch.
std::function<void()> serial_batch(const TrainerOptions& c,
                                   const std::vector<std::int64_t>& image) {
  if (is_recurrent(c.model)) {
    auto serial = std::make_shared<RecurrentSerial>(c, image);
    return [serial] {
      serial->backward();
      serial->step();
    };
  }
  std::vector<std::int64_t> shape = image;
  shape[0] = c.batch;
  const std::vector<std::int64_t> example(shape.begin() + 1, shape.end());
  struct Chain {
    nn::SequentialNetwork net;
    Tensor images, labels;
    std::unique_ptr<torch::optim::Optimizer> optimizer;
  };
  auto chain = std::make_shared<Chain>(
      Chain{nn::SequentialNetwork(build_network(c.model, example), c.parallel.seed()),
            torch::randn(shape), torch::randint(0, 10, {c.batch}, torch::kInt64), nullptr});
  chain->net->train();
  chain->optimizer = make_optimizer(c, chain->net->parameters());
  return [chain] {
    chain->optimizer->zero_grad();
    torch::nn::functional::cross_entropy(chain->net->forward(chain->images), chain->labels)
        .backward();
    chain->optimizer->step();
  };
}

/// Sets the calling thread's OpenMP thread count (LibTorch's intra-op threads on this build).
/// OpenMP keeps it per thread, so a new thread must set its own; torch::set_num_threads would do
/// that but also rebuilds process-wide pools (pthreadpool) that other threads may be computing
/// with. The OpenMP runtime is the one LibTorch loaded, found at run time; without one (another
/// threading backend) torch::set_num_threads is called, one thread at a time.
void set_thread_count(int threads) {
  using SetNumThreads = void (*)(int);
  static const auto omp =
      reinterpret_cast<SetNumThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (omp != nullptr) return omp(threads);
  static std::mutex one_at_a_time;
  const std::lock_guard<std::mutex> lock(one_at_a_time);
  torch::set_num_threads(threads);
}

/// `timed()` while `others` threads run the model's serial batch, each on its own copy with
/// `threads` torch threads; they have finished one batch before `timed` starts.
double while_busy(const TrainerOptions& c, const std::vector<std::int64_t>& image, int threads,
                  int others, const std::function<double()>& timed) {
  std::atomic<bool> stop{false};
  std::atomic<int> ready{0};
  std::vector<std::exception_ptr> errors(static_cast<size_t>(others));
  std::vector<std::thread> busy;
  for (int k = 0; k < others; ++k)
    busy.emplace_back([&, k] {
      try {
        set_thread_count(threads);
        const std::function<void()> work = serial_batch(c, image);
        work();
        ++ready;
        while (!stop) work();
      } catch (...) {
        errors[static_cast<size_t>(k)] = std::current_exception();
        ++ready;
      }
    });
  while (ready < others) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  double seconds = 0;
  std::exception_ptr error;
  try {
    seconds = timed();
  } catch (...) {
    error = std::current_exception();
  }
  stop = true;
  for (std::thread& t : busy) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  if (error) std::rethrow_exception(error);
  return seconds;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Replaces each timed figure of passes[0] by its median over the passes (the sizes, counts and
/// structure are the same in every pass).
MeasuredCosts median_over(const std::vector<MeasuredCosts>& passes) {
  MeasuredCosts m = passes.front();
  // field(q) is a figure of pass q; m's becomes their median.
  auto each = [&](auto field) {
    std::vector<double> v;
    for (const MeasuredCosts& q : passes) v.push_back(field(q));
    field(m) = median(std::move(v));
  };
  using PerLayer = std::vector<double> MeasuredCosts::*;
  for (PerLayer f :
       {&MeasuredCosts::forward, &MeasuredCosts::forward_record, &MeasuredCosts::adjoint_reuse,
        &MeasuredCosts::adjoint_final, &MeasuredCosts::adjoint_build, &MeasuredCosts::axpy,
        &MeasuredCosts::forward_in_situ, &MeasuredCosts::adjoint_in_situ})
    for (size_t k = 0; k < (m.*f).size(); ++k) each([&](auto& q) -> auto& { return (q.*f)[k]; });
  for (double MeasuredCosts::*f :
       {&MeasuredCosts::open_forward, &MeasuredCosts::open_backward, &MeasuredCosts::close,
        &MeasuredCosts::optimizer, &MeasuredCosts::serial_batch, &MeasuredCosts::fixed_forward,
        &MeasuredCosts::fixed_backward, &MeasuredCosts::fixed_optimizer,
        &MeasuredCosts::model_bytes})
    each([&](auto& q) -> auto& { return q.*f; });
  using PerPoint = std::vector<double> SpatialCosts::*;
  for (size_t d = 0; d < m.spatial.size(); ++d)
    for (PerPoint f :
         {&SpatialCosts::forward, &SpatialCosts::adjoint_build, &SpatialCosts::adjoint_reuse,
          &SpatialCosts::axpy, &SpatialCosts::restriction, &SpatialCosts::interpolation})
      for (size_t k = 0; k < (m.spatial[d].*f).size(); ++k)
        each([&](auto& q) -> auto& { return (q.spatial[d].*f)[k]; });
  return m;
}

/// `passes` passes (fewer, but at least 3, once 20 s have gone), each timing every figure in a
/// burst of 3 after a warm-up, then one training batch of the model at one rank: each pass's
/// in-situ factors compare figures and batch of the same moment.
MeasuredCosts measure(const TrainerOptions& c, const std::vector<std::int64_t>& image, int passes) {
  constexpr int kBurst = 3, kMinPasses = 3;
  constexpr double kBudget = 20.0;
  const double process = resident_bytes();
  std::vector<MeasuredCosts> all;
  const double start = now();
  std::unique_ptr<InSituBatch> in_situ;
  double before_model = 0;
  while (static_cast<int>(all.size()) < passes) {
    all.push_back(
        measure_pass(c, image, kBurst));  // the first pass also checks the model (flag names)
    if (!in_situ) {
      before_model = allocated_bytes();
      in_situ = std::make_unique<InSituBatch>(c, image);
      in_situ->run();  // warm-up (creates the optimizer's state)
    }
    const InSituBatch::Batch b = in_situ->run();
    set_in_situ(c, all.back(), b.forward, b.adjoint);
    set_fixed(c, all.back(), b.phases);
    all.back().process_bytes = process;
    all.back().model_bytes = std::max(0.0, b.allocated_after_forward - before_model);
    if (static_cast<int>(all.size()) >= kMinPasses && now() - start > kBudget) break;
  }
  return median_over(all);
}

}  // namespace

MeasuredCosts measure_costs(const TrainerOptions& options,
                            const std::vector<std::int64_t>& example_shape, int passes) {
  if (passes < 1)
    throw InvalidOption("measure_costs", "passes",
                        "is " + std::to_string(passes) + "; accepted: >= 1");
  std::vector<std::int64_t> image{1};
  image.insert(image.end(), example_shape.begin(), example_shape.end());
  try {
    return measure(options, image, passes);
  } catch (const c10::Error& e) {  // LibTorch's message without its C++ backtrace
    throw BadData(std::string("measuring the model's costs: ") + e.what_without_backtrace());
  }
}

std::vector<double> measure_layer_costs(const TrainerOptions& options, const nn::Network& network,
                                        const std::vector<std::int64_t>& example_shape,
                                        int repeats) {
  if (repeats < 1)
    throw InvalidOption("measure_layer_costs", "repeats",
                        "is " + std::to_string(repeats) + "; accepted: >= 1");
  // The random batch and adjoint seeds must not move the training's own random streams.
  struct RestoreGenerator {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    Tensor state = generator.get_state();
    ~RestoreGenerator() { generator.set_state(state); }
  } restore;
  try {
    nn::LayerParallelOptions probe = options.parallel;
    probe.layer_costs({});
    nn::ChainProbe chain(nn::LayerParallel(MPI_COMM_SELF, network, probe));
    chain.module()->train();
    std::vector<std::int64_t> shape{options.batch};
    shape.insert(shape.end(), example_shape.begin(), example_shape.end());
    const std::vector<Tensor> x = chain.states(torch::randn(shape));
    MeasuredCosts m;
    measure_chain_layers(chain, x, repeats, m);
    return nn::layer_costs(m);
  } catch (const c10::Error& e) {  // LibTorch's message without its C++ backtrace
    throw BadData(std::string("measuring the layers' costs: ") + e.what_without_backtrace());
  }
}

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

std::vector<double> measure_busy_slowdown(const TrainerOptions& options,
                                          const std::vector<std::int64_t>& example_shape,
                                          const std::vector<int>& busy_cores, int passes) {
  constexpr int kBurst = 3, kMinPasses = 3;
  constexpr double kBudget = 20.0;
  const int threads = options.threads > 0 ? options.threads : 1;
  const int cores = available_cores();
  if (passes < 1)
    throw InvalidOption("measure_busy_slowdown", "passes",
                        "is " + std::to_string(passes) + "; accepted: >= 1");
  for (int b : busy_cores)
    if (b < 1 || b * threads > cores)
      throw InvalidOption("measure_busy_slowdown", "busy_cores",
                          "has " + std::to_string(b) + "; accepted: 1.." +
                              std::to_string(std::max(1, cores / threads)) + " (" +
                              std::to_string(cores) + " cores, " + std::to_string(threads) +
                              " torch threads per rank)");
  std::vector<std::int64_t> image{1};
  image.insert(image.end(), example_shape.begin(), example_shape.end());
  try {
    torch::set_num_threads(threads);
    torch::manual_seed(static_cast<std::uint64_t>(options.model.seed));
    const std::function<void()> batch = serial_batch(options, image);
    batch();  // warm-up
    auto burst = [&] { return median_seconds(kBurst, batch); };
    // Alone and loaded alternate within each pass, so that both see the same moments.
    std::vector<std::vector<double>> ratios(busy_cores.size());
    const double start = now();
    for (int pass = 0; pass < passes; ++pass) {
      for (size_t i = 0; i < busy_cores.size(); ++i) {
        if (busy_cores[i] == 1) {
          ratios[i].push_back(1.0);
          continue;
        }
        const double alone = burst();
        ratios[i].push_back(while_busy(options, image, threads, busy_cores[i] - 1, burst) / alone);
      }
      if (pass + 1 >= kMinPasses && now() - start > kBudget) break;
    }
    std::vector<double> out;
    for (std::vector<double>& r : ratios) out.push_back(median(std::move(r)));
    return out;
  } catch (const c10::Error& e) {
    throw BadData(std::string("measuring the busy-core slowdown: ") + e.what_without_backtrace());
  }
}

}  // namespace weft::train
