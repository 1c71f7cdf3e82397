// The network description, the whole network on one rank, moving it to and from the ranks
// (gather/load), and the loss helpers.
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "core.hpp"
#include "tags.hpp"
#include "weft/nn/layer_parallel.hpp"
#include "weft/util/clock.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"
#include "weft/util/trace.hpp"

namespace weft::nn {

// ------------------------------------------------------------------------------------------
// The description

std::vector<Stage> Network::resolved_stages() const {
  const std::string where = "layer-parallel network: ";
  if (stages.empty()) {
    if (steps < 1)
      throw InvalidOption(where + "steps = " + std::to_string(steps) +
                          "; need at least 1 step layer (or a list of stages)");
    if (!step) throw InvalidOption(where + "the step-layer factory is missing");
    if (!std::isfinite(t_final) || t_final <= 0)
      throw InvalidOption(where + "t_final = " + number_text(t_final) + "; need a finite T > 0");
    Stage one;
    one.steps = steps;
    one.t_final = t_final;
    one.step = step;
    return {one};
  }
  if (steps != 0 || step)
    throw InvalidOption(where + "both steps/step and stages are set; describe the network one way");
  for (size_t s = 0; s < stages.size(); ++s) {
    const Stage& st = stages[s];
    const std::string which = "stage " + std::to_string(s) + ": ";
    if (st.steps < 1)
      throw InvalidOption(where + which + "steps = " + std::to_string(st.steps) +
                          "; need at least 1 residual step");
    if (!st.step) throw InvalidOption(where + which + "the step-layer factory is missing");
    if (!std::isfinite(st.t_final) || st.t_final <= 0)
      throw InvalidOption(where + which + "t_final = " + number_text(st.t_final) +
                          "; need a finite T > 0");
    if (s + 1 < stages.size() && !st.transition)
      throw InvalidOption(where + which + "the transition to stage " + std::to_string(s + 1) +
                          " is missing");
    if (s + 1 == stages.size() && st.transition)
      throw InvalidOption(where + which + "the last stage has a transition, but no stage follows");
  }
  return stages;
}

std::int64_t Network::layers() const {
  std::int64_t n = 0;
  for (const Stage& s : resolved_stages()) n += s.steps + 1;
  return n - 1;
}

namespace detail {

Chain chain_of(const std::vector<Stage>& stages) {
  std::vector<StageSpan> spans;
  for (const Stage& s : stages) spans.push_back(StageSpan{s.steps, s.t_final});
  return Chain(std::move(spans));
}

}  // namespace detail

// ------------------------------------------------------------------------------------------
// The whole network on one rank

SequentialNetworkImpl::SequentialNetworkImpl(const Network& network, std::uint64_t seed)
    : seed_(seed) {
  const auto stages = network.resolved_stages();
  const detail::Chain chain = detail::chain_of(stages);
  if (network.open) {
    open_ = network.open();
    register_module("open", open_.ptr());
  }
  for (std::int64_t n = 0; n < chain.layers(); ++n) {
    steps_.push_back(detail::make_chain_layer(stages, chain, n));
    if (steps_.back().is_empty())
      throw InvalidOption("sequential network: the factory returned an empty module for " +
                          chain.layer_name(n));
    register_module(chain.layer_name(n), steps_.back().ptr());
    h_.push_back(chain.is_transition(n) ? 0.0 : chain.step_size(chain.stage_of_point(n)));
  }
  if (network.close) {
    close_ = network.close();
    register_module("close", close_.ptr());
  }
}

torch::Tensor SequentialNetworkImpl::forward(torch::Tensor x) {
  const bool training = is_training();
  if (!open_.is_empty()) x = open_.forward(x);
  for (size_t n = 0; n < steps_.size(); ++n) {
    const auto layer = static_cast<std::int64_t>(n);
    detail::StreamGuard stream(training && steps_[n].ptr()->is_training(), x.device(),
                               layer_stream_seed(seed_, batch_, layer));
    const torch::Tensor y = steps_[n].forward(x);
    x = h_[n] == 0.0 ? y : x + h_[n] * y;
  }
  if (training) ++batch_;
  if (!close_.is_empty()) x = close_.forward(x);
  return x;
}

// ------------------------------------------------------------------------------------------
// Gather and load

namespace {
/// The modules of rank r, in the order they travel: open (rank 0), layers, close (rank P-1).
std::vector<std::shared_ptr<torch::nn::Module>> sequential_modules_of(
    const SequentialNetworkImpl& full, const detail::Core& c, int r) {
  std::vector<std::shared_ptr<torch::nn::Module>> out;
  if (r == 0 && c.net.open) out.push_back(full.open().ptr());
  for (std::int64_t n = c.placement.layer_begin(r); n < c.placement.layer_end(r); ++n)
    out.push_back(full.step(n).ptr());
  if (r == c.ranks - 1 && c.net.close) out.push_back(full.close().ptr());
  return out;
}

std::size_t bytes_of(const std::vector<std::shared_ptr<torch::nn::Module>>& modules) {
  std::size_t bytes = 0;
  for (const auto& m : modules) bytes += detail::state_bytes(*m);
  return bytes;
}

void check_count(const MPI_Status& status, std::size_t expected, const std::string& what) {
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  if (static_cast<std::size_t>(count) != expected)
    throw MpiError(what + ": received " + std::to_string(count) + " bytes, expected " +
                   std::to_string(expected));
}
}  // namespace

SequentialNetwork LayerParallelImpl::gather_sequential(int root) {
  detail::Core& c = *core_;
  if (root < 0 || root >= c.ranks)
    throw InvalidOption("gather_sequential: root " + std::to_string(root) + " outside [0, " +
                        std::to_string(c.ranks) + ")");
  std::vector<char> mine;
  for (const auto& m : c.bank.own_modules()) detail::pack_state(*m, mine);
  if (c.rank != root) {
    mpi::check(MPI_Send(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, root,
                        detail::tags::kGather, c.comm.get()),
               "MPI_Send (gather_sequential)");
    return SequentialNetwork(nullptr);
  }
  SequentialNetwork full(c.net, c.opts.seed());
  c.bank.place(*full.ptr());
  full->train(is_training());
  full->set_batch_index(c.batch_index);
  std::vector<char> buffer;
  for (int r = 0; r < c.ranks; ++r) {
    const auto modules = sequential_modules_of(*full, c, r);
    if (r == root) {
      buffer = std::move(mine);
    } else {
      buffer.assign(bytes_of(modules), 0);
      MPI_Status status;
      mpi::check(MPI_Recv(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, r,
                          detail::tags::kGather, c.comm.get(), &status),
                 "MPI_Recv (gather_sequential)");
      check_count(
          status, buffer.size(),
          "gather_sequential (" + mpi::where(c.comm.get()) + ") from rank " + std::to_string(r));
    }
    const char* p = buffer.data();
    for (const auto& m : modules) p = detail::unpack_state(*m, p);
  }
  return full;
}

void LayerParallelImpl::load_sequential(const SequentialNetwork& full, int root) {
  detail::Core& c = *core_;
  if (root < 0 || root >= c.ranks)
    throw InvalidOption("load_sequential: root " + std::to_string(root) + " outside [0, " +
                        std::to_string(c.ranks) + ")");
  mpi::collectively(c.comm.get(), [&] {
    if (c.rank != root) return;
    if (full.is_empty())
      throw InvalidOption("load_sequential: the network on root rank " + std::to_string(root) +
                          " is empty");
    if (full->steps() != c.chain.layers() || full->open().is_empty() != !c.net.open ||
        full->close().is_empty() != !c.net.close)
      throw InvalidOption("load_sequential: the network on root rank " + std::to_string(root) +
                          " does not match this one (" + std::to_string(c.chain.layers()) +
                          " chain layers, open/close layers as in the Network)");
  });
  const auto mine = c.bank.own_modules();
  if (c.rank == root) {
    for (int r = 0; r < c.ranks; ++r) {
      std::vector<char> buffer;
      for (const auto& m : sequential_modules_of(*full, c, r)) detail::pack_state(*m, buffer);
      if (r == root) {
        const char* p = buffer.data();
        for (const auto& m : mine) p = detail::unpack_state(*m, p);
      } else {
        mpi::check(MPI_Send(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, r,
                            detail::tags::kLoad, c.comm.get()),
                   "MPI_Send (load_sequential)");
      }
    }
    return;
  }
  std::vector<char> buffer(bytes_of(mine));
  MPI_Status status;
  mpi::check(MPI_Recv(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, root,
                      detail::tags::kLoad, c.comm.get(), &status),
             "MPI_Recv (load_sequential)");
  check_count(status, buffer.size(), "load_sequential (" + mpi::where(c.comm.get()) + ")");
  const char* p = buffer.data();
  for (const auto& m : mine) p = detail::unpack_state(*m, p);
}

// ------------------------------------------------------------------------------------------
// Loss helpers

double LayerParallelImpl::broadcast_from_output(double value) const {
  trace::Span span("broadcast", core_->comm.get(), core_->ranks - 1, sizeof(double));
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
      trace::Span span("loss", "train");
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
  {
    trace::Span span("broadcast", c.comm.get(), c.ranks - 1, sizeof(shared));
    mpi::check(MPI_Bcast(shared, mpi::count_of(shared), MPI_DOUBLE, c.ranks - 1, c.comm.get()),
               "MPI_Bcast (loss)");
  }
  // Every rank knows that the criterion threw; the agreement tells each why (the output
  // rank's exception, on every rank).
  if (shared[0] == 1) mpi::agree_or_throw(c.comm.get(), failure);
  const std::string where = "layer-parallel loss (" + mpi::where(c.comm.get()) + ")";
  if (shared[0] == 2)
    throw BadData(where + ": the loss criterion must return a tensor with one element");
  if (owns_output()) return value.reshape({});
  if (!output.defined())
    throw InvalidOption(where + ": pass the placeholder that forward() returned on this rank");
  return output.sum() * 0.0 + shared[1];
}

}  // namespace weft::nn
