// The layer-parallel module: forward and adjoint MGRIT solves over tensor states, and the
// autograd function that connects them to LibTorch.
#include "weft/nn/layer_parallel.hpp"

#include <torch/torch.h>

#include <array>
#include <cmath>
#include <cstring>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "core.hpp"
#include "weft/util/error.hpp"

namespace weft::nn {
namespace detail {

using torch::Tensor;

// ------------------------------------------------------------------------------------------
// Tensor states

// Initial guesses share one zero tensor (Core::shared_zero), so the operations that write into
// a state in place first detach it from that tensor (copy on write).
void TensorOps::sum(double a, const Tensor& x, double b, Tensor& y) const {
  torch::NoGradGuard no_grad;
  if (y.is_same(core->shared_zero)) y = Tensor();  // then y = a x is right: y was zero
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
  if (dst.is_same(core->shared_zero)) dst = Tensor();
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
  if (!core->staging.defined() || core->staging.sizes() != u.sizes() ||
      core->staging.dtype() != u.dtype())
    core->staging =
        torch::empty(u.sizes(), torch::TensorOptions().dtype(u.dtype()).pinned_memory(true));
  core->staging.copy_(u);
  if (bytes) std::memcpy(buffer, core->staging.data_ptr(), bytes);
}

void TensorOps::unpack(const void* buffer, Tensor& u) const {
  torch::NoGradGuard no_grad;
  const Tensor blob = torch::from_blob(const_cast<void*>(buffer), core->shape,
                                       torch::TensorOptions().dtype(core->dtype));
  if (u.is_same(core->shared_zero)) u = Tensor();
  if (u.defined() && u.sizes() == blob.sizes() && u.dtype() == blob.dtype())
    u.copy_(blob);
  else
    u = blob.to(torch::TensorOptions().dtype(core->dtype).device(core->device),
                /*non_blocking=*/false, /*copy=*/true);
}

// ------------------------------------------------------------------------------------------
// Forward

Tensor ForwardApp::init(double t) const {
  if (core->rank == 0 && t < 0.5 * core->h) return core->x0.clone();
  return core->zero_state();
}

void ForwardApp::step(const Tensor& in, Tensor& out, double, double,
                      const mgrit::StepInfo& info) const {
  const std::int64_t n = info.from;
  const double H = static_cast<double>(info.to - info.from) * core->h;
  Layer& layer = core->forward_layer(n);
  Tensor f;
  if (core->record_graphs && info.done && info.level == 0 && core->is_local_layer(n)) {
    // The final fine sweep: keep y_n = F_n(x_n) for the adjoint (validated after the solve).
    torch::AutoGradMode grad_on(true);
    Graph g;
    g.x = in.detach().requires_grad_(true);
    g.y = layer.forward(g.x);
    g.version = in._version();
    f = g.y.detach();
    core->graphs[static_cast<size_t>(n - core->layer_begin)] = std::move(g);
  } else {
    torch::NoGradGuard no_grad;
    f = layer.forward(in);
  }
  if (f.sizes() != in.sizes())
    throw BadData("layer-parallel forward (" + mpi::where(core->comm.get()) + "): step layer " +
                  std::to_string(n) + " maps a state of shape " + c10::str(in.sizes()) +
                  " to shape " + c10::str(f.sizes()) +
                  "; step layers must preserve the state shape");
  torch::NoGradGuard no_grad;
  out = torch::add(in, f, H);  // one pass, one allocation
}

Tensor Core::zeros() const {
  return torch::zeros(shape, torch::TensorOptions().dtype(dtype).device(device));
}

const Tensor& Core::zero_state() {
  if (!shared_zero.defined() || shared_zero.sizes() != torch::IntArrayRef(shape) ||
      shared_zero.scalar_type() != dtype || shared_zero.device() != device)
    shared_zero = zeros();
  return shared_zero;
}

std::string Core::share_message(const std::string& message, int root) const {
  std::int64_t length = static_cast<std::int64_t>(message.size());
  mpi::check(MPI_Bcast(&length, 1, MPI_INT64_T, root, comm.get()), "MPI_Bcast (message)");
  std::string out = rank == root ? message : std::string(static_cast<size_t>(length), ' ');
  mpi::check(MPI_Bcast(out.data(), static_cast<int>(length), MPI_CHAR, root, comm.get()),
             "MPI_Bcast (message)");
  return out;
}

void Core::validate_layers() {
  std::string error;
  auto check = [&](Layer& layer, const std::string& name, bool same_shape) {
    torch::nn::Module& m = layer.module();
    const bool was_training = m.is_training();
    m.train(false);
    try {
      const Tensor x = zeros();
      const Tensor y = layer.forward(x);
      if (!y.defined())
        error = name + " returned an undefined tensor";
      else if (same_shape && y.sizes() != x.sizes())
        error = name + " maps the state shape " + c10::str(x.sizes()) + " to " +
                c10::str(y.sizes()) + "; step layers must preserve the state shape";
    } catch (const std::exception& e) {
      const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
      error = name + " fails on a state of shape " + c10::str(torch::IntArrayRef(shape)) +
              " and dtype " + std::string(c10::toString(dtype)) + ": " +
              (c10_error ? c10_error->what_without_backtrace() : e.what());
    }
    m.train(was_training);
  };
  {
    torch::NoGradGuard no_grad;
    for (std::int64_t n = layer_begin; n < layer_end && error.empty(); ++n)
      check(local_layer(n), "step layer " + std::to_string(n), true);
    if (error.empty() && rank == ranks - 1 && !close.is_empty())
      check(close, "the close layer", false);
  }
  int first_bad = error.empty() ? ranks : rank;
  int global = ranks;
  mpi::check(MPI_Allreduce(&first_bad, &global, 1, MPI_INT, MPI_MIN, comm.get()),
             "MPI_Allreduce (layer check)");
  if (global == ranks) return;
  const std::string what = share_message(error, global);
  asolver.reset();
  fsolver.reset();
  throw BadData("layer-parallel forward (" + mpi::where(comm.get()) + "): on rank " +
                std::to_string(global) + ", " + what);
}

Tensor Core::forward(const Tensor& x0_in) {
  const double t_start = now();
  ++generation;
  stats = BatchStatistics();
  stats.batch = ++batches;
  graphs.assign(local.size(), Graph());

  // 1. The state shape (and the input's health) from the input rank, every batch.
  constexpr int kMaxDims = 28;
  std::array<std::int64_t, 4 + kMaxDims> head{};
  if (rank == 0) {
    if (open_failure) {
      head[0] = 5;
    } else if (input_missing || !x0_in.defined()) {
      head[0] = 1;
    } else if (x0_in.dim() > kMaxDims) {
      head[0] = 2;
      head[3] = x0_in.dim();
    } else if (!c10::isFloatingType(x0_in.scalar_type())) {
      head[0] = 3;
    } else if (opts.check_input() && !torch::isfinite(x0_in).all().item<bool>()) {
      head[0] = 4;
    }
    if (head[0] == 0) {
      head[1] = static_cast<std::int64_t>(x0_in.scalar_type());
      head[2] = x0_in.dim();
      for (std::int64_t d = 0; d < x0_in.dim(); ++d)
        head[static_cast<size_t>(4 + d)] = x0_in.size(d);
    }
  }
  mpi::check(MPI_Bcast(head.data(), static_cast<int>(head.size()), MPI_INT64_T, 0, comm.get()),
             "MPI_Bcast (state shape)");
  const std::string where = "layer-parallel forward (" + mpi::where(comm.get()) + ")";
  if (head[0] == 5) {
    const std::string what = share_message(open_message, 0);
    if (open_failure) {
      std::exception_ptr failure = open_failure;
      open_failure = nullptr;
      std::rethrow_exception(failure);
    }
    throw BadData(where + ": the open layer failed on rank 0: " + what);
  }
  switch (head[0]) {
    case 1:
      throw BadData(where + ": the input x_0 on rank 0 is undefined");
    case 2:
      throw BadData(where + ": the input x_0 on rank 0 has " + std::to_string(head[3]) +
                    " dimensions; at most " + std::to_string(kMaxDims) + " are supported");
    case 3:
      throw BadData(where + ": the input x_0 on rank 0 is not a floating-point tensor");
    case 4:
      throw BadData(where + ": the input x_0 on rank 0 contains NaN or Inf (batch " +
                    std::to_string(batches) + ")");
    default:
      break;
  }
  std::vector<std::int64_t> new_shape(head.begin() + 4,
                                      head.begin() + 4 + static_cast<std::ptrdiff_t>(head[2]));
  const auto new_dtype = static_cast<torch::Dtype>(head[1]);
  if (!fsolver || new_shape != shape || new_dtype != dtype) {
    // New solvers: stored states (warm starts) of another shape are useless.
    shape = std::move(new_shape);
    dtype = new_dtype;
    asolver.reset();
    fsolver.reset();
    const auto grid = mgrit::TimeGrid::uniform(0.0, net.t_final, N);
    fsolver = std::make_unique<mgrit::Solver<ForwardApp>>(fapp, comm.get(), grid,
                                                          opts.forward_solver_options());
    asolver = std::make_unique<mgrit::Solver<AdjointApp>>(
        aapp, comm.get(), grid, opts.backward_solver_options().rank_blocks(adjoint_blocks()));
    validate_layers();
  }
  stats.shape = shape;

  // 2. Ghost layers.
  exchange();

  // 3. The solve.
  x0 = rank == 0 ? x0_in.detach() : Tensor();
  stats.forward.result = fsolver->solve();
  stats.forward.statistics = fsolver->statistics();
  x0 = Tensor();
  if (needs_backward) exchange_boundary();

  // Keep only graphs recorded at the final states: stored here, or the left neighbour's last.
  for (size_t k = 0; k < graphs.size(); ++k) {
    Graph& g = graphs[k];
    if (!g.defined()) continue;
    const std::int64_t n = layer_begin + static_cast<std::int64_t>(k);
    bool final_state = false;
    if (n < lo) {
      final_state =
          boundary.defined() && g.x._version() == g.version && torch::equal(g.x, boundary);
    } else {
      const Tensor* s = fsolver->state(n);
      final_state = s && s->data_ptr() == g.x.data_ptr() && s->_version() == g.version;
    }
    if (final_state)
      ++stats.graphs_recorded;
    else
      g = Graph();
  }

  Tensor out = rank == ranks - 1
                   ? fsolver->state(N)->clone()
                   : torch::zeros({}, torch::TensorOptions().dtype(dtype).device(device));
  stats.forward.seconds = now() - t_start;
  return out;
}

void Core::exchange_boundary() {
  boundary = Tensor();
  if (ranks == 1) return;
  const double t = now();
  constexpr int kTag = 7302;
  std::int64_t elements = 1;
  for (std::int64_t d : shape) elements *= d;
  const auto bytes = static_cast<std::size_t>(elements) * c10::elementSize(dtype);
  boundary_in.resize(rank > 0 ? bytes : 0);
  boundary_out.resize(rank < ranks - 1 ? bytes : 0);
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  if (rank > 0)
    mpi::check(MPI_Irecv(boundary_in.data(), static_cast<int>(bytes), MPI_BYTE, rank - 1, kTag,
                         comm.get(), &requests[0]),
               "MPI_Irecv (boundary state)");
  if (rank < ranks - 1) {
    const Tensor* last = fsolver->state(hi - 1);
    if (!last)
      throw MpiError("layer-parallel forward (" + mpi::where(comm.get()) + "): state " +
                     std::to_string(hi - 1) + " is not stored");
    fapp.pack(*last, boundary_out.data());
    mpi::check(MPI_Isend(boundary_out.data(), static_cast<int>(bytes), MPI_BYTE, rank + 1, kTag,
                         comm.get(), &requests[1]),
               "MPI_Isend (boundary state)");
  }
  mpi::check(MPI_Waitall(2, requests, MPI_STATUSES_IGNORE), "MPI_Waitall (boundary state)");
  if (rank > 0) fapp.unpack(boundary_in.data(), boundary);
  stats.exchange_seconds += now() - t;
}

// ------------------------------------------------------------------------------------------
// Adjoint

Tensor AdjointApp::init(double t) const {
  if (t > core->net.t_final - 0.5 * core->h && core->lambda_N.defined())
    return core->lambda_N.clone();
  return core->zero_state();
}

void AdjointApp::step(const Tensor& in, Tensor& out, double, double,
                      const mgrit::StepInfo& info) const {
  const double H = static_cast<double>(info.from - info.to) * core->h;
  const Tensor gx = core->vjp(info.to, in, info.done && info.level == 0, H);
  torch::NoGradGuard no_grad;
  out = gx.defined() ? torch::add(in, gx, H) : in.clone();
}

Tensor Core::vjp(std::int64_t n, const Tensor& lambda, bool with_params, double H) {
  if (!is_local_layer(n))
    throw MpiError("layer-parallel backward (" + mpi::where(comm.get()) + "): adjoint step into " +
                   std::to_string(n) + " outside the local layers [" + std::to_string(layer_begin) +
                   ", " + std::to_string(layer_end) + ")");
  const auto k = static_cast<size_t>(n - layer_begin);
  const bool cache = opts.cache_graphs();
  Graph scratch;
  Graph* g = cache ? &graphs[k] : &scratch;
  if (g->defined()) {
    ++stats.graphs_reused;
  } else {
    const Tensor* x = n < lo ? &boundary : fsolver->state(n);
    if (!x || !x->defined())
      throw MpiError("layer-parallel backward (" + mpi::where(comm.get()) + "): forward state " +
                     std::to_string(n) + " is not stored");
    torch::AutoGradMode grad_on(true);
    g->x = x->detach().requires_grad_(true);
    g->y = local_layer(n).forward(g->x);
    ++stats.graphs_built;
  }
  // The final fine sweep steps each interval once: the graph is not needed afterwards.
  const bool last_use = with_params;
  Tensor gx;
  if (g->y.requires_grad()) {
    std::vector<Tensor> inputs{g->x};
    if (with_params) inputs.insert(inputs.end(), layer_params[k].begin(), layer_params[k].end());
    const auto grads = torch::autograd::grad({g->y}, inputs, {lambda},
                                             /*retain_graph=*/cache && !last_use,
                                             /*create_graph=*/false, /*allow_unused=*/true);
    gx = grads[0];
    if (with_params) {
      torch::NoGradGuard no_grad;
      for (size_t p = 0; p < layer_params[k].size(); ++p) {
        const Tensor& gp = grads[p + 1];
        if (!gp.defined()) continue;
        Tensor& acc = grad_acc[k][p];
        acc = acc.defined() ? acc.add_(gp, H) : H * gp;
      }
    }
  }
  if (last_use || !cache) *g = Graph();
  return gx;
}

std::vector<Tensor> Core::backward(const Tensor& grad_output) {
  const double t_start = now();
  // The terminal value λ_N and its health, from the output rank.
  std::int64_t status = 0;
  if (rank == ranks - 1) {
    lambda_N = grad_output.defined() ? grad_output.detach() : zeros();
    if (lambda_N.sizes() != torch::IntArrayRef(shape))
      status = 2;
    else if (!torch::isfinite(lambda_N).all().item<bool>())
      status = 1;
  }
  mpi::check(MPI_Bcast(&status, 1, MPI_INT64_T, ranks - 1, comm.get()),
             "MPI_Bcast (backward status)");
  const std::string where = "layer-parallel backward (" + mpi::where(comm.get()) + ")";
  if (status != 0) {
    lambda_N = Tensor();
    graphs.assign(local.size(), Graph());
    if (status == 1)
      throw Divergence(where + ": the loss gradient at the network output (rank " +
                       std::to_string(ranks - 1) + ") contains NaN or Inf (batch " +
                       std::to_string(batches) + ")");
    throw BadData(where + ": the gradient at the output has a shape other than the state's");
  }

  grad_acc.assign(local.size(), {});
  for (size_t k = 0; k < local.size(); ++k) grad_acc[k].resize(layer_params[k].size());
  stats.backward.result = asolver->solve();
  stats.backward.statistics = asolver->statistics();
  lambda_N = Tensor();
  graphs.assign(local.size(), Graph());

  std::vector<Tensor> out;
  out.reserve(1 + trainable.size());
  out.push_back(rank == 0 ? asolver->state(0)->clone() : Tensor());
  for (auto& layer : grad_acc)
    for (auto& g : layer) out.push_back(std::move(g));
  grad_acc.clear();
  stats.backward.seconds = now() - t_start;
  return out;
}

// ------------------------------------------------------------------------------------------
// The autograd bridge

/// Inputs: x_0 (input rank; a zero-size placeholder elsewhere), an anchor that requires grad
/// (so every rank's output is part of a graph and backward reaches this node everywhere), the
/// local trainable parameters, and the core. Output: x_N (output rank; a 0-dim placeholder
/// elsewhere). Backward: the adjoint solve; the gradient of x_0 and of every local parameter.
struct LayerParallelFunction : public torch::autograd::Function<LayerParallelFunction> {
  static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& x0,
                        const Tensor& anchor, at::TensorList params, Core* core) {
    (void)anchor;
    ctx->saved_data["core"] = static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(core));
    ctx->saved_data["x0_grad"] = x0.requires_grad();
    ctx->saved_data["params"] = static_cast<std::int64_t>(params.size());
    Tensor out = core->forward(x0);
    ctx->saved_data["generation"] = core->generation;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto* core =
        reinterpret_cast<Core*>(static_cast<std::intptr_t>(ctx->saved_data["core"].toInt()));
    const std::int64_t generation = ctx->saved_data["generation"].toInt();
    if (generation != core->generation)
      throw InvalidOption("layer-parallel backward (" + mpi::where(core->comm.get()) +
                          "): the graph is stale (forward pass " + std::to_string(generation) +
                          ", now " + std::to_string(core->generation) +
                          "): call backward once per forward, before the next forward, "
                          "set_options() or to()");
    if (!core->fsolver || !core->asolver)
      throw InvalidOption("layer-parallel backward (" + mpi::where(core->comm.get()) +
                          "): the solvers were rebuilt since the forward pass");
    const auto n_params = static_cast<size_t>(ctx->saved_data["params"].toInt());
    std::vector<Tensor> grads = core->backward(grad_out.at(0));
    if (grads.size() != 1 + n_params)
      throw MpiError("layer-parallel backward (" + mpi::where(core->comm.get()) +
                     "): the trainable parameters changed between forward and backward");
    torch::autograd::variable_list result;
    result.reserve(n_params + 3);
    result.push_back(ctx->saved_data["x0_grad"].toBool() ? grads[0] : Tensor());
    result.emplace_back();  // anchor
    for (size_t p = 0; p < n_params; ++p) result.push_back(grads[p + 1]);
    result.emplace_back();  // core
    return result;
  }
};

}  // namespace detail

// ------------------------------------------------------------------------------------------
// LayerParallelImpl

LayerParallelImpl::LayerParallelImpl(MPI_Comm comm, Network network, LayerParallelOptions options)
    : core_(std::make_unique<detail::Core>(*this, comm, std::move(network), std::move(options))) {}

LayerParallelImpl::~LayerParallelImpl() = default;

torch::Tensor LayerParallelImpl::forward(const torch::Tensor& input) {
  detail::Core& c = *core_;
  torch::Tensor x0;
  c.input_missing = false;
  c.open_failure = nullptr;
  if (owns_input()) {
    if (!input.defined()) {
      c.input_missing = true;
    } else if (c.open.is_empty()) {
      x0 = input;
    } else {
      // A failure here is reported to every rank by the forward solve's first broadcast.
      try {
        x0 = c.open.forward(input);
      } catch (const c10::Error& e) {
        c.open_failure = std::current_exception();
        c.open_message = e.what_without_backtrace();
        x0 = torch::Tensor();
      } catch (const std::exception& e) {
        c.open_failure = std::current_exception();
        c.open_message = e.what();
        x0 = torch::Tensor();
      }
    }
  }
  if (!x0.defined()) x0 = torch::empty({0});
  c.collect_parameters();
  c.needs_backward = torch::GradMode::is_enabled();
  c.record_graphs = c.needs_backward && c.opts.cache_graphs();
  const torch::Tensor anchor = torch::zeros({}, torch::TensorOptions().requires_grad(true));
  torch::Tensor xN =
      detail::LayerParallelFunction::apply(x0, anchor, at::TensorList(c.trainable), &c);
  if (owns_output() && !c.close.is_empty()) return c.close.forward(xN);
  return xN;
}

const LayerParallelOptions& LayerParallelImpl::options() const {
  return core_->opts;
}
const BatchStatistics& LayerParallelImpl::statistics() const {
  return core_->stats;
}
MPI_Comm LayerParallelImpl::comm() const {
  return core_->comm.get();
}
int LayerParallelImpl::rank() const {
  return core_->rank;
}
int LayerParallelImpl::ranks() const {
  return core_->ranks;
}
std::int64_t LayerParallelImpl::steps() const {
  return core_->N;
}
double LayerParallelImpl::step_size() const {
  return core_->h;
}
std::int64_t LayerParallelImpl::first_point() const {
  return core_->lo;
}
std::int64_t LayerParallelImpl::end_point() const {
  return core_->hi;
}
std::int64_t LayerParallelImpl::first_layer() const {
  return core_->layer_begin;
}
std::int64_t LayerParallelImpl::end_layer() const {
  return core_->layer_end;
}
Layer& LayerParallelImpl::open() {
  return core_->open;
}
Layer& LayerParallelImpl::close() {
  return core_->close;
}

Layer& LayerParallelImpl::layer(std::int64_t n) {
  if (!core_->is_local_layer(n))
    throw InvalidOption("layer " + std::to_string(n) + " is not local to " +
                        mpi::where(core_->comm.get()) + " (its layers are [" +
                        std::to_string(core_->layer_begin) + ", " +
                        std::to_string(core_->layer_end) + "))");
  return core_->local_layer(n);
}

std::vector<std::int64_t> LayerParallelImpl::ghost_layers() const {
  std::vector<std::int64_t> out;
  for (const auto& entry : core_->ghosts) out.push_back(entry.first);
  return out;
}

void LayerParallelImpl::set_options(const LayerParallelOptions& options) {
  options.validate();
  core_->opts = options;
  ++core_->generation;  // a pending backward would need the old solvers
  core_->asolver.reset();
  core_->fsolver.reset();
  core_->plan();
}

void LayerParallelImpl::to(torch::Device device, torch::Dtype dtype, bool non_blocking) {
  torch::nn::Module::to(device, dtype, non_blocking);
  core_->convert(device, dtype);
}
void LayerParallelImpl::to(torch::Dtype dtype, bool non_blocking) {
  torch::nn::Module::to(dtype, non_blocking);
  core_->convert(std::nullopt, dtype);
}
void LayerParallelImpl::to(torch::Device device, bool non_blocking) {
  torch::nn::Module::to(device, non_blocking);
  core_->convert(device, std::nullopt);
}

}  // namespace weft::nn
