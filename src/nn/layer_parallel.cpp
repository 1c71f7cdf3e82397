// The layer-parallel module: construction, the forward pass around the batch solve, and the
// autograd function that connects the solves to LibTorch.
#include "weft/nn/layer_parallel.hpp"

#include <torch/csrc/autograd/engine.h>
#include <torch/torch.h>

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "core.hpp"
#include "solve_function.hpp"
#include "tensor_tuple.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"
#include "weft/util/trace.hpp"

namespace weft::nn {
namespace detail {

using torch::Tensor;

namespace {
std::string rank_text(int rank, int ranks) {
  return "rank " + std::to_string(rank) + "/" + std::to_string(ranks);
}

/// The options with every rank's checks made before any collective call.
LayerParallelOptions checked(LayerParallelOptions options) {
  options.validate();
  return options;
}

Placement placed(const Chain& chain, int rank, int ranks, const LayerParallelOptions& options) {
  if (chain.layers() < ranks)
    throw InvalidOption("layer-parallel network (" + rank_text(rank, ranks) +
                        "): " + std::to_string(chain.layers()) +
                        (chain.stages() == 1 ? " step layers" : " layers (steps and transitions)") +
                        " on " + std::to_string(ranks) +
                        " ranks; need at least as many layers as ranks (N >= P)");
  return Placement(chain, rank, ranks, options.forward_solver_options(),
                   options.backward_solver_options(), options.layer_costs());
}
}  // namespace

Core::Core(torch::nn::Module& owner_module, MPI_Comm layer_comm, MPI_Comm data_comm,
           Network network, LayerParallelOptions options)
    : owner(owner_module),
      comm(layer_comm),
      data(data_comm == MPI_COMM_NULL ? mpi::OwnedComm() : mpi::OwnedComm(data_comm)),
      rank(mpi::rank(layer_comm)),
      ranks(mpi::size(layer_comm)),
      net(std::move(network)),
      stages(net.resolved_stages()),
      chain(chain_of(stages)),
      opts(checked(std::move(options))),
      placement(placed(chain, rank, ranks, opts)),
      bank(owner_module, stages, chain, net.open, net.close, placement),
      evaluator(bank, chain),
      sync(data.get(), opts.bucket_bytes()),
      solve(comm.get(), chain, placement, bank, evaluator, sync, stats) {
  solve.configure(opts);
}

/// The chain's autograd node. Inputs: x_0 (input rank; a zero-size placeholder elsewhere), an
/// anchor that requires grad (so every rank's output is part of a graph and backward reaches this
/// node everywhere) and the local trainable parameters. Output: x_N (output rank; a 0-dim
/// placeholder elsewhere). Backward: the adjoint solve; the gradient of x_0 and of every local
/// parameter.
struct ChainNode {
  using Core = detail::Core;
  static constexpr const char* owner = "layer-parallel";
  static constexpr const char* advice =
      "call backward once per forward, before the next forward, set_options() or to()";
  static std::int64_t generation(const Core& c) { return c.generation; }
  static MPI_Comm comm(const Core& c) { return c.comm.get(); }

  static torch::autograd::variable_list forward(Core& c, at::TensorList inputs) {
    Tensor xN = c.solve.forward(inputs[0], c.opts.cache_graphs(), true);
    if (c.rank == c.ranks - 1) return {xN};
    return {torch::zeros(
        {}, torch::TensorOptions().dtype(c.solve.shapes().dtype).device(c.bank.device()))};
  }

  static torch::autograd::variable_list backward(Core& c,
                                                 const torch::autograd::variable_list& grad_out,
                                                 const std::vector<std::int64_t>& wanted) {
    Core* core = &c;
    if (!c.solve.ready())
      throw InvalidOption("layer-parallel backward (" + mpi::where(c.comm.get()) +
                          "): the solvers were rebuilt since the forward pass");
    const std::size_t n_params = wanted.size() - 2;
    const double t = now();
    std::vector<Tensor> grads = c.solve.backward(grad_out.at(0));
    c.stats.backward.seconds = now() - t;
    if (grads.size() != 1 + n_params)
      throw MpiError("layer-parallel backward (" + mpi::where(c.comm.get()) +
                     "): the trainable parameters changed between forward and backward");
    if (c.sync.active()) {
      // The open and close layers' gradients are complete only when the whole backward is.
      torch::autograd::Engine::get_default_engine().queue_callback([core] {
        std::vector<Tensor> ends;
        for (Layer* end : {&core->bank.open(), &core->bank.close()})
          if (!end->is_empty())
            for (const Tensor& p : end->ptr()->parameters())
              if (p.requires_grad() && p.grad().defined()) ends.push_back(p.mutable_grad());
        core->sync.average_now(ends);
      });
    }
    torch::autograd::variable_list result;
    result.reserve(n_params + 2);
    result.push_back(grads[0]);
    result.emplace_back();  // anchor
    for (size_t p = 0; p < n_params; ++p) result.push_back(grads[p + 1]);
    return result;
  }
};
using LayerParallelFunction = SolveFunction<ChainNode>;

}  // namespace detail

// ------------------------------------------------------------------------------------------
// LayerParallelImpl

LayerParallelImpl::LayerParallelImpl(MPI_Comm comm, Network network, LayerParallelOptions options)
    : LayerParallelImpl(comm, MPI_COMM_NULL, std::move(network), std::move(options)) {}

LayerParallelImpl::LayerParallelImpl(MPI_Comm layer_comm, MPI_Comm data_comm, Network network,
                                     LayerParallelOptions options)
    : core_(std::make_unique<detail::Core>(*this, layer_comm, data_comm, std::move(network),
                                           std::move(options))) {}

LayerParallelImpl::~LayerParallelImpl() = default;

torch::Tensor LayerParallelImpl::forward(const torch::Tensor& input) {
  detail::Core& c = *core_;
  const double t_start = detail::now();
  ++c.generation;
  c.stats = BatchStatistics();
  c.stats.batch = ++c.batches;

  // 1. x_0 = open(input) on the input rank, and its health, agreed by every rank.
  torch::Tensor x0;
  constexpr std::int64_t kMaxDims = 28;
  mpi::collectively(c.comm.get(), [&] {
    if (!owns_input()) return;
    if (!input.defined()) throw BadData("layer-parallel forward: the input on rank 0 is undefined");
    if (c.bank.open().is_empty()) {
      x0 = input;
    } else {
      try {
        trace::Span span("open", "train");
        x0 = c.bank.open().forward(input);
      } catch (const c10::Error& e) {
        throw BadData(std::string("layer-parallel forward: the open layer failed on rank 0: ") +
                      e.what_without_backtrace());
      }
    }
    if (!x0.defined())
      throw BadData("layer-parallel forward: the input x_0 on rank 0 is undefined");
    if (x0.dim() > kMaxDims)
      throw BadData("layer-parallel forward: the input x_0 on rank 0 has " +
                    std::to_string(x0.dim()) + " dimensions; at most " + std::to_string(kMaxDims) +
                    " are supported");
    if (!c10::isFloatingType(x0.scalar_type()))
      throw BadData(
          "layer-parallel forward: the input x_0 on rank 0 is not a floating-point "
          "tensor");
    if (c.opts.check_input() && !detail::all_finite(x0))
      throw BadData("layer-parallel forward: the input x_0 on rank 0 contains NaN or Inf (batch " +
                    std::to_string(c.batches) + ")");
  });

  // 2. Its shape and dtype to every rank; solvers for them.
  std::array<std::int64_t, 2 + kMaxDims> head{};
  if (owns_input()) {
    head[0] = static_cast<std::int64_t>(x0.scalar_type());
    head[1] = x0.dim();
    for (std::int64_t d = 0; d < x0.dim(); ++d) head[static_cast<size_t>(2 + d)] = x0.size(d);
  }
  {
    trace::Span span("broadcast", c.comm.get(), 0, sizeof(head));
    mpi::check(MPI_Bcast(head.data(), static_cast<int>(head.size()), MPI_INT64_T, 0, c.comm.get()),
               "MPI_Bcast (state shape)");
  }
  const std::vector<std::int64_t> shape(head.begin() + 2,
                                        head.begin() + 2 + static_cast<std::ptrdiff_t>(head[1]));
  c.solve.prepare(shape, static_cast<torch::Dtype>(head[0]));
  c.stats.shape = shape;

  // 3. Ghost layers, random streams, the solve.
  const double t_exchange = detail::now();
  c.stats.ghost_bytes = c.bank.exchange(c.comm.get());
  c.stats.exchange_seconds = detail::now() - t_exchange;
  c.evaluator.begin_batch(c.opts.seed(), c.batch_index, is_training());
  if (is_training()) ++c.batch_index;
  c.bank.collect_trainable();
  c.stats.parameter_bytes = c.bank.own_bytes();
  c.stats.ghost_bytes_held = c.bank.ghost_bytes();
  if (!x0.defined()) x0 = torch::empty({0});
  const torch::Tensor anchor = torch::zeros({}, torch::TensorOptions().requires_grad(true));
  torch::Tensor xN;
  if (torch::GradMode::is_enabled()) {
    std::vector<torch::Tensor> inputs{x0, anchor};
    const std::vector<torch::Tensor>& trainable = c.bank.trainable();
    inputs.insert(inputs.end(), trainable.begin(), trainable.end());
    xN = detail::LayerParallelFunction::apply(at::TensorList(inputs), &c)[0];
  } else {
    xN = c.solve.forward(x0, false, false);
    if (!owns_output())
      xN = torch::zeros(
          {}, torch::TensorOptions().dtype(c.solve.shapes().dtype).device(c.bank.device()));
  }
  c.stats.forward.seconds = detail::now() - t_start;
  if (owns_output() && !c.bank.close().is_empty()) {
    trace::Span span("close", "train");
    return c.bank.close().forward(xN);
  }
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
MPI_Comm LayerParallelImpl::data_comm() const {
  return core_->data.get();
}
int LayerParallelImpl::data_ranks() const {
  return core_->data.get() == MPI_COMM_NULL ? 1 : mpi::size(core_->data.get());
}
int LayerParallelImpl::replica() const {
  return core_->data.get() == MPI_COMM_NULL ? 0 : mpi::rank(core_->data.get());
}
std::int64_t LayerParallelImpl::batch_index() const {
  return core_->batch_index;
}
void LayerParallelImpl::set_batch_index(std::int64_t batch) {
  core_->batch_index = batch;
}
bool LayerParallelImpl::is_transition(std::int64_t n) const {
  return core_->chain.is_transition(n);
}
std::int64_t LayerParallelImpl::steps() const {
  return core_->chain.layers();
}
double LayerParallelImpl::step_size() const {
  return core_->chain.step_size(0);
}
std::int64_t LayerParallelImpl::first_point() const {
  return core_->placement.point_begin(core_->rank);
}
std::int64_t LayerParallelImpl::end_point() const {
  return core_->placement.point_begin(core_->rank + 1);
}
std::int64_t LayerParallelImpl::first_layer() const {
  return core_->bank.begin();
}
std::int64_t LayerParallelImpl::end_layer() const {
  return core_->bank.end();
}
Layer& LayerParallelImpl::open() {
  return core_->bank.open();
}
Layer& LayerParallelImpl::close() {
  return core_->bank.close();
}

Layer& LayerParallelImpl::layer(std::int64_t n) {
  if (!core_->bank.is_local(n))
    throw InvalidOption("layer " + std::to_string(n) + " is not local to " +
                        mpi::where(core_->comm.get()) + " (its layers are [" +
                        std::to_string(core_->bank.begin()) + ", " +
                        std::to_string(core_->bank.end()) + "))");
  return core_->bank.local(n);
}

std::vector<std::int64_t> LayerParallelImpl::ghost_layers() const {
  std::vector<std::int64_t> out;
  for (const auto& entry : core_->bank.ghosts()) out.push_back(entry.first);
  return out;
}

void LayerParallelImpl::set_options(const LayerParallelOptions& options) {
  options.validate();
  detail::Core& c = *core_;
  if (options.layer_costs() != c.opts.layer_costs())
    throw InvalidOption("layer-parallel options (" + mpi::where(c.comm.get()) +
                        "): set_options cannot change layer_costs (the layers would move "
                        "between ranks); build a new module with them");
  c.opts = options;
  ++c.generation;  // a pending backward would need the old solvers
  c.placement = detail::Placement(c.chain, c.rank, c.ranks, options.forward_solver_options(),
                                  options.backward_solver_options(), options.layer_costs());
  c.bank.replan();
  c.solve.configure(options);
  c.sync = detail::GradientSync(c.data.get(), options.bucket_bytes());
}

void LayerParallelImpl::to(torch::Device device, torch::Dtype dtype, bool non_blocking) {
  torch::nn::Module::to(device, dtype, non_blocking);
  core_->bank.convert(device, dtype);
  ++core_->generation;  // solvers hold states on the old device
  core_->solve.reset();
}
void LayerParallelImpl::to(torch::Dtype dtype, bool non_blocking) {
  torch::nn::Module::to(dtype, non_blocking);
  core_->bank.convert(std::nullopt, dtype);
  ++core_->generation;
  core_->solve.reset();
}
void LayerParallelImpl::to(torch::Device device, bool non_blocking) {
  torch::nn::Module::to(device, non_blocking);
  core_->bank.convert(device, std::nullopt);
  ++core_->generation;
  core_->solve.reset();
}

// ------------------------------------------------------------------------------------------
// Replica groups

ReplicaGroups::ReplicaGroups(MPI_Comm world, int data_ranks) {
  const int ranks = mpi::size(world);
  const int rank = mpi::rank(world);
  if (data_ranks < 1 || ranks % data_ranks != 0)
    throw InvalidOption("data parallelism: " + std::to_string(data_ranks) + " replicas of " +
                        std::to_string(ranks) +
                        " ranks; the number of replicas must be >= 1 and divide the ranks");
  const int per_replica = ranks / data_ranks;
  replicas_ = data_ranks;
  replica_ = rank / per_replica;
  mpi::check(MPI_Comm_split(world, replica_, rank, &layers_), "MPI_Comm_split (layers)");
  mpi::check(MPI_Comm_split(world, rank % per_replica, rank, &data_), "MPI_Comm_split (data)");
}

ReplicaGroups::~ReplicaGroups() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (layers_ != MPI_COMM_NULL) MPI_Comm_free(&layers_);
  if (data_ != MPI_COMM_NULL) MPI_Comm_free(&data_);
}

}  // namespace weft::nn
