// The recurrent module: parameters (torch's names and layout), input checks agreed by every
// rank, and the autograd function around the forward and adjoint solves.
#include "weft/nn/recurrent.hpp"

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "recurrent_solve.hpp"
#include "solve_function.hpp"
#include "weft/mgrit/hierarchy.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace weft::nn {

std::string to_string(CellKind kind) {
  return kind == CellKind::GRU ? "gru" : "lstm";
}

std::string to_string(CoarseInput input) {
  return input == CoarseInput::Start ? "start" : "mean";
}

void RecurrentOptions::validate() const {
  auto positive = [](const char* name, std::int64_t v) {
    if (v < 1)
      throw InvalidOption("recurrent network", name,
                          "= " + std::to_string(v) + " is invalid; need at least 1");
  };
  positive("input_size", input_size_);
  positive("hidden_size", hidden_size_);
  positive("num_layers", num_layers_);
  positive("implicit_iterations", implicit_iterations_);
  if (implicit_iterations_ > std::numeric_limits<int>::max())
    throw InvalidOption("recurrent network", "implicit_iterations",
                        "= " + std::to_string(implicit_iterations_) + " is invalid; need at most " +
                            std::to_string(std::numeric_limits<int>::max()));
  if (!(implicit_step_ >= 0) || !std::isfinite(implicit_step_))
    throw InvalidOption("recurrent network", "implicit_step",
                        "= " + number_text(implicit_step_) +
                            " is invalid; need 0 (explicit cell) or a finite step > 0");
  if (!solver_.layer_costs().empty())
    throw InvalidOption("recurrent network", "layer_costs",
                        "are not supported (its sequence steps cost alike: leave them empty)");
  solver_.validate();
}

std::int64_t RecurrentOptions::state_parts() const {
  return cell_ == CellKind::LSTM ? 2 * num_layers_ : num_layers_;
}

namespace detail {

using torch::Tensor;

class RecurrentCore {
 public:
  RecurrentCore(MPI_Comm comm, RecurrentOptions opts)
      : comm_(comm),
        options(std::move(opts)),
        solve(comm_.get(),
              StackedCell{options.cell(), options.num_layers(), options.implicit_step(),
                          static_cast<int>(options.implicit_iterations())},
              options.coarse_input(), stats) {
    solve.configure(options.solver());
  }
  MPI_Comm comm() const { return comm_.get(); }

 private:
  mpi::OwnedComm comm_;

 public:
  RecurrentOptions options;
  RecurrentStatistics stats;
  RecurrentSolve solve;
  std::vector<Tensor> params;
  std::int64_t generation = 0;
  bool needs_backward = false;
  bool distributed = false;  ///< this batch's mode
};

RecurrentOptions validated(RecurrentOptions options) {
  options.validate();
  return options;
}

namespace {
/// The state tuple from torch's [L, B, H] tensors (h0, and c0 for LSTM).
TensorTuple tuple_of(CellKind kind, const Tensor& h, const Tensor& c) {
  TensorTuple s;
  for (std::int64_t k = 0; k < h.size(0); ++k) {
    s.push_back(h[k]);
    if (kind == CellKind::LSTM) s.push_back(c[k]);
  }
  return s;
}
}  // namespace

/// The sequence's autograd node. Inputs: x [T, B, F], h0, c0 (a 0-element tensor for GRU), the
/// parameters. Outputs: the output sequence (a 0-element tensor unless asked), h_n, c_n
/// (0 elements for GRU). Backward: the adjoint solve.
struct SequenceNode {
  using Core = RecurrentCore;
  static constexpr const char* owner = "recurrent network";
  static constexpr const char* advice = "call backward once per forward, before the next forward";
  static std::int64_t generation(const Core& c) { return c.generation; }
  static MPI_Comm comm(const Core& c) { return c.comm(); }

  static torch::autograd::variable_list forward(Core& c, at::TensorList inputs) {
    const Tensor& x = inputs[0];
    const CellKind kind = c.options.cell();
    const std::vector<Tensor> params(inputs.begin() + 3, inputs.end());
    RecurrentSolve::Forward f = c.solve.forward(x, tuple_of(kind, inputs[1], inputs[2]), params,
                                                c.options.output_sequence(), c.needs_backward,
                                                x.requires_grad(), c.distributed);
    const std::int64_t L = c.options.num_layers();
    std::vector<Tensor> h, cs;
    for (std::int64_t k = 0; k < L; ++k) {
      const auto i = static_cast<size_t>(kind == CellKind::LSTM ? 2 * k : k);
      h.push_back(f.final_state[i]);
      if (kind == CellKind::LSTM) cs.push_back(f.final_state[i + 1]);
    }
    const Tensor none = torch::zeros({0}, x.options());
    return {f.output.defined() ? f.output : none, torch::stack(h),
            cs.empty() ? none : torch::stack(cs)};
  }

  static torch::autograd::variable_list backward(Core& c,
                                                 const torch::autograd::variable_list& grad_out,
                                                 const std::vector<std::int64_t>& wanted) {
    const CellKind kind = c.options.cell();
    const bool x_grad = wanted.at(0) != 0;
    const Tensor& d_output = grad_out.at(0);
    RecurrentSolve::Backward b = c.solve.backward(
        tuple_of(kind, grad_out.at(1), grad_out.at(2)),
        c.options.output_sequence() && d_output.numel() > 0 ? d_output : Tensor(), x_grad);
    std::vector<Tensor> dh, dc;
    for (std::int64_t k = 0; k < c.options.num_layers(); ++k) {
      const auto i = static_cast<size_t>(kind == CellKind::LSTM ? 2 * k : k);
      dh.push_back(b.initial_state[i]);
      if (kind == CellKind::LSTM) dc.push_back(b.initial_state[i + 1]);
    }
    torch::autograd::variable_list result;
    result.push_back(x_grad ? b.input : Tensor());
    result.push_back(torch::stack(dh));
    result.push_back(dc.empty() ? Tensor() : torch::stack(dc));
    for (Tensor& g : b.params) result.push_back(std::move(g));
    return result;
  }
};
using RecurrentFunction = SolveFunction<SequenceNode>;

}  // namespace detail

// ------------------------------------------------------------------------------------------
// RecurrentImpl

RecurrentImpl::RecurrentImpl(MPI_Comm comm, RecurrentOptions options)
    : core_(std::make_unique<detail::RecurrentCore>(comm, detail::validated(std::move(options)))) {
  detail::RecurrentCore& c = *core_;
  const RecurrentOptions& o = c.options;
  const std::int64_t gates = o.cell() == CellKind::GRU ? 3 : 4;
  const std::int64_t H = o.hidden_size();
  const double bound = 1.0 / std::sqrt(static_cast<double>(H));
  torch::NoGradGuard no_grad;
  for (std::int64_t k = 0; k < o.num_layers(); ++k) {
    const std::int64_t in = k == 0 ? o.input_size() : H;
    const std::string l = "_l" + std::to_string(k);
    for (auto& [name, shape] : std::vector<std::pair<std::string, std::vector<std::int64_t>>>{
             {"weight_ih" + l, {gates * H, in}},
             {"weight_hh" + l, {gates * H, H}},
             {"bias_ih" + l, {gates * H}},
             {"bias_hh" + l, {gates * H}}}) {
      torch::Tensor p = torch::empty(shape, torch::kFloat32).uniform_(-bound, bound);
      c.params.push_back(register_parameter(name, p));
    }
  }
  // Replicated parameters: rank 0's values everywhere.
  std::vector<torch::Tensor> flat;
  for (const torch::Tensor& p : c.params) flat.push_back(p.reshape({-1}));
  torch::Tensor all = torch::cat(flat).contiguous();
  mpi::check(MPI_Bcast(all.data_ptr(), static_cast<int>(all.numel()), MPI_FLOAT, 0, c.comm()),
             "MPI_Bcast (recurrent parameters)");
  std::int64_t offset = 0;
  for (torch::Tensor& p : c.params) {
    p.copy_(all.slice(0, offset, offset + p.numel()).view(p.sizes()));
    offset += p.numel();
  }
}

RecurrentImpl::~RecurrentImpl() = default;

RecurrentOutput RecurrentImpl::forward(const torch::Tensor& input, const torch::Tensor& h0,
                                       const torch::Tensor& c0) {
  return run(input, h0, c0, false);
}

RecurrentOutput RecurrentImpl::forward_local(const torch::Tensor& local_input,
                                             const torch::Tensor& h0, const torch::Tensor& c0) {
  return run(local_input, h0, c0, true);
}

RecurrentOutput RecurrentImpl::run(const torch::Tensor& input, const torch::Tensor& h0,
                                   const torch::Tensor& c0, bool distributed) {
  detail::RecurrentCore& c = *core_;
  c.distributed = distributed;
  const RecurrentOptions& o = c.options;
  ++c.generation;
  c.stats = RecurrentStatistics();
  c.stats.batch = c.generation;
  const std::int64_t L = o.num_layers(), H = o.hidden_size();
  const bool lstm = o.cell() == CellKind::LSTM;
  std::int64_t length = 0;
  torch::Tensor h, cs;
  mpi::collectively(c.comm(), [&] {
    const std::string what = "recurrent network (" + mpi::where(c.comm()) + "): ";
    if (!input.defined() || input.dim() != 3)
      throw BadData(what + "the input must be a [steps, batch, features] tensor; got " +
                    (input.defined() ? std::to_string(input.dim()) + " dimensions" : "none"));
    if (!c10::isFloatingType(input.scalar_type()))
      throw BadData(what + "the input is not a floating-point tensor");
    if (input.size(2) != o.input_size())
      throw BadData(
          what + "the input has " + std::to_string(input.size(2)) +
          " features per step; the network expects input_size = " + std::to_string(o.input_size()));
    if (input.size(1) < 1) throw BadData(what + "the input batch is empty");
    const std::vector<std::int64_t> state_shape{L, input.size(1), H};
    auto initial = [&](const torch::Tensor& t, const char* name) {
      if (!t.defined()) return torch::zeros(state_shape, input.options());
      if (t.sizes() != torch::IntArrayRef(state_shape))
        throw BadData(what + name + " has shape " + c10::str(t.sizes()) + "; expected " +
                      c10::str(torch::IntArrayRef(state_shape)) + " [layers, batch, hidden]");
      return t.to(input.options());
    };
    h = initial(h0, "h0");
    cs = lstm ? initial(c0, "c0") : torch::zeros({0}, input.options());
    if (!detail::all_finite(input))
      throw BadData(what + "the input sequence contains NaN or Inf (batch " +
                    std::to_string(c.generation) + ")");
    length = input.size(0);
  });
  // Every rank must hold the same sequence shape (distributed: the same batch, and its share).
  std::int64_t mine[2] = {distributed ? 0 : length, input.size(1)}, low[2] = {0, 0},
               high[2] = {0, 0};
  mpi::check(MPI_Allreduce(mine, low, mpi::count_of(mine), MPI_INT64_T, MPI_MIN, c.comm()),
             "MPI_Allreduce");
  mpi::check(MPI_Allreduce(mine, high, mpi::count_of(mine), MPI_INT64_T, MPI_MAX, c.comm()),
             "MPI_Allreduce");
  if (low[0] != high[0] || low[1] != high[1])
    throw BadData("recurrent network (" + mpi::where(c.comm()) +
                  "): the ranks hold inputs of different shapes (steps " + std::to_string(low[0]) +
                  ".." + std::to_string(high[0]) + ", batch " + std::to_string(low[1]) + ".." +
                  std::to_string(high[1]) + "); every rank must pass the same sequence");
  const std::int64_t local_length = length;
  if (distributed)
    mpi::check(MPI_Allreduce(&local_length, &length, 1, MPI_INT64_T, MPI_SUM, c.comm()),
               "MPI_Allreduce");
  mpi::collectively(c.comm(), [&] {
    c.solve.prepare(length);
    if (!distributed) return;
    const auto [first, end] = local_steps(length);
    if (local_length != end - first)
      throw BadData("recurrent network (" + mpi::where(c.comm()) + "): this rank holds " +
                    std::to_string(local_length) + " steps of a sequence of " +
                    std::to_string(length) + "; its share is steps [" + std::to_string(first) +
                    ", " + std::to_string(end) + ") (local_steps), " + std::to_string(end - first) +
                    " steps");
  });

  bool any_grad = input.requires_grad() || h.requires_grad() || cs.requires_grad();
  for (const auto& p : c.params) any_grad = any_grad || p.requires_grad();
  c.needs_backward = torch::GradMode::is_enabled() && any_grad;
  // The parameters in the input's dtype (double tests, float training) keep their graph.
  std::vector<torch::Tensor> params;
  for (const auto& p : c.params) params.push_back(p.to(input.scalar_type()));
  std::vector<torch::Tensor> inputs{input, h, cs};
  inputs.insert(inputs.end(), params.begin(), params.end());
  auto out = detail::RecurrentFunction::apply(at::TensorList(inputs), &c);
  RecurrentOutput result;
  result.output = out[0];
  result.h_n = out[1];
  result.c_n = out[2];
  return result;
}

void RecurrentImpl::set_solver(const LayerParallelOptions& solver) {
  detail::RecurrentCore& c = *core_;
  solver.validate();
  c.options.solver(solver);
  c.solve.configure(solver);
}

const RecurrentOptions& RecurrentImpl::options() const {
  return core_->options;
}

const RecurrentStatistics& RecurrentImpl::statistics() const {
  return core_->stats;
}

std::pair<std::int64_t, std::int64_t> RecurrentImpl::local_steps(std::int64_t length) const {
  const int r = rank(), p = ranks();
  auto point = [&](int q) { return mgrit::Distribution::block_begin(length + 1, p, q); };
  const std::int64_t first = r == 0 ? 0 : point(r) - 1;
  const std::int64_t end = r == p - 1 ? length : point(r + 1) - 1;
  return {first, end};
}

MPI_Comm RecurrentImpl::comm() const {
  return core_->comm();
}
int RecurrentImpl::rank() const {
  return mpi::rank(core_->comm());
}
int RecurrentImpl::ranks() const {
  return mpi::size(core_->comm());
}

}  // namespace weft::nn
