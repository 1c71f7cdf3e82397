#include "weft/mgrit/step_map.hpp"

#include <algorithm>

namespace weft::mgrit {

std::vector<StepSite> step_sites(const TimeGrid& grid, const Options& options, int ranks) {
  const Direction direction = options.direction();
  const TimeGrid internal = direction == Direction::Forward ? grid : grid.reversed();
  const index_t last = internal.intervals();
  const Hierarchy hierarchy = Hierarchy::uniform(internal, options);
  const Distribution dist(internal.points(), ranks, direction, options.rank_blocks());
  // Internal chain positions own contiguous internal blocks: the owner of internal point i.
  std::vector<index_t> ends;
  for (int q = 0; q < ranks; ++q) ends.push_back(dist.end(q));
  auto owner = [&](index_t i) {
    const auto q = std::upper_bound(ends.begin(), ends.end(), i) - ends.begin();
    return dist.rank_at_position(static_cast<int>(q));
  };
  auto user = [&](index_t i) { return direction == Direction::Forward ? i : last - i; };
  std::vector<StepSite> sites;
  for (int l = 0; l < hierarchy.levels(); ++l) {
    const auto& fine = hierarchy.level(l).fine;
    for (size_t k = 1; k < fine.size(); ++k)
      sites.push_back(StepSite{l, user(fine[k - 1]), user(fine[k]), owner(fine[k])});
  }
  return sites;
}

}  // namespace weft::mgrit
