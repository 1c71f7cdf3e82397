// Pipelined exact inference (LayerParallelImpl::infer): the network's own forward, no MGRIT,
// with the ranks working on consecutive inputs at once, as the stages of a pipeline.
#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <deque>
#include <exception>
#include <string>
#include <vector>

#include "core.hpp"
#include "tags.hpp"
#include "weft/nn/layer_parallel.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace weft::nn {
namespace {

constexpr std::int64_t kMaxDims = 28;
/// A state's message header: ok (1) or failed upstream (0), dtype, dimensions, sizes.
using Header = std::array<std::int64_t, 3 + kMaxDims>;

/// A state sent down the chain: its header and bytes stay alive until both sends complete.
struct Outgoing {
  Header header{};
  torch::Tensor data;
  std::array<MPI_Request, 2> requests{MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  void wait() {
    mpi::check(MPI_Waitall(2, requests.data(), MPI_STATUSES_IGNORE), "MPI_Waitall (inference)");
  }
};

/// Sends `x` (at most kMaxDims dimensions) or, undefined, the news that this input failed
/// upstream, to `peer`.
void post(std::deque<Outgoing>& pending, const torch::Tensor& x, int peer, MPI_Comm comm) {
  Outgoing& out = pending.emplace_back();
  if (x.defined()) {
    out.data = x.to(torch::kCPU).contiguous();
    out.header[0] = 1;
    out.header[1] = static_cast<std::int64_t>(out.data.scalar_type());
    out.header[2] = out.data.dim();
    for (std::int64_t d = 0; d < out.data.dim(); ++d)
      out.header[static_cast<size_t>(3 + d)] = out.data.size(d);
  }
  mpi::check(MPI_Isend(out.header.data(), static_cast<int>(out.header.size()), MPI_INT64_T, peer,
                       detail::tags::kInferenceState, comm, &out.requests[0]),
             "MPI_Isend (inference header)");
  if (out.data.defined())
    mpi::check(MPI_Isend(out.data.data_ptr(), static_cast<int>(out.data.nbytes()), MPI_BYTE, peer,
                         detail::tags::kInferenceState, comm, &out.requests[1]),
               "MPI_Isend (inference state)");
}

/// The state `peer` sent, on `device`; undefined when that input failed upstream.
torch::Tensor receive(int peer, MPI_Comm comm, torch::Device device) {
  Header header{};
  mpi::check(MPI_Recv(header.data(), static_cast<int>(header.size()), MPI_INT64_T, peer,
                      detail::tags::kInferenceState, comm, MPI_STATUS_IGNORE),
             "MPI_Recv (inference header)");
  if (header[0] == 0) return torch::Tensor();
  const std::vector<std::int64_t> shape(header.begin() + 3, header.begin() + 3 + header[2]);
  torch::Tensor x =
      torch::empty(shape, torch::TensorOptions().dtype(static_cast<torch::Dtype>(header[1])));
  mpi::check(MPI_Recv(x.data_ptr(), static_cast<int>(x.nbytes()), MPI_BYTE, peer,
                      detail::tags::kInferenceState, comm, MPI_STATUS_IGNORE),
             "MPI_Recv (inference state)");
  return x.to(device);
}

}  // namespace

void LayerParallelImpl::infer(
    std::int64_t count, const std::function<torch::Tensor(std::int64_t)>& input,
    const std::function<void(std::int64_t, const torch::Tensor&)>& output) {
  detail::Core& c = *core_;
  const MPI_Comm comm = c.comm.get();
  mpi::collectively(comm, [&] {
    if (is_training())
      throw InvalidOption("pipelined inference (" + mpi::where(comm) +
                          "): the module is in training mode; call eval() first");
    if (count < 0)
      throw InvalidOption("pipelined inference (" + mpi::where(comm) +
                          "): " + std::to_string(count) + " inputs; the count must be >= 0");
  });
  torch::NoGradGuard no_grad;
  c.evaluator.begin_batch(c.opts.seed(), c.batch_index, false);
  c.evaluator.count_into(nullptr);
  c.evaluator.at_level(0);
  const std::int64_t first = c.bank.begin(), end = c.bank.end();
  std::exception_ptr error;  // this rank's first failure; later inputs only pass the news on
  std::deque<Outgoing> pending;
  for (std::int64_t j = 0; j < count; ++j) {
    torch::Tensor x;
    if (owns_input()) {
      if (!error) try {
          x = input(j);
          if (!x.defined())
            throw BadData("pipelined inference: input " + std::to_string(j) + " is undefined");
          if (!c.bank.open().is_empty()) x = c.bank.open().forward(x);
        } catch (...) {
          error = std::current_exception();
          x = torch::Tensor();
        }
    } else {
      x = receive(rank() - 1, comm, c.bank.device());
    }
    if (x.defined() && !error) try {
        for (std::int64_t n = first; n < end; ++n) x = c.evaluator.step(n, n + 1, x, false);
        if (x.dim() > kMaxDims)
          throw BadData("pipelined inference: a state has " + std::to_string(x.dim()) +
                        " dimensions; at most " + std::to_string(kMaxDims) + " are supported");
        if (owns_output()) {
          if (!c.bank.close().is_empty()) x = c.bank.close().forward(x);
          output(j, x);
        }
      } catch (...) {
        error = std::current_exception();
        x = torch::Tensor();
      }
    if (error) x = torch::Tensor();
    if (!owns_output()) {
      // At most two states in flight per rank: the next send waits for the one before last.
      if (pending.size() == 2) {
        pending.front().wait();
        pending.pop_front();
      }
      post(pending, x, rank() + 1, comm);
    }
  }
  for (Outgoing& out : pending) out.wait();
  mpi::agree_or_throw(comm, error);
}

}  // namespace weft::nn
