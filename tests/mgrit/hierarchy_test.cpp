// Index maps of the time hierarchy and the block distribution.
#include <gtest/gtest.h>

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
