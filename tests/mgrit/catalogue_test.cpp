// The catalogue of model problems (weft/mgrit/problems/catalogue.hpp): complete entries, each
// built from its defaults; errors that name the parameter; runs that reproduce the reference
// figures and the sequential solution; a gradient run that agrees with its own forward solve.
#include "weft/mgrit/problems/catalogue.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "weft/util/error.hpp"

namespace weft::mgrit::problems {
namespace {

std::string exact_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", x);
  return buf;
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

TEST(Catalogue, EveryEntryHasEveryField) {
  ASSERT_GE(catalogue().size(), 7u);
  std::set<std::string> names;
  for (const CatalogueEntry& e : catalogue()) {
    ASSERT_NE(e.name, nullptr);
    SCOPED_TRACE(e.name);
    EXPECT_TRUE(names.insert(e.name).second) << "listed twice";
    ASSERT_NE(e.summary, nullptr);
    EXPECT_GT(std::string(e.summary).size(), 5u);
    EXPECT_NE(e.make, nullptr);
    EXPECT_EQ(find_problem(e.name), &e);
    std::set<std::string> parameters;
    for (const Parameter& p : e.parameters) {
      ASSERT_NE(p.name, nullptr);
      SCOPED_TRACE(p.name);
      EXPECT_TRUE(parameters.insert(p.name).second) << "listed twice";
      EXPECT_EQ(std::string(p.name).find_first_of(" -"), std::string::npos)
          << "a library name: front ends derive their flags from it";
      ASSERT_NE(p.type, nullptr);
      EXPECT_FALSE(std::string(p.type).empty());
      ASSERT_NE(p.fallback, nullptr);
      ASSERT_NE(p.help, nullptr);
      EXPECT_FALSE(std::string(p.help).empty());
    }
    EXPECT_EQ(parameters.count("integrator"), 1u);
  }
  EXPECT_EQ(find_problem("no-such-problem"), nullptr);
}

TEST(Catalogue, EveryEntryBuildsFromItsDefaultsAndDescribesItself) {
  for (const CatalogueEntry& e : catalogue()) {
    SCOPED_TRACE(e.name);
    const auto problem = make_problem(e.name);
    ASSERT_NE(problem, nullptr);
    const std::string text = problem->describe();
    EXPECT_EQ(text.rfind(std::string(e.name) + ": ", 0), 0u) << text;
    EXPECT_NE(text.find("integrator "), std::string::npos) << text;
    const auto values = problem->parameters();
    EXPECT_FALSE(values.empty());
    // Every reported parameter is the problem's own (or derived from one: "nx_per_level").
    for (const auto& [name, value] : values) {
      bool known = false;
      for (const Parameter& p : e.parameters) known = known || name.rfind(p.name, 0) == 0;
      EXPECT_TRUE(known || name == "petsc") << name;
    }
  }
}

TEST(Catalogue, ErrorsNameTheParameter) {
  auto option_of = [](const std::string& problem, std::map<std::string, std::string> given) {
    try {
      make_problem(problem, given);
    } catch (const InvalidOption& e) {
      return e.option() + " | " + e.what();
    }
    return std::string("no error");
  };
  EXPECT_EQ(option_of("dahlquist", {{"lambda", "nan"}}).rfind("lambda | ", 0), 0u);
  EXPECT_NE(option_of("heat1d", {{"x1", "-1"}}).find("x1 | heat1d: x1 '-1' is invalid"),
            std::string::npos)
      << option_of("heat1d", {{"x1", "-1"}});
  EXPECT_EQ(option_of("heat1d", {{"kappa", "0"}}).rfind("kappa | ", 0), 0u);
  EXPECT_EQ(option_of("advection1d", {{"speed", "0"}}).rfind("speed | ", 0), 0u);
  EXPECT_EQ(option_of("heat2d", {{"ksp", "gmres"}}).rfind("ksp | ", 0), 0u);
  // A parameter of another problem, and an unknown problem.
  const std::string other = option_of("heat1d-periodic", {{"kappa", "2"}});
  EXPECT_EQ(other.rfind("kappa | ", 0), 0u) << other;
  EXPECT_NE(other.find("accepted: integrator, nx"), std::string::npos) << other;
  EXPECT_NE(option_of("heat3d", {}).find("'heat3d' is unknown; accepted: heat1d, dahlquist"),
            std::string::npos);
}

// The catalogue's default problem with PyMGRIT's settings reproduces PyMGRIT's heat reference
// (shared/DESIGN.md; tests/mgrit/reference_test.cpp runs the same figures on the App itself).
TEST(Catalogue, DefaultRunReproducesThePyMgritHeatReference) {
  auto heat = make_problem(catalogue().front().name);
  RunSettings run;  // [0, 2], 64 intervals
  run.options.convention(Convention::PyMGRIT).max_levels(3).cfactor(4).nrelax(1);
  run.options.abs_tol(1e-10).max_iterations(2);
  int setups = 0;
  run.on_setup = [&](const RunSummary& setup) {
    ++setups;
    EXPECT_EQ(setup.intervals, (std::vector<index_t>{64, 16, 4}));
    EXPECT_TRUE(setup.result.residuals.empty()) << "called before the solve";
  };
  const RunSummary sum = heat->run(run, MPI_COMM_WORLD);
  EXPECT_EQ(setups, world_rank() == 0 ? 1 : 0);
  ASSERT_EQ(sum.result.residuals.size(), 2u);
  EXPECT_NEAR(*sum.result.residuals[0], 2.676924665e-03, 5e-13);
  EXPECT_NEAR(*sum.result.residuals[1], 1.805273368e-04, 5e-13);
  EXPECT_EQ(sum.cf_built, (std::vector<int>{4, 4, 4}));
  if (world_rank() == 0) {
    ASSERT_EQ(sum.steps.size(), 3u);
    EXPECT_GT(sum.steps[0], 0);
    EXPECT_GE(sum.solve, sum.step);
  }
}

// The recorded solution of a converged multilevel run is the sequential solution, at every
// fine point, gathered on rank 0 only.
TEST(Catalogue, RecordedSolutionIsTheSequentialSolution) {
  auto dahlquist = make_problem("dahlquist", {{"lambda", "-0.7"}, {"integrator", "be"}});
  RunSettings run;
  run.t1 = 3;
  run.nt = 24;
  run.record_solution = true;
  run.options.max_levels(1);
  const RunSummary sequential = dahlquist->run(run, MPI_COMM_SELF);
  run.options.max_levels(3).cfactor(2).abs_tol(1e-13).max_iterations(50);
  const RunSummary parallel = dahlquist->run(run, MPI_COMM_WORLD);
  ASSERT_EQ(sequential.solution.size(), 25u);
  EXPECT_EQ(sequential.width, 1);
  if (world_rank() != 0) {
    EXPECT_TRUE(parallel.solution.empty());
    return;
  }
  EXPECT_TRUE(parallel.result.converged);
  ASSERT_EQ(parallel.solution.size(), 25u);
  double u = 1;  // backward Euler by hand: u_{n+1} = u_n / (1 + 0.7 h), h = 1/8
  for (const auto& [n, point] : parallel.solution) {
    EXPECT_DOUBLE_EQ(point.t, 3.0 * static_cast<double>(n) / 24);
    ASSERT_EQ(point.values.size(), 1u);
    EXPECT_NEAR(point.values[0], sequential.solution.at(n).values[0], 1e-12) << n;
    EXPECT_NEAR(point.values[0], u, 1e-12) << n;
    u /= 1 + 0.7 * 0.125;
  }
}

// J = |u_N|^2 / 2 of the gradient run is the forward solve's; dJ/dlambda agrees with a central
// difference of J over lambda (both through the catalogue).
TEST(Catalogue, GradientRunAgreesWithItsForwardSolve) {
  RunSettings run;
  run.t1 = 2;
  run.nt = 32;
  run.options.max_levels(2).cfactor(4).abs_tol(1e-13).max_iterations(60);
  run.gradient = true;
  auto objective = [&](double lambda) {
    RunSettings forward = run;
    forward.gradient = false;
    forward.record_solution = true;
    auto p = make_problem("dahlquist", {{"lambda", exact_text(lambda)}});
    const RunSummary sum = p->run(forward, MPI_COMM_SELF);
    const double uN = sum.solution.rbegin()->second.values[0];
    return 0.5 * uN * uN;
  };
  const RunSummary g = make_problem("dahlquist", {{"lambda", "-0.5"}})->run(run, MPI_COMM_WORLD);
  ASSERT_TRUE(g.objective && g.gradient);
  EXPECT_EQ(g.parameter, "lambda");
  EXPECT_NEAR(*g.objective, objective(-0.5), 1e-12);
  const double h = 1e-5;
  EXPECT_NEAR(*g.gradient, (objective(-0.5 + h) - objective(-0.5 - h)) / (2 * h), 1e-7);
  // The gradient is not offered where the catalogue has no parameter for it.
  EXPECT_EQ(find_problem("linear")->gradient_parameter, nullptr);
}

}  // namespace
}  // namespace weft::mgrit::problems
