// Layers and their parameters across ranks: construction, ghost layers, the whole network on
// one rank (gather/load), and the loss helpers.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core.hpp"
#include "weft/mgrit/hierarchy.hpp"
#include "weft/nn/layer_parallel.hpp"
#include "weft/util/error.hpp"

namespace weft::nn {
namespace detail {

using torch::Tensor;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ------------------------------------------------------------------------------------------
// Module state as bytes

std::vector<Tensor> state_tensors(const torch::nn::Module& m) {
  std::vector<Tensor> out = m.parameters(/*recurse=*/true);
  for (const Tensor& b : m.buffers(/*recurse=*/true)) out.push_back(b);
  return out;
}

std::size_t state_bytes(const torch::nn::Module& m) {
  std::size_t bytes = 0;
  for (const Tensor& t : state_tensors(m))
    bytes += static_cast<std::size_t>(t.numel()) * t.element_size();
  return bytes;
}

void pack_state(const torch::nn::Module& m, std::vector<char>& buffer) {
  torch::NoGradGuard no_grad;
  for (const Tensor& t : state_tensors(m)) {
    const Tensor c = t.detach().to(torch::kCPU).contiguous();
    const std::size_t n = static_cast<std::size_t>(c.numel()) * c.element_size();
    const std::size_t offset = buffer.size();
    buffer.resize(offset + n);
    if (n) std::memcpy(buffer.data() + offset, c.data_ptr(), n);
  }
}

const char* unpack_state(torch::nn::Module& m, const char* data) {
  torch::NoGradGuard no_grad;
  for (Tensor& t : state_tensors(m)) {
    const std::size_t n = static_cast<std::size_t>(t.numel()) * t.element_size();
    if (n) {
      const Tensor blob = torch::from_blob(const_cast<char*>(data), t.sizes(),
                                           torch::TensorOptions().dtype(t.dtype()));
      t.copy_(blob);
    }
    data += n;
  }
  return data;
}

namespace {
std::shared_ptr<torch::nn::Module> module_of(const Layer& any) {
  return any.ptr();
}

std::string rank_text(int rank, int ranks) {
  return "rank " + std::to_string(rank) + "/" + std::to_string(ranks);
}

/// A status from `root` to every rank; non-zero means every rank throws.
std::int64_t share_status(std::int64_t status, int root, MPI_Comm comm, const char* what) {
  mpi::check(MPI_Bcast(&status, 1, MPI_INT64_T, root, comm), what);
  return status;
}
}  // namespace

// ------------------------------------------------------------------------------------------
// Construction

Core::Core(torch::nn::Module& owner_module, MPI_Comm parent, Network network,
           LayerParallelOptions options)
    : owner(owner_module), net(std::move(network)), opts(std::move(options)) {
  // Checks every rank makes identically, before any collective call.
  rank = mpi::rank(parent);
  ranks = mpi::size(parent);
  N = net.steps;
  const std::string where = "layer-parallel network (" + rank_text(rank, ranks) + ")";
  if (N < 1)
    throw InvalidOption(where + ": steps = " + std::to_string(N) + "; need at least 1 step layer");
  if (N < ranks)
    throw InvalidOption(where + ": " + std::to_string(N) + " step layers on " +
                        std::to_string(ranks) +
                        " ranks; need at least as many step layers as ranks (N >= P)");
  if (!std::isfinite(net.t_final) || net.t_final <= 0)
    throw InvalidOption(where + ": t_final = " + std::to_string(net.t_final) +
                        "; need a finite T > 0");
  if (!net.step) throw InvalidOption(where + ": the step-layer factory is missing");
  opts.validate();

  comm = mpi::OwnedComm(parent);
  h = net.t_final / static_cast<double>(N);
  lo = block_begin(rank);
  hi = block_begin(rank + 1);
  layer_begin = layer_begin_of(rank);
  layer_end = layer_end_of(rank);
  fapp.core = this;
  aapp.core = this;

  for (std::int64_t n = layer_begin; n < layer_end; ++n) {
    local.push_back(build([&] { return net.step(n); }, "step layer " + std::to_string(n)));
    owner.register_module("step_" + std::to_string(n), module_of(local.back()));
  }
  if (rank == 0 && net.open) {
    open = build(net.open, "open layer");
    owner.register_module("open", module_of(open));
  }
  if (rank == ranks - 1 && net.close) {
    close = build(net.close, "close layer");
    owner.register_module("close", module_of(close));
  }
  for (const Tensor& p : owner.parameters()) {
    device = p.device();
    break;
  }
  plan();
}

Layer Core::build(const LayerFactory& make, const std::string& what) const {
  Layer m = make();
  if (m.is_empty())
    throw InvalidOption("layer-parallel network (" + rank_text(rank, ranks) +
                        "): the factory returned an empty module for the " + what);
  if (device_override && dtype_override)
    m.ptr()->to(*device_override, *dtype_override);
  else if (device_override)
    m.ptr()->to(*device_override);
  else if (dtype_override)
    m.ptr()->to(*dtype_override);
  return m;
}

std::int64_t Core::block_begin(int r) const {
  return mgrit::Distribution::block_begin(N + 1, ranks, r);
}

std::int64_t Core::layer_begin_of(int r) const {
  return r == 0 ? 0 : block_begin(r) - 1;
}

std::int64_t Core::layer_end_of(int r) const {
  return r == ranks - 1 ? N : block_begin(r + 1) - 1;
}

std::vector<mgrit::index_t> Core::adjoint_blocks() const {
  std::vector<mgrit::index_t> first;
  for (int r = 0; r < ranks; ++r) first.push_back(layer_begin_of(r));
  return first;
}

int Core::owner_of_point(std::int64_t point) const {
  int a = 0, b = ranks;  // block_begin(a) <= point < block_begin(b)
  while (b - a > 1) {
    const int m = (a + b) / 2;
    if (block_begin(m) <= point)
      a = m;
    else
      b = m;
  }
  return a;
}

Layer& Core::forward_layer(std::int64_t n) {
  if (is_local_layer(n)) return local_layer(n);
  auto it = ghosts.find(n);
  if (it == ghosts.end())
    throw MpiError("layer-parallel forward (" + mpi::where(comm.get()) + "): layer " +
                   std::to_string(n) + " is neither local nor a ghost copy");
  return it->second;
}

void Core::plan() {
  // Every step of every level goes from a point's predecessor on that level to the point, on
  // the point's owner, with the predecessor's layer: the ghosts are the predecessors' layers
  // that live elsewhere (the adjoint needs none: its step into n runs where layer n lives).
  const auto grid = mgrit::TimeGrid::uniform(0.0, net.t_final, N);
  const auto hierarchy = mgrit::Hierarchy::uniform(grid, opts.forward_solver_options());
  std::vector<std::set<std::int64_t>> need(static_cast<size_t>(ranks));
  for (int l = 0; l < hierarchy.levels(); ++l) {
    const auto& fine = hierarchy.level(l).fine;
    for (size_t k = 1; k < fine.size(); ++k) {
      const int to_owner = owner_of_point(fine[k]);
      if (layer_owner(fine[k - 1]) != to_owner)
        need[static_cast<size_t>(to_owner)].insert(fine[k - 1]);
    }
  }
  send_plan.clear();
  recv_plan.clear();
  for (int r = 0; r < ranks; ++r) {
    if (r == rank) continue;
    Peer peer;
    peer.rank = r;
    for (std::int64_t n : need[static_cast<size_t>(r)])
      if (is_local_layer(n)) peer.layers.push_back(n);
    if (!peer.layers.empty()) send_plan.push_back(std::move(peer));
  }
  std::map<int, Peer> by_owner;
  for (std::int64_t n : need[static_cast<size_t>(rank)]) {
    Peer& peer = by_owner[layer_owner(n)];
    peer.rank = layer_owner(n);
    peer.layers.push_back(n);
  }
  for (auto& entry : by_owner) recv_plan.push_back(std::move(entry.second));

  std::map<std::int64_t, Layer> kept;
  for (std::int64_t n : need[static_cast<size_t>(rank)]) {
    auto it = ghosts.find(n);
    kept[n] = it != ghosts.end() ? std::move(it->second)
                                 : build([&] { return net.step(n); },
                                         "ghost copy of step layer " + std::to_string(n));
  }
  ghosts = std::move(kept);
}

void Core::exchange() {
  const double t = now();
  constexpr int kTag = 7001;
  std::vector<std::vector<char>> recv_bufs(recv_plan.size()), send_bufs(send_plan.size());
  std::vector<MPI_Request> recv_reqs(recv_plan.size(), MPI_REQUEST_NULL);
  std::vector<MPI_Request> send_reqs(send_plan.size(), MPI_REQUEST_NULL);
  for (size_t i = 0; i < recv_plan.size(); ++i) {
    std::size_t bytes = 0;
    for (std::int64_t n : recv_plan[i].layers) bytes += state_bytes(*module_of(ghosts.at(n)));
    recv_bufs[i].resize(bytes);
    mpi::check(MPI_Irecv(recv_bufs[i].data(), static_cast<int>(bytes), MPI_BYTE, recv_plan[i].rank,
                         kTag, comm.get(), &recv_reqs[i]),
               "MPI_Irecv (ghost layers)");
  }
  for (size_t i = 0; i < send_plan.size(); ++i) {
    for (std::int64_t n : send_plan[i].layers) pack_state(*module_of(local_layer(n)), send_bufs[i]);
    mpi::check(MPI_Isend(send_bufs[i].data(), static_cast<int>(send_bufs[i].size()), MPI_BYTE,
                         send_plan[i].rank, kTag, comm.get(), &send_reqs[i]),
               "MPI_Isend (ghost layers)");
  }
  std::vector<MPI_Status> statuses(recv_plan.size());
  const int rc = MPI_Waitall(static_cast<int>(recv_reqs.size()), recv_reqs.data(), statuses.data());
  for (size_t i = 0; i < recv_plan.size(); ++i) {
    int count = 0;
    MPI_Get_count(&statuses[i], MPI_BYTE, &count);
    if (rc != MPI_SUCCESS || static_cast<std::size_t>(count) != recv_bufs[i].size())
      throw MpiError("layer-parallel forward (" + mpi::where(comm.get()) +
                     "): ghost layers from rank " + std::to_string(recv_plan[i].rank) +
                     " arrived with " + std::to_string(count) + " bytes, expected " +
                     std::to_string(recv_bufs[i].size()) +
                     " (do the ranks' layers differ in structure or dtype?)");
    const char* p = recv_bufs[i].data();
    for (std::int64_t n : recv_plan[i].layers) p = unpack_state(*module_of(ghosts.at(n)), p);
    stats.ghost_bytes += count;
  }
  mpi::check(MPI_Waitall(static_cast<int>(send_reqs.size()), send_reqs.data(), MPI_STATUSES_IGNORE),
             "MPI_Waitall (ghost layers)");
  for (auto& entry : ghosts) module_of(entry.second)->train(owner.is_training());
  stats.exchange_seconds += now() - t;
}

void Core::collect_parameters() {
  layer_params.assign(local.size(), {});
  trainable.clear();
  for (size_t k = 0; k < local.size(); ++k)
    for (const Tensor& p : module_of(local[k])->parameters())
      if (p.requires_grad()) {
        layer_params[k].push_back(p);
        trainable.push_back(p);
      }
}

void Core::convert(std::optional<torch::Device> to_device, std::optional<torch::Dtype> to_dtype) {
  if (to_device) {
    device_override = to_device;
    device = *to_device;
  }
  if (to_dtype) dtype_override = to_dtype;
  for (auto& entry : ghosts) {
    auto m = module_of(entry.second);
    if (to_device && to_dtype)
      m->to(*to_device, *to_dtype);
    else if (to_device)
      m->to(*to_device);
    else if (to_dtype)
      m->to(*to_dtype);
  }
  // Solvers hold states on the old device; a pending backward cannot use them.
  ++generation;
  asolver.reset();
  fsolver.reset();
  staging = Tensor();
}

}  // namespace detail

// ------------------------------------------------------------------------------------------
// The whole network on one rank

SequentialNetworkImpl::SequentialNetworkImpl(const Network& network)
    : h_(network.t_final / static_cast<double>(network.steps)) {
  if (network.steps < 1 || !network.step)
    throw InvalidOption("sequential network: need steps >= 1 and a step factory (steps = " +
                        std::to_string(network.steps) + ")");
  if (network.open) {
    open_ = network.open();
    register_module("open", open_.ptr());
  }
  for (std::int64_t n = 0; n < network.steps; ++n) {
    steps_.push_back(network.step(n));
    register_module("step_" + std::to_string(n), steps_.back().ptr());
  }
  if (network.close) {
    close_ = network.close();
    register_module("close", close_.ptr());
  }
}

torch::Tensor SequentialNetworkImpl::forward(torch::Tensor x) {
  if (!open_.is_empty()) x = open_.forward(x);
  for (auto& step : steps_) x = x + h_ * step.forward(x);
  if (!close_.is_empty()) x = close_.forward(x);
  return x;
}

namespace {
/// The modules of rank r, in the order they travel: open (rank 0), layers, close (rank P-1).
std::vector<std::shared_ptr<torch::nn::Module>> sequential_modules_of(
    const SequentialNetworkImpl& full, const detail::Core& c, int r) {
  std::vector<std::shared_ptr<torch::nn::Module>> out;
  if (r == 0 && c.net.open) out.push_back(full.open().ptr());
  for (std::int64_t n = c.layer_begin_of(r); n < c.layer_end_of(r); ++n)
    out.push_back(full.step(n).ptr());
  if (r == c.ranks - 1 && c.net.close) out.push_back(full.close().ptr());
  return out;
}

std::vector<std::shared_ptr<torch::nn::Module>> own_modules(detail::Core& c) {
  std::vector<std::shared_ptr<torch::nn::Module>> out;
  if (!c.open.is_empty()) out.push_back(c.open.ptr());
  for (auto& m : c.local) out.push_back(m.ptr());
  if (!c.close.is_empty()) out.push_back(c.close.ptr());
  return out;
}

std::size_t bytes_of(const std::vector<std::shared_ptr<torch::nn::Module>>& modules) {
  std::size_t bytes = 0;
  for (const auto& m : modules) bytes += detail::state_bytes(*m);
  return bytes;
}
}  // namespace

SequentialNetwork LayerParallelImpl::gather_sequential(int root) {
  detail::Core& c = *core_;
  constexpr int kTag = 7002;
  if (root < 0 || root >= c.ranks)
    throw InvalidOption("gather_sequential: root " + std::to_string(root) + " outside [0, " +
                        std::to_string(c.ranks) + ")");
  std::vector<char> mine;
  for (const auto& m : own_modules(c)) detail::pack_state(*m, mine);
  if (c.rank != root) {
    mpi::check(
        MPI_Send(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, root, kTag, c.comm.get()),
        "MPI_Send (gather_sequential)");
    return SequentialNetwork(nullptr);
  }
  SequentialNetwork full(c.net);
  if (c.device_override && c.dtype_override)
    full->to(*c.device_override, *c.dtype_override);
  else if (c.device_override)
    full->to(*c.device_override);
  else if (c.dtype_override)
    full->to(*c.dtype_override);
  full->train(is_training());
  std::vector<char> buffer;
  for (int r = 0; r < c.ranks; ++r) {
    const auto modules = sequential_modules_of(*full, c, r);
    if (r == root) {
      buffer = std::move(mine);
    } else {
      buffer.assign(bytes_of(modules), 0);
      MPI_Status status;
      mpi::check(MPI_Recv(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, r, kTag,
                          c.comm.get(), &status),
                 "MPI_Recv (gather_sequential)");
      int count = 0;
      MPI_Get_count(&status, MPI_BYTE, &count);
      if (static_cast<std::size_t>(count) != buffer.size())
        throw MpiError("gather_sequential (" + mpi::where(c.comm.get()) + "): rank " +
                       std::to_string(r) + " sent " + std::to_string(count) + " bytes, expected " +
                       std::to_string(buffer.size()));
    }
    const char* p = buffer.data();
    for (const auto& m : modules) p = detail::unpack_state(*m, p);
  }
  return full;
}

void LayerParallelImpl::load_sequential(const SequentialNetwork& full, int root) {
  detail::Core& c = *core_;
  constexpr int kTag = 7003;
  if (root < 0 || root >= c.ranks)
    throw InvalidOption("load_sequential: root " + std::to_string(root) + " outside [0, " +
                        std::to_string(c.ranks) + ")");
  std::int64_t status = 0;
  if (c.rank == root) {
    if (full.is_empty())
      status = 1;
    else if (full->steps() != c.N || full->open().is_empty() != !c.net.open ||
             full->close().is_empty() != !c.net.close)
      status = 2;
  }
  status = detail::share_status(status, root, c.comm.get(), "MPI_Bcast (load_sequential)");
  if (status == 1)
    throw InvalidOption("load_sequential: the network on root rank " + std::to_string(root) +
                        " is empty");
  if (status == 2)
    throw InvalidOption("load_sequential: the network on root rank " + std::to_string(root) +
                        " does not match this one (" + std::to_string(c.N) +
                        " steps, open/close layers as in the Network)");
  const auto mine = own_modules(c);
  if (c.rank == root) {
    for (int r = 0; r < c.ranks; ++r) {
      std::vector<char> buffer;
      for (const auto& m : sequential_modules_of(*full, c, r)) detail::pack_state(*m, buffer);
      if (r == root) {
        const char* p = buffer.data();
        for (const auto& m : mine) p = detail::unpack_state(*m, p);
      } else {
        mpi::check(MPI_Send(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, r, kTag,
                            c.comm.get()),
                   "MPI_Send (load_sequential)");
      }
    }
    return;
  }
  std::vector<char> buffer(bytes_of(mine));
  MPI_Status st;
  mpi::check(MPI_Recv(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, root, kTag,
                      c.comm.get(), &st),
             "MPI_Recv (load_sequential)");
  int count = 0;
  MPI_Get_count(&st, MPI_BYTE, &count);
  if (static_cast<std::size_t>(count) != buffer.size())
    throw MpiError("load_sequential (" + mpi::where(c.comm.get()) + "): received " +
                   std::to_string(count) + " bytes, expected " + std::to_string(buffer.size()));
  const char* p = buffer.data();
  for (const auto& m : mine) p = detail::unpack_state(*m, p);
}

// ------------------------------------------------------------------------------------------
// Loss helpers

double LayerParallelImpl::broadcast_from_output(double value) const {
  mpi::check(MPI_Bcast(&value, 1, MPI_DOUBLE, core_->ranks - 1, core_->comm.get()),
             "MPI_Bcast (broadcast_from_output)");
  return value;
}

torch::Tensor LayerParallelImpl::loss(
    const torch::Tensor& output,
    const std::function<torch::Tensor(const torch::Tensor&)>& criterion) {
  detail::Core& c = *core_;
  torch::Tensor value;
  double shared[2] = {0.0, 0.0};  // status, value
  std::exception_ptr failure;
  if (owns_output()) {
    try {
      value = criterion(output);
      if (!value.defined() || value.numel() != 1)
        shared[0] = 2;
      else
        shared[1] = value.detach().to(torch::kCPU).to(torch::kFloat64).item<double>();
    } catch (...) {
      failure = std::current_exception();
      shared[0] = 1;
    }
  }
  mpi::check(MPI_Bcast(shared, 2, MPI_DOUBLE, c.ranks - 1, c.comm.get()), "MPI_Bcast (loss)");
  if (failure) std::rethrow_exception(failure);
  const std::string where = "layer-parallel loss (" + mpi::where(c.comm.get()) + ")";
  if (shared[0] == 1)
    throw BadData(where + ": the loss criterion threw on the output rank " +
                  std::to_string(c.ranks - 1) + " (its message is reported there)");
  if (shared[0] == 2)
    throw BadData(where + ": the loss criterion must return a tensor with one element");
  if (owns_output()) return value.reshape({});
  if (!output.defined())
    throw InvalidOption(where + ": pass the placeholder that forward() returned on this rank");
  return output.sum() * 0.0 + shared[1];
}

}  // namespace weft::nn
