// The recurrent batch solve: the stacked cell, the forward and adjoint Apps over tuple states,
// and the messages around the solves (boundary state, gathers, broadcasts).
#include "recurrent_solve.hpp"

#include <chrono>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "chain.hpp"
#include "gradient_sync.hpp"
#include "tags.hpp"
#include "weft/mgrit/step_map.hpp"
#include "weft/util/clock.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace weft::nn::detail {

using torch::Tensor;

namespace {
std::int64_t point_of(double t) {
  return static_cast<std::int64_t>(std::llround(t));
}
}  // namespace

// ------------------------------------------------------------------------------------------
// The cell

TensorTuple StackedCell::step(const TensorTuple& s, const Tensor& x,
                              const std::vector<Tensor>& params, std::int64_t span) const {
  if (implicit_step <= 0) return explicit_step(s, x, params);
  // Backward Euler for ds/dt = Φ(s, x) − s by fixed-point iterations from y = s.
  const double dt = implicit_step * static_cast<double>(span);
  TensorTuple y = s;
  for (int k = 0; k < implicit_iterations; ++k) {
    TensorTuple next = explicit_step(y, x, params);
    for (size_t i = 0; i < next.size(); ++i) next[i] = (s[i] + dt * next[i]) / (1.0 + dt);
    y = std::move(next);
  }
  return y;
}

TensorTuple StackedCell::explicit_step(const TensorTuple& s, const Tensor& x,
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
    g.x = s.input_row(a).detach();
    if (s.input_grad_) g.x.requires_grad_(true);
    g.y = s.cell_.step(g.s, g.x, s.graph_params_);
    torch::NoGradGuard no_grad;
    out.resize(g.y.size());
    for (size_t i = 0; i < g.y.size(); ++i) out[i] = g.y[i].detach().clone();
    s.graphs_[static_cast<size_t>(a - s.step_begin())] = std::move(g);
    return;
  }
  torch::NoGradGuard no_grad;
  out = s.cell_.step(in, s.step_input(a, info.to), s.detached_params_, info.to - a);
}

TensorTuple RecurrentAdjointApp::init(double t) const {
  torch::NoGradGuard no_grad;
  RecurrentSolve& s = *solve;
  if (point_of(t) != s.length_) return zeros_like(s.zero_);
  TensorTuple lambda = detached_clone(s.lambda_T_);
  if (s.output_grad_.defined()) lambda[s.cell_.top_h()].add_(s.output_grad_last_);
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
    xa = s.step_input(a, b).detach();
    if (want_x) xa.requires_grad_(true);
    if (final_fine)
      for (const Tensor& p : s.detached_params_) params.push_back(p.detach().requires_grad_(true));
    y = s.cell_.step(sa, xa, final_fine ? params : s.detached_params_, b - a);
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
  if (s.output_grad_.defined() && a >= 1) out[s.cell_.top_h()].add_(s.output_grad_row(a - 1));
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

RecurrentSolve::RecurrentSolve(MPI_Comm comm, StackedCell cell, CoarseInput coarse_input,
                               RecurrentStatistics& stats)
    : comm_(comm),
      rank_(mpi::rank(comm)),
      ranks_(mpi::size(comm)),
      cell_(cell),
      coarse_input_(coarse_input),
      stats_(stats),
      pair_(comm, tags::kRecurrentBoundary, "recurrent network forward") {
  fapp_.solve = this;
  aapp_.solve = this;
}

RecurrentSolve::~RecurrentSolve() = default;

void RecurrentSolve::configure(const LayerParallelOptions& options) {
  options.validate();
  options_ = options;
  length_ = -1;
  pair_.reset();
}

void RecurrentSolve::prepare(std::int64_t length) {
  if (length == length_ && pair_.ready()) return;
  pair_.reset();
  length_ = -1;
  if (length < ranks_)
    throw InvalidOption("recurrent network (" + mpi::where(comm_) + "): a sequence of " +
                        std::to_string(length) + " steps on " + std::to_string(ranks_) +
                        " ranks; need at least as many steps as ranks");
  const Chain chain({StageSpan{length, 1.0}});
  placement_ = Placement(chain, rank_, ranks_, options_.forward_solver_options(),
                         options_.backward_solver_options());
  pair_.build(fapp_, aapp_, length, options_.forward_solver_options(),
              placement_.backward_options(), placement_.point_begin(rank_),
              placement_.point_begin(rank_ + 1));
  const auto grid = mgrit::TimeGrid::uniform(0.0, static_cast<double>(length), length);
  std::vector<mgrit::StepSite> sites =
      mgrit::step_sites(grid, options_.forward_solver_options(), ranks_);
  for (const auto& site : mgrit::step_sites(grid, placement_.backward_options(), ranks_))
    sites.push_back(site);
  std::vector<std::int64_t> begins;
  for (int r = 0; r < ranks_; ++r) begins.push_back(step_begin(r));
  begins.push_back(length);
  plan_ = CoarseInputPlan(sites, begins, rank_, coarse_input_);
  length_ = length;
}

Tensor RecurrentSolve::input_row(std::int64_t a) const {
  const std::int64_t i = a - x_offset_;
  if (i < 0 || i >= x_.size(0))
    throw MpiError("recurrent network (" + mpi::where(comm_) + "): the input of step " +
                   std::to_string(a) + " is not held here");
  return x_[i];
}

Tensor RecurrentSolve::step_input(std::int64_t a, std::int64_t b) const {
  if (b == a + 1) return input_row(a);
  const auto it = coarse_inputs_.find({a, b});
  if (it == coarse_inputs_.end())
    throw MpiError("recurrent network (" + mpi::where(comm_) + "): no input for the coarse step " +
                   std::to_string(a) + " -> " + std::to_string(b));
  return it->second;
}

Tensor RecurrentSolve::output_grad_row(std::int64_t t) const {
  return output_grad_[t - output_grad_offset_];
}

void RecurrentSolve::prepare_coarse_inputs() {
  torch::NoGradGuard no_grad;
  coarse_inputs_.clear();
  // This rank's rows of interval i, summed (Start: the row x_a alone); undefined when none.
  auto local_part = [&](const StepInterval& i) {
    const StepInterval p = distributed_ ? plan_.part(rank_, i)
                           : coarse_input_ == CoarseInput::Start
                               ? StepInterval{i.first, i.first + 1}
                               : i;
    if (p.first >= p.second) return Tensor();
    return x_.slice(0, p.first - x_offset_, p.second - x_offset_).sum(0);
  };
  std::map<StepInterval, Tensor> sums;
  for (const StepInterval& i : plan_.intervals()) sums[i] = local_part(i);
  if (distributed_ && ranks_ > 1) {
    const auto row = x_.sizes().slice(1).vec();
    std::vector<Tensor> out_buffers, in_buffers;
    std::vector<MPI_Request> requests;
    auto bytes = [](const Tensor& t) { return static_cast<int>(t.numel() * t.element_size()); };
    for (const auto& peer : plan_.recvs()) {
      std::vector<std::int64_t> shape{static_cast<std::int64_t>(peer.intervals.size())};
      shape.insert(shape.end(), row.begin(), row.end());
      in_buffers.push_back(torch::empty(shape, x_.options().device(torch::kCPU)));
      requests.emplace_back();
      mpi::check(MPI_Irecv(in_buffers.back().data_ptr(), bytes(in_buffers.back()), MPI_BYTE,
                           peer.rank, tags::kRecurrentInputs, comm_, &requests.back()),
                 "MPI_Irecv (recurrent coarse inputs)");
    }
    for (const auto& peer : plan_.sends()) {
      std::vector<Tensor> parts;
      for (const StepInterval& i : peer.intervals) parts.push_back(local_part(i));
      out_buffers.push_back(torch::stack(parts).to(torch::kCPU).contiguous());
      requests.emplace_back();
      mpi::check(MPI_Isend(out_buffers.back().data_ptr(), bytes(out_buffers.back()), MPI_BYTE,
                           peer.rank, tags::kRecurrentInputs, comm_, &requests.back()),
                 "MPI_Isend (recurrent coarse inputs)");
    }
    mpi::check(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE),
               "MPI_Waitall (recurrent coarse inputs)");
    for (size_t k = 0; k < in_buffers.size(); ++k) {
      const auto& peer = plan_.recvs()[k];
      const Tensor parts = in_buffers[k].to(x_.device());
      for (size_t j = 0; j < peer.intervals.size(); ++j) {
        Tensor& sum = sums[peer.intervals[j]];
        sum = sum.defined() ? sum + parts[static_cast<std::int64_t>(j)]
                            : parts[static_cast<std::int64_t>(j)].clone();
      }
    }
  }
  for (auto& [i, sum] : sums)
    coarse_inputs_[i] =
        coarse_input_ == CoarseInput::Mean ? sum / static_cast<double>(i.second - i.first) : sum;
}

void RecurrentSolve::shift_output_grad(const Tensor& local) {
  torch::NoGradGuard no_grad;
  output_grad_ = local;
  output_grad_offset_ = step_begin();
  output_grad_last_ = local[local.size(0) - 1];
  if (ranks_ == 1) return;
  // The adjoint point t + 1 (where ∂loss/∂output_t enters) of the last local step lives on the
  // next rank (adjoint blocks start one point earlier).
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  Tensor in, out;
  if (rank_ > 0) {
    in = torch::empty_like(local[0], local.options().device(torch::kCPU));
    mpi::check(MPI_Irecv(in.data_ptr(), static_cast<int>(in.numel() * in.element_size()), MPI_BYTE,
                         rank_ - 1, tags::kRecurrentOutputGrad, comm_, &requests[0]),
               "MPI_Irecv (recurrent output gradient)");
  }
  if (rank_ < ranks_ - 1) {
    out = local[local.size(0) - 1].to(torch::kCPU).contiguous();
    mpi::check(MPI_Isend(out.data_ptr(), static_cast<int>(out.numel() * out.element_size()),
                         MPI_BYTE, rank_ + 1, tags::kRecurrentOutputGrad, comm_, &requests[1]),
               "MPI_Isend (recurrent output gradient)");
  }
  mpi::check(MPI_Waitall(2, requests, MPI_STATUSES_IGNORE),
             "MPI_Waitall (recurrent output gradient)");
  if (rank_ > 0) {
    output_grad_ = torch::cat({in.to(local.device()).unsqueeze(0), local});
    output_grad_offset_ = step_begin() - 1;
  }
  // The solver may initialise point T on any rank (its coarse levels).
  Tensor last = rank_ == ranks_ - 1
                    ? local[local.size(0) - 1].to(torch::kCPU).contiguous()
                    : torch::empty_like(local[0], local.options().device(torch::kCPU));
  mpi::check(MPI_Bcast(last.data_ptr(), static_cast<int>(last.numel() * last.element_size()),
                       MPI_BYTE, ranks_ - 1, comm_),
             "MPI_Bcast (recurrent output gradient)");
  output_grad_last_ = last.to(local.device());
}

const TensorTuple& RecurrentSolve::forward_state(std::int64_t t) const {
  const TensorTuple* s = pair_.forward_state(t);
  if (!s)
    throw MpiError("recurrent network (" + mpi::where(comm_) + "): forward state " +
                   std::to_string(t) + " is not stored here");
  return *s;
}

RecurrentSolve::Forward RecurrentSolve::forward(const Tensor& x, const TensorTuple& s0,
                                                const std::vector<Tensor>& params,
                                                bool output_sequence, bool needs_backward,
                                                bool input_grad, bool distributed) {
  const double t0 = clock::now();
  torch::NoGradGuard no_grad;
  distributed_ = distributed;
  x_ = x.detach();
  x_offset_ = distributed ? step_begin() : 0;
  prepare_coarse_inputs();
  s0_ = detached_clone(s0);
  zero_ = zeros_like(s0_);
  detached_params_.clear();
  for (const Tensor& p : params) detached_params_.push_back(p.detach());
  pair_.clear_boundary();
  input_grad_ = input_grad;
  cache_graphs_ = needs_backward && options_.cache_graphs() &&
                  options_.forward_solver_options().max_levels() == 1;
  graphs_.assign(cache_graphs_ ? static_cast<size_t>(step_end() - step_begin()) : 0, StepGraph());
  graph_params_.clear();
  if (cache_graphs_)
    for (const Tensor& p : params) graph_params_.push_back(p.detach().requires_grad_(true));
  stats_.forward.result = pair_.forward().solve();
  stats_.forward.statistics = pair_.forward().statistics();
  if (needs_backward) pair_.exchange_boundary(fapp_, zeros_like(zero_));

  Forward result;
  result.final_state = broadcast(
      rank_ == ranks_ - 1 ? detached_clone(*pair_.forward().state(length_)) : zeros_like(zero_),
      ranks_ - 1);
  if (output_sequence) {
    std::vector<Tensor> rows;
    for (std::int64_t t = step_begin(); t < step_end(); ++t)
      rows.push_back(pair_.forward().state(t + 1)->at(cell_.top_h()));
    result.output = distributed ? torch::stack(rows) : gather_steps(torch::stack(rows));
  }
  if (!needs_backward) {
    graphs_.clear();
    coarse_inputs_.clear();
    x_ = Tensor();
    s0_.clear();
  }
  stats_.forward.seconds = clock::now() - t0;
  return result;
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
  const double t0 = clock::now();
  if (!x_.defined() || !pair_.ready())
    throw InvalidOption("recurrent network (" + mpi::where(comm_) +
                        "): backward without a forward that kept its states");
  {
    torch::NoGradGuard no_grad;
    lambda_T_ = detached_clone(final_state);
    output_grad_ = Tensor();
    output_grad_offset_ = 0;
    if (output.defined() && distributed_) {
      shift_output_grad(output.detach());
    } else if (output.defined()) {
      output_grad_ = output.detach();
      output_grad_last_ = output_grad_[length_ - 1];
    }
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
    coarse_inputs_.clear();
    x_ = Tensor();
    s0_.clear();
    pair_.clear_boundary();
    lambda_T_.clear();
    output_grad_ = Tensor();
    output_grad_last_ = Tensor();
  };
  try {
    stats_.backward.result = pair_.adjoint().solve();
  } catch (...) {
    release();
    throw;
  }
  stats_.backward.statistics = pair_.adjoint().statistics();

  torch::NoGradGuard no_grad;
  Backward result;
  result.initial_state =
      broadcast(rank_ == 0 ? detached_clone(*pair_.adjoint().state(0)) : zeros_like(zero_), 0);
  if (input_grad) result.input = distributed_ ? input_grad_local_ : gather_steps(input_grad_local_);
  const double t_reduce = clock::now();
  GradientSync(comm_, 1).sum_now(param_grads_);
  stats_.reduce_seconds = clock::now() - t_reduce;
  result.params = std::move(param_grads_);
  param_grads_.clear();
  input_grad_local_ = Tensor();
  release();
  stats_.backward.seconds = clock::now() - t0;
  return result;
}

}  // namespace weft::nn::detail
