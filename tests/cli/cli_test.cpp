// End-to-end tests of `weft mgrit`: the real binary runs under mpiexec at several rank counts;
// the tests check its exit code, stderr, the JSON summary (--json) and the CSV solution
// (--output) against DESIGN.md's reference figures and against sequential solves.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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

using weft::test_support::expect_relative;

void expect_residuals(const json& j, const std::vector<double>& ref, const std::string& what) {
  ASSERT_TRUE(j.contains("residuals")) << what;
  const json& r = j["residuals"];
  ASSERT_EQ(r.size(), ref.size()) << what << ": " << r.dump();
  for (std::size_t k = 0; k < ref.size(); ++k) {
    ASSERT_TRUE(r[k].is_number()) << what << " iteration " << k;
    expect_relative(r[k].get<double>(), ref[k], 1e-12, what + " iteration " + std::to_string(k));
  }
}

// A DESIGN.md figure as printed ("2.845538e-02"), or "-" where the convention measures none.
// Agreement: relative 1e-7, or half a unit in the last printed digit where the figure was
// rounded more coarsely than that.
void expect_figures(const json& j, const std::vector<std::string>& ref, const std::string& what) {
  ASSERT_TRUE(j.contains("residuals")) << what;
  const json& r = j["residuals"];
  ASSERT_EQ(r.size(), ref.size()) << what << ": " << r.dump();
  for (std::size_t k = 0; k < ref.size(); ++k) {
    const std::string at = what + " iteration " + std::to_string(k);
    if (ref[k] == "-") {
      EXPECT_TRUE(r[k].is_null()) << at;
      continue;
    }
    ASSERT_TRUE(r[k].is_number()) << at;
    const double value = std::stod(ref[k]);
    const auto e = ref[k].find_first_of("eE");
    const std::string mantissa = ref[k].substr(0, e);
    const auto dot = mantissa.find('.');
    const int decimals = dot == std::string::npos ? 0 : static_cast<int>(mantissa.size() - dot - 1);
    const int exponent = e == std::string::npos ? 0 : std::stoi(ref[k].substr(e + 1));
    const double half_unit = 0.5 * std::pow(10.0, exponent - decimals) * (1 + 1e-9);
    EXPECT_NEAR(r[k].get<double>(), value, std::max(1e-7 * std::abs(value), half_unit)) << at;
  }
}

const std::vector<std::string> kHeatReference = {"2.676924665e-03", "1.805273368e-04"};
const std::vector<std::string> kXBraidN48 = {
    "-", "5.8560697e-02", "2.4543793e-03", "1.2452604e-04", "6.7882002e-06", "3.7696134e-07"};
const std::string kXBraidN48Args =
    "--problem dahlquist --convention xbraid --nt 48 --t0 0 --t1 24 --levels 3 --cf 2 "
    "--nrelax 1 --init value:0.456 --tol 1e-6 --max-iter 100";

// ---------------------------------------------------------------------------------------------
// Reference runs

class DefaultRun : public ::testing::TestWithParam<int> {};

// No flags: the PyMGRIT heat reference of DESIGN.md (nested iteration, FCF, cf 4, 3 levels,
// 64 intervals on [0, 2]), iterated to the default tolerance: its first two residuals are the
// reference figures.
TEST_P(DefaultRun, IsTheHeatReference) {
  const fs::path dir = work_dir();
  const json j = mgrit_json(GetParam(), "", dir, "default");
  ASSERT_FALSE(j.is_null());
  json first_two = j;
  ASSERT_GE(j["residuals"].size(), 2u);
  first_two["residuals"] = json({j["residuals"][0], j["residuals"][1]});
  expect_figures(first_two, kHeatReference, "default run");
  EXPECT_EQ(j["problem"], "heat1d");
  EXPECT_EQ(j["levels"], json({64, 16, 4}));
  EXPECT_GT(j["iterations"].get<int>(), 2);
  EXPECT_EQ(j["converged"], true);
  EXPECT_LT(j["residuals"].back().get<double>(), 1e-10);
  const json& o = j["options"];
  EXPECT_EQ(o["convention"], "pymgrit");
  EXPECT_EQ(o["initial_phase"], "nested");
  EXPECT_EQ(o["nt"], 64);
  EXPECT_EQ(o["nx"], 5);
  EXPECT_EQ(o["cf"], json({4, 4, 4}));
  EXPECT_EQ(o["nrelax"], json({1, 1, 1}));
  EXPECT_EQ(o["max_iter"], 100);
  EXPECT_EQ(o["ranks"], GetParam());
  ASSERT_TRUE(j["timings"].contains("setup_seconds"));
  ASSERT_TRUE(j["timings"].contains("solve_seconds"));
  EXPECT_GE(j["timings"]["solve_seconds"].get<double>(), 0.0);
  ASSERT_EQ(j["steps_per_level"].size(), 3u);
  EXPECT_GT(j["steps_per_level"][0].get<long long>(), 0);
}

// The printed table shows the same figures.
TEST_P(DefaultRun, PrintsTheTable) {
  const fs::path dir = work_dir();
  const Outcome r = weft(GetParam(), "mgrit", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("2.676924665e-03"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1.805273368e-04"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("converged    yes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("convention   pymgrit"), std::string::npos) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Ranks, DefaultRun, ::testing::Values(1, 2));

TEST(ReferenceRuns, XBraidDahlquistN48AtThreeRanks) {
  const fs::path dir = work_dir();
  const json j = mgrit_json(3, kXBraidN48Args, dir, "n48");
  ASSERT_FALSE(j.is_null());
  expect_figures(j, kXBraidN48, "XBraid N=48");
  EXPECT_EQ(j["iterations"], 6);
  EXPECT_EQ(j["converged"], true);
  EXPECT_EQ(j["levels"], json({48, 24, 12}));
  EXPECT_EQ(j["options"]["initial_phase"], "skip");
}

// DESIGN.md's N = 24 XBraid cases: per-level nrelax lists, relaxation-only coarsest, skip 0/1.
TEST(ReferenceRuns, XBraidN24PerLevelRelaxation) {
  const fs::path dir = work_dir();
  const std::string base =
      "--problem dahlquist --convention xbraid --nt 24 --t1 12 --levels 2 --cf 2 "
      "--init value:0.456 --tol 1e-6 --max-iter 2 --nrelax-coarsest 5 ";
  expect_figures(mgrit_json(2, base + "--nrelax 1,1 --relax-only-coarsest --skip 0", dir, "a"),
                 {"3.560861e-01", "2.558119e-02"}, "relax-only skip 0");
  expect_figures(mgrit_json(2, base + "--nrelax 1,2 --relax-only-coarsest --skip 1", dir, "b"),
                 {"-", "3.240160e-02"}, "relax-only skip 1");
  expect_figures(mgrit_json(2, base + "--nrelax 1,2 --skip 0", dir, "c"),
                 {"3.560861e-01", "1.403540e-02"}, "skip 0");
}

// ---------------------------------------------------------------------------------------------
// --output

// A heat run converged far enough against the sequential solve (--levels 1).
TEST(Output, ConvergedHeatMatchesSequentialSolve) {
  const fs::path dir = work_dir();
  const std::string grid = "--problem heat1d --nx 9 --nt 40 --t1 2 ";
  const json j = mgrit_json(
      2,
      grid + "--levels 3 --cf 2 --max-iter 50 --tol 1e-13 --output " + (dir / "mgrit.csv").string(),
      dir, "mgrit");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["converged"], true);
  const json seq =
      mgrit_json(1, grid + "--levels 1 --output " + (dir / "seq.csv").string(), dir, "seq");
  ASSERT_FALSE(seq.is_null());
  EXPECT_EQ(seq["levels"], json({40}));

  const Csv a = read_csv(dir / "mgrit.csv"), b = read_csv(dir / "seq.csv");
  const std::vector<std::string> header = {"t", "u_1", "u_2", "u_3", "u_4", "u_5", "u_6", "u_7"};
  EXPECT_EQ(a.header, header);
  EXPECT_EQ(b.header, header);
  ASSERT_EQ(a.rows.size(), 41u);
  ASSERT_EQ(b.rows.size(), 41u);
  for (std::size_t i = 0; i < a.rows.size(); ++i) {
    ASSERT_EQ(a.rows[i].size(), 8u);
    EXPECT_NEAR(a.rows[i][0], 2.0 * static_cast<double>(i) / 40, 1e-14) << "row " << i;
    if (i > 0) {
      EXPECT_GT(a.rows[i][0], a.rows[i - 1][0]) << "times must increase";
    }
    EXPECT_EQ(a.rows[i][0], b.rows[i][0]);
    for (std::size_t c = 1; c < 8; ++c)
      EXPECT_NEAR(a.rows[i][c], b.rows[i][c], 1e-9) << "row " << i << " column " << c;
  }
  // The initial value is sin(pi x) at x = 0.25, 0.5, ...
  EXPECT_NEAR(a.rows[0][1], std::sin(M_PI * 0.25), 1e-15);
}

// Reverse solves start from u = 1 at t1; the result matches the sequential reverse solve.
TEST(Output, ReverseDahlquistMatchesSequentialSolve) {
  const fs::path dir = work_dir();
  const std::string base = "--problem dahlquist --lambda 0.5 --nt 32 --t1 4 --reverse ";
  const json j = mgrit_json(
      3,
      base + "--levels 3 --cf 2 --max-iter 50 --tol 1e-14 --output " + (dir / "mgrit.csv").string(),
      dir, "mgrit");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["converged"], true);
  EXPECT_EQ(j["options"]["reverse"], true);
  mgrit_json(1, base + "--levels 1 --output " + (dir / "seq.csv").string(), dir, "seq");
  const Csv a = read_csv(dir / "mgrit.csv"), b = read_csv(dir / "seq.csv");
  EXPECT_EQ(a.header, std::vector<std::string>({"t", "u"}));
  ASSERT_EQ(a.rows.size(), 33u);
  ASSERT_EQ(b.rows.size(), 33u);
  EXPECT_EQ(a.rows.front()[0], 0.0);
  EXPECT_EQ(a.rows.back()[0], 4.0);
  EXPECT_EQ(a.rows.back()[1], 1.0);  // the initial value, at t1
  // Backward Euler marching down from t1: u_i = u_{i+1} / (1 + lambda h), h = 1/8.
  EXPECT_NEAR(a.rows.front()[1], std::pow(1.0 / (1.0 + 0.5 / 8), 32), 1e-12);
  for (std::size_t i = 0; i < a.rows.size(); ++i) {
    if (i > 0) {
      EXPECT_GT(a.rows[i][0], a.rows[i - 1][0]);
    }
    EXPECT_NEAR(a.rows[i][1], b.rows[i][1], 1e-9) << "row " << i;
  }
}

// ---------------------------------------------------------------------------------------------
// --points

TEST(Points, SameAsUniformHierarchy) {
  const fs::path dir = work_dir();
  json levels = json::array();
  for (int stride : {4, 16}) {
    json list = json::array();
    for (int i = 0; i <= 64; i += stride) list.push_back(i);
    levels.push_back(list);
  }
  std::ofstream(dir / "points.json") << json({{"levels", levels}}).dump();
  const json uniform =
      mgrit_json(2, "--max-iter 4 --output " + (dir / "u.csv").string(), dir, "uniform");
  const json listed = mgrit_json(2,
                                 "--max-iter 4 --points " + (dir / "points.json").string() +
                                     " --output " + (dir / "p.csv").string(),
                                 dir, "listed");
  ASSERT_FALSE(uniform.is_null());
  ASSERT_FALSE(listed.is_null());
  EXPECT_EQ(listed["levels"], json({64, 16, 4}));
  EXPECT_EQ(listed["options"]["points"], (dir / "points.json").string());
  ASSERT_EQ(listed["residuals"].size(), 4u);
  std::vector<double> ref;
  for (const auto& r : uniform["residuals"]) ref.push_back(r.get<double>());
  expect_residuals(listed, ref, "explicit points");
  // Its first two iterations are the heat reference.
  json first_two = listed;
  first_two["residuals"] = json::array({listed["residuals"][0], listed["residuals"][1]});
  expect_figures(first_two, kHeatReference, "explicit points");
  EXPECT_EQ(slurp(dir / "u.csv"), slurp(dir / "p.csv"));
}

// A non-uniform hierarchy converges to the sequential solution.
TEST(Points, NonUniformLevelsConverge) {
  const fs::path dir = work_dir();
  std::ofstream(dir / "points.json")
      << R"({"levels": [[0, 1, 3, 6, 10, 15, 21, 24, 28, 30, 32], [0, 6, 15, 24, 32]]})";
  const json j = mgrit_json(3,
                            "--problem dahlquist --nt 32 --max-iter 30 --tol 1e-12 --points " +
                                (dir / "points.json").string(),
                            dir, "nonuniform");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["levels"], json({32, 10, 4}));
  EXPECT_EQ(j["converged"], true);
}

// ---------------------------------------------------------------------------------------------
// Rank counts beyond the problem size

// More ranks than fine points: some ranks own nothing on any level.
TEST(Ranks, MoreRanksThanFinePoints) {
  const fs::path dir = work_dir();
  const std::string args = "--problem heat1d --nt 4 --levels 2 --cf 2 --max-iter 5 --output ";
  const json one = mgrit_json(1, args + (dir / "np1.csv").string(), dir, "np1");
  const json six = mgrit_json(6, args + (dir / "np6.csv").string(), dir, "np6");
  ASSERT_FALSE(one.is_null());
  ASSERT_FALSE(six.is_null());
  EXPECT_EQ(six["levels"], json({4, 2}));
  EXPECT_EQ(six["residuals"], one["residuals"]);
  EXPECT_EQ(slurp(dir / "np1.csv"), slurp(dir / "np6.csv"));
  EXPECT_EQ(read_csv(dir / "np6.csv").rows.size(), 5u);
}

// More ranks than coarse points (the coarsest level has 5), and than fine points of a Dahlquist
// XBraid run.
TEST(Ranks, MoreRanksThanCoarsePoints) {
  const fs::path dir = work_dir();
  expect_figures(mgrit_json(7, "--max-iter 2", dir, "heat"), kHeatReference, "heat at 7 ranks");
  const json j = mgrit_json(5,
                            "--problem dahlquist --convention xbraid --nt 3 --t1 1.5 --levels 2 "
                            "--cf 2 --min-coarse 1 --init value:0.456 --max-iter 10 --tol 1e-12",
                            dir, "tiny");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["converged"], true);
}

// Every rank count gives the same residuals (C-point storage and F-cycles included).
TEST(Ranks, ResultsDoNotDependOnRankCount) {
  const fs::path dir = work_dir();
  const std::string args = "--storage cpoints --cycle F --max-iter 4 --nested 0";
  const json one = mgrit_json(1, args, dir, "np1");
  const json four = mgrit_json(4, args, dir, "np4");
  ASSERT_FALSE(one.is_null());
  ASSERT_FALSE(four.is_null());
  ASSERT_EQ(one["residuals"].size(), 4u);
  std::vector<double> ref;
  for (const auto& r : one["residuals"]) ref.push_back(r.get<double>());
  expect_residuals(four, ref, "4 ranks vs 1");
  EXPECT_EQ(four["options"]["storage"], "cpoints");
  EXPECT_EQ(four["options"]["cycle"], "F");
  EXPECT_EQ(four["options"]["initial_phase"], "none");
}

// ---------------------------------------------------------------------------------------------
// Options that change the run

TEST(Options, SequentialGuessConvergesAtOnceWithoutInitialPhase) {
  const fs::path dir = work_dir();
  const json j = mgrit_json(2, "--init sequential --nested 0 --max-iter 5", dir, "seq");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["iterations"], 1);
  EXPECT_EQ(j["converged"], true);
  EXPECT_LT(j["residuals"][0].get<double>(), 1e-12);
  EXPECT_EQ(j["options"]["init"], "sequential");
}

TEST(Options, NoResidualRunsExactlyMaxIter) {
  const fs::path dir = work_dir();
  const json j = mgrit_json(2, "--no-residual --max-iter 3", dir, "nores");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["iterations"], 3);
  EXPECT_EQ(j["converged"], false);
  EXPECT_EQ(j["residuals"], json({nullptr, nullptr, nullptr}));
  EXPECT_EQ(j["options"]["residual"], false);
}

TEST(Options, RelativeToleranceStops) {
  const fs::path dir = work_dir();
  const json j = mgrit_json(2, "--max-iter 50 --tol 0 --rtol 1e-3", dir, "rtol");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["converged"], true);
  const json& r = j["residuals"];
  EXPECT_LT(r.back().get<double>(), 1e-3 * r.front().get<double>());
  EXPECT_LT(j["iterations"].get<int>(), 50);
}

TEST(Options, PerLevelListsAreReported) {
  const fs::path dir = work_dir();
  const json j = mgrit_json(1,
                            "--nt 96 --levels 4 --cf 2,3 --nrelax 0,2 --cwt 1.5 "
                            "--tnorm inf --convention xbraid --skip 0 --max-iter 3",
                            dir, "lists");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["levels"], json({96, 48, 16, 5}));
  EXPECT_EQ(j["options"]["cf"], json({2, 3, 3, 3}));
  EXPECT_EQ(j["options"]["nrelax"], json({0, 2, 2, 2}));
  EXPECT_EQ(j["options"]["cwt"], json({1.5, 1.5, 1.5, 1.5}));
  EXPECT_EQ(j["options"]["tnorm"], "inf");
  EXPECT_EQ(j["options"]["initial_phase"], "none");
  EXPECT_TRUE(j["residuals"][0].is_number());  // skip 0: r_0 exists
}

// ---------------------------------------------------------------------------------------------
// Bad input: exit code 2 on every rank, exactly one line on stderr naming the option. Every
// case runs as a singleton (a failing mpiexec job takes seconds to tear down); a few run on
// several ranks in MultiRankBadInput.

struct BadInput {
  std::string args;
  std::string option;  // must appear in the message
};

void PrintTo(const BadInput& b, std::ostream* os) {
  *os << "'" << b.args << "'";
}

// Runs `weft mgrit ARGS` (@DIR@ stands for the test's directory) and checks the usage error.
void expect_usage_error(int np, const BadInput& bad) {
  const fs::path dir = work_dir();
  std::string args = bad.args;
  const std::string marker = "@DIR@";
  for (auto pos = args.find(marker); pos != std::string::npos; pos = args.find(marker))
    args.replace(pos, marker.size(), dir.string());
  std::ofstream(dir / "bad.json") << R"({"levels": [[0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40,)";
  std::ofstream(dir / "nolevels.json") << R"({"points": [[0, 4]]})";
  std::ofstream(dir / "notsubset.json") << R"({"levels": [[0, 4, 64], [0, 8, 64]]})";
  std::ofstream(dir / "noinitial.json") << R"({"levels": [[4, 8, 64]]})";
  std::ofstream(dir / "toomany.json") << R"({"levels": [[0, 4, 64], [0, 64], [0, 64]]})";
  const Outcome r = weft(np, "mgrit " + args, dir);
  EXPECT_EQ(r.code, 2) << "weft mgrit " << args << "\n" << r.err;
  const auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind("weft mgrit: ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(bad.option), std::string::npos) << lines[0];
  // The run never started.
  EXPECT_EQ(r.out.find("iterations"), std::string::npos) << r.out;
}

class BadInputTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadInputTest, ExitsWithUsageErrorAndOneLine) {
  expect_usage_error(0, GetParam());
}

// All ranks detect the error, return 2 and nobody hangs; only rank 0 prints.
TEST(MultiRankBadInput, CfOnThreeRanks) {
  expect_usage_error(3, {"--cf 2,x", "option --cf: '2,x' is invalid"});
}
TEST(MultiRankBadInput, PointsFileOnThreeRanks) {
  expect_usage_error(3, {"--points @DIR@/notsubset.json", "option --points"});
}

std::string name_of(const ::testing::TestParamInfo<BadInput>& info) {
  std::string name;
  for (char c : info.param.args) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return std::to_string(info.index) + "_" + name.substr(0, 40);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadInputTest,
    ::testing::Values(
        BadInput{"--cf 1", "option --cf: '1' is invalid; accepted: an integer >= 2"},
        BadInput{"--cf 2,x", "option --cf: '2,x'"}, BadInput{"--cf 2,4,4,2", "option --cf"},
        BadInput{"--nrelax 1,,2", "option --nrelax: '1,,2'"},
        BadInput{"--nrelax 1,", "option --nrelax"}, BadInput{"--nrelax -1", "option --nrelax"},
        BadInput{"--cwt 0", "option --cwt"}, BadInput{"--cwt 1,1,1,1", "option --cwt"},
        BadInput{"--levels 0", "option --levels: '0' is invalid; accepted: an integer >= 1"},
        BadInput{"--levels x", "option --levels"},
        BadInput{"--nt 0", "option --nt: '0' is invalid; accepted: an integer >= 1"},
        BadInput{"--nt 1.5", "option --nt"}, BadInput{"--tol -1e-6", "option --tol"},
        BadInput{"--rtol -1", "option --rtol"}, BadInput{"--rtol 1", "option --rtol"},
        BadInput{"--max-iter 0", "option --max-iter"},
        BadInput{"--min-coarse 0", "option --min-coarse"},
        BadInput{"--nrelax-coarsest -2", "option --nrelax-coarsest"},
        BadInput{"--problem foo",
                 "option --problem: 'foo' is invalid; accepted: heat1d, dahlquist"},
        BadInput{"--problem dahlquist --integrator rk4", "option --integrator: 'rk4'"},
        BadInput{"--integrator fe", "option --integrator"},
        BadInput{"--problem dahlquist --lambda nan", "option --lambda"},
        BadInput{"--problem dahlquist --nx 9", "option --nx"}, BadInput{"--nx 2", "option --nx"},
        BadInput{"--x1 -1", "option --x1"}, BadInput{"--t1 0", "option --t1"},
        BadInput{"--t0 abc", "option --t0"}, BadInput{"--skip 2", "option --skip"},
        BadInput{"--nested yes", "option --nested"}, BadInput{"--skip 1 --nested 1", "--nested"},
        BadInput{"--cycle W", "option --cycle"}, BadInput{"--tnorm 3", "option --tnorm"},
        BadInput{"--init value:x", "option --init"}, BadInput{"--init ones", "option --init"},
        BadInput{"--storage some", "option --storage"},
        BadInput{"--convention braid", "option --convention"},
        BadInput{"--points @DIR@/missing.json", "option --points"},
        BadInput{"--points @DIR@/bad.json", "option --points"},
        BadInput{"--points @DIR@/nolevels.json", "option --points"},
        BadInput{"--points @DIR@/notsubset.json", "option --points"},
        BadInput{"--points @DIR@/noinitial.json", "option --points"},
        BadInput{"--points @DIR@/toomany.json --levels 3", "option --points"},
        BadInput{"--json @DIR@/no/such/dir/x.json", "option --json"},
        BadInput{"--output @DIR@/no/such/dir/x.csv", "option --output"},
        BadInput{"--no-such-flag", "--no-such-flag"}, BadInput{"--nt", "--nt"}),
    name_of);

// ---------------------------------------------------------------------------------------------
// Failures of the computation and of the command line itself

TEST(Failures, DivergenceIsReportedWithExitCodeOne) {
  const fs::path dir = work_dir();
  const Outcome r = weft(
      2, "mgrit --problem dahlquist --integrator fe --lambda -100 --nt 256 --t1 256 --levels 2",
      dir);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  const auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind("weft mgrit: ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("diverged"), std::string::npos) << lines[0];
}

// A failure on one rank only (rank 0 cannot write the JSON file after the solve: the disk is
// full) aborts every rank instead of leaving the others waiting.
TEST(Failures, ErrorOnOneRankAbortsAll) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const fs::path dir = work_dir();
  const Outcome r = weft(3, "mgrit --json /dev/full", dir);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("weft: rank 0: cannot write --json file '/dev/full'"), std::string::npos)
      << r.err;
}

TEST(Failures, MissingSubcommandIsAUsageError) {
  const fs::path dir = work_dir();
  const Outcome r = weft(0, "", dir);
  EXPECT_EQ(r.code, 2);
  ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
  EXPECT_EQ(r.err_lines()[0].rfind("weft: ", 0), 0u) << r.err;
}

TEST(Help, ListsEveryFlag) {
  const fs::path dir = work_dir();
  const Outcome r = weft(1, "mgrit --help", dir);
  EXPECT_EQ(r.code, 0);
  for (const char* flag : {"--problem",    "--lambda",
                           "--integrator", "--nx",
                           "--x0",         "--x1",
                           "--t0",         "--t1",
                           "--nt",         "--levels",
                           "--cf",         "--min-coarse",
                           "--nrelax",     "--nrelax-coarsest",
                           "--cwt",        "--relax-only-coarsest",
                           "--skip",       "--nested",
                           "--cycle",      "--tol",
                           "--rtol",       "--tnorm",
                           "--max-iter",   "--no-residual",
                           "--init",       "--storage",
                           "--convention", "--points",
                           "--reverse",    "--json",
                           "--output"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}

}  // namespace
