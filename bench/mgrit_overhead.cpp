// The MGRIT solver's own cost on u' = -u (backward Euler): a plain sequential loop of the same
// steps is the baseline, measured in the same run; each MGRIT configuration reports nanoseconds
// per step evaluation, the bookkeeping above the loop's cost per step, and the ratio
//   time / (step evaluations x the loop's cost per step).
// Run at 1 and 2 ranks (bench/run_mgrit_bench.sh). Medians over --reps repetitions.
//
//   mgrit_overhead [--log2n 16,20] [--levels 1,2,6,15] [--iters 10] [--reps 5] [--work K]
// --work K adds K dependent multiply-adds to every step, to see the ratio for a costlier step.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "weft/mgrit/solver.hpp"
#include "weft/util/clock.hpp"

namespace {

using weft::mgrit::index_t;

struct Decay {
  using State = double;
  int work = 0;
  State init(double t) const { return t == 0.0 ? 1.0 : 0.456; }
  void step(const State& in, State& out, double t0, double t1, const weft::mgrit::StepInfo&) const {
    double u = in / (1.0 + (t1 - t0));
    for (int k = 0; k < work; ++k) u = u * 0.9999999 + 1e-12;  // a step of adjustable cost
    out = u;
  }
};

using weft::clock::now;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<int> parse_list(const char* text) {
  std::vector<int> out;
  std::string s(text);
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = s.find(',', pos);
    out.push_back(std::atoi(s.substr(pos, comma - pos).c_str()));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

// The baseline: the same steps in a plain loop, every state stored (as the solver does).
double plain_loop_seconds(const Decay& app, index_t n, const std::vector<double>& t) {
  std::vector<double> u(static_cast<size_t>(n) + 1);
  u[0] = 1.0;
  weft::mgrit::StepInfo info;
  const double start = now();
  for (index_t i = 1; i <= n; ++i)
    app.step(u[static_cast<size_t>(i - 1)], u[static_cast<size_t>(i)],
             t[static_cast<size_t>(i - 1)], t[static_cast<size_t>(i)], info);
  const double elapsed = now() - start;
  volatile double sink = u.back();
  (void)sink;
  return elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::vector<int> log2n = {16, 20}, levels = {1, 2, 6, 15};
  int iters = 10, reps = 5, work = 0;
  for (int a = 1; a + 1 < argc; a += 2) {
    const std::string flag = argv[a];
    if (flag == "--log2n")
      log2n = parse_list(argv[a + 1]);
    else if (flag == "--levels")
      levels = parse_list(argv[a + 1]);
    else if (flag == "--iters")
      iters = std::atoi(argv[a + 1]);
    else if (flag == "--reps")
      reps = std::atoi(argv[a + 1]);
    else if (flag == "--work")
      work = std::atoi(argv[a + 1]);
  }
  Decay app;
  app.work = work;
  if (rank == 0)
    std::printf(
        "# weft MGRIT overhead: u' = -u, backward Euler, cf 2, FCF, %d iterations, "
        "skip, %d rank(s), step work %d, median of %d\n",
        iters, ranks, work, reps);
  for (int p : log2n) {
    const index_t n = index_t{1} << p;
    const auto grid = weft::mgrit::TimeGrid::uniform(0.0, static_cast<double>(n) / 16.0, n);
    std::vector<double> loop_times;
    for (int r = 0; r < reps; ++r) loop_times.push_back(plain_loop_seconds(app, n, grid.times()));
    const double loop_ns = 1e9 * median(loop_times) / static_cast<double>(n);
    if (rank == 0) {
      std::printf("N = 2^%d = %lld intervals; plain sequential loop: %.2f ns/step\n", p,
                  static_cast<long long>(n), loop_ns);
      std::printf("  %-8s %14s %12s %14s %16s %12s\n", "levels", "steps (all)", "time [ms]",
                  "ns/step-eval", "bookkeeping ns", "ratio");
    }
    for (int nl : levels) {
      weft::mgrit::Options o;
      o.max_levels(nl).max_iterations(iters).abs_tol(0).collect_timings(true);
      std::vector<double> times;
      index_t evals = 0;
      for (int r = 0; r < reps; ++r) {
        weft::mgrit::Solver<Decay> solver(app, MPI_COMM_WORLD, grid, o);
        MPI_Barrier(MPI_COMM_WORLD);
        const double start = now();
        solver.solve();
        double elapsed = now() - start, slowest = 0;
        MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        times.push_back(slowest);
        const index_t mine = solver.statistics().total_steps();
        MPI_Allreduce(&mine, &evals, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
      }
      const double t = median(times);
      // Per rank, the evaluations it performs; the slowest rank sets the time.
      const double evals_per_rank = static_cast<double>(evals) / ranks;
      const double ns_per_eval = 1e9 * t / evals_per_rank;
      if (rank == 0)
        std::printf("  %-8d %14lld %12.3f %14.2f %16.2f %12.3f\n", nl,
                    static_cast<long long>(evals), 1e3 * t, ns_per_eval, ns_per_eval - loop_ns,
                    ns_per_eval / loop_ns);
    }
  }
  MPI_Finalize();
  return 0;
}
