// The recurrent batch solve: the stacked cell, the forward and adjoint Apps over tuple states,
// and the messages around the solves (boundary state, gathers, broadcasts).
#include "recurrent_solve.hpp"

#include <chrono>
#include <cmath>
#include <string>
#include <utility>

#include "chain.hpp"
#include "gradient_sync.hpp"
#include "tags.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace weft::nn::detail {

using torch::Tensor;

namespace {
double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
std::int64_t point_of(double t) {
  return static_cast<std::int64_t>(std::llround(t));
}
}  // namespace

// ------------------------------------------------------------------------------------------
// The cell

TensorTuple StackedCell::step(const TensorTuple& s, const Tensor& x,
                              const std::vector<Tensor>& params) const {
  TensorTuple out(s.size());
  Tensor in = x;
  for (std::int64_t k = 0; k < layers; ++k) {
    const auto p = static_cast<size_t>(4 * k);
    if (kind == CellKind::GRU) {
      const auto h = static_cast<size_t>(k);
      out[h] = at::gru_cell(in, s[h], params[p], params[p + 1], params[p + 2], params[p + 3]);
      in = out[h];
    } else {
      const auto h = static_cast<size_t>(2 * k);
      auto hc = at::lstm_cell(in, {s[h], s[h + 1]}, params[p], params[p + 1], params[p + 2],
                              params[p + 3]);
      out[h] = std::get<0>(hc);
      out[h + 1] = std::get<1>(hc);
      in = out[h];
    }
  }
  return out;
}

// ------------------------------------------------------------------------------------------
// The Apps

TensorTuple RecurrentForwardApp::init(double t) const {
  torch::NoGradGuard no_grad;
  if (point_of(t) == 0) return detached_clone(solve->s0_);
  return zeros_like(solve->zero_);
}

void RecurrentForwardApp::step(const TensorTuple& in, TensorTuple& out, double, double,
                               const mgrit::StepInfo& info) const {
  RecurrentSolve& s = *solve;
  const std::int64_t a = info.from;
  if (s.cache_graphs_ && info.done && info.level == 0 && info.to == a + 1) {
    torch::AutoGradMode grad_mode(true);
    RecurrentSolve::StepGraph g;
    for (const Tensor& t : in) g.s.push_back(t.detach().requires_grad_(true));
    g.x = s.x_[a].detach();
    if (s.input_grad_) g.x.requires_grad_(true);
    g.y = s.cell_.step(g.s, g.x, s.graph_params_);
    torch::NoGradGuard no_grad;
    out.resize(g.y.size());
    for (size_t i = 0; i < g.y.size(); ++i) out[i] = g.y[i].detach().clone();
    s.graphs_[static_cast<size_t>(a - s.step_begin())] = std::move(g);
    return;
  }
  torch::NoGradGuard no_grad;
  out = s.cell_.step(in, s.x_[a], s.detached_params_);
}

TensorTuple RecurrentAdjointApp::init(double t) const {
  torch::NoGradGuard no_grad;
  RecurrentSolve& s = *solve;
  if (point_of(t) != s.length_) return zeros_like(s.zero_);
  TensorTuple lambda = detached_clone(s.lambda_T_);
  if (s.output_grad_.defined()) lambda[s.cell_.top_h()].add_(s.output_grad_[s.length_ - 1]);
  return lambda;
}

void RecurrentAdjointApp::step(const TensorTuple& in, TensorTuple& out, double, double,
                               const mgrit::StepInfo& info) const {
  RecurrentSolve& s = *solve;
  const std::int64_t b = info.from, a = info.to;
  const bool final_fine = info.done && info.level == 0 && b == a + 1;
  const bool want_x = final_fine && s.input_grad_;

  torch::AutoGradMode grad_mode(true);
  std::vector<Tensor> inputs;
  TensorTuple sa, y;
  Tensor xa;
  std::vector<Tensor> params;
  RecurrentSolve::StepGraph* cached =
      final_fine && s.cache_graphs_ ? &s.graphs_[static_cast<size_t>(a - s.step_begin())] : nullptr;
  if (cached && !cached->y.empty()) {
    sa = cached->s;
    xa = cached->x;
    y = std::move(cached->y);
    params = s.graph_params_;
    *cached = RecurrentSolve::StepGraph();
  } else {
    for (const Tensor& t : s.forward_state(a)) sa.push_back(t.detach().requires_grad_(true));
    xa = s.x_[a].detach();
    if (want_x) xa.requires_grad_(true);
    if (final_fine)
      for (const Tensor& p : s.detached_params_) params.push_back(p.detach().requires_grad_(true));
    y = s.cell_.step(sa, xa, final_fine ? params : s.detached_params_);
  }
  inputs = sa;
  if (want_x) inputs.push_back(xa);
  if (final_fine) inputs.insert(inputs.end(), params.begin(), params.end());
  const std::vector<Tensor> grads = torch::autograd::grad(y, inputs, in, /*retain_graph=*/false,
                                                          /*create_graph=*/false,
                                                          /*allow_unused=*/true);
  torch::NoGradGuard no_grad;
  out.resize(sa.size());
  for (size_t i = 0; i < sa.size(); ++i)
    out[i] = grads[i].defined() ? grads[i] : torch::zeros_like(sa[i]);
  if (s.output_grad_.defined() && a >= 1) out[s.cell_.top_h()].add_(s.output_grad_[a - 1]);
  if (!final_fine) return;
  size_t next = sa.size();
  if (want_x) {
    const Tensor& gx = grads[next++];
    if (gx.defined()) s.input_grad_local_[a - s.step_begin()].copy_(gx);
  }
  for (size_t p = 0; p < params.size(); ++p, ++next)
    if (grads[next].defined()) s.param_grads_[p].add_(grads[next]);
}

// ------------------------------------------------------------------------------------------
// RecurrentSolve

RecurrentSolve::RecurrentSolve(MPI_Comm comm, StackedCell cell, RecurrentStatistics& stats)
    : comm_(comm), rank_(mpi::rank(comm)), ranks_(mpi::size(comm)), cell_(cell), stats_(stats) {
  fapp_.solve = this;
  aapp_.solve = this;
}

RecurrentSolve::~RecurrentSolve() = default;

void RecurrentSolve::configure(const LayerParallelOptions& options) {
  options.validate();
  options_ = options;
  length_ = -1;
  fsolver_.reset();
  asolver_.reset();
}

void RecurrentSolve::prepare(std::int64_t length) {
  if (length == length_ && fsolver_) return;
  fsolver_.reset();
  asolver_.reset();
  length_ = -1;
  if (length < ranks_)
    throw InvalidOption("recurrent network (" + mpi::where(comm_) + "): a sequence of " +
                        std::to_string(length) + " steps on " + std::to_string(ranks_) +
                        " ranks; need at least as many steps as ranks");
  const Chain chain({StageSpan{length, 1.0}});
  placement_ = Placement(chain, rank_, ranks_, options_.forward_solver_options(),
                         options_.backward_solver_options());
  lo_ = placement_.point_begin(rank_);
  hi_ = placement_.point_begin(rank_ + 1);
  const auto grid = mgrit::TimeGrid::uniform(0.0, static_cast<double>(length), length);
  fsolver_ = std::make_unique<mgrit::Solver<RecurrentForwardApp>>(
      fapp_, comm_, grid, options_.forward_solver_options());
  asolver_ = std::make_unique<mgrit::Solver<RecurrentAdjointApp>>(aapp_, comm_, grid,
                                                                  placement_.backward_options());
  length_ = length;
}

const TensorTuple& RecurrentSolve::forward_state(std::int64_t t) const {
  if (t == lo_ - 1 && rank_ > 0) return boundary_;
  const TensorTuple* s = fsolver_->state(t);
  if (!s)
    throw MpiError("recurrent network (" + mpi::where(comm_) + "): forward state " +
                   std::to_string(t) + " is not stored here");
  return *s;
}

RecurrentSolve::Forward RecurrentSolve::forward(const Tensor& x, const TensorTuple& s0,
                                                const std::vector<Tensor>& params,
                                                bool output_sequence, bool needs_backward,
                                                bool input_grad) {
  const double t0 = seconds();
  torch::NoGradGuard no_grad;
  x_ = x.detach();
  s0_ = detached_clone(s0);
  zero_ = zeros_like(s0_);
  detached_params_.clear();
  for (const Tensor& p : params) detached_params_.push_back(p.detach());
  boundary_.clear();
  input_grad_ = input_grad;
  cache_graphs_ = needs_backward && options_.cache_graphs() &&
                  options_.forward_solver_options().max_levels() == 1;
  graphs_.assign(cache_graphs_ ? static_cast<size_t>(step_end() - step_begin()) : 0, StepGraph());
  graph_params_.clear();
  if (cache_graphs_)
    for (const Tensor& p : params) graph_params_.push_back(p.detach().requires_grad_(true));
  stats_.forward.result = fsolver_->solve();
  stats_.forward.statistics = fsolver_->statistics();
  if (needs_backward) exchange_boundary();

  Forward result;
  result.final_state =
      broadcast(rank_ == ranks_ - 1 ? detached_clone(*fsolver_->state(length_)) : zeros_like(zero_),
                ranks_ - 1);
  if (output_sequence) {
    std::vector<Tensor> rows;
    for (std::int64_t t = step_begin(); t < step_end(); ++t)
      rows.push_back(fsolver_->state(t + 1)->at(cell_.top_h()));
    result.output = gather_steps(torch::stack(rows));
  }
  if (!needs_backward) {
    graphs_.clear();
    x_ = Tensor();
    s0_.clear();
  }
  stats_.forward.seconds = seconds() - t0;
  return result;
}

void RecurrentSolve::exchange_boundary() {
  if (ranks_ == 1) return;
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  std::vector<char> in, out;
  if (rank_ > 0) {
    boundary_ = zeros_like(zero_);
    in.resize(fapp_.buffer_size(boundary_));
    mpi::check(MPI_Irecv(in.data(), static_cast<int>(in.size()), MPI_BYTE, rank_ - 1,
                         tags::kRecurrentBoundary, comm_, &requests[0]),
               "MPI_Irecv (recurrent boundary state)");
  }
  if (rank_ < ranks_ - 1) {
    const TensorTuple& last = *fsolver_->state(hi_ - 1);
    out.resize(fapp_.buffer_size(last));
    fapp_.pack(last, out.data());
    mpi::check(MPI_Isend(out.data(), static_cast<int>(out.size()), MPI_BYTE, rank_ + 1,
                         tags::kRecurrentBoundary, comm_, &requests[1]),
               "MPI_Isend (recurrent boundary state)");
  }
  mpi::check(MPI_Waitall(2, requests, MPI_STATUSES_IGNORE),
             "MPI_Waitall (recurrent boundary state)");
  if (rank_ > 0) fapp_.unpack(in.data(), boundary_);
}

Tensor RecurrentSolve::gather_steps(const Tensor& local) const {
  torch::NoGradGuard no_grad;
  std::vector<std::int64_t> shape = local.sizes().vec();
  shape[0] = length_;
  Tensor all = torch::empty(shape, local.options().device(torch::kCPU));
  if (ranks_ == 1) return all.copy_(local).to(local.device());
  const std::int64_t row_bytes = local[0].numel() * local.element_size();
  std::vector<int> counts, displs;
  for (int r = 0; r < ranks_; ++r) {
    counts.push_back(static_cast<int>((step_end(r) - step_begin(r)) * row_bytes));
    displs.push_back(static_cast<int>(step_begin(r) * row_bytes));
  }
  const Tensor mine = local.to(torch::kCPU).contiguous();
  mpi::check(MPI_Allgatherv(mine.data_ptr(), counts[static_cast<size_t>(rank_)], MPI_BYTE,
                            all.data_ptr(), counts.data(), displs.data(), MPI_BYTE, comm_),
             "MPI_Allgatherv (recurrent steps)");
  return all.to(local.device());
}

TensorTuple RecurrentSolve::broadcast(TensorTuple u, int root) const {
  if (ranks_ == 1) return u;
  std::vector<char> buffer(fapp_.buffer_size(u));
  if (rank_ == root) fapp_.pack(u, buffer.data());
  mpi::check(MPI_Bcast(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, root, comm_),
             "MPI_Bcast (recurrent state)");
  if (rank_ != root) fapp_.unpack(buffer.data(), u);
  return u;
}

RecurrentSolve::Backward RecurrentSolve::backward(const TensorTuple& final_state,
                                                  const Tensor& output, bool input_grad) {
  const double t0 = seconds();
  if (!x_.defined() || !fsolver_)
    throw InvalidOption("recurrent network (" + mpi::where(comm_) +
                        "): backward without a forward that kept its states");
  {
    torch::NoGradGuard no_grad;
    lambda_T_ = detached_clone(final_state);
    output_grad_ = output.defined() ? output.detach() : Tensor();
    input_grad_ = input_grad;
    const std::int64_t steps = step_end() - step_begin();
    input_grad_local_ =
        input_grad ? torch::zeros({steps, x_.size(1), x_.size(2)}, x_.options()) : Tensor();
    param_grads_.clear();
    for (const Tensor& p : detached_params_) param_grads_.push_back(torch::zeros_like(p));
  }
  auto release = [&] {
    graphs_.clear();
    graph_params_.clear();
    x_ = Tensor();
    s0_.clear();
    boundary_.clear();
    lambda_T_.clear();
    output_grad_ = Tensor();
  };
  try {
    stats_.backward.result = asolver_->solve();
  } catch (...) {
    release();
    throw;
  }
  stats_.backward.statistics = asolver_->statistics();

  torch::NoGradGuard no_grad;
  Backward result;
  result.initial_state =
      broadcast(rank_ == 0 ? detached_clone(*asolver_->state(0)) : zeros_like(zero_), 0);
  if (input_grad) result.input = gather_steps(input_grad_local_);
  const double t_reduce = seconds();
  GradientSync(comm_, 1).sum_now(param_grads_);
  stats_.reduce_seconds = seconds() - t_reduce;
  result.params = std::move(param_grads_);
  param_grads_.clear();
  input_grad_local_ = Tensor();
  release();
  stats_.backward.seconds = seconds() - t0;
  return result;
}

}  // namespace weft::nn::detail
