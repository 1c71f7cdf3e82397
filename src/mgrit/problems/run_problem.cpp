// The non-template parts of a catalogue run: the hierarchy, the statistics and the recorded
// solution, gathered on rank 0.
#include "run_problem.hpp"

namespace weft::mgrit::problems::detail {

void describe_hierarchy(const Hierarchy& h, const Options& effective, RunSummary& sum) {
  sum.intervals = h.intervals_per_level();
  for (int l = 0; l < h.levels(); ++l) sum.cf_built.push_back(h.level(l).cfactor);
  sum.options = effective;
}

void collect_statistics(const Statistics& st, MPI_Comm comm, RunSummary& sum) {
  double local[5] = {st.setup_seconds, st.solve_seconds, st.step_seconds, st.comm_seconds,
                     st.other_seconds()};
  double global[5] = {};
  mpi::check(MPI_Reduce(local, global, mpi::count_of(local), MPI_DOUBLE, MPI_MAX, 0, comm),
             "MPI_Reduce (timings)");
  sum.setup = global[0];
  sum.solve = global[1];
  sum.step = global[2];
  sum.comm = global[3];
  sum.other = global[4];
  std::vector<long long> steps(st.steps_per_level.begin(), st.steps_per_level.end());
  sum.steps.assign(steps.size(), 0);
  mpi::check(MPI_Reduce(steps.data(), sum.steps.data(), static_cast<int>(steps.size()),
                        MPI_LONG_LONG, MPI_SUM, 0, comm),
             "MPI_Reduce (steps)");
}

void gather_solution(const std::map<index_t, SolutionPoint>& observed, MPI_Comm comm, int width,
                     index_t nt, RunSummary& sum) {
  const int rank = mpi::rank(comm), ranks = mpi::size(comm);
  const std::size_t row = 2 + static_cast<std::size_t>(width);  // index, t, values
  std::vector<double> mine;
  for (const auto& [index, point] : observed) {
    if (static_cast<int>(point.values.size()) != width)
      throw std::logic_error("observed state of " + std::to_string(point.values.size()) +
                             " values, expected " + std::to_string(width));
    mine.push_back(static_cast<double>(index));
    mine.push_back(point.t);
    mine.insert(mine.end(), point.values.begin(), point.values.end());
  }
  int count = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(ranks)), displs(static_cast<size_t>(ranks));
  mpi::check(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm), "MPI_Gather");
  std::vector<double> all;
  if (rank == 0) {
    int total = 0;
    for (int r = 0; r < ranks; ++r) {
      displs[static_cast<size_t>(r)] = total;
      total += counts[static_cast<size_t>(r)];
    }
    all.resize(static_cast<size_t>(total));
  }
  mpi::check(MPI_Gatherv(mine.data(), count, MPI_DOUBLE, all.data(), counts.data(), displs.data(),
                         MPI_DOUBLE, 0, comm),
             "MPI_Gatherv (solution)");
  sum.width = width;
  if (rank != 0) return;
  for (std::size_t off = 0; off < all.size(); off += row) {
    SolutionPoint& point = sum.solution[static_cast<index_t>(all[off])];
    point.t = all[off + 1];
    point.values.assign(all.begin() + static_cast<std::ptrdiff_t>(off + 2),
                        all.begin() + static_cast<std::ptrdiff_t>(off + row));
  }
  if (static_cast<index_t>(sum.solution.size()) != nt + 1)
    throw std::logic_error("observed " + std::to_string(sum.solution.size()) +
                           " fine points, expected " + std::to_string(nt + 1));
}

}  // namespace weft::mgrit::problems::detail
