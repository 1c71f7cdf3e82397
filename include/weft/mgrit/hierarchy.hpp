#pragma once
// Time grids: the fine grid t_0..t_N and the multilevel hierarchy of coarser grids.
//
// Indices here are the solver's internal numbering, in which a solve always marches from
// point 0 upward; for reverse-time solves internal point j is the user's point N - j.
#include <vector>

#include "weft/mgrit/options.hpp"
#include "weft/mgrit/types.hpp"

namespace weft::mgrit {

/// The fine time points, strictly monotone (increasing or decreasing).
class TimeGrid {
 public:
  /// N intervals of equal length on [t0, t1].
  static TimeGrid uniform(double t0, double t1, index_t intervals);
  /// Explicit points (at least two, strictly monotone).
  static TimeGrid from_points(std::vector<double> times);

  index_t intervals() const { return static_cast<index_t>(times_.size()) - 1; }
  index_t points() const { return static_cast<index_t>(times_.size()); }
  const std::vector<double>& times() const { return times_; }
  /// The same points in reverse order (for reverse-time solves).
  TimeGrid reversed() const;

 private:
  std::vector<double> times_;
};

/// One level of the hierarchy.
struct LevelGrid {
  std::vector<index_t> fine;     ///< fine-grid index of each point of this level
  std::vector<double> times;     ///< time of each point
  std::vector<index_t> cpoints;  ///< positions (on this level) of its C-points, 0 first
  int cfactor = 0;               ///< coarsening factor to the next level; 0 for explicit lists

  index_t points() const { return static_cast<index_t>(fine.size()); }
  index_t intervals() const { return points() - 1; }
  bool is_cpoint(index_t i) const;
};

class Hierarchy {
 public:
  /// Level l+1 keeps every cf_l-th point of level l while it keeps at least min_coarse intervals
  /// and fewer than max_levels levels exist. The coarsest level's own C-points (used only when
  /// it is relaxed instead of solved) follow its cfactor.
  static Hierarchy uniform(const TimeGrid& grid, const Options& options);
  /// `coarse_levels[l]` lists the fine indices of level l+1's points; each list is a strictly
  /// increasing subset of the one above and starts with 0.
  static Hierarchy from_levels(const TimeGrid& grid,
                               const std::vector<std::vector<index_t>>& coarse_levels,
                               const Options& options);

  int levels() const { return static_cast<int>(levels_.size()); }
  const LevelGrid& level(int l) const { return levels_.at(static_cast<size_t>(l)); }
  std::vector<index_t> intervals_per_level() const;

 private:
  std::vector<LevelGrid> levels_;
};

/// Distribution of the fine points over the ranks of a communicator in contiguous blocks: by
/// default the first (N+1) mod P ranks one point more; or the blocks starting at the given first
/// points (the user's numbering, see Options::rank_blocks). Reverse solves keep every point on
/// the rank that owns it forward; chain positions then run from the last rank to the first.
class Distribution {
 public:
  /// Throws InvalidOption when `first_points` is not a valid list for `points` and `ranks`.
  Distribution(index_t points, int ranks, Direction direction,
               const std::vector<index_t>& first_points = {});

  int ranks() const { return ranks_; }
  /// Position in the chain of messages (0 owns internal point 0).
  int position_of_rank(int rank) const;
  int rank_at_position(int position) const;
  /// Internal fine indices [begin, end) of a chain position.
  index_t begin(int position) const;
  index_t end(int position) const;
  /// Fine-grid block of a rank in the user's numbering: [first, last + 1).
  static index_t block_begin(index_t points, int ranks, int rank);
  /// Blocks that balance unequal steps (for Options::rank_blocks): `step_costs[k]` is the cost
  /// of the step into point k + 1 of N + 1 points (N entries, finite, >= 0). Every rank gets at
  /// least one step, and the largest sum of a rank's step costs is as small as contiguous
  /// blocks allow (to a relative 1e-12; ties fill the first ranks first). Returns each rank's
  /// first point (0 for rank 0). Throws InvalidOption for fewer steps than ranks or a bad cost.
  static std::vector<index_t> balanced_blocks(const std::vector<double>& step_costs, int ranks);

 private:
  index_t points_;
  int ranks_;
  Direction direction_;
  std::vector<index_t> bounds_;  ///< rank r owns the user's points [bounds_[r], bounds_[r+1])
};

}  // namespace weft::mgrit
