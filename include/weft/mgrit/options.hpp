#pragma once
// Solver options as a value type with chained setters:
//   mgrit::Options().max_levels(3).cfactor(4).nrelax(0, /*level=*/0).abs_tol(1e-9)
// Per-level options take an optional level; without one they set the default for all levels.
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "weft/mgrit/types.hpp"

namespace weft::mgrit {

/// Where and when the residual is measured, and the default initial phase (docs/mgrit.md, §4).
enum class Convention {
  XBraid,   ///< level 0, during the down-cycle, before the coarse correction; default skip
  PyMGRIT,  ///< after each full cycle; default nested iteration
};
enum class Cycle { V, F };
enum class InitialPhase {
  Default,  ///< the convention's own: Skip for XBraid, Nested for PyMGRIT
  None,     ///< the first iteration is an ordinary cycle
  Skip,     ///< iteration 0 injects the guess to all levels, solves the coarsest, interpolates up
  Nested,   ///< coarsest solve, then one V-cycle per level on the way up (before iteration 0)
};
enum class InitialGuess {
  App,         ///< App::init(t) at every point
  Sequential,  ///< the sequential fine-grid solution; the initial phase is then None, and
               ///< MGRIT converges in its first iteration
};
enum class Storage {
  All,      ///< every point of the level is stored
  CPoints,  ///< only C-points; F-points are recomputed when needed
};
enum class TemporalNorm { One, Two, Inf };
/// What happens on the fine grid after the last iteration.
enum class FinalSweep {
  Default,  ///< XBraid: F; PyMGRIT: None (its cycles end with an F-relaxation)
  None,
  F,   ///< one F-relaxation (observer sees consistent F-points)
  CF,  ///< every fine interval stepped once: F- then C-relaxation (gradients accumulate)
};

std::string to_string(Convention);
std::string to_string(Cycle);
std::string to_string(InitialPhase);
std::string to_string(InitialGuess);
std::string to_string(Storage);
std::string to_string(TemporalNorm);
std::string to_string(FinalSweep);
std::string to_string(Direction);

/// A value that may differ per level: a default plus overrides for single levels.
template <class T>
class PerLevel {
 public:
  explicit PerLevel(T fallback) : fallback_(fallback) {}
  void set(T value, int level) {
    if (level < 0) {
      fallback_ = value;
      overrides_.clear();
    } else {
      overrides_[level] = value;
    }
  }
  T at(int level) const {
    auto it = overrides_.find(level);
    return it == overrides_.end() ? fallback_ : it->second;
  }
  const std::map<int, T>& overrides() const { return overrides_; }
  T fallback() const { return fallback_; }

 private:
  T fallback_;
  std::map<int, T> overrides_;
};

class Options {
 public:
  // Hierarchy
  Options& max_levels(int n) {
    max_levels_ = n;
    return *this;
  }
  Options& min_coarse(index_t n) {
    min_coarse_ = n;
    return *this;
  }
  Options& cfactor(int cf, int level = -1) {
    cfactor_.set(cf, level);
    return *this;
  }

  // Relaxation and cycles
  Options& nrelax(int n, int level = -1) {
    nrelax_.set(n, level);
    return *this;
  }
  /// Sweeps on the coarsest level (only used with relaxation-only coarsest levels); when unset,
  /// the coarsest level takes nrelax of its level.
  Options& nrelax_coarsest(int n) {
    nrelax_coarsest_ = n;
    return *this;
  }
  Options& cweight(double w, int level = -1) {
    cweight_.set(w, level);
    return *this;
  }
  Options& relax_only_coarsest(bool on) {
    relax_only_coarsest_ = on;
    return *this;
  }
  Options& cycle(Cycle c) {
    cycle_ = c;
    return *this;
  }
  Options& initial_phase(InitialPhase p) {
    initial_phase_ = p;
    return *this;
  }
  Options& initial_guess(InitialGuess g) {
    initial_guess_ = g;
    return *this;
  }
  Options& storage(Storage s, int level = -1) {
    storage_.set(s, level);
    return *this;
  }
  Options& final_sweep(FinalSweep s) {
    final_sweep_ = s;
    return *this;
  }
  /// Keep the previous solve's states as the next solve's initial guess.
  Options& warm_start(bool on) {
    warm_start_ = on;
    return *this;
  }

  // Convergence
  Options& convention(Convention c) {
    convention_ = c;
    return *this;
  }
  Options& abs_tol(double tol) {
    abs_tol_ = tol;
    return *this;
  }
  /// Relative to the first residual the convention measures; 0 switches it off.
  Options& rel_tol(double tol) {
    rel_tol_ = tol;
    return *this;
  }
  Options& temporal_norm(TemporalNorm n) {
    temporal_norm_ = n;
    return *this;
  }
  Options& max_iterations(int n) {
    max_iterations_ = n;
    return *this;
  }
  /// Off: run exactly max_iterations cycles without measuring residuals.
  Options& compute_residual(bool on) {
    compute_residual_ = on;
    return *this;
  }
  /// A residual above this (or NaN/Inf) stops the solve with weft::Divergence.
  Options& divergence_limit(double limit) {
    divergence_limit_ = limit;
    return *this;
  }

  /// Richardson extrapolation at the fine grid's C-points (XBraid's
  /// braid_SetRichardsonEstimation with richardson on): `local_order` is the fine integrator's
  /// local order p (its local error is O(dt^p): 2 for backward Euler, 3 for a second-order
  /// method); 0 turns it off. The converged solution is then one order more accurate than the
  /// sequential fine solve at the C-points. XBraid convention only, C-weight 1.
  Options& richardson(int local_order) {
    richardson_order_ = local_order;
    return *this;
  }
  /// Richardson-based local error estimates at the fine points (XBraid's est_error), for an
  /// App that refines or reports: after each restriction to level 1, the points of the fine
  /// C-interval (c', c] get |g_c| dtk / (DTK - dtk), g_c level 1's FAS right-hand side at c
  /// (|g_c| dtk / DTK with extrapolation); points past the last C-point take the last
  /// interval's. `local_order` as in richardson() (equal when both are on); 0 turns it off.
  /// Read by Solver::error_estimate() and StepInfo::error_estimate. Forward solves.
  Options& error_estimates(int local_order) {
    error_estimate_order_ = local_order;
    return *this;
  }

  /// A time-periodic solve, u(t_0) = u(t_N) (XBraid's braid_SetPeriodic): the N fine points
  /// t_0..t_{N-1} are all unknowns, and point 0 is the C-point reached by one step from
  /// t_{N-1} to t_N. The intervals of every level must divide by its coarsening factor; the
  /// coarsest level is relaxed (its only C-point is 0, unless relax_only_coarsest keeps its
  /// own), never solved sequentially. Forward solves, the App's initial guess, no Richardson.
  Options& periodic(bool on) {
    periodic_ = on;
    return *this;
  }

  /// Temporal refinement (XBraid's braid_SetRefine): after each iteration's cycle, the fine
  /// intervals whose steps the App asked to split (App::refine_factor) are split uniformly,
  /// the hierarchy is rebuilt over the new grid and the same iteration runs again (it is
  /// neither counted nor checked for convergence). Forward, non-periodic solves over the block
  /// distribution and a uniform hierarchy.
  Options& refinement(bool on) {
    refinement_ = on;
    return *this;
  }
  /// Refinement stops for good once this many refinements happened (XBraid's
  /// braid_SetMaxRefinements; default 200, as there).
  Options& max_refinements(int count) {
    max_refinements_ = count;
    return *this;
  }
  /// Refinement stops for good once the fine grid has at least this many intervals (XBraid's
  /// braid_SetTPointsCutoff: checked before refining, so the last refinement may pass it).
  Options& refinement_cutoff(index_t intervals) {
    refinement_cutoff_ = intervals;
    return *this;
  }

  // Direction and instrumentation
  Options& direction(Direction d) {
    direction_ = d;
    return *this;
  }
  /// Per-phase wall-clock timers (steps / communication / rest).
  Options& collect_timings(bool on) {
    collect_timings_ = on;
    return *this;
  }
  /// The first fine point (the user's numbering) of each rank's block of points, one entry per
  /// rank of the solver's communicator: 0 first, nondecreasing (equal entries leave a rank
  /// empty). Empty (the default) is the block distribution. Reverse solves keep each point on
  /// the rank given here, as they do with the block distribution.
  Options& rank_blocks(std::vector<index_t> first_points) {
    rank_blocks_ = std::move(first_points);
    return *this;
  }

  int max_levels() const { return max_levels_; }
  index_t min_coarse() const { return min_coarse_; }
  int cfactor_at(int level) const { return cfactor_.at(level); }
  int nrelax_at(int level) const { return nrelax_.at(level); }
  int nrelax_coarsest() const { return nrelax_coarsest_; }
  double cweight_at(int level) const { return cweight_.at(level); }
  bool relax_only_coarsest() const { return relax_only_coarsest_; }
  Cycle cycle() const { return cycle_; }
  InitialPhase initial_phase() const { return initial_phase_; }
  /// The initial phase with Default resolved through the convention.
  InitialPhase effective_initial_phase() const;
  /// Whether the coarsest level of a `levels`-level hierarchy is solved by one sequential sweep
  /// (the default, and always with a single level) rather than relaxed.
  bool coarsest_solved_sequentially(int levels) const {
    return levels == 1 || (!relax_only_coarsest_ && !periodic_);
  }
  /// Sweeps on a relaxation-only coarsest level `level`: a count given for that very level wins
  /// over nrelax_coarsest(), which wins over the level's nrelax.
  int coarsest_sweeps(int level) const;
  InitialGuess initial_guess() const { return initial_guess_; }
  Storage storage_at(int level) const { return storage_.at(level); }
  FinalSweep final_sweep() const { return final_sweep_; }
  FinalSweep effective_final_sweep() const;
  bool warm_start() const { return warm_start_; }
  Convention convention() const { return convention_; }
  double abs_tol() const { return abs_tol_; }
  double rel_tol() const { return rel_tol_; }
  TemporalNorm temporal_norm() const { return temporal_norm_; }
  int max_iterations() const { return max_iterations_; }
  bool compute_residual() const { return compute_residual_; }
  double divergence_limit() const { return divergence_limit_; }
  /// The integrator's local order for Richardson extrapolation; 0: off.
  int richardson_order() const { return richardson_order_; }
  bool periodic() const { return periodic_; }
  /// The local order for error estimates; 0: off.
  int error_estimate_order() const { return error_estimate_order_; }
  bool refinement() const { return refinement_; }
  int max_refinements() const { return max_refinements_; }
  index_t refinement_cutoff() const { return refinement_cutoff_; }
  Direction direction() const { return direction_; }
  bool collect_timings() const { return collect_timings_; }
  const std::vector<index_t>& rank_blocks() const { return rank_blocks_; }

  const PerLevel<int>& cfactor_levels() const { return cfactor_; }
  const PerLevel<int>& nrelax_levels() const { return nrelax_; }
  const PerLevel<double>& cweight_levels() const { return cweight_; }
  const PerLevel<Storage>& storage_levels() const { return storage_; }

  /// Throws weft::InvalidOption naming the first offending option and what is accepted.
  void validate() const;

 private:
  int max_levels_ = 30;
  index_t min_coarse_ = 2;
  PerLevel<int> cfactor_{2};
  PerLevel<int> nrelax_{1};
  int nrelax_coarsest_ = -1;
  PerLevel<double> cweight_{1.0};
  bool relax_only_coarsest_ = false;
  Cycle cycle_ = Cycle::V;
  InitialPhase initial_phase_ = InitialPhase::Default;
  InitialGuess initial_guess_ = InitialGuess::App;
  PerLevel<Storage> storage_{Storage::All};
  FinalSweep final_sweep_ = FinalSweep::Default;
  bool warm_start_ = false;
  Convention convention_ = Convention::XBraid;
  double abs_tol_ = 1e-9;
  double rel_tol_ = 0.0;
  TemporalNorm temporal_norm_ = TemporalNorm::Two;
  int max_iterations_ = 100;
  bool compute_residual_ = true;
  double divergence_limit_ = 1e300;
  int richardson_order_ = 0;
  bool periodic_ = false;
  int error_estimate_order_ = 0;
  bool refinement_ = false;
  int max_refinements_ = 200;
  index_t refinement_cutoff_ = std::numeric_limits<index_t>::max();
  Direction direction_ = Direction::Forward;
  bool collect_timings_ = true;
  std::vector<index_t> rank_blocks_;
};

}  // namespace weft::mgrit
