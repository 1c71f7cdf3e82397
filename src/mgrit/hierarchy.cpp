#include "weft/mgrit/hierarchy.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "weft/util/error.hpp"

namespace weft::mgrit {

TimeGrid TimeGrid::uniform(double t0, double t1, index_t intervals) {
  if (intervals < 1)
    throw InvalidOption("time grid: need at least 1 interval, got " + std::to_string(intervals));
  if (!std::isfinite(t0) || !std::isfinite(t1) || t0 == t1)
    throw InvalidOption("time grid: need finite t0 != t1, got [" + number_text(t0) + ", " +
                        number_text(t1) + "]");
  TimeGrid g;
  g.times_.resize(static_cast<size_t>(intervals) + 1);
  const double span = t1 - t0;
  for (index_t i = 0; i <= intervals; ++i)
    g.times_[static_cast<size_t>(i)] =
        t0 + span * static_cast<double>(i) / static_cast<double>(intervals);
  g.times_.back() = t1;
  return g;
}

TimeGrid TimeGrid::from_points(std::vector<double> times) {
  if (times.size() < 2)
    throw InvalidOption("time grid: need at least 2 time points, got " +
                        std::to_string(times.size()));
  const bool increasing = times[1] > times[0];
  for (size_t i = 1; i < times.size(); ++i) {
    const bool ok = increasing ? times[i] > times[i - 1] : times[i] < times[i - 1];
    if (!ok || !std::isfinite(times[i]))
      throw InvalidOption("time grid: points must be finite and strictly monotone; point " +
                          std::to_string(i) + " = " + number_text(times[i]) + " breaks it");
  }
  TimeGrid g;
  g.times_ = std::move(times);
  return g;
}

TimeGrid TimeGrid::reversed() const {
  TimeGrid g;
  g.times_.assign(times_.rbegin(), times_.rend());
  return g;
}

bool LevelGrid::is_cpoint(index_t i) const {
  return std::binary_search(cpoints.begin(), cpoints.end(), i);
}

namespace {
std::vector<index_t> every(index_t points, int cf) {
  std::vector<index_t> out;
  for (index_t i = 0; i < points; i += cf) out.push_back(i);
  return out;
}
}  // namespace

Hierarchy Hierarchy::uniform(const TimeGrid& grid, const Options& options) {
  Hierarchy h;
  LevelGrid fine;
  fine.fine.resize(static_cast<size_t>(grid.points()));
  for (index_t i = 0; i < grid.points(); ++i) fine.fine[static_cast<size_t>(i)] = i;
  fine.times = grid.times();
  h.levels_.push_back(std::move(fine));
  for (;;) {
    LevelGrid& top = h.levels_.back();
    const int l = h.levels() - 1;
    const int cf = options.cfactor_at(l);
    top.cfactor = cf;
    top.cpoints = every(top.points(), cf);
    const index_t coarse_intervals = top.intervals() / cf;
    // XBraid coarsens while the coarse grid's last unknown has an index >= min_coarse: N/cf on
    // an ordinary grid, N/cf - 1 on a periodic one (its point N is point 0).
    const index_t coarse_last = options.periodic() ? coarse_intervals - 1 : coarse_intervals;
    if (h.levels() >= options.max_levels() || coarse_last < options.min_coarse()) {
      if (options.periodic() && l == 0)
        throw InvalidOption("time grid", "periodic",
                            "needs two or more levels: " + std::to_string(top.intervals()) +
                                " steps give one with min_coarse " +
                                std::to_string(options.min_coarse()) + " and coarsening factor " +
                                std::to_string(cf) + " (more steps or a smaller min_coarse)");
      if (options.periodic() && !options.relax_only_coarsest()) {
        // As XBraid: the coarsest periodic level is relaxed with point 0 its only C-point, so
        // that a relaxation sweep is one pass around the period.
        top.cfactor = static_cast<int>(top.intervals());
        top.cpoints = {0, top.intervals()};
      }
      break;
    }
    if (options.periodic() && top.intervals() % cf != 0)
      throw InvalidOption("time grid", "periodic",
                          "needs each level's intervals divisible by its coarsening factor: "
                          "level " +
                              std::to_string(l) + " has " + std::to_string(top.intervals()) +
                              ", cf " + std::to_string(cf) +
                              "; accepted: steps divisible by the product of the coarsening "
                              "factors of all levels but the coarsest");
    LevelGrid coarse;
    for (index_t pos : top.cpoints) {
      coarse.fine.push_back(top.fine[static_cast<size_t>(pos)]);
      coarse.times.push_back(top.times[static_cast<size_t>(pos)]);
    }
    h.levels_.push_back(std::move(coarse));
  }
  return h;
}

Hierarchy Hierarchy::from_levels(const TimeGrid& grid,
                                 const std::vector<std::vector<index_t>>& coarse_levels,
                                 const Options& options) {
  if (options.periodic())
    throw InvalidOption("time grid", "periodic", "needs uniform coarsening, not explicit levels");
  Hierarchy h = uniform(grid, Options(options).max_levels(1));
  for (size_t c = 0; c < coarse_levels.size(); ++c) {
    const auto& list = coarse_levels[c];
    const LevelGrid& above = h.levels_.back();
    const std::string name = "explicit level " + std::to_string(c + 1);
    if (list.size() < 2) throw InvalidOption(name + ": needs at least 2 points");
    if (list.front() != 0) throw InvalidOption(name + ": must start with the initial point");
    LevelGrid coarse;
    LevelGrid& fine_level = h.levels_.back();
    fine_level.cpoints.clear();
    fine_level.cfactor = 0;
    size_t pos = 0;
    for (size_t k = 0; k < list.size(); ++k) {
      if (k > 0 && list[k] <= list[k - 1])
        throw InvalidOption(name + ": indices must increase strictly (" +
                            std::to_string(list[k - 1]) + " then " + std::to_string(list[k]) + ")");
      while (pos < above.fine.size() && above.fine[pos] < list[k]) ++pos;
      if (pos == above.fine.size() || above.fine[pos] != list[k])
        throw InvalidOption(name + ": fine index " + std::to_string(list[k]) +
                            " is not a point of the level above");
      fine_level.cpoints.push_back(static_cast<index_t>(pos));
      coarse.fine.push_back(list[k]);
      coarse.times.push_back(above.times[pos]);
    }
    h.levels_.push_back(std::move(coarse));
  }
  LevelGrid& coarsest = h.levels_.back();
  coarsest.cfactor = options.cfactor_at(h.levels() - 1);
  coarsest.cpoints = every(coarsest.points(), coarsest.cfactor);
  return h;
}

std::vector<index_t> Hierarchy::intervals_per_level() const {
  std::vector<index_t> out;
  for (const auto& l : levels_) out.push_back(l.intervals());
  return out;
}

index_t Distribution::block_begin(index_t points, int ranks, int rank) {
  const index_t base = points / ranks;
  const index_t extra = points % ranks;
  const index_t r = rank;
  return r < extra ? r * (base + 1) : extra * (base + 1) + (r - extra) * base;
}

std::vector<index_t> Distribution::balanced_blocks(const std::vector<double>& step_costs,
                                                   int ranks) {
  const auto steps = static_cast<index_t>(step_costs.size());
  if (ranks < 1 || steps < ranks)
    throw InvalidOption("balanced blocks: " + std::to_string(steps) + " steps on " +
                        std::to_string(ranks) + " ranks; need at least one step per rank");
  double largest = 0, total = 0;
  for (index_t k = 0; k < steps; ++k) {
    const double c = step_costs[static_cast<size_t>(k)];
    if (!std::isfinite(c) || c < 0)
      throw InvalidOption("balanced blocks: cost " + number_text(c) + " of step " +
                          std::to_string(k) + " is invalid; accepted: finite and >= 0");
    largest = std::max(largest, c);
    total += c;
  }
  // Fills rank after rank up to `bound`, keeping a step for each later rank; the last rank
  // takes the rest. Returns the first steps and whether the last rank stayed within `bound`.
  auto fill = [&](double bound, std::vector<index_t>* first) {
    first->assign(1, 0);
    index_t k = 0;
    for (int r = 0; r + 1 < ranks; ++r) {
      const index_t keep = steps - (ranks - 1 - r);  // steps this rank may reach
      index_t end = k + 1;
      double sum = step_costs[static_cast<size_t>(k)];
      while (end < keep && sum + step_costs[static_cast<size_t>(end)] <= bound)
        sum += step_costs[static_cast<size_t>(end++)];
      first->push_back(end);
      k = end;
    }
    double rest = 0;
    for (; k < steps; ++k) rest += step_costs[static_cast<size_t>(k)];
    return rest <= bound;
  };
  std::vector<index_t> first;
  // fill(hi) succeeds (with room for rounding); the least feasible bound is in [lo, hi].
  double lo = largest, hi = total * (1 + 1e-9);
  if (!fill(lo, &first)) {
    for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
      const double mid = lo + (hi - lo) / 2;
      if (fill(mid, &first))
        hi = mid;
      else
        lo = mid;
    }
    fill(hi, &first);
  }
  // Step k goes into point k + 1: rank r's first point is its first step + 1 (0 for rank 0).
  for (size_t r = 1; r < first.size(); ++r) first[r] += 1;
  return first;
}

Distribution::Distribution(index_t points, int ranks, Direction direction,
                           const std::vector<index_t>& first_points)
    : points_(points), ranks_(ranks), direction_(direction) {
  if (ranks < 1) throw InvalidOption("distribution: need at least one rank");
  if (first_points.empty()) {
    for (int r = 0; r <= ranks; ++r) bounds_.push_back(block_begin(points, ranks, r));
    return;
  }
  if (static_cast<index_t>(first_points.size()) != ranks)
    throw InvalidOption("option rank_blocks: " + std::to_string(first_points.size()) +
                        " first points given for " + std::to_string(ranks) +
                        " ranks; accepted: one per rank");
  for (size_t r = 0; r < first_points.size(); ++r) {
    const index_t f = first_points[r];
    const index_t floor = r == 0 ? 0 : first_points[r - 1];
    if ((r == 0 && f != 0) || f < floor || f > points)
      throw InvalidOption("option rank_blocks: first point " + std::to_string(f) + " of rank " +
                          std::to_string(r) + " is invalid; accepted: 0 for rank 0, then " +
                          "nondecreasing points <= " + std::to_string(points));
  }
  bounds_ = first_points;
  bounds_.push_back(points);
}

int Distribution::position_of_rank(int rank) const {
  return direction_ == Direction::Forward ? rank : ranks_ - 1 - rank;
}

int Distribution::rank_at_position(int position) const {
  return direction_ == Direction::Forward ? position : ranks_ - 1 - position;
}

index_t Distribution::begin(int position) const {
  const auto rank = static_cast<size_t>(rank_at_position(position));
  return direction_ == Direction::Forward ? bounds_[rank] : points_ - bounds_[rank + 1];
}

index_t Distribution::end(int position) const {
  const auto rank = static_cast<size_t>(rank_at_position(position));
  return direction_ == Direction::Forward ? bounds_[rank + 1] : points_ - bounds_[rank];
}

}  // namespace weft::mgrit
