// Index maps of the time hierarchy and the block distribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "weft/mgrit/hierarchy.hpp"
#include "weft/util/error.hpp"

namespace weft::mgrit {
namespace {

TEST(TimeGrid, UniformEndsExactlyAndIsMonotone) {
  const auto g = TimeGrid::uniform(0.0, 5.0, 10);
  ASSERT_EQ(g.points(), 11);
  EXPECT_DOUBLE_EQ(g.times()[3], 1.5);
  EXPECT_EQ(g.times().back(), 5.0);
  const auto r = g.reversed();
  EXPECT_EQ(r.times().front(), 5.0);
  EXPECT_EQ(r.times().back(), 0.0);
}

TEST(TimeGrid, RejectsBadGrids) {
  EXPECT_THROW(TimeGrid::uniform(0, 1, 0), InvalidOption);
  EXPECT_THROW(TimeGrid::uniform(1, 1, 4), InvalidOption);
  EXPECT_THROW(TimeGrid::from_points({0.0}), InvalidOption);
  EXPECT_THROW(TimeGrid::from_points({0.0, 1.0, 1.0}), InvalidOption);
  EXPECT_NO_THROW(TimeGrid::from_points({0.0, 0.1, 0.5, 2.0}));
}

TEST(Hierarchy, UniformDivisible) {
  const auto h = Hierarchy::uniform(TimeGrid::uniform(0, 24, 48), Options().max_levels(3));
  ASSERT_EQ(h.levels(), 3);
  EXPECT_EQ(h.intervals_per_level(), (std::vector<index_t>{48, 24, 12}));
  EXPECT_EQ(h.level(1).fine[5], 10);
  EXPECT_EQ(h.level(2).fine[5], 20);
  EXPECT_DOUBLE_EQ(h.level(2).times[5], 10.0);
  EXPECT_EQ(h.level(0).cpoints.size(), 25u);
  EXPECT_TRUE(h.level(0).is_cpoint(46));
  EXPECT_FALSE(h.level(0).is_cpoint(47));
}

TEST(Hierarchy, NonDivisibleKeepsTrailingFPoints) {
  // 10 intervals, cf 4: coarse points at 0, 4, 8; points 9 and 10 are trailing F-points.
  const auto h =
      Hierarchy::uniform(TimeGrid::uniform(0, 1, 10), Options().max_levels(2).cfactor(4));
  ASSERT_EQ(h.levels(), 2);
  EXPECT_EQ(h.level(1).fine, (std::vector<index_t>{0, 4, 8}));
  EXPECT_EQ(h.level(0).cpoints, (std::vector<index_t>{0, 4, 8}));
}

TEST(Hierarchy, PerLevelFactorsAndMinCoarse) {
  Options o;
  o.max_levels(10).cfactor(4, 0).cfactor(2).min_coarse(3);
  o.cfactor(4, 0);
  const auto h = Hierarchy::uniform(TimeGrid::uniform(0, 1, 64), o);
  // 64 -(4)-> 16 -(2)-> 8 -(2)-> 4 -(2)-> 2 < 3 stops.
  EXPECT_EQ(h.intervals_per_level(), (std::vector<index_t>{64, 16, 8, 4}));
  EXPECT_EQ(h.level(3).fine[1], 16);
}

TEST(Hierarchy, MaxLevelsOneIsJustTheFineGrid) {
  const auto h = Hierarchy::uniform(TimeGrid::uniform(0, 1, 7), Options().max_levels(1));
  EXPECT_EQ(h.levels(), 1);
}

TEST(Hierarchy, ExplicitLevels) {
  const auto g = TimeGrid::uniform(0, 10, 10);
  const auto h = Hierarchy::from_levels(g, {{0, 1, 5, 9, 10}, {0, 9}}, Options());
  ASSERT_EQ(h.levels(), 3);
  EXPECT_EQ(h.level(0).cpoints, (std::vector<index_t>{0, 1, 5, 9, 10}));
  EXPECT_EQ(h.level(1).cpoints, (std::vector<index_t>{0, 3}));
  EXPECT_DOUBLE_EQ(h.level(2).times[1], 9.0);
  EXPECT_THROW(Hierarchy::from_levels(g, {{0, 2, 2}}, Options()), InvalidOption);
  EXPECT_THROW(Hierarchy::from_levels(g, {{1, 2}}, Options()), InvalidOption);
  EXPECT_THROW(Hierarchy::from_levels(g, {{0, 11}}, Options()), InvalidOption);
  EXPECT_THROW(Hierarchy::from_levels(g, {{0, 4, 8}, {0, 5}}, Options()), InvalidOption);
}

TEST(Distribution, BlocksGiveExtraPointsToFirstRanks) {
  // 11 points on 3 ranks: 4, 4, 3.
  const Distribution d(11, 3, Direction::Forward);
  EXPECT_EQ(d.begin(0), 0);
  EXPECT_EQ(d.end(0), 4);
  EXPECT_EQ(d.begin(1), 4);
  EXPECT_EQ(d.end(1), 8);
  EXPECT_EQ(d.begin(2), 8);
  EXPECT_EQ(d.end(2), 11);
}

TEST(Distribution, MoreRanksThanPointsLeavesEmptyBlocks) {
  const Distribution d(3, 5, Direction::Forward);
  index_t total = 0;
  for (int q = 0; q < 5; ++q) {
    EXPECT_LE(d.begin(q), d.end(q));
    total += d.end(q) - d.begin(q);
  }
  EXPECT_EQ(total, 3);
  EXPECT_EQ(d.begin(3), d.end(3));
}

TEST(Distribution, ReverseKeepsEveryPointOnItsForwardRank) {
  const index_t points = 11;
  const Distribution fwd(points, 3, Direction::Forward);
  const Distribution rev(points, 3, Direction::Reverse);
  for (int rank = 0; rank < 3; ++rank) {
    const int qf = fwd.position_of_rank(rank), qr = rev.position_of_rank(rank);
    EXPECT_EQ(rev.rank_at_position(qr), rank);
    // Internal reverse index j is the user's point N - j.
    EXPECT_EQ(rev.begin(qr), points - fwd.end(qf));
    EXPECT_EQ(rev.end(qr), points - fwd.begin(qf));
  }
  EXPECT_EQ(rev.begin(0), 0);  // the last rank starts the reverse chain
  EXPECT_EQ(rev.rank_at_position(0), 2);
}

// The largest block cost of first points `first` (one per rank) for `costs` (step k into k + 1).
double largest_block(const std::vector<double>& costs, const std::vector<index_t>& first) {
  double most = 0;
  for (size_t r = 0; r < first.size(); ++r) {
    const index_t lo = r == 0 ? 0 : first[r] - 1;
    const index_t hi = r + 1 < first.size() ? first[r + 1] - 1 : static_cast<index_t>(costs.size());
    double sum = 0;
    for (index_t k = lo; k < hi; ++k) sum += costs[static_cast<size_t>(k)];
    most = std::max(most, sum);
  }
  return most;
}

// The least largest block over every split of `costs` into `ranks` nonempty contiguous blocks.
double best_largest_block(const std::vector<double>& costs, int ranks, size_t from = 0) {
  if (ranks == 1) {
    double sum = 0;
    for (size_t k = from; k < costs.size(); ++k) sum += costs[k];
    return sum;
  }
  double best = std::numeric_limits<double>::infinity(), sum = 0;
  for (size_t end = from + 1; end + static_cast<size_t>(ranks - 1) <= costs.size(); ++end) {
    sum += costs[end - 1];
    best = std::min(best, std::max(sum, best_largest_block(costs, ranks - 1, end)));
  }
  return best;
}

TEST(Distribution, BalancedBlocksMinimizeTheLargestBlockCost) {
  // Against every split of small cost lists (exhaustive), including zero costs and one dear step.
  std::mt19937 random(7);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (int trial = 0; trial < 300; ++trial) {
    const int steps = 1 + trial % 9;
    const int ranks = 1 + (trial / 9) % steps;
    std::vector<double> costs(static_cast<size_t>(steps));
    for (double& c : costs) c = trial % 5 == 0 ? std::floor(3 * uniform(random)) : uniform(random);
    if (trial % 7 == 0) costs[static_cast<size_t>(trial) % costs.size()] = 20;
    const std::vector<index_t> first = Distribution::balanced_blocks(costs, ranks);
    ASSERT_EQ(first.size(), static_cast<size_t>(ranks));
    EXPECT_EQ(first[0], 0);
    for (size_t r = 1; r < first.size(); ++r) {
      EXPECT_GT(first[r], r == 1 ? 1 : first[r - 1]) << "every rank holds a step";
      EXPECT_LE(first[r], steps);
    }
    const double best = best_largest_block(costs, ranks);
    EXPECT_NEAR(largest_block(costs, first), best, 1e-9 * std::max(1.0, best))
        << "trial " << trial << ": " << steps << " steps, " << ranks << " ranks";
    // A valid distribution of the solver over the N + 1 points.
    EXPECT_NO_THROW(Distribution(steps + 1, ranks, Direction::Forward, first));
  }
}

TEST(Distribution, BalancedBlocksGiveDearStepsFewerPerRank) {
  // 4 steps of cost 4, then 12 of cost 1, on 4 ranks: two dear steps, two dear steps, 8 cheap
  // ones, 4 cheap ones (the first ranks filled first): 8 at most, where equal numbers of
  // steps put the four dear ones on rank 0 (16).
  std::vector<double> costs(4, 4.0);
  costs.resize(16, 1.0);
  const std::vector<index_t> first = Distribution::balanced_blocks(costs, 4);
  EXPECT_DOUBLE_EQ(largest_block(costs, first), 8.0);
  EXPECT_EQ(first, (std::vector<index_t>{0, 3, 5, 13}));
  // Equal costs: the largest block holds ceil(N / P) steps, as the block distribution's.
  EXPECT_DOUBLE_EQ(largest_block(std::vector<double>(10, 1.0),
                                 Distribution::balanced_blocks(std::vector<double>(10, 1.0), 3)),
                   4.0);
}

TEST(Distribution, BalancedBlocksRefuseTooFewStepsAndBadCosts) {
  auto refused = [](const std::vector<double>& costs, int ranks, const std::string& part) {
    try {
      Distribution::balanced_blocks(costs, ranks);
      ADD_FAILURE() << "accepted: " << part;
    } catch (const InvalidOption& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  refused({1, 1}, 3, "2 steps on 3 ranks; need at least one step per rank");
  refused({1, -1, 1}, 2, "cost -1 of step 1 is invalid");
  refused({1, std::nan(""), 1}, 2, "of step 1 is invalid");
  refused({1, 1}, 0, "need at least one step per rank");
}

TEST(Distribution, ExplicitFirstPointsInBothDirections) {
  // 11 points on 3 ranks from points 0, 3, 3 (rank 1 empty) and the reverse of that.
  const std::vector<index_t> first{0, 3, 3};
  const Distribution fwd(11, 3, Direction::Forward, first);
  EXPECT_EQ(fwd.begin(0), 0);
  EXPECT_EQ(fwd.end(0), 3);
  EXPECT_EQ(fwd.begin(1), fwd.end(1));
  EXPECT_EQ(fwd.begin(2), 3);
  EXPECT_EQ(fwd.end(2), 11);
  const Distribution rev(11, 3, Direction::Reverse, first);
  EXPECT_EQ(rev.rank_at_position(0), 2);
  EXPECT_EQ(rev.begin(0), 0);  // user points 3..10 are internal 0..7
  EXPECT_EQ(rev.end(0), 8);
  EXPECT_EQ(rev.begin(2), 8);
  EXPECT_EQ(rev.end(2), 11);
}

TEST(Distribution, InvalidFirstPointsAreRejected) {
  for (const std::vector<index_t>& bad :
       {std::vector<index_t>{0, 4}, {1, 4, 8}, {0, 5, 4}, {0, 4, 12}, {0, -1, 4}})
    EXPECT_THROW(Distribution(11, 3, Direction::Forward, bad), InvalidOption);
  try {
    Distribution(11, 3, Direction::Forward, {0, 5, 4});
  } catch (const InvalidOption& e) {
    EXPECT_NE(std::string(e.what()).find("first point 4 of rank 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace weft::mgrit
