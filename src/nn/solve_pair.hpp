#pragma once
// Private to weft_nn. The lifecycle the chain solve (BatchSolve) and the recurrent solve
// (RecurrentSolve) share: the pair of MGRIT solvers over one uniform grid of layers or sequence
// steps (the forward solve, and the adjoint solve in reverse time), this rank's block of forward
// points, and the boundary exchange after a forward that hands each rank the forward state just
// before its block (where the adjoint linearizes the block's first step). The solves supply
// their Apps, options and state shapes; everything else about the pair lives here.
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "weft/mgrit/solver.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"
#include "weft/util/trace.hpp"

namespace weft::nn::detail {

template <class ForwardApp, class AdjointApp>
class SolvePair {
 public:
  using State = typename ForwardApp::State;

  /// `owner` names the module in errors ("layer-parallel forward"); `boundary_tag` is the
  /// boundary message's tag on `comm`.
  SolvePair(MPI_Comm comm, int boundary_tag, std::string owner)
      : comm_(comm),
        rank_(mpi::rank(comm)),
        ranks_(mpi::size(comm)),
        tag_(boundary_tag),
        owner_(std::move(owner)) {}

  /// Both solvers over a uniform grid of `steps` steps, for this rank's forward points
  /// [lo, hi). Solves at one level only read their initial state (a sequential sweep from it),
  /// which may then be the caller's tensor itself; solvers that do not warm-start hand their
  /// final state over instead of copying it (one_level(), warm()).
  void build(ForwardApp& fapp, AdjointApp& aapp, std::int64_t steps, const mgrit::Options& forward,
             const mgrit::Options& backward, std::int64_t lo, std::int64_t hi) {
    reset();
    const auto grid = mgrit::TimeGrid::uniform(0.0, static_cast<double>(steps), steps);
    forward_ = std::make_unique<mgrit::Solver<ForwardApp>>(fapp, comm_, grid, forward);
    adjoint_ = std::make_unique<mgrit::Solver<AdjointApp>>(aapp, comm_, grid, backward);
    forward_one_level_ = forward_->hierarchy().levels() == 1;
    adjoint_one_level_ = adjoint_->hierarchy().levels() == 1;
    forward_warm_ = forward.warm_start();
    adjoint_warm_ = backward.warm_start();
    lo_ = lo;
    hi_ = hi;
  }
  /// Drops the solvers and the boundary state.
  void reset() {
    adjoint_.reset();
    forward_.reset();
    boundary_ = State();
  }
  bool ready() const { return forward_ && adjoint_; }

  mgrit::Solver<ForwardApp>& forward() { return *forward_; }
  mgrit::Solver<AdjointApp>& adjoint() { return *adjoint_; }
  const mgrit::Solver<ForwardApp>* forward_if_built() const { return forward_.get(); }
  const mgrit::Solver<AdjointApp>* adjoint_if_built() const { return adjoint_.get(); }
  bool forward_one_level() const { return forward_one_level_; }
  bool adjoint_one_level() const { return adjoint_one_level_; }
  bool forward_warm() const { return forward_warm_; }
  bool adjoint_warm() const { return adjoint_warm_; }
  std::int64_t lo() const { return lo_; }
  std::int64_t hi() const { return hi_; }

  /// The forward state at point n: a point the forward solver stores here, or the boundary
  /// lo - 1 after exchange_boundary(); nullptr otherwise.
  const State* forward_state(std::int64_t n) const {
    if (n == lo_ - 1 && rank_ > 0) return &boundary_;
    return forward_ ? forward_->state(n) : nullptr;
  }
  /// The boundary state (empty until exchange_boundary()).
  const State& boundary() const { return boundary_; }
  void clear_boundary() { boundary_ = State(); }

  /// Collective: sends this rank's last forward state (point hi - 1) to the next rank and
  /// receives the previous rank's into the boundary, shaped as `like` (`ops` packs states).
  void exchange_boundary(const ForwardApp& ops, State like) {
    if (ranks_ == 1) return;
    MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    if (rank_ > 0) {
      boundary_ = std::move(like);
      in_.resize(ops.buffer_size(boundary_));
      mpi::check(MPI_Irecv(in_.data(), static_cast<int>(in_.size()), MPI_BYTE, rank_ - 1, tag_,
                           comm_, &requests[0]),
                 "MPI_Irecv (boundary state)");
    }
    if (rank_ < ranks_ - 1) {
      const State* last = forward_->state(hi_ - 1);
      if (!last)
        throw MpiError(owner_ + " (" + mpi::where(comm_) + "): state " + std::to_string(hi_ - 1) +
                       " is not stored");
      out_.resize(ops.buffer_size(*last));
      ops.pack(*last, out_.data());
      trace::sent(comm_, rank_ + 1, tag_, out_.size());
      mpi::check(MPI_Isend(out_.data(), static_cast<int>(out_.size()), MPI_BYTE, rank_ + 1, tag_,
                           comm_, &requests[1]),
                 "MPI_Isend (boundary state)");
    }
    {
      trace::Span wait("wait", "mpi", trace::Kind::Wait);
      if (rank_ > 0) wait.message(comm_, rank_ - 1, tag_, in_.size());
      mpi::check(MPI_Waitall(2, requests, MPI_STATUSES_IGNORE), "MPI_Waitall (boundary state)");
    }
    if (rank_ > 0) ops.unpack(in_.data(), boundary_);
  }

 private:
  MPI_Comm comm_;
  int rank_ = 0, ranks_ = 1;
  int tag_ = 0;
  std::string owner_;
  std::unique_ptr<mgrit::Solver<ForwardApp>> forward_;
  std::unique_ptr<mgrit::Solver<AdjointApp>> adjoint_;
  bool forward_one_level_ = false, adjoint_one_level_ = false;
  bool forward_warm_ = false, adjoint_warm_ = false;
  std::int64_t lo_ = 0, hi_ = 0;
  State boundary_;
  std::vector<char> in_, out_;
};

/// The autograd Functions' check that a backward belongs to the module's latest forward: the
/// generation is bumped by every forward (and by whatever invalidates stored states), stamped
/// into the context by the forward and compared by the backward.
inline void check_generation(std::int64_t stamped, std::int64_t now, const std::string& owner,
                             MPI_Comm comm, const std::string& advice) {
  if (stamped != now)
    throw InvalidOption(owner + " backward (" + mpi::where(comm) +
                        "): the graph is stale (forward pass " + std::to_string(stamped) +
                        ", now " + std::to_string(now) + "): " + advice);
}

}  // namespace weft::nn::detail
