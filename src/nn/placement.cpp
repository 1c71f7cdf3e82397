#include "placement.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "weft/mgrit/hierarchy.hpp"
#include "weft/mgrit/step_map.hpp"
#include "weft/util/error.hpp"

namespace weft::nn::detail {

Placement::Placement(const Chain& chain, int rank, int ranks, mgrit::Options forward,
                     mgrit::Options backward, const std::vector<double>& layer_costs)
    : rank_(rank),
      ranks_(ranks),
      points_(chain.layers() + 1),
      first_points_(first_points(chain.layers(), ranks, layer_costs)) {
  forward_ = std::move(forward);
  if (!layer_costs.empty()) forward_.rank_blocks({first_points_.begin(), first_points_.end() - 1});
  for (int r = 0; r < ranks; ++r) adjoint_blocks_.push_back(layer_begin(r));
  backward_ = std::move(backward.rank_blocks(adjoint_blocks_));

  const auto grid =
      mgrit::TimeGrid::uniform(0.0, static_cast<double>(chain.layers()), chain.layers());
  std::vector<std::set<std::int64_t>> need(static_cast<size_t>(ranks));
  auto add = [&](const std::vector<mgrit::StepSite>& sites) {
    for (const auto& s : sites)
      for (const Segment& seg : chain.segments(std::min(s.from, s.to), std::max(s.from, s.to)))
        if (layer_owner(seg.layer) != s.rank) need[static_cast<size_t>(s.rank)].insert(seg.layer);
  };
  add(mgrit::step_sites(grid, forward_, ranks));
  add(mgrit::step_sites(grid, backward_, ranks));

  const auto& mine = need[static_cast<size_t>(rank)];
  ghosts_.assign(mine.begin(), mine.end());
  std::map<int, Peer> by_owner;
  for (std::int64_t n : ghosts_) {
    Peer& p = by_owner[layer_owner(n)];
    p.rank = layer_owner(n);
    p.layers.push_back(n);
  }
  for (auto& entry : by_owner) recvs_.push_back(std::move(entry.second));
  for (int r = 0; r < ranks; ++r) {
    if (r == rank) continue;
    Peer p;
    p.rank = r;
    for (std::int64_t n : need[static_cast<size_t>(r)])
      if (is_local(n)) p.layers.push_back(n);
    if (!p.layers.empty()) sends_.push_back(std::move(p));
  }
}

std::vector<mgrit::index_t> Placement::first_points(std::int64_t layers, int ranks,
                                                    const std::vector<double>& layer_costs) {
  std::vector<mgrit::index_t> first;
  if (layer_costs.empty()) {
    for (int r = 0; r < ranks; ++r)
      first.push_back(mgrit::Distribution::block_begin(layers + 1, ranks, r));
  } else {
    if (static_cast<std::int64_t>(layer_costs.size()) != layers)
      throw InvalidOption("layer-parallel options: layer_costs has " +
                          std::to_string(layer_costs.size()) + " entries for " +
                          std::to_string(layers) + " chain layers; need one per layer");
    first = mgrit::Distribution::balanced_blocks(layer_costs, ranks);
  }
  first.push_back(layers + 1);
  return first;
}

std::int64_t Placement::point_begin(int r) const {
  return first_points_.at(static_cast<size_t>(r));
}

std::int64_t Placement::layer_begin(int r) const {
  return r == 0 ? 0 : point_begin(r) - 1;
}

std::int64_t Placement::layer_end(int r) const {
  return r == ranks_ - 1 ? points_ - 1 : point_begin(r + 1) - 1;
}

int Placement::layer_owner(std::int64_t n) const {
  int a = 0, b = ranks_;  // point_begin(a) <= n + 1 < point_begin(b)
  while (b - a > 1) {
    const int m = (a + b) / 2;
    if (point_begin(m) <= n + 1)
      a = m;
    else
      b = m;
  }
  return a;
}

}  // namespace weft::nn::detail
