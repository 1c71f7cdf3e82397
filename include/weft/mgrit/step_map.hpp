#pragma once
// Where the solver evaluates each step: a map of (level, from, to, rank) for every step that a
// Solver with the same grid, options and rank count may evaluate. Code that must place data
// next to the steps (the parameters a network layer needs, a cost model replaying a schedule)
// reads it here instead of re-deriving the solver's rules.
//
//   auto sites = weft::mgrit::step_sites(grid, options, ranks);
//   for (const auto& s : sites) if (s.rank == me) need(s.level, s.from, s.to);
//
// The rule: on level l, the step into point k starts at k's predecessor on level l and runs on
// the rank that owns k (fine-grid block distribution, Options::rank_blocks respected). Indices
// are the user's numbering, so reverse-time solves list from > to.
#include <vector>

#include "weft/mgrit/hierarchy.hpp"
#include "weft/mgrit/options.hpp"
#include "weft/mgrit/types.hpp"

namespace weft::mgrit {

struct StepSite {
  int level = 0;
  index_t from = 0;  ///< start point (user numbering)
  index_t to = 0;    ///< end point (user numbering)
  int rank = 0;      ///< the rank that evaluates it
};

/// Every step of every level of the hierarchy built from `grid` and `options` (direction,
/// coarsening, rank blocks) on `ranks` ranks; level by level, in the solver's internal order.
std::vector<StepSite> step_sites(const TimeGrid& grid, const Options& options, int ranks);

}  // namespace weft::mgrit
