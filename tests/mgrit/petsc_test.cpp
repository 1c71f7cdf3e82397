// Space-time parallelism over PETSc: heat2d with S space ranks per time step. P ranks split into
// P/S time groups; each step is a KSP solve over its group; the MGRIT solver runs over the time
// communicator. Whatever S, the residual history equals the one-rank run (to 1e-10 relative,
// with tight KSP tolerances), and the solution equals the serial heat2d's.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "breadth_support.hpp"
#include "weft/mgrit/problems/heat2d.hpp"
#include "weft/mgrit/problems/petsc_heat2d.hpp"
#include "weft/mgrit/problems/space_time.hpp"
#include "weft/mgrit/solver.hpp"

namespace weft::mgrit::breadth {
namespace {

using problems::Heat2D;
using problems::Heat2DGrid;
using problems::InitialGuess;
using problems::PetscHeat2D;
using problems::SpaceTimeComms;

// PETSc lives for the whole test program (MPI is initialized by the test main).
class PetscEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { session_ = std::make_unique<problems::PetscSession>(); }
  void TearDown() override { session_.reset(); }

 private:
  std::unique_ptr<problems::PetscSession> session_;
};
::testing::Environment* const kPetsc = ::testing::AddGlobalTestEnvironment(new PetscEnvironment);

const Heat2DGrid kGrid{9, 11, 1.0, 1.25};
const char* const kMethods[] = {"be", "cn,be"};

struct PetscRun {
  Result result;
  std::vector<double> final_state;  // u(T) on every rank
  long long ksp_iterations = 0;
};

// One MGRIT solve of PetscHeat2D with `space_ranks` space ranks per time group.
PetscRun run_petsc(MPI_Comm world, int space_ranks, const char* methods, const TimeGrid& grid,
                   const Options& options, const problems::KspSettings& ksp) {
  const SpaceTimeComms comms = problems::split_space_time(world, space_ranks);
  PetscRun out;
  PetscHeat2D app(comms.space.get(), kGrid, Heat2D::parse_methods(methods), 0.0,
                  InitialGuess::random(7), ksp);
  Solver<PetscHeat2D> solver(app, comms.time.get(), grid, options);
  out.result = solver.solve();
  // The owner group of u(T) gathers it over its space communicator; broadcast over the world.
  const index_t last = grid.intervals();
  std::vector<double> u(kGrid.unknowns(), 0.0);
  int owner_world = -1, mine = -1;
  if (const auto* s = solver.state(last)) {
    u = app.gather(*s);
    if (comms.space_rank == 0) MPI_Comm_rank(world, &mine);
  }
  MPI_Allreduce(&mine, &owner_world, 1, MPI_INT, MPI_MAX, world);
  MPI_Bcast(u.data(), static_cast<int>(u.size()), MPI_DOUBLE, owner_world, world);
  out.final_state = u;
  out.ksp_iterations = app.ksp_iterations();
  return out;
}

double max_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

std::vector<int> divisors(int p) {
  std::vector<int> out;
  for (int s = 1; s <= p; ++s)
    if (p % s == 0) out.push_back(s);
  return out;
}

// With redundant LU every step is the same arithmetic at every space rank count: the histories
// differ only by the rounding of the norm's reduction. With CG + Jacobi the inner products'
// rounding differs, so residuals carry an absolute noise of ~1e-15: they agree to 1e-10
// relative above 1e-4 (1e-14 absolute below).
TEST(PetscHeat2D, ResidualHistoryDoesNotDependOnTheSpaceRanks) {
  const auto grid = TimeGrid::uniform(0.0, 1.0, 16);
  const Options o = Options().max_levels(3).abs_tol(1e-9).max_iterations(40);
  struct Ksp {
    const char* name;
    double rel, floor;
  };
  for (const Ksp& ksp : {Ksp{"lu", 1e-12, 0.0}, Ksp{"cg", 1e-10, 1e-4}}) {
    const auto settings = problems::KspSettings::parse(ksp.name);
    for (const char* methods : kMethods) {
      // Every rank alone: the one-rank reference.
      const PetscRun self = run_petsc(MPI_COMM_SELF, 1, methods, grid, o, settings);
      ASSERT_TRUE(self.result.converged) << methods;
      ASSERT_GE(self.result.iterations, 4) << methods;
      for (int s : divisors(world_size())) {
        const PetscRun r = run_petsc(MPI_COMM_WORLD, s, methods, grid, o, settings);
        const std::string what = std::string(ksp.name) + " " + methods + " S=" + std::to_string(s);
        SCOPED_TRACE(what);
        expect_same_history(r.result, self.result, ksp.rel, ksp.floor);
        EXPECT_LT(max_difference(r.final_state, self.final_state), 1e-13);
      }
    }
  }
}

TEST(PetscHeat2D, AgreesWithTheSerialHeat2D) {
  const auto grid = TimeGrid::uniform(0.0, 1.0, 16);
  const Options o = Options().max_levels(3).abs_tol(1e-9).max_iterations(40);
  for (const char* methods : kMethods) {
    Heat2D serial(kGrid, Heat2D::parse_methods(methods), 0.0, InitialGuess::random(7));
    Solver<Heat2D> solver(serial, MPI_COMM_SELF, grid, o);
    const Result rs = solver.solve();
    const PetscRun r =
        run_petsc(MPI_COMM_WORLD, world_size(), methods, grid, o, problems::KspSettings());
    SCOPED_TRACE(methods);
    expect_same_history(r.result, rs, 1e-10, 1e-4);
    EXPECT_LT(max_difference(r.final_state, *solver.state(grid.intervals())), 1e-12);
    // And it approaches the manufactured solution cos(1) sin sin.
    const Heat2D::State exact = serial.exact(1.0);
    EXPECT_LT(max_difference(r.final_state, exact), 2e-2);
  }
}

TEST(PetscHeat2D, SpaceRanksMustDivideTheRankCount) {
  const int p = world_size();
  EXPECT_THROW(problems::split_space_time(MPI_COMM_WORLD, p + 1), InvalidOption);
  EXPECT_TRUE(problems::petsc_available());
  EXPECT_NO_THROW(problems::require_petsc("PetscHeat2D", "space_ranks", "2"));
  EXPECT_THROW(problems::KspSettings::parse("gmres"), InvalidOption);
}

TEST(PetscHeat2D, StatesPackTheirLocalPart) {
  const SpaceTimeComms comms = problems::split_space_time(MPI_COMM_WORLD, world_size());
  PetscHeat2D app(comms.space.get(), kGrid, Heat2D::Method::BackwardEuler, 0.0,
                  InitialGuess::zero());
  PetscHeat2D::State u = app.exact(0.5), v;
  app.copy(u, v);
  std::vector<char> buffer(app.buffer_size(u));
  app.pack(u, buffer.data());
  app.sum(0.0, u, 0.0, v);  // v = 0
  app.unpack(buffer.data(), v);
  EXPECT_EQ(max_difference(app.gather(u), app.gather(v)), 0.0);
  double s = 0;
  for (double x : app.gather(u)) s += x * x;
  EXPECT_NEAR(app.norm(u), std::sqrt(s), 1e-14);
  EXPECT_EQ(buffer.size(), app.local_size() * sizeof(double));
}

}  // namespace
}  // namespace weft::mgrit::breadth
