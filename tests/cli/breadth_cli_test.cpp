// End-to-end tests of the model problems of `weft mgrit` beyond heat1d and dahlquist (linear,
// heat1d-periodic, heat2d, advection1d, brusselator), per-level integrators, space-time
// coarsening (--nx lists), --gradient and space-time parallelism (--space-ranks, PETSc): the
// real binary runs under mpiexec; the tests check exit codes, stderr, --json and --output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "expect.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

using weft::cli_test::Csv;
using weft::cli_test::mgrit_json;
using weft::cli_test::Outcome;
using weft::cli_test::read_csv;
using weft::cli_test::slurp;
using weft::cli_test::weft;
using weft::cli_test::work_dir;

std::vector<double> residuals(const json& j) {
  std::vector<double> r;
  for (const auto& x : j["residuals"]) r.push_back(x.is_number() ? x.get<double>() : -1.0);
  return r;
}

void expect_converged(const json& j, double tol, const std::string& what) {
  ASSERT_FALSE(j.is_null()) << what;
  EXPECT_EQ(j["converged"], true) << what << ": " << j["residuals"].dump();
  ASSERT_TRUE(j["final_residual"].is_number()) << what;
  EXPECT_LT(j["final_residual"].get<double>(), tol) << what;
}

// The same residual history, relative `rel` per iteration.
void expect_same_history(const json& a, const json& b, double rel, const std::string& what) {
  weft::test_support::expect_same_sequence(
      residuals(a), residuals(b), rel, 0.0,
      what + ": " + a["residuals"].dump() + " vs " + b["residuals"].dump());
}

// Two CSV solutions agree to `tol` absolute, row by row.
void expect_same_solution(const Csv& a, const Csv& b, double tol, const std::string& what) {
  EXPECT_EQ(a.header, b.header) << what;
  ASSERT_EQ(a.rows.size(), b.rows.size()) << what;
  for (std::size_t i = 0; i < a.rows.size(); ++i) {
    ASSERT_EQ(a.rows[i].size(), b.rows[i].size()) << what << " row " << i;
    for (std::size_t c = 0; c < a.rows[i].size(); ++c)
      ASSERT_NEAR(a.rows[i][c], b.rows[i][c], tol) << what << " row " << i << " column " << c;
  }
}

// ---------------------------------------------------------------------------------------------
// Every new problem runs and converges

TEST(Problems, LinearBeAndSdirk2Converge) {
  const fs::path dir = work_dir();
  for (const std::string integrator : {"be", "sdirk2"}) {
    const std::string base = "--problem linear --a -2 --b 0.5 --c 0.25 --u0 2 --nt 64 --t1 4 ";
    const json j = mgrit_json(2,
                              base + "--integrator " + integrator + " --tol 1e-12 --output " +
                                  (dir / (integrator + ".csv")).string(),
                              dir, integrator);
    expect_converged(j, 1e-12, "linear " + integrator);
    EXPECT_EQ(j["options"]["integrator"], integrator);
    EXPECT_EQ(j["options"]["a"], -2.0);
    EXPECT_EQ(j["options"]["u0"], 2.0);
    // The fixed point is the sequential solution.
    mgrit_json(1,
               base + "--integrator " + integrator + " --levels 1 --output " +
                   (dir / (integrator + "_seq.csv")).string(),
               dir, integrator + "_seq");
    const Csv a = read_csv(dir / (integrator + ".csv"));
    EXPECT_EQ(a.header, std::vector<std::string>({"t", "u"}));
    EXPECT_EQ(a.rows.front()[1], 2.0);
    expect_same_solution(a, read_csv(dir / (integrator + "_seq.csv")), 1e-10,
                         "linear " + integrator);
  }
}

// XBraid's examples/ex-06.c: u' = -4u - t + 1 on [0, 0.5], guess 0.456, its hierarchy options.
const std::string kEx06 =
    "--problem linear --a -4 --b -1 --c 1 --t1 0.5 --init value:0.456 --convention xbraid "
    "--min-coarse 8 --skip 0 ";

// XBraid's ex-06 with -periodic (docs/mgrit.md §3; reference_test has every residual at 1-4
// ranks): the command line reproduces it, reports the run as periodic and measures the error
// against the periodic solution.
TEST(Problems, LinearPeriodicIsXBraidsEx06Periodic) {
  const fs::path dir = work_dir();
  for (int np : {1, 3}) {
    const json j = mgrit_json(np,
                              kEx06 +
                                  "--nt 256 --levels 100 --cf 2 --tol 2.2583179581272428e-11 "
                                  "--periodic",
                              dir, "ex06_periodic_np" + std::to_string(np));
    expect_converged(j, 2.2583179581272428e-11, "ex-06 periodic");
    EXPECT_EQ(j["options"]["periodic"], true);
    EXPECT_EQ(j["levels"], json({256, 128, 64, 32, 16}));
    const std::vector<double> r = residuals(j);
    ASSERT_EQ(r.size(), 9u);
    EXPECT_NEAR(r[0], 7.544452e-01, 5e-7);
    EXPECT_NEAR(r[3], 2.751658e-05, 5e-12);
    EXPECT_NEAR(j["final_error"].get<double>(), 1.768e-04, 5e-7);
  }
}

// --error-estimates: the largest estimate and its time, the same at 1 and 2 ranks (XBraid's
// figure for points 1-4 of this run; reference_test has the others).
TEST(Problems, LinearErrorEstimatesAreReported) {
  const fs::path dir = work_dir();
  for (int np : {1, 2}) {
    const json j =
        mgrit_json(np, kEx06 + "--nt 32 --levels 2 --cf 4 --max-iter 3 --error-estimates", dir,
                   "estimates_np" + std::to_string(np));
    EXPECT_EQ(j["options"]["error_estimates"], 2);
    EXPECT_NEAR(j["largest_estimate"].get<double>(), 3.51428582831466e-03, 1e-12);
    EXPECT_DOUBLE_EQ(j["largest_estimate_time"].get<double>(), 0.5 / 32);
  }
}

// XBraid's ex-06 -refinet (refinement_reference_test has every cycle at 1-4 ranks): the table
// shows each refined cycle, the JSON the refinements and the final grid, the same at 1 and 3
// ranks.
TEST(Problems, LinearRefineIsXBraidsEx06Refinet) {
  const fs::path dir = work_dir();
  for (int np : {1, 3}) {
    const std::string name = "ex06_refine_np" + std::to_string(np);
    const Outcome out = weft(np,
                             "mgrit " + kEx06 +
                                 "--nt 19 --levels 100 --cf 2 --tol 2.2583179581272428e-11 "
                                 "--max-iter 9 --refine --max-intervals 400 --json " +
                                 (dir / (name + ".json")).string(),
                             dir);
    ASSERT_EQ(out.code, 0) << out.err;
    EXPECT_NE(out.out.find("     2  3.876263745e-05   1.393e-02  refined: 19 -> 38 intervals"),
              std::string::npos)
        << out.out;
    EXPECT_NE(out.out.find("     6  6.333324848e-05   3.589e-01  refinement stopped"),
              std::string::npos)
        << out.out;
    EXPECT_NE(out.out.find("refinement   5 refinements, final grid 608 intervals, 7 levels"),
              std::string::npos)
        << out.out;
    const json j = json::parse(std::ifstream(dir / (name + ".json")));
    EXPECT_EQ(j["refinements"].size(), 5u);
    EXPECT_EQ(j["final_levels"], json({608, 304, 152, 76, 38, 19, 9}));
    const std::vector<double> r = residuals(j);
    ASSERT_EQ(r.size(), 9u);
    EXPECT_NEAR(r[8], 1.762635578996885e-07, 1e-15);
    EXPECT_NEAR(j["final_error"].get<double>(), 3.0588851761120806e-04, 1e-12);
  }
}

// XBraid's ex-07 without Delta correction (lorenz_reference_test has the history and why it is
// compared to bounds): plain MGRIT stalls for about 27 iterations on the chaotic Lorenz system.
TEST(Problems, LorenzIsXBraidsEx07WithoutDeltaCorrection) {
  const fs::path dir = work_dir();
  for (int np : {1, 2}) {
    const json j = mgrit_json(
        np,
        "--problem lorenz --integrator fe --t1 10.233711524417982 --nt 2048 --init initial "
        "--convention xbraid --levels 3 --cf 2 --nrelax 0 --skip 0 "
        "--tol 1e-6",
        dir, "lorenz_np" + std::to_string(np));
    expect_converged(j, 1e-6, "ex-07 without Delta correction");
    EXPECT_EQ(j["options"]["integrator"], "fe");
    EXPECT_EQ(j["options"]["sigma"], 10.0);
    EXPECT_EQ(j["iterations"], 40);
    const std::vector<double> r = residuals(j);
    EXPECT_NEAR(r[0], 6.296418493626518e+01, 1e-12);
    EXPECT_NEAR(r[1], 7.959466877774085e+00, 1e-10);
    EXPECT_GT(r[26], 1.0);  // the stall
  }
}

// ex-07 -rank 2 (delta_reference_test has every iteration of ranks 1-3 at 1-4 ranks): Delta
// correction needs 18 iterations where plain MGRIT needs 40, and reports the exponents.
TEST(Problems, LorenzWithDeltaCorrectionIsXBraidsEx07Rank2) {
  const fs::path dir = work_dir();
  for (int np : {1, 2}) {
    const std::string name = "lorenz_delta_np" + std::to_string(np);
    const Outcome out = weft(np,
                             "mgrit --problem lorenz --integrator fe --t1 10.233711524417982 "
                             "--nt 2048 --init initial --convention xbraid --levels 3 --cf 2 "
                             "--nrelax 0 --skip 0 --tol 1e-6 --delta-rank 2 --json " +
                                 (dir / (name + ".json")).string(),
                             dir);
    ASSERT_EQ(out.code, 0) << out.err;
    EXPECT_NE(out.out.find("Delta correction (rank 2, Lyapunov estimation)"), std::string::npos)
        << out.out;
    EXPECT_NE(out.out.find("Lyapunov     0.683315, 0.132332"), std::string::npos) << out.out;
    const json j = json::parse(std::ifstream(dir / (name + ".json")));
    expect_converged(j, 1e-6, "ex-07 -rank 2");
    EXPECT_EQ(j["iterations"], 18);
    EXPECT_EQ(j["options"]["delta_rank"], 2);
    const std::vector<double> r = residuals(j);
    EXPECT_NEAR(r[11], 1.212798452995345e+00, 1e-13);
    EXPECT_NEAR(r[17], 5.925011200877017e-07, 1e-20);
    ASSERT_EQ(j["lyapunov_exponents"].size(), 2u);
    EXPECT_NEAR(j["lyapunov_exponents"][0].get<double>(), 0.68331508416336, 1e-12);
    EXPECT_NEAR(j["lyapunov_exponents"][1].get<double>(), 0.13233154002151645, 1e-12);
  }
}

TEST(Problems, Heat1DPeriodicConverges) {
  const fs::path dir = work_dir();
  for (const std::string integrator : {"be", "cn,be"}) {
    const json j =
        mgrit_json(2, "--problem heat1d-periodic --integrator " + integrator, dir, "periodic");
    expect_converged(j, 1e-10, "heat1d-periodic " + integrator);
    EXPECT_EQ(j["options"]["nx"], 33);
  }
}

TEST(Problems, BrusselatorRk4Converges) {
  const fs::path dir = work_dir();
  const json j = mgrit_json(2,
                            "--problem brusselator --A 1.5 --B 3 --cf 2 --nt 96 --t1 6 "
                            "--tol 1e-12 --output " +
                                (dir / "b.csv").string(),
                            dir, "bru");
  expect_converged(j, 1e-12, "brusselator");
  EXPECT_EQ(j["options"]["integrator"], "rk4");
  EXPECT_EQ(j["options"]["A"], 1.5);
  const Csv csv = read_csv(dir / "b.csv");
  EXPECT_EQ(csv.header, std::vector<std::string>({"t", "u_1", "u_2"}));
  ASSERT_EQ(csv.rows.size(), 97u);
  EXPECT_EQ(csv.rows.front()[1], 0.0);
  EXPECT_EQ(csv.rows.front()[2], 1.0);
  mgrit_json(1,
             "--problem brusselator --A 1.5 --cf 2 --nt 96 --t1 6 --levels 1 --output " +
                 (dir / "seq.csv").string(),
             dir, "seq");
  expect_same_solution(csv, read_csv(dir / "seq.csv"), 1e-10, "brusselator");
}

TEST(Problems, DahlquistPerLevelIntegrators) {
  const fs::path dir = work_dir();
  const json j = mgrit_json(3,
                            "--problem dahlquist --integrator mr,be --nt 64 --t1 5 --tol 1e-12 "
                            "--output " +
                                (dir / "mr.csv").string(),
                            dir, "mrbe");
  expect_converged(j, 1e-12, "dahlquist mr,be");
  EXPECT_EQ(j["options"]["integrator"], "mr,be");
  // The fixed point is the fine (midpoint) solution ((1 - h/2)/(1 + h/2))^64.
  const double h = 5.0 / 64;
  EXPECT_NEAR(read_csv(dir / "mr.csv").rows.back()[1], std::pow((1 - h / 2) / (1 + h / 2), 64),
              1e-12);
}

// Advection is the hard case: implicit upwind converges, slowly (docs/mgrit-problems.md §5).
TEST(Problems, Advection1DConvergesSlowly) {
  const fs::path dir = work_dir();
  const json j = mgrit_json(
      2, "--problem advection1d --nt 256 --t1 4 --levels 4 --cf 2 --max-iter 100", dir, "adv");
  expect_converged(j, 1e-10, "advection1d be");
  EXPECT_EQ(j["options"]["nx"], 64);
  const auto r = residuals(j);
  ASSERT_GE(r.size(), 2u);
  const double mean = std::pow(r.back() / r.front(), 1.0 / static_cast<double>(r.size() - 1));
  std::cout << "advection1d be: " << j["iterations"] << " iterations, mean factor " << mean << "\n";
  RecordProperty("mean_factor", std::to_string(mean));
  EXPECT_GT(j["iterations"].get<int>(), 12);  // slow: heat needs ~5 on such grids
  EXPECT_GT(mean, 0.1);
  EXPECT_LT(mean, 0.9);
}

// ---------------------------------------------------------------------------------------------
// heat2d

TEST(Heat2D, BeAndCnConvergeAtOneAndTwoRanks) {
  const fs::path dir = work_dir();
  for (const std::string integrator : {"be", "cn"}) {
    const std::string args = "--problem heat2d --nx 17 --ny 13 --lx 2 --integrator " + integrator;
    const json one = mgrit_json(1, args, dir, integrator + "1");
    const json two = mgrit_json(2, args, dir, integrator + "2");
    expect_converged(one, 1e-10, "heat2d " + integrator + " 1 rank");
    expect_converged(two, 1e-10, "heat2d " + integrator + " 2 ranks");
    expect_same_history(two, one, 1e-8, "heat2d " + integrator + " 2 ranks vs 1");
    EXPECT_EQ(two["options"]["ny"], 13);
    EXPECT_EQ(two["options"]["lx"], 2.0);
  }
}

// Space-time parallel: 2 time groups of 2 space ranks give what 1 rank gives (PETSc, LU).
TEST(Heat2D, SpaceRanksMatchOneRank) {
  const fs::path dir = work_dir();
  const std::string args = "--problem heat2d --nx 17 --ksp lu --integrator cn,be --output ";
  const json one = mgrit_json(1, args + (dir / "np1.csv").string(), dir, "np1");
  ASSERT_FALSE(one.is_null());
  if (one["options"]["petsc"] == false) GTEST_SKIP() << "built without PETSc";
  Outcome run4;
  const json four =
      mgrit_json(4, args + (dir / "np4.csv").string() + " --space-ranks 2", dir, "np4", &run4);
  expect_converged(one, 1e-10, "1 rank");
  expect_converged(four, 1e-10, "4 ranks, 2 space ranks");
  expect_same_history(four, one, 1e-10, "space ranks 2 vs 1 rank");
  EXPECT_EQ(four["options"]["space_ranks"], 2);
  EXPECT_EQ(four["options"]["ksp"], "lu");
  // Printed once (world rank 0), and the solution written once, complete.
  std::size_t headers = 0;
  for (auto pos = run4.out.find("weft mgrit:"); pos != std::string::npos;
       pos = run4.out.find("weft mgrit:", pos + 1))
    ++headers;
  EXPECT_EQ(headers, 1u) << run4.out;
  const Csv a = read_csv(dir / "np4.csv"), b = read_csv(dir / "np1.csv");
  ASSERT_EQ(a.rows.size(), 65u);
  ASSERT_EQ(a.header.size(), 1u + 15 * 15);
  expect_same_solution(a, b, 1e-12, "space ranks 2 vs 1 rank");
}

// A KSP failure is weft::Divergence: exit 1, one line, with one time group; with several time
// groups (the others wait for the failing one) every rank aborts with exit 1, none hangs.
TEST(Heat2D, KspFailureExitsWithOne) {
  const fs::path dir = work_dir();
  if (weft(0, "mgrit --problem heat2d --nx 5 --nt 4 --ksp cg", dir).code != 0)
    GTEST_SKIP() << "built without PETSc";
  setenv("PETSC_OPTIONS", "-heat2d_ksp_max_it 1", 1);
  const Outcome one_group = weft(2, "mgrit --problem heat2d --nx 9 --space-ranks 2", dir);
  const Outcome two_groups = weft(4, "mgrit --problem heat2d --nx 9 --space-ranks 2", dir);
  unsetenv("PETSC_OPTIONS");
  EXPECT_EQ(one_group.code, 1) << one_group.out << one_group.err;
  ASSERT_EQ(one_group.err_lines().size(), 1u) << one_group.err;
  EXPECT_EQ(one_group.err_lines()[0].rfind("weft mgrit: PetscHeat2D: the KSP solve", 0), 0u)
      << one_group.err;
  EXPECT_EQ(two_groups.code, 1) << two_groups.out << two_groups.err;
  EXPECT_NE(two_groups.err.find("did not converge"), std::string::npos) << two_groups.err;
}

// ---------------------------------------------------------------------------------------------
// Space-time coarsening: heat1d with one grid per level converges to the fine sequential solve.

TEST(Heat1D, SpatialCoarseningMatchesSequentialSolve) {
  const fs::path dir = work_dir();
  const std::string grid = "--problem heat1d --nt 64 --t1 2 --kappa 0.8 ";
  const json j = mgrit_json(
      2,
      grid + "--nx 17,9,5 --cf 2 --tol 1e-13 --max-iter 60 --output " + (dir / "st.csv").string(),
      dir, "st");
  expect_converged(j, 1e-13, "heat1d 17,9,5");
  EXPECT_EQ(j["options"]["nx"], 17);
  EXPECT_EQ(j["options"]["nx_per_level"], json({17, 9, 5}));
  EXPECT_EQ(j["options"]["kappa"], 0.8);
  mgrit_json(1, grid + "--nx 17 --levels 1 --output " + (dir / "seq.csv").string(), dir, "seq");
  const Csv a = read_csv(dir / "st.csv");
  ASSERT_EQ(a.header.size(), 16u);  // t, 15 interior unknowns of the fine grid
  ASSERT_EQ(a.rows.size(), 65u);
  expect_same_solution(a, read_csv(dir / "seq.csv"), 1e-8, "heat1d 17,9,5 vs sequential");
}

// ---------------------------------------------------------------------------------------------
// --gradient

// Backward Euler: u_N = (1 - lambda h)^-N, J = u_N^2 / 2, dJ/dlambda = u_N N h (1 - lambda h)^-N-1.
TEST(Gradient, DahlquistMatchesClosedForm) {
  const fs::path dir = work_dir();
  const double lambda = -0.7, t1 = 3.0;
  const int n = 48;
  const double h = t1 / n, u = std::pow(1 - lambda * h, -n);
  const double objective = 0.5 * u * u, gradient = u * n * h * std::pow(1 - lambda * h, -n - 1);
  for (int np : {1, 3}) {
    Outcome r;
    const json j = mgrit_json(np,
                              "--problem dahlquist --lambda -0.7 --nt 48 --t1 3 --cf 2 "
                              "--tol 1e-14 --gradient",
                              dir, "np" + std::to_string(np), &r);
    ASSERT_FALSE(j.is_null());
    EXPECT_EQ(j["parameter"], "lambda");
    EXPECT_EQ(j["options"]["gradient"], true);
    EXPECT_EQ(j["adjoint"]["converged"], true);
    EXPECT_NEAR(j["objective"].get<double>(), objective, 1e-10 * objective) << np << " ranks";
    EXPECT_NEAR(j["gradient"].get<double>(), gradient, 1e-10 * gradient) << np << " ranks";
    EXPECT_NE(r.out.find("dJ/dlambda = "), std::string::npos) << r.out;
  }
}

// The kappa gradient with spatial coarsening equals the sequential one (one level).
TEST(Gradient, Heat1DKappaIndependentOfTheHierarchy) {
  const fs::path dir = work_dir();
  const std::string base = "--kappa 0.7 --integrator cn --nt 32 --t1 1 --tol 1e-13 --gradient ";
  const json seq = mgrit_json(1, base + "--nx 17 --levels 1", dir, "seq");
  const json par = mgrit_json(3, base + "--nx 17,9 --cf 2", dir, "par");
  ASSERT_FALSE(seq.is_null());
  ASSERT_FALSE(par.is_null());
  EXPECT_EQ(par["parameter"], "kappa");
  const double g = seq["gradient"].get<double>();
  EXPECT_NE(g, 0.0);
  EXPECT_NEAR(par["gradient"].get<double>(), g, 1e-8 * std::abs(g));
  EXPECT_NEAR(par["objective"].get<double>(), seq["objective"].get<double>(),
              1e-10 * seq["objective"].get<double>());
}

// ---------------------------------------------------------------------------------------------
// Bad input: exit 2, one line on stderr naming the option, no run.

struct BadInput {
  int np;
  std::string args;
  std::string option;
};

void PrintTo(const BadInput& b, std::ostream* os) {
  *os << b.np << " ranks: '" << b.args << "'";
}

class BreadthBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(BreadthBadInput, ExitsWithUsageErrorAndOneLine) {
  const BadInput& bad = GetParam();
  const fs::path dir = work_dir();
  const Outcome r = weft(bad.np, "mgrit " + bad.args, dir);
  EXPECT_EQ(r.code, 2) << bad.args << "\n" << r.out << r.err;
  const auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind("weft mgrit: ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(bad.option), std::string::npos) << lines[0];
  EXPECT_EQ(r.out.find("iterations"), std::string::npos) << r.out;
}

std::string bad_name(const ::testing::TestParamInfo<BadInput>& info) {
  std::string name;
  for (char c : info.param.args) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return std::to_string(info.index) + "_np" + std::to_string(info.param.np) + "_" +
         name.substr(0, 40);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BreadthBadInput,
    ::testing::Values(
        BadInput{0, "--problem dahlquist --integrator be,be,be,be --levels 2", "--integrator"},
        BadInput{0, "--nx 17,10", "option --nx: '17,10'"},
        BadInput{0, "--nx 17,9,5 --levels 2", "option --nx"},
        BadInput{4, "--problem heat2d --space-ranks 3", "option --space-ranks: '3'"},
        BadInput{0, "--problem heat2d --space-ranks 0", "option --space-ranks"},
        BadInput{0, "--problem heat2d --gradient", "--problem heat2d"},
        BadInput{2, "--problem brusselator --gradient", "--problem brusselator"},
        BadInput{0, "--problem dahlquist --gradient --reverse", "--reverse"},
        BadInput{0, "--gradient --output x.csv", "--output"},
        BadInput{0, "--problem heat2d --ksp qr", "option --ksp"},
        BadInput{0, "--problem heat2d --lx 0", "option --lx"},
        BadInput{0, "--problem heat2d --ny 2", "option --ny"},
        BadInput{0, "--problem heat2d --space-ranks 2", "option --space-ranks"},
        BadInput{0, "--problem linear --A 2", "option --A"},
        BadInput{0, "--problem brusselator --a 2", "option --a"},
        BadInput{0, "--problem brusselator --B x", "option --B"},
        BadInput{0, "--problem brusselator --integrator be", "option --integrator: 'be'"},
        BadInput{0, "--problem linear --integrator sdirk2,cn", "option --integrator"},
        BadInput{0, "--problem advection1d --speed 0", "option --speed"},
        BadInput{0, "--problem advection1d --nx 1.5", "option --nx"},
        BadInput{0, "--problem heat1d-periodic --kappa 2", "option --kappa"},
        BadInput{0, "--kappa -1", "option --kappa"},
        BadInput{3, "--problem linear --integrator be,be,be,be", "--integrator"},
        BadInput{0, "--problem linear --periodic --init sequential",
                 "option --periodic: not with --init sequential"},
        BadInput{0, "--problem linear --periodic --convention xbraid --richardson",
                 "option --periodic: not with --richardson"},
        BadInput{2, "--problem linear --periodic --nt 30 --cf 4",
                 "option --periodic: needs each level's intervals divisible"},
        BadInput{2, "--problem linear --periodic --nt 8 --min-coarse 8",
                 "option --periodic: needs two or more levels"},
        BadInput{0, "--problem heat1d --error-estimates", "option --error-estimates"},
        BadInput{0, "--problem heat1d --refine", "option --refine: not available"},
        BadInput{0, "--problem linear --refine --periodic", "option --refine: not with"},
        BadInput{0, "--problem linear --max-intervals 100", "option --max-intervals: needs"},
        BadInput{0, "--problem linear --refine --refine-fraction 2",
                 "option --refine-fraction: '2' is invalid"},
        BadInput{0, "--problem linear --init initial", "option --init: 'initial' is invalid"},
        BadInput{0, "--problem lorenz --integrator rk2", "option --integrator: 'rk2'"},
        BadInput{0, "--problem lorenz --convention xbraid --delta-rank 4",
                 "option --delta-rank: '4' is invalid"},
        BadInput{0, "--problem lorenz --delta-rank 1", "option --delta-rank: needs --convention"},
        BadInput{0, "--problem linear --convention xbraid --delta-rank 1",
                 "option --delta-rank: not available"},
        BadInput{0, "--problem lorenz --convention xbraid --delta-rank 1 --reverse",
                 "option --delta-rank: not with --reverse"},
        BadInput{0, "--problem lorenz --delta-static", "option --delta-static: needs"},
        BadInput{0, "--problem lorenz --delta-relax", "option --delta-relax: needs"}),
    bad_name);

TEST(Help, ListsTheNewFlags) {
  const fs::path dir = work_dir();
  const Outcome r = weft(1, "mgrit --help", dir);
  EXPECT_EQ(r.code, 0);
  for (const char* flag : {"--kappa",
                           "--ny",
                           "--lx",
                           "--ly",
                           "--space-ranks",
                           "--ksp",
                           "--a",
                           "--b",
                           "--c",
                           "--u0",
                           "--A",
                           "--B",
                           "--speed",
                           "--gradient",
                           "heat1d-periodic",
                           "advection1d",
                           "brusselator",
                           "--delta-rank",
                           "--delta-static",
                           "--delta-relax"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}

}  // namespace
