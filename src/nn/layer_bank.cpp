// The layers a rank holds, and moving their parameters and buffers between ranks.
#include "layer_bank.hpp"

#include <cstring>
#include <string>

#include "tags.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"
#include "weft/util/trace.hpp"

namespace weft::nn::detail {

using torch::Tensor;

Layer make_chain_layer(const std::vector<Stage>& stages, const Chain& chain, std::int64_t n) {
  for (int s = 0; s < chain.stages(); ++s) {
    const Stage& st = stages[static_cast<size_t>(s)];
    if (n == chain.transition_after(s)) return st.transition(n);
    if (n >= chain.stage_begin(s) && n < chain.stage_begin(s) + st.steps) return st.step(n);
  }
  throw InvalidOption("layer " + std::to_string(n) + " is outside the chain of " +
                      std::to_string(chain.layers()) + " layers");
}

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

LayerBank::LayerBank(torch::nn::Module& owner, std::vector<Stage> stages, const Chain& chain,
                     LayerFactory open, LayerFactory close, const Placement& placement)
    : owner_(owner), stages_(std::move(stages)), chain_(chain), placement_(placement) {
  const int rank = placement.rank();
  begin_ = placement.layer_begin(rank);
  end_ = placement.layer_end(rank);
  for (std::int64_t n = begin_; n < end_; ++n) {
    local_.push_back(build(n, "layer"));
    owner_.register_module(chain_.layer_name(n), local_.back().ptr());
    local_buffers_.push_back(!local_.back().ptr()->buffers().empty());
    any_buffers_ = any_buffers_ || local_buffers_.back();
  }
  auto make_end = [&](const LayerFactory& make, const char* name) {
    Layer m = make();
    if (m.is_empty())
      throw InvalidOption(std::string("layer-parallel network: the ") + name +
                          " factory returned an empty module");
    owner_.register_module(name, m.ptr());
    return m;
  };
  if (rank == 0 && open) open_ = make_end(open, "open");
  if (rank == placement.ranks() - 1 && close) close_ = make_end(close, "close");
  for (const Tensor& p : owner_.parameters()) {
    device_ = p.device();
    break;
  }
  replan();
}

Layer LayerBank::build(std::int64_t n, const char* what) const {
  Layer m = make_chain_layer(stages_, chain_, n);
  if (m.is_empty())
    throw InvalidOption("layer-parallel network: the factory returned an empty module for " +
                        std::string(what) + " " + chain_.layer_name(n));
  place(*m.ptr());
  return m;
}

void LayerBank::place(torch::nn::Module& m) const {
  if (device_override_ && dtype_override_)
    m.to(*device_override_, *dtype_override_);
  else if (device_override_)
    m.to(*device_override_);
  else if (dtype_override_)
    m.to(*dtype_override_);
}

Layer& LayerBank::at(std::int64_t n) {
  if (is_local(n)) return local(n);
  auto it = ghosts_.find(n);
  if (it == ghosts_.end())
    throw MpiError("layer-parallel network (rank " + std::to_string(placement_.rank()) +
                   "): layer " + std::to_string(n) + " is neither local nor a ghost copy");
  return it->second;
}

Layer& LayerBank::probe(std::int64_t n) {
  if (is_local(n)) return local(n);
  auto it = ghosts_.find(n);
  if (it != ghosts_.end()) return it->second;
  auto p = probes_.find(n);
  if (p == probes_.end()) p = probes_.emplace(n, build(n, "shape probe of")).first;
  return p->second;
}

bool LayerBank::has_buffers(std::int64_t n) const {
  if (is_local(n)) return local_buffers_[static_cast<size_t>(n - begin_)];
  auto it = ghosts_.find(n);
  return it != ghosts_.end() && !it->second.ptr()->buffers().empty();
}

void LayerBank::replan() {
  std::map<std::int64_t, Layer> kept;
  for (std::int64_t n : placement_.ghosts()) {
    auto it = ghosts_.find(n);
    kept[n] = it != ghosts_.end() ? std::move(it->second) : build(n, "ghost copy of");
  }
  ghosts_ = std::move(kept);
  for (const auto& entry : ghosts_) probes_.erase(entry.first);
}

std::int64_t LayerBank::exchange(MPI_Comm comm) {
  const auto& recvs = placement_.recvs();
  const auto& sends = placement_.sends();
  std::vector<std::vector<char>> recv_bufs(recvs.size()), send_bufs(sends.size());
  std::vector<MPI_Request> recv_reqs(recvs.size(), MPI_REQUEST_NULL);
  std::vector<MPI_Request> send_reqs(sends.size(), MPI_REQUEST_NULL);
  for (size_t i = 0; i < recvs.size(); ++i) {
    std::size_t bytes = 0;
    for (std::int64_t n : recvs[i].layers) bytes += state_bytes(*ghosts_.at(n).ptr());
    recv_bufs[i].resize(bytes);
    mpi::check(MPI_Irecv(recv_bufs[i].data(), static_cast<int>(bytes), MPI_BYTE, recvs[i].rank,
                         tags::kGhostLayers, comm, &recv_reqs[i]),
               "MPI_Irecv (ghost layers)");
  }
  for (size_t i = 0; i < sends.size(); ++i) {
    for (std::int64_t n : sends[i].layers) pack_state(*local(n).ptr(), send_bufs[i]);
    trace::sent(comm, sends[i].rank, tags::kGhostLayers, send_bufs[i].size());
    mpi::check(MPI_Isend(send_bufs[i].data(), static_cast<int>(send_bufs[i].size()), MPI_BYTE,
                         sends[i].rank, tags::kGhostLayers, comm, &send_reqs[i]),
               "MPI_Isend (ghost layers)");
  }
  std::vector<MPI_Status> statuses(recvs.size());
  int rc = MPI_SUCCESS;
  {
    trace::Span wait("wait", "mpi", trace::Kind::Wait);
    if (!recvs.empty()) wait.message(comm, recvs[0].rank, tags::kGhostLayers, recv_bufs[0].size());
    rc = MPI_Waitall(static_cast<int>(recv_reqs.size()), recv_reqs.data(), statuses.data());
  }
  for (size_t i = 1; i < recvs.size(); ++i)
    trace::also_received(comm, recvs[i].rank, tags::kGhostLayers, recv_bufs[i].size());
  std::int64_t received = 0;
  for (size_t i = 0; i < recvs.size(); ++i) {
    int count = 0;
    MPI_Get_count(&statuses[i], MPI_BYTE, &count);
    if (rc != MPI_SUCCESS || static_cast<std::size_t>(count) != recv_bufs[i].size())
      throw MpiError("layer-parallel forward (" + mpi::where(comm) + "): ghost layers from rank " +
                     std::to_string(recvs[i].rank) + " arrived with " + std::to_string(count) +
                     " bytes, expected " + std::to_string(recv_bufs[i].size()) +
                     " (do the ranks' layers differ in structure or dtype?)");
    const char* p = recv_bufs[i].data();
    for (std::int64_t n : recvs[i].layers) p = unpack_state(*ghosts_.at(n).ptr(), p);
    received += count;
  }
  trace::Span wait_sends("wait", "mpi", trace::Kind::Wait);  // no message: costs nothing
  mpi::check(MPI_Waitall(static_cast<int>(send_reqs.size()), send_reqs.data(), MPI_STATUSES_IGNORE),
             "MPI_Waitall (ghost layers)");
  for (auto& entry : ghosts_) entry.second.ptr()->train(owner_.is_training());
  return received;
}

void LayerBank::collect_trainable() {
  layer_params_.assign(local_.size(), {});
  trainable_.clear();
  for (size_t k = 0; k < local_.size(); ++k)
    for (const Tensor& p : local_[k].ptr()->parameters())
      if (p.requires_grad()) {
        layer_params_[k].push_back(p);
        trainable_.push_back(p);
      }
}

std::vector<std::shared_ptr<torch::nn::Module>> LayerBank::own_modules() const {
  std::vector<std::shared_ptr<torch::nn::Module>> out;
  if (!open_.is_empty()) out.push_back(open_.ptr());
  for (const auto& m : local_) out.push_back(m.ptr());
  if (!close_.is_empty()) out.push_back(close_.ptr());
  return out;
}

std::int64_t LayerBank::own_bytes() const {
  std::int64_t bytes = 0;
  for (const auto& m : own_modules()) bytes += static_cast<std::int64_t>(state_bytes(*m));
  return bytes;
}

std::int64_t LayerBank::ghost_bytes() const {
  std::int64_t bytes = 0;
  for (const auto& entry : ghosts_)
    bytes += static_cast<std::int64_t>(state_bytes(*entry.second.ptr()));
  return bytes;
}

void LayerBank::convert(std::optional<torch::Device> device, std::optional<torch::Dtype> dtype) {
  if (device) {
    device_override_ = device;
    device_ = *device;
  }
  if (dtype) dtype_override_ = dtype;
  for (auto* group : {&ghosts_, &probes_})
    for (auto& entry : *group) place(*entry.second.ptr());
}

}  // namespace weft::nn::detail
