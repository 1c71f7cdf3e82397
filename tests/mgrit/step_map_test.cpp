// mgrit::step_sites against the solver itself: every step a Solver evaluates, on every level
// and rank, forward and reverse (with explicit rank blocks), is listed on the rank that
// evaluated it, and every listed step is evaluated.
#include <gtest/gtest.h>
#include <mpi.h>

#include <set>
#include <tuple>
#include <vector>

#include "weft/mgrit/solver.hpp"
#include "weft/mgrit/step_map.hpp"

namespace weft::mgrit {
namespace {

using Site = std::tuple<int, index_t, index_t, int>;  // level, from, to, rank

/// u' = -u with backward Euler; records where each step runs.
struct RecordingApp {
  using State = double;
  int rank = 0;
  std::set<Site> seen;
  double init(double t) const { return t == 0.0 ? 1.0 : 0.0; }
  void step(const double& in, double& out, double t0, double t1, const StepInfo& info) {
    seen.insert({info.level, info.from, info.to, rank});
    out = in / (1.0 + (t1 > t0 ? t1 - t0 : t0 - t1));
  }
};

/// Every rank's sites, on every rank.
std::set<Site> gather(const std::set<Site>& mine) {
  std::vector<long long> flat;
  for (const auto& [l, a, b, r] : mine) flat.insert(flat.end(), {l, a, b, r});
  int n = static_cast<int>(flat.size()), ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::vector<int> counts(static_cast<size_t>(ranks)), offsets(static_cast<size_t>(ranks));
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < ranks; ++r) {
    offsets[static_cast<size_t>(r)] = total;
    total += counts[static_cast<size_t>(r)];
  }
  std::vector<long long> all(static_cast<size_t>(total));
  MPI_Allgatherv(flat.data(), n, MPI_LONG_LONG, all.data(), counts.data(), offsets.data(),
                 MPI_LONG_LONG, MPI_COMM_WORLD);
  std::set<Site> out;
  for (size_t k = 0; k + 3 < all.size(); k += 4)
    out.insert({static_cast<int>(all[k]), all[k + 1], all[k + 2], static_cast<int>(all[k + 3])});
  return out;
}

void expect_same_map(const Options& options, index_t intervals, const char* what) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const auto grid = TimeGrid::uniform(0.0, 1.0, intervals);
  RecordingApp app;
  app.rank = rank;
  Solver<RecordingApp> solver(app, MPI_COMM_WORLD, grid, options);
  solver.solve();
  const std::set<Site> evaluated = gather(app.seen);
  std::set<Site> listed;
  for (const StepSite& s : step_sites(grid, options, ranks))
    listed.insert({s.level, s.from, s.to, s.rank});
  EXPECT_EQ(evaluated, listed) << what << ": " << evaluated.size() << " evaluated, "
                               << listed.size() << " listed";
  EXPECT_FALSE(listed.empty());
}

TEST(StepMap, ListsExactlyTheStepsTheSolverEvaluatesOnTheirRanks) {
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  expect_same_map(Options().max_levels(3).cfactor(2).max_iterations(2), 13, "V cf 2");
  expect_same_map(Options().max_levels(3).cfactor(4).nrelax(0, 0).max_iterations(2), 17,
                  "V cf 4, F fine");
  expect_same_map(Options().max_levels(3).cfactor(2).cycle(Cycle::F).max_iterations(2), 11,
                  "F-cycle");
  expect_same_map(Options().max_levels(1), 7, "one level");
  // Reverse time with explicit rank blocks (the adjoint of a layer-parallel network).
  std::vector<index_t> blocks;
  for (int r = 0; r < ranks; ++r) blocks.push_back(r == 0 ? 0 : 3 * r - 1);
  expect_same_map(Options()
                      .max_levels(3)
                      .cfactor(2)
                      .max_iterations(2)
                      .direction(Direction::Reverse)
                      .rank_blocks(blocks)
                      .final_sweep(FinalSweep::CF),
                  14, "reverse with rank blocks");
}

}  // namespace
}  // namespace weft::mgrit
