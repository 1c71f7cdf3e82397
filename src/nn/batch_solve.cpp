// One batch through the chain: the forward and adjoint MGRIT solves over tensor states.
#include "batch_solve.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "tags.hpp"
#include "tensor_tuple.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"
#include "weft/util/trace.hpp"

namespace weft::nn::detail {

using torch::Tensor;

namespace {
std::string shape_text(torch::IntArrayRef shape) {
  return c10::str(shape);
}

/// LibTorch errors without their C++ backtrace.
std::string message_of(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  return c10_error ? c10_error->what_without_backtrace() : e.what();
}

std::int64_t point_of(double t) {
  return static_cast<std::int64_t>(std::llround(t));
}
}  // namespace

// ------------------------------------------------------------------------------------------
// Tensor states

void TensorOps::sum(double a, const Tensor& x, double b, Tensor& y) const {
  torch::NoGradGuard no_grad;
  if (solve->is_shared_zero(x)) {  // y = b y: no pass over memory for a zero
    if (!y.defined() || b == 0.0)
      y = x;
    else if (b != 1.0 && !solve->is_shared_zero(y))
      y.mul_(b);
    return;
  }
  if (y.defined() && solve->is_shared_zero(y)) y = Tensor();  // then y = a x is right
  if (!y.defined() || b == 0.0) {
    y = a == 1.0 ? x.clone() : x * a;
    return;
  }
  if (b != 1.0) y.mul_(b);
  y.add_(x, a);
}

double TensorOps::norm(const Tensor& u) const {
  torch::NoGradGuard no_grad;
  return u.norm().item<double>();
}

void TensorOps::copy(const Tensor& src, Tensor& dst) const {
  torch::NoGradGuard no_grad;
  if (solve->is_shared_zero(src)) {  // copies of an initial guess share it too
    dst = src;
    return;
  }
  if (dst.defined() && solve->is_shared_zero(dst)) dst = Tensor();
  if (dst.defined() && dst.sizes() == src.sizes() && dst.dtype() == src.dtype() &&
      dst.device() == src.device())
    dst.copy_(src);
  else
    dst = src.clone();
}

std::size_t TensorOps::buffer_size(const Tensor& like) const {
  return static_cast<std::size_t>(like.numel()) * like.element_size();
}

void TensorOps::pack(const Tensor& u, void* buffer) const {
  torch::NoGradGuard no_grad;
  const std::size_t bytes = buffer_size(u);
  if (u.is_cpu()) {
    const Tensor c = u.contiguous();
    if (bytes) std::memcpy(buffer, c.data_ptr(), bytes);
    return;
  }
  // Device tensors go through pinned host memory.
  Tensor& staging = solve->staging_;
  if (!staging.defined() || staging.sizes() != u.sizes() || staging.dtype() != u.dtype())
    staging = torch::empty(u.sizes(), torch::TensorOptions().dtype(u.dtype()).pinned_memory(true));
  staging.copy_(u);
  if (bytes) std::memcpy(buffer, staging.data_ptr(), bytes);
}

void TensorOps::unpack(const void* buffer, Tensor& u) const {
  torch::NoGradGuard no_grad;
  const std::vector<std::int64_t> shape = u.sizes().vec();
  const Tensor blob =
      torch::from_blob(const_cast<void*>(buffer), shape, torch::TensorOptions().dtype(u.dtype()));
  if (solve->is_shared_zero(u))
    u = blob.to(solve->shapes_.options(), /*non_blocking=*/false, /*copy=*/true);
  else
    u.copy_(blob);
}

int TensorOps::depth(int level) const {
  const auto& d = adjoint ? solve->adjoint_depth_ : solve->forward_depth_;
  if (d.empty() || level < 0) return 0;
  return d[std::min(static_cast<size_t>(level), d.size() - 1)];
}

void TensorOps::coarsen(const Tensor& fine, Tensor& coarse, int fine_level) const {
  if (depth(fine_level + 1) > depth(fine_level))
    coarse = solve->transfer_.restrict(fine);
  else
    copy(fine, coarse);
}

void TensorOps::refine(const Tensor& coarse, Tensor& fine, int coarse_level) const {
  if (depth(coarse_level) > depth(coarse_level - 1))
    fine = solve->transfer_.interpolate(coarse);
  else
    copy(coarse, fine);
}

// ------------------------------------------------------------------------------------------
// The Apps

Tensor ForwardApp::init(double t) const {
  const std::int64_t p = point_of(t);
  if (p == 0 && solve->x0_.defined())
    return solve->pair_.forward_one_level() ? solve->x0_ : solve->x0_.clone();
  return solve->zero_of_point(p);
}

void ForwardApp::step(const Tensor& in, Tensor& out, double, double,
                      const mgrit::StepInfo& info) const {
  BatchSolve& s = *solve;
  const std::int64_t a = info.from, b = info.to;
  s.evaluator_.at_level(info.level);
  // The forward's final fine sweep on the owner: the evaluation whose state backprop uses (it
  // may update batch-norm statistics, and its graph is kept for the adjoint).
  const bool final_fine = info.done && info.level == 0 && b == a + 1 && s.bank_.is_local(a);
  if (final_fine && s.record_graphs_) {
    Graph& g = s.graphs_[static_cast<size_t>(a - s.bank_.begin())];
    const Tensor y = s.evaluator_.record(a, in, true, g);
    torch::NoGradGuard no_grad;  // so the step needs no detached view of y
    out = s.evaluator_.step_from(a, in, y);
  } else {
    out = s.evaluator_.step(a, b, in, final_fine, depth(info.level));
  }
  const auto& expected = s.shape_of_point(b, depth(info.level));
  if (out.sizes() != torch::IntArrayRef(expected))
    throw BadData("layer-parallel forward (" + mpi::where(s.comm_) + "): " +
                  (b == a + 1
                       ? s.chain_.layer_label(a)
                       : "the step from point " + std::to_string(a) + " to " + std::to_string(b)) +
                  " maps a state of shape " + shape_text(in.sizes()) + " to shape " +
                  shape_text(out.sizes()) + "; expected " + shape_text(expected) +
                  " (step layers must preserve their stage's state shape)");
}

Tensor AdjointApp::init(double t) const {
  const std::int64_t p = point_of(t);
  if (p == solve->chain_.layers() && solve->lambda_N_.defined())
    return solve->pair_.adjoint_one_level() ? solve->lambda_N_ : solve->lambda_N_.clone();
  return solve->zero_of_point(p);
}

void AdjointApp::step(const Tensor& in, Tensor& out, double, double,
                      const mgrit::StepInfo& info) const {
  BatchSolve& s = *solve;
  const std::int64_t b = info.from, a = info.to;
  s.evaluator_.at_level(info.level);
  if (!s.bank_.is_local(a))
    throw MpiError("layer-parallel backward (" + mpi::where(s.comm_) + "): adjoint step into " +
                   std::to_string(a) + " outside the local layers [" +
                   std::to_string(s.bank_.begin()) + ", " + std::to_string(s.bank_.end()) + ")");
  // Coarse levels restricted in space linearize at the restricted forward state.
  const int d = depth(info.level);
  const Tensor* x = s.forward_state(a, d);
  if (!x || !x->defined())
    throw MpiError("layer-parallel backward (" + mpi::where(s.comm_) + "): forward state " +
                   std::to_string(a) + " is not stored");
  const auto k = static_cast<size_t>(a - s.bank_.begin());
  const bool fine = b == a + 1 && d == 0;
  const bool final_fine = info.done && info.level == 0 && fine;
  const bool cache = s.options_.cache_graphs();
  Graph scratch;
  Graph& g = !cache ? scratch : fine ? s.graphs_[k] : s.coarse_graphs_[{info.level, a, b}];
  if (g.defined()) ++(fine ? s.stats_.graphs_reused : s.stats_.coarse_graphs_reused);
  bool built = false;
  std::vector<Tensor> param_grads;
  out = s.evaluator_.vjp(a, b, *x, in, g, /*retain_graph=*/cache && !final_fine,
                         final_fine ? &s.bank_.layer_params()[k] : nullptr,
                         final_fine ? &param_grads : nullptr, &built, d);
  if (built) ++(fine ? s.stats_.graphs_built : s.stats_.coarse_graphs_built);
  if (final_fine || !cache) g = Graph();  // the final sweep is each graph's last use
  if (final_fine) {
    auto& acc = s.grad_acc_[k];
    acc.resize(param_grads.size());
    torch::NoGradGuard no_grad;
    for (size_t p = 0; p < param_grads.size(); ++p)
      if (param_grads[p].defined())
        acc[p] = acc[p].defined() ? acc[p].add_(param_grads[p]) : param_grads[p];
    s.sync_.layer_done(k, acc);
  }
}

// ------------------------------------------------------------------------------------------
// BatchSolve

BatchSolve::BatchSolve(MPI_Comm comm, const Chain& chain, const Placement& placement,
                       LayerBank& bank, LayerEvaluator& evaluator, GradientSync& sync,
                       BatchStatistics& stats)
    : comm_(comm),
      rank_(mpi::rank(comm)),
      ranks_(mpi::size(comm)),
      chain_(chain),
      placement_(placement),
      bank_(bank),
      evaluator_(evaluator),
      sync_(sync),
      stats_(stats),
      pair_(comm, tags::kBoundaryState, "layer-parallel forward") {
  fapp_.solve = this;
  aapp_.solve = this;
  aapp_.adjoint = true;
  lo_ = placement.point_begin(rank_);
  hi_ = placement.point_begin(rank_ + 1);
}

void BatchSolve::configure(const LayerParallelOptions& options) {
  options_ = options;
  evaluator_.coarse_kernels(options.spatial_kernels());
  auto coarsened = [](const std::vector<int>& flags) {
    for (int f : flags)
      if (f > 0) return true;
    return false;
  };
  evaluator_.running_statistics_when_coarsened(
      options.spatial_running_statistics() &&
      (coarsened(options.forward_spatial()) || coarsened(options.backward_spatial())));
  reset();
}

void BatchSolve::reset() {
  pair_.reset();
  graphs_.clear();
  coarse_graphs_.clear();
  staging_ = Tensor();
  input_shape_.clear();
  coarse_x_.clear();
}

bool BatchSolve::is_shared_zero(const Tensor& t) const {
  for (const Tensor& z : zeros_)
    if (t.is_same(z)) return true;
  return false;
}

const Tensor& BatchSolve::zero_of_point(std::int64_t p) {
  const auto s = static_cast<size_t>(chain_.stage_of_point(p));
  if (!zeros_[s].defined()) zeros_[s] = torch::zeros(shapes_.shape[s], shapes_.options());
  return zeros_[s];
}

const Tensor* BatchSolve::forward_state(std::int64_t n) const {
  return pair_.forward_state(n);
}

const Tensor* BatchSolve::forward_state(std::int64_t n, int depth) {
  if (depth == 0) return forward_state(n);
  Tensor& x = coarse_x_[{depth, n}];
  if (!x.defined()) {
    const Tensor* finer = forward_state(n, depth - 1);
    if (!finer || !finer->defined()) return nullptr;
    x = transfer_.restrict(*finer);
  }
  return &x;
}

void BatchSolve::find_spatial_shapes() {
  forward_depth_ =
      spatial_depths(options_.forward_spatial(),
                     pair_.forward_if_built() ? pair_.forward_if_built()->hierarchy().levels() : 1);
  adjoint_depth_ =
      spatial_depths(options_.backward_spatial(),
                     pair_.adjoint_if_built() ? pair_.adjoint_if_built()->hierarchy().levels() : 1);
  depth_shapes_.assign(1, shapes_.shape);
  mpi::collectively(comm_, [&] {
    torch::NoGradGuard no_grad;
    // The first level of each depth is where the states are restricted: name it in errors.
    auto deepen = [&](int depth, const char* which, int level) {
      while (static_cast<int>(depth_shapes_.size()) <= depth) {
        const auto& above = depth_shapes_.back();
        std::vector<std::vector<std::int64_t>> coarse;
        for (size_t st = 0; st < above.size(); ++st) {
          const std::string why = why_not_coarsenable(above[st]);
          if (!why.empty())
            throw InvalidOption(
                std::string("layer-parallel ") + which + " solve: spatial coarsening of level " +
                std::to_string(level) + ": the state of stage " + std::to_string(st) + " (shape " +
                shape_text(above[st]) + " on level " + std::to_string(level - 1) + ") " + why);
          coarse.push_back(coarsened_shape(above[st]));
        }
        // Transitions act on coarse states too: they must map coarse shapes onto coarse shapes.
        for (int st = 0; st + 1 < chain_.stages(); ++st) {
          const std::int64_t t = chain_.transition_after(st);
          Layer& g = bank_.probe(t);
          const bool was_training = g.ptr()->is_training();
          g.ptr()->train(false);
          std::string error;
          try {
            const Tensor y =
                g.forward(torch::zeros(coarse[static_cast<size_t>(st)], shapes_.options()));
            if (y.sizes() != torch::IntArrayRef(coarse[static_cast<size_t>(st) + 1]))
              error = "maps it to shape " + shape_text(y.sizes()) + ", not the restricted " +
                      shape_text(coarse[static_cast<size_t>(st) + 1]);
          } catch (const std::exception& e) {
            error = "fails on it: " + message_of(e);
          }
          g.ptr()->train(was_training);
          if (!error.empty())
            throw InvalidOption(
                std::string("layer-parallel ") + which + " solve: spatial coarsening of level " +
                std::to_string(level) + ": transition " + std::to_string(t) +
                " applied to the coarse state of stage " + std::to_string(st) + " (shape " +
                shape_text(coarse[static_cast<size_t>(st)]) + ") " + error);
        }
        depth_shapes_.push_back(std::move(coarse));
      }
    };
    for (const auto& [depths, which] :
         {std::make_pair(&forward_depth_, "forward"), std::make_pair(&adjoint_depth_, "backward")})
      for (size_t l = 1; l < depths->size(); ++l)
        if ((*depths)[l] > (*depths)[l - 1]) deepen((*depths)[l], which, static_cast<int>(l));
    // The local step layers must work on every coarse grid too (no fixed spatial sizes): a
    // failure in the middle of a solve would leave the other ranks waiting.
    for (size_t d = 1; d < depth_shapes_.size(); ++d)
      for (std::int64_t n = bank_.begin(); n < bank_.end(); ++n) {
        if (chain_.is_transition(n)) continue;  // probed above
        const auto& in = shape_of_point(n, static_cast<int>(d));
        std::string error;
        torch::nn::Module& m = bank_.local(n).module();
        const bool was_training = m.is_training();
        m.train(false);
        try {
          const Tensor y =
              evaluator_.layer(n, torch::zeros(in, shapes_.options()), false, static_cast<int>(d));
          if (!y.defined() || y.sizes() != torch::IntArrayRef(in))
            error = "maps it to shape " + (y.defined() ? shape_text(y.sizes()) : "undefined");
        } catch (const std::exception& e) {
          error = "fails on it: " + message_of(e);
        }
        m.train(was_training);
        if (!error.empty())
          throw InvalidOption(
              "layer-parallel network: spatial coarsening: " + chain_.layer_label(n) +
              " applied to a state restricted " + std::to_string(d) + " time(s) in space (shape " +
              shape_text(in) + ") " + error);
      }
  });
}

void BatchSolve::find_shapes(const std::vector<std::int64_t>& shape0, torch::Dtype dtype) {
  shapes_.shape.assign(1, shape0);
  shapes_.dtype = dtype;
  shapes_.device = bank_.device();
  mpi::collectively(comm_, [&] {
    torch::NoGradGuard no_grad;
    for (int s = 0; s + 1 < chain_.stages(); ++s) {
      const std::int64_t t = chain_.transition_after(s);
      Layer& g = bank_.probe(t);
      const bool was_training = g.ptr()->is_training();
      g.ptr()->train(false);
      try {
        const Tensor y = g.forward(torch::zeros(shapes_.shape.back(), shapes_.options()));
        g.ptr()->train(was_training);
        if (!y.defined() || y.dim() == 0)
          throw BadData("layer-parallel network: transition " + std::to_string(t) +
                        " (after stage " + std::to_string(s) + ") returned no state");
        shapes_.shape.push_back(y.sizes().vec());
      } catch (const Error&) {
        throw;
      } catch (const std::exception& e) {
        g.ptr()->train(was_training);
        throw BadData("layer-parallel network: transition " + std::to_string(t) + " (after stage " +
                      std::to_string(s) + ") fails on a state of shape " +
                      shape_text(shapes_.shape.back()) + ": " + message_of(e));
      }
    }
  });
  zeros_.assign(shapes_.shape.size(), Tensor());
}

void BatchSolve::validate_layers() {
  mpi::collectively(comm_, [&] {
    torch::NoGradGuard no_grad;
    auto check = [&](Layer& layer, const std::string& name, const std::vector<std::int64_t>& in,
                     const std::vector<std::int64_t>* out) {
      torch::nn::Module& m = layer.module();
      const bool was_training = m.is_training();
      m.train(false);
      std::string error;
      try {
        const Tensor y = layer.forward(torch::zeros(in, shapes_.options()));
        if (!y.defined())
          error = name + " returned an undefined tensor";
        else if (out && y.sizes() != torch::IntArrayRef(*out))
          error = name + " maps the state shape " + shape_text(in) + " to " +
                  shape_text(y.sizes()) + "; expected " + shape_text(*out) +
                  " (step layers must preserve their stage's state shape)";
      } catch (const std::exception& e) {
        error = name + " fails on a state of shape " + shape_text(in) + " and dtype " +
                std::string(c10::toString(shapes_.dtype)) + ": " + message_of(e);
      }
      m.train(was_training);
      if (!error.empty())
        throw BadData("layer-parallel forward (" + mpi::where(comm_) + "): " + error);
    };
    for (std::int64_t n = bank_.begin(); n < bank_.end(); ++n)
      check(bank_.local(n), chain_.layer_label(n), shape_of_point(n), &shape_of_point(n + 1));
    if (rank_ == ranks_ - 1 && !bank_.close().is_empty())
      check(bank_.close(), "the close layer", shape_of_point(chain_.layers()), nullptr);
  });
}

void BatchSolve::prepare(const std::vector<std::int64_t>& shape, torch::Dtype dtype) {
  if (ready() && shape == input_shape_ && dtype == shapes_.dtype) return;
  // New solvers: stored states (warm starts) of another shape are useless.
  reset();
  find_shapes(shape, dtype);
  mgrit::Options forward = placement_.forward_options();
  // Batch-norm statistics change at the final sweep's evaluations: F then C evaluates every
  // layer there once. Every rank must choose alike.
  int buffers = bank_.any_buffers() ? 1 : 0, any = 0;
  {
    trace::Span reduce("allreduce", "mpi", trace::Kind::Reduce);
    reduce.reduction(comm_, sizeof(int));
    mpi::check(MPI_Allreduce(&buffers, &any, 1, MPI_INT, MPI_MAX, comm_),
               "MPI_Allreduce (buffers)");
  }
  if (any && forward.max_levels() > 1) forward.final_sweep(mgrit::FinalSweep::CF);
  pair_.build(fapp_, aapp_, chain_.layers(), forward, placement_.backward_options(), lo_, hi_);
  try {
    find_spatial_shapes();
    validate_layers();
  } catch (...) {
    reset();
    throw;
  }
  input_shape_ = shape;
}

Tensor BatchSolve::forward(const Tensor& x0, bool record_graphs, bool needs_backward) {
  graphs_.assign(static_cast<size_t>(bank_.end() - bank_.begin()), Graph());
  record_graphs_ = record_graphs;
  x0_ = rank_ == 0 ? x0.detach() : Tensor();
  stats_.forward.evaluations.clear();
  evaluator_.count_into(&stats_.forward.evaluations);
  try {
    stats_.forward.result = pair_.forward().solve();
  } catch (...) {
    evaluator_.count_into(nullptr);
    x0_ = Tensor();
    throw;
  }
  evaluator_.count_into(nullptr);
  stats_.forward.statistics = pair_.forward().statistics();
  x0_ = Tensor();
  pair_.clear_boundary();
  if (needs_backward)
    pair_.exchange_boundary(
        fapp_, rank_ > 0 ? torch::empty(shape_of_point(lo_ - 1), shapes_.options()) : Tensor());

  // The final sweep evaluates each layer once: its graph maps the input it saw to the stored
  // x_{n+1}, and its batch statistics are those the running statistics took. With an F then C
  // sweep the first layer after a C point saw that point before the C relaxation replaced it;
  // its graph stays the layer's linearization (the two inputs agree at convergence). A graph
  // whose input was changed in place since is invalid and rebuilt by the adjoint.
  for (Graph& g : graphs_) {
    if (!g.defined()) continue;
    if (g.x._version() == g.version) {
      ++stats_.graphs_recorded;
      stats_.graph_bytes += g.output_bytes;
    } else {
      g = Graph();
    }
  }
  std::int64_t state_bytes = 0;
  for (std::int64_t p = lo_; p < hi_; ++p) {
    std::int64_t elements = 1;
    for (std::int64_t d : shape_of_point(p)) elements *= d;
    state_bytes += elements * static_cast<std::int64_t>(c10::elementSize(shapes_.dtype));
  }
  stats_.state_bytes = 2 * state_bytes;  // forward states and adjoint states
  if (rank_ != ranks_ - 1) return Tensor();
  Tensor& xN = *pair_.forward().state(chain_.layers());
  return pair_.forward_warm() || is_shared_zero(xN) ? xN.clone() : std::move(xN);
}

std::vector<Tensor> BatchSolve::backward(const Tensor& lambda_N) {
  // The terminal value λ_N and its health, from the output rank.
  mpi::collectively(comm_, [&] {
    if (rank_ != ranks_ - 1) return;
    const auto& expected = shape_of_point(chain_.layers());
    lambda_N_ = lambda_N.defined() ? lambda_N.detach() : torch::zeros(expected, shapes_.options());
    if (lambda_N_.sizes() != torch::IntArrayRef(expected))
      throw BadData("layer-parallel backward: the gradient at the output has shape " +
                    shape_text(lambda_N_.sizes()) + ", the state's is " + shape_text(expected));
    if (!all_finite(lambda_N_))
      throw Divergence(
          "layer-parallel backward: the loss gradient at the network output contains "
          "NaN or Inf (batch " +
          std::to_string(stats_.batch) + ")");
  });
  const auto& params = bank_.layer_params();
  grad_acc_.assign(params.size(), {});
  for (size_t k = 0; k < params.size(); ++k) grad_acc_[k].resize(params[k].size());
  sync_.begin(params);
  stats_.backward.evaluations.clear();
  evaluator_.count_into(&stats_.backward.evaluations);
  coarse_x_.clear();
  coarse_graphs_.clear();
  stats_.coarse_graphs_built = stats_.coarse_graphs_reused = 0;
  try {
    stats_.backward.result = pair_.adjoint().solve();
  } catch (...) {
    evaluator_.count_into(nullptr);
    coarse_x_.clear();
    coarse_graphs_.clear();
    lambda_N_ = Tensor();
    graphs_.assign(graphs_.size(), Graph());
    throw;
  }
  evaluator_.count_into(nullptr);
  stats_.backward.statistics = pair_.adjoint().statistics();
  coarse_x_.clear();
  coarse_graphs_.clear();
  lambda_N_ = Tensor();
  graphs_.assign(graphs_.size(), Graph());
  stats_.reduce_buckets = sync_.buckets();
  stats_.reduce_seconds = sync_.finish(grad_acc_);

  std::vector<Tensor> out;
  if (rank_ == 0) {
    Tensor& lambda_0 = *pair_.adjoint().state(0);
    out.push_back(pair_.adjoint_warm() || is_shared_zero(lambda_0) ? lambda_0.clone()
                                                                   : std::move(lambda_0));
  } else {
    out.emplace_back();
  }
  for (auto& layer : grad_acc_)
    for (auto& g : layer) out.push_back(std::move(g));
  grad_acc_.clear();
  return out;
}

}  // namespace weft::nn::detail
