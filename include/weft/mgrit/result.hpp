#pragma once
// What a solve reports: the residual history and where the time and work went.
#include <optional>
#include <vector>

#include "weft/mgrit/types.hpp"

namespace weft::mgrit {

struct Statistics {
  std::vector<index_t> intervals_per_level;    ///< the hierarchy actually built
  std::vector<index_t> steps_per_level;        ///< step evaluations on this rank, per level
  double setup_seconds = 0;                    ///< hierarchy, distribution, storage
  double solve_seconds = 0;                    ///< the whole solve() call on this rank
  double step_seconds = 0;                     ///< inside sweeps: steps and vector operations
  std::vector<double> step_seconds_per_level;  ///< step_seconds split by level
  double comm_seconds = 0;                     ///< waiting for messages and collectives
  index_t messages_sent = 0;                   ///< states sent to the right neighbour, last solve
  index_t messages_received = 0;               ///< states received from the left neighbour
  index_t reductions = 0;                      ///< residual norm reductions (collectives)
  double other_seconds() const { return solve_seconds - step_seconds - comm_seconds; }
  index_t total_steps() const {
    index_t s = 0;
    for (index_t n : steps_per_level) s += n;
    return s;
  }
};

/// A temporal refinement at the end of an iteration's cycle (Options::refinement).
struct Refinement {
  int iteration = 0;               ///< the iteration whose cycle ran on the old grid
  index_t intervals_before = 0;    ///< fine intervals of the old grid
  index_t intervals_after = 0;     ///< and of the new one
  std::optional<double> residual;  ///< the old grid's residual in that cycle
};

struct Result {
  int iterations = 0;
  bool converged = false;
  /// One entry per iteration; empty where the convention measures none (skip, residual off).
  std::vector<std::optional<double>> residuals;
  /// r_k / r_{k-1} where both exist.
  std::vector<std::optional<double>> factors;
  /// Temporal refinements in order; each iteration's entry above is its last cycle's.
  std::vector<Refinement> refinements;
  /// The iteration at which refinement stopped for good (a limit reached), if it did.
  std::optional<int> refinement_stopped;
  /// The fine grid's intervals at the end (differs from the start after refinements).
  index_t intervals = 0;
  std::optional<double> final_residual() const {
    for (auto it = residuals.rbegin(); it != residuals.rend(); ++it)
      if (*it) return *it;
    return std::nullopt;
  }
};

}  // namespace weft::mgrit
