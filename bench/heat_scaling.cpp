// Strong scaling of MGRIT for the heat equation, with the work counts that make the figures
// readable on a machine with fewer cores than ranks (run by bench/run_heat_scaling.sh at 1, 2
// and 4 ranks; 4 is oversubscribed on a 2-core machine).
//
// 1. heat2d (problems::PetscHeat2D with PETSc, problems::Heat2D without) on an nx x nx grid,
//    nt steps: for every S dividing the rank count P, P/S time groups of S space ranks run
//    MGRIT on the time communicator; with S = P also the plain sequential time stepping over S
//    space ranks. Baseline: the sequential solve on one rank, measured in the same run. Columns:
//    wall time (slowest rank, median of --reps), speedup over the baseline, iterations, step
//    evaluations per level (summed over the time groups, each group counted once), the most
//    steps one time group performs (the critical path in steps), the work-model speedup
//    nt / that, and KSP iterations (PETSc only).
// 2. heat1d (problems::Heat1D) with --heat1d-nt intervals: time per fine step of MGRIT over all
//    P ranks vs the plain sequential solve on one rank, in the same run.
//
//   heat_scaling [--nx 33] [--nt 256] [--levels 3] [--cf 4] [--tol 1e-7] [--reps 3]
//                [--ksp cg|lu] [--heat1d-nt 4096] [--heat1d-nx 33] [--heat1d-levels 6]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "weft/mgrit/problems/heat1d.hpp"
#include "weft/mgrit/problems/heat2d.hpp"
#include "weft/mgrit/problems/space_time.hpp"
#include "weft/mgrit/solver.hpp"
#include "weft/util/clock.hpp"
#include "weft/util/mpi.hpp"
#ifdef WEFT_HAVE_PETSC
#include "weft/mgrit/problems/petsc_heat2d.hpp"
#endif

namespace {

namespace mg = weft::mgrit;
namespace pb = weft::mgrit::problems;
using mg::index_t;

struct Args {
  int nx = 33, levels = 3, cf = 4, reps = 3, heat1d_nx = 33, heat1d_levels = 6;
  index_t nt = 256, heat1d_nt = 4096;
  double tol = 1e-7;
  std::string ksp = "cg";
};

using weft::clock::now;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Measure {
  double seconds = 0;  // median over reps of the slowest rank
  int iterations = 0;
  std::vector<long long> steps;  // per level, summed over the time groups
  long long max_steps = 0;       // the most steps one time rank performs
  long long ksp_iterations = 0;  // summed over the time groups
};

// Solves `reps` times with a fresh App from make(); collective over world.
template <class App, class Make>
Measure measure(Make make, const pb::SpaceTimeComms& comms, MPI_Comm world,
                const mg::TimeGrid& grid, const mg::Options& options, int reps) {
  Measure m;
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    auto app = make();
    mg::Solver<App> solver(*app, comms.time.get(), grid, options);
    MPI_Barrier(world);
    const double start = now();
    const mg::Result result = solver.solve();
    double elapsed = now() - start, slowest = 0;
    MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, world);
    times.push_back(slowest);
    if (r + 1 < reps) continue;
    m.iterations = result.iterations;
    const auto& s = solver.statistics().steps_per_level;
    std::vector<long long> mine(s.begin(), s.end());
    m.steps.assign(mine.size(), 0);
    MPI_Allreduce(mine.data(), m.steps.data(), static_cast<int>(mine.size()), MPI_LONG_LONG,
                  MPI_SUM, comms.time.get());
    long long total = static_cast<long long>(solver.statistics().total_steps());
    MPI_Allreduce(&total, &m.max_steps, 1, MPI_LONG_LONG, MPI_MAX, comms.time.get());
    long long ksp = 0;
#ifdef WEFT_HAVE_PETSC
    if constexpr (std::is_same_v<App, pb::PetscHeat2D>) ksp = app->ksp_iterations();
#endif
    MPI_Allreduce(&ksp, &m.ksp_iterations, 1, MPI_LONG_LONG, MPI_SUM, comms.time.get());
  }
  m.seconds = median(times);
  return m;
}

std::string join(const std::vector<long long>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "/" : "") + std::to_string(v[i]);
  return s;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* v = argv[i + 1];
    if (flag == "--nx")
      a.nx = std::atoi(v);
    else if (flag == "--nt")
      a.nt = std::atoll(v);
    else if (flag == "--levels")
      a.levels = std::atoi(v);
    else if (flag == "--cf")
      a.cf = std::atoi(v);
    else if (flag == "--tol")
      a.tol = std::atof(v);
    else if (flag == "--reps")
      a.reps = std::atoi(v);
    else if (flag == "--ksp")
      a.ksp = v;
    else if (flag == "--heat1d-nt")
      a.heat1d_nt = std::atoll(v);
    else if (flag == "--heat1d-nx")
      a.heat1d_nx = std::atoi(v);
    else if (flag == "--heat1d-levels")
      a.heat1d_levels = std::atoi(v);
    else
      throw weft::InvalidOption("heat_scaling: unknown flag " + flag);
  }
  return a;
}

void heat2d_scaling(const Args& a, int rank, int ranks) {
  const pb::Heat2DGrid g{a.nx, a.nx, 1.0, 1.0};
  const auto grid = mg::TimeGrid::uniform(0.0, 1.0, a.nt);
  const mg::Options mgrit =
      mg::Options().max_levels(a.levels).cfactor(a.cf).abs_tol(a.tol).max_iterations(100);
  const mg::Options sequential = mg::Options().max_levels(1);
#ifdef WEFT_HAVE_PETSC
  const char* app_name = "PetscHeat2D";
  const pb::KspSettings ksp = pb::KspSettings::parse(a.ksp);
  auto run = [&](const pb::SpaceTimeComms& c, MPI_Comm world, const mg::Options& o) {
    return measure<pb::PetscHeat2D>(
        [&] {
          return std::make_unique<pb::PetscHeat2D>(c.space.get(), g,
                                                   pb::Heat2D::Method::BackwardEuler, 0.0,
                                                   pb::InitialGuess::zero(), ksp);
        },
        c, world, grid, o, a.reps);
  };
#else
  const char* app_name = "Heat2D (no PETSc: S = 1 only)";
  auto run = [&](const pb::SpaceTimeComms& c, MPI_Comm world, const mg::Options& o) {
    return measure<pb::Heat2D>(
        [&] {
          return std::make_unique<pb::Heat2D>(g, pb::Heat2D::Method::BackwardEuler, 0.0,
                                              pb::InitialGuess::zero());
        },
        c, world, grid, o, a.reps);
  };
#endif
  // The baseline: the sequential solve on rank 0 alone.
  Measure base;
  if (rank == 0) {
    const pb::SpaceTimeComms self = pb::split_space_time(MPI_COMM_SELF, 1);
    base = run(self, MPI_COMM_SELF, sequential);
  }
  MPI_Bcast(&base.seconds, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf(
        "\n# heat2d: %s, %dx%d grid (%zu unknowns), be, %lld steps on [0, 1], "
        "MGRIT: %d levels, cf %d, FCF, tol %g%s\n",
        app_name, a.nx, a.nx, g.unknowns(), static_cast<long long>(a.nt), a.levels, a.cf, a.tol,
        std::string(app_name).rfind("Petsc", 0) == 0 ? (", ksp " + a.ksp).c_str() : "");
    std::printf(
        "# baseline: sequential time stepping on 1 rank: %.4f s (%lld steps, %lld KSP "
        "iterations)\n",
        base.seconds, static_cast<long long>(a.nt), base.ksp_iterations);
    std::printf("%3s %3s %3s  %-10s %5s %9s %8s  %-28s %10s %8s %10s\n", "P", "S", "T", "method",
                "iter", "wall [s]", "speedup", "steps per level (all T)", "max steps", "model",
                "KSP its");
  }
  for (int s = 1; s <= ranks; ++s) {
    if (ranks % s != 0) continue;
#ifndef WEFT_HAVE_PETSC
    if (s > 1) continue;
#endif
    const pb::SpaceTimeComms comms = pb::split_space_time(MPI_COMM_WORLD, s);
    std::vector<std::pair<std::string, mg::Options>> runs = {{"mgrit", mgrit}};
    if (s == ranks) runs.push_back({"sequential", sequential});
    for (const auto& [name, options] : runs) {
      const Measure m = run(comms, MPI_COMM_WORLD, options);
      if (rank == 0)
        std::printf("%3d %3d %3d  %-10s %5d %9.4f %8.2f  %-28s %10lld %8.2f %10lld\n", ranks, s,
                    ranks / s, name.c_str(), m.iterations, m.seconds, base.seconds / m.seconds,
                    join(m.steps).c_str(), m.max_steps,
                    static_cast<double>(a.nt) / static_cast<double>(m.max_steps), m.ksp_iterations);
    }
  }
}

void heat1d_per_step(const Args& a, int rank, int ranks) {
  const auto grid = mg::TimeGrid::uniform(0.0, 2.0, a.heat1d_nt);
  auto make = [&] {
    return std::make_unique<pb::Heat1D>(a.heat1d_nx, 0.0, 2.0, 0.0, pb::InitialGuess::zero());
  };
  Measure seq;
  if (rank == 0) {
    const pb::SpaceTimeComms self = pb::split_space_time(MPI_COMM_SELF, 1);
    seq = measure<pb::Heat1D>(make, self, MPI_COMM_SELF, grid, mg::Options().max_levels(1), a.reps);
  }
  MPI_Bcast(&seq.seconds, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  const pb::SpaceTimeComms world = pb::split_space_time(MPI_COMM_WORLD, 1);
  const mg::Options o =
      mg::Options().max_levels(a.heat1d_levels).cfactor(4).abs_tol(1e-9).max_iterations(100);
  const Measure m = measure<pb::Heat1D>(make, world, MPI_COMM_WORLD, grid, o, a.reps);
  if (rank != 0) return;
  const double n = static_cast<double>(a.heat1d_nt);
  long long all = 0;
  for (long long s : m.steps) all += s;
  std::printf(
      "\n# heat1d: nx %d, be, %lld intervals on [0, 2]; MGRIT: %d levels max, cf 4, FCF, "
      "tol 1e-9, %d rank(s)\n",
      a.heat1d_nx, static_cast<long long>(a.heat1d_nt), a.heat1d_levels, ranks);
  std::printf("%-26s %12s %14s %8s  %s\n", "solve", "wall [s]", "us/fine step", "ratio", "work");
  std::printf("%-26s %12.5f %14.3f %8.2f  %lld steps\n", "sequential (1 rank)", seq.seconds,
              1e6 * seq.seconds / n, 1.0, static_cast<long long>(a.heat1d_nt));
  std::printf(
      "%-26s %12.5f %14.3f %8.2f  %d iterations, steps per level %s (%.1f per fine "
      "step; at most %lld on one rank)\n",
      ("mgrit (" + std::to_string(ranks) + " ranks)").c_str(), m.seconds, 1e6 * m.seconds / n,
      m.seconds / seq.seconds, m.iterations, join(m.steps).c_str(), static_cast<double>(all) / n,
      m.max_steps);
}

}  // namespace

int main(int argc, char** argv) {
  weft::mpi::Environment env(&argc, &argv);
  int code = 0;
  {
#ifdef WEFT_HAVE_PETSC
    pb::PetscSession petsc;
#endif
    const int rank = weft::mpi::rank(MPI_COMM_WORLD), ranks = weft::mpi::size(MPI_COMM_WORLD);
    try {
      const Args a = parse(argc, argv);
      if (rank == 0)
        std::printf(
            "# weft heat_scaling: %d rank(s); wall times are the slowest rank's, median "
            "of %d; with more ranks than cores read the work counts, not the times\n",
            ranks, a.reps);
      heat2d_scaling(a, rank, ranks);
      heat1d_per_step(a, rank, ranks);
    } catch (const weft::Error& e) {
      if (rank == 0) std::fprintf(stderr, "heat_scaling: %s\n", e.what());
      code = 2;
    }
  }
  return code;
}
