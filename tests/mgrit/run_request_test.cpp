// A catalogue run described by text (weft/mgrit/problems/run_request.hpp): the defaults are the
// PyMGRIT heat reference run; every bad value is an InvalidOption naming it, with other names
// spelled as the front end spells them; explicit coarse levels are checked against the grid;
// and the run's JSON record (weft/report/mgrit_record.hpp) holds what the run did.
#include "weft/mgrit/problems/run_request.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "weft/report/mgrit_record.hpp"
#include "weft/util/error.hpp"

namespace weft::mgrit::problems {
namespace {

// "option NAME | DETAIL" of the error parse_run throws for `text`, or "no error".
std::string error_of(RunText text) {
  try {
    parse_run(text);
  } catch (const InvalidOption& e) {
    return e.option() + " | " + e.detail();
  }
  return "no error";
}

RunText given(std::map<std::string, std::string> values) {
  RunText t;
  t.values = std::move(values);
  return t;
}

TEST(RunRequest, TheDefaultsAreThePyMgritHeatReferenceIteratedToTheTolerance) {
  RunRequest r = parse_run(RunText{});
  EXPECT_EQ(r.problem, "heat1d");
  EXPECT_EQ(r.integrator, "be");
  EXPECT_EQ(r.settings.nt, 64);
  EXPECT_EQ(r.levels, 3);
  EXPECT_EQ(r.cf, (std::vector<int>{4}));
  EXPECT_EQ(r.convention, Convention::PyMGRIT);
  EXPECT_EQ(r.settings.options.effective_initial_phase(), InitialPhase::Nested);
  r.settings.options.max_iterations(2);
  const RunSummary sum = r.instance->run(r.settings, MPI_COMM_WORLD);
  ASSERT_EQ(sum.result.residuals.size(), 2u);
  EXPECT_NEAR(*sum.result.residuals[0], 2.676924665e-03, 5e-13);
  EXPECT_NEAR(*sum.result.residuals[1], 1.805273368e-04, 5e-13);
}

TEST(RunRequest, PerLevelListsSkipAndConventionReachTheOptions) {
  RunText t = given({{"problem", "dahlquist"},
                     {"cf", "2,4"},
                     {"nrelax", "0,1"},
                     {"cwt", "1.5"},
                     {"convention", "xbraid"},
                     {"skip", "0"},
                     {"tnorm", "inf"},
                     {"storage", "cpoints"},
                     {"init", "sequential"}});
  t.reverse = true;
  const RunRequest r = parse_run(t);
  const Options& o = r.settings.options;
  EXPECT_EQ(o.cfactor_at(0), 2);
  EXPECT_EQ(o.cfactor_at(1), 4);
  EXPECT_EQ(o.cfactor_at(2), 4) << "the last value repeats";
  EXPECT_EQ(o.nrelax_at(0), 0);
  EXPECT_EQ(o.nrelax_at(1), 1);
  EXPECT_DOUBLE_EQ(o.cweight_at(2), 1.5);
  EXPECT_EQ(o.effective_initial_phase(), InitialPhase::None) << "xbraid skips; skip 0 undoes it";
  EXPECT_EQ(o.direction(), Direction::Reverse);
  EXPECT_EQ(o.initial_guess(), mgrit::InitialGuess::Sequential);
  EXPECT_DOUBLE_EQ(r.settings.t_start(), 2.0);
}

TEST(RunRequest, EveryBadValueIsNamedAndOtherNamesAreSpelledAsTheFrontEndSpellsThem) {
  EXPECT_EQ(error_of(given({{"cf", "1"}})),
            "cf | '1' is invalid; accepted: an integer >= 2, or a comma list of them, one per "
            "level (at most levels values)");
  RunText spelled = given({{"cf", "2,3,4,5"}});
  spelled.spell = [](const std::string& name) { return "--" + name; };
  EXPECT_EQ(error_of(spelled),
            "cf | '2,3,4,5' is invalid (4 values for 3 levels); accepted: an integer >= 2, or a "
            "comma list of them, one per level (at most --levels values)");
  EXPECT_EQ(error_of(given({{"t1", "-1"}})),
            "t1 | '-1' is invalid; accepted: a finite number > t0 (0); use reverse to solve "
            "backward");
  EXPECT_EQ(error_of(given({{"skip", "1"}, {"nested", "1"}})).rfind("nested | '1' is invalid", 0),
            0u);
  EXPECT_EQ(error_of(given({{"lambda", "2"}})),
            "lambda | '2' is invalid (not used by problem heat1d); accepted: only with problem "
            "dahlquist");
  EXPECT_EQ(error_of(given({{"problem", "heat3d"}})).rfind("problem | 'heat3d' is invalid", 0), 0u);
  EXPECT_EQ(error_of(given({{"tnorm", "3"}})), "tnorm | '3' is invalid; accepted: 1, 2, inf");
  EXPECT_EQ(error_of(given({{"max_iter", "0"}})).rfind("max_iter | ", 0), 0u);
  RunText gradient = given({{"problem", "linear"}});
  gradient.gradient = true;
  EXPECT_EQ(error_of(gradient).rfind("gradient | not available for problem linear", 0), 0u);
  gradient.values["problem"] = "dahlquist";
  gradient.reverse = true;
  EXPECT_EQ(error_of(gradient).rfind("gradient | not with reverse", 0), 0u);
  EXPECT_EQ(error_of(given({{"init", "bogus"}})).rfind("guess | ", 0), 0u)
      << "the guess's own parser names it";
}

TEST(RunRequest, ExplicitCoarseLevelsAreCheckedAgainstTheGrid) {
  RunText t = given({{"nt", "8"}, {"points", "levels.json"}});
  t.points = {{0, 2, 4, 6, 8}, {0, 4, 8}};
  const RunRequest r = parse_run(t);
  EXPECT_EQ(r.levels, 3) << "the points fix the levels";
  t.points = {{0, 4, 12}};
  EXPECT_EQ(error_of(t),
            "points | 'levels.json' is invalid (level 1: index 12 is outside [0, nt]); accepted: "
            "per coarse level, strictly increasing fine indices in [0, nt], a subset of the level "
            "above, containing the initial point");
  t.points = {{2, 4}};
  EXPECT_NE(error_of(t).find("level 1 lacks the initial point 0"), std::string::npos);
  t.reverse = true;
  t.points = {{0, 4}};
  EXPECT_NE(error_of(t).find("lacks the initial point 8"), std::string::npos);
  t.reverse = false;
  t.values["levels"] = "2";
  t.points = {{0, 4, 8}, {0, 8}};
  EXPECT_NE(error_of(t).find("it gives 3 levels, levels is 2"), std::string::npos);
}

// XBraid's examples/ex-06.c as a run request (the values below), with `changes` on top.
RunText ex06(const std::map<std::string, std::string>& changes = {}) {
  std::map<std::string, std::string> values = {{"problem", "linear"},
                                               {"a", "-4"},
                                               {"b", "-1"},
                                               {"c", "1"},
                                               {"t1", "0.5"},
                                               {"nt", "256"},
                                               {"init", "value:0.456"},
                                               {"convention", "xbraid"},
                                               {"levels", "100"},
                                               {"min_coarse", "8"},
                                               {"cf", "2"},
                                               {"skip", "0"},
                                               {"tol", "2.2583179581272428e-11"}};
  for (const auto& [name, value] : changes) values[name] = value;
  return given(values);
}

// XBraid's examples/ex-06.c without -richardson: u' = -4u - t + 1, u(0) = 1 on [0, 0.5], 256
// backward Euler steps, guess 0.456, cf 2 down to 8 points, FCF, absolute tolerance
// 1e-12 / sqrt(0.5 / 255) (ex-06 divides by its default dt). Its final discretization error is
// 7.260e-04 (the figure issue 29 quotes); a problem without a closed form records none.
TEST(RunRequest, TheFinalErrorIsTheDiscretizationErrorOfXBraidsEx06) {
  const RunRequest r = parse_run(ex06());
  const RunSummary sum = r.instance->run(r.settings, MPI_COMM_WORLD);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    EXPECT_TRUE(sum.result.converged);
    ASSERT_TRUE(sum.final_error);
    EXPECT_NEAR(*sum.final_error, 7.260e-04, 5e-7);
    EXPECT_DOUBLE_EQ(sum.final_time, 0.5);
    const nlohmann::json j = nlohmann::json::parse(report::mgrit_run_record(r, sum, "", 1));
    EXPECT_EQ(j["final_error"].get<double>(), *sum.final_error);
  }
  const RunRequest d = parse_run(given({{"problem", "dahlquist"}, {"nt", "16"}}));
  const RunSummary none = d.instance->run(d.settings, MPI_COMM_WORLD);
  EXPECT_FALSE(none.final_error);
  if (rank == 0) {
    const auto record = nlohmann::json::parse(report::mgrit_run_record(d, none, "", 1));
    EXPECT_TRUE(record["final_error"].is_null());
  }
}

// ex-06 with -periodic through the front ends' path: XBraid's history (reference_test has it in
// full), and the final error against the periodic solution of the ODE, at t1 (point 0's image).
TEST(RunRequest, PeriodicRunsEx06AndMeasuresAgainstThePeriodicSolution) {
  RunText t = ex06();
  t.periodic = true;
  const RunRequest r = parse_run(t);
  EXPECT_TRUE(r.settings.options.periodic());
  const RunSummary sum = r.instance->run(r.settings, MPI_COMM_WORLD);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    ASSERT_EQ(sum.result.residuals.size(), 9u);
    EXPECT_NEAR(*sum.result.residuals[1], 2.884771e-02, 5e-9);
    ASSERT_TRUE(sum.final_error);
    // Backward Euler's error in the periodic solution at t = 0.5 (a first-order method, dt
    // 1/512), and not the initial-value problem's 7.260e-04.
    EXPECT_GT(*sum.final_error, 1e-4);
    EXPECT_LT(*sum.final_error, 3e-4);
    EXPECT_DOUBLE_EQ(sum.final_time, 0.5);
    const nlohmann::json j = nlohmann::json::parse(report::mgrit_run_record(r, sum, "", 1));
    EXPECT_TRUE(j["options"]["periodic"].get<bool>());
    EXPECT_EQ(j["final_error"].get<double>(), *sum.final_error);
  }
}

// --error-estimates takes the fine integrator's local order; the run reports the largest
// estimate and where (XBraid's figures for these estimates are in reference_test).
TEST(RunRequest, ErrorEstimatesTakeTheIntegratorsOrderAndReportTheLargest) {
  RunText t = ex06({{"nt", "32"}, {"levels", "2"}, {"cf", "4"}, {"max_iter", "3"}});
  t.error_estimates = true;
  const RunRequest r = parse_run(t);
  EXPECT_EQ(r.settings.options.error_estimate_order(), 2);
  const RunSummary sum = r.instance->run(r.settings, MPI_COMM_WORLD);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    ASSERT_TRUE(sum.largest_estimate);
    EXPECT_NEAR(*sum.largest_estimate, 3.51428582831466e-03, 1e-12);  // points 1-4
    EXPECT_DOUBLE_EQ(sum.largest_estimate_time, 0.5 / 32);
    const nlohmann::json j = nlohmann::json::parse(report::mgrit_run_record(r, sum, "", 1));
    EXPECT_EQ(j["largest_estimate"].get<double>(), *sum.largest_estimate);
    EXPECT_EQ(j["options"]["error_estimates"].get<int>(), 2);
  }
  RunText heat = given({{"problem", "heat1d"}});
  heat.error_estimates = true;
  try {
    parse_run(heat);
    ADD_FAILURE() << "heat1d accepted";
  } catch (const InvalidOption& e) {
    EXPECT_EQ(e.option(), "error_estimates");
    EXPECT_NE(e.detail().find("declares no local order"), std::string::npos) << e.detail();
  }
}

// ex-06 -refinet through the front ends' path (refinement_reference_test has XBraid's every
// cycle): refine turns the error estimates on, the run records each refinement, where it
// stopped, the final grid's levels, and measures the error at the last point of the final grid.
TEST(RunRequest, RefineRunsEx06RefinetAndReportsTheFinalGrid) {
  RunText t = ex06({{"nt", "19"}, {"max_iter", "9"}, {"max_intervals", "400"}});
  t.refine = true;
  const RunRequest r = parse_run(t);
  EXPECT_TRUE(r.settings.options.refinement());
  EXPECT_EQ(r.settings.options.error_estimate_order(), 2);
  EXPECT_EQ(r.settings.options.refinement_cutoff(), 400);
  EXPECT_EQ(r.settings.options.max_refinements(), 200);
  const RunSummary sum = r.instance->run(r.settings, MPI_COMM_WORLD);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    ASSERT_EQ(sum.result.refinements.size(), 5u);
    EXPECT_NEAR(*sum.result.refinements[0].residual, 3.876263745323712e-05, 1e-14);
    EXPECT_EQ(sum.result.refinements.back().intervals_after, 608);
    EXPECT_EQ(sum.result.refinement_stopped, std::optional<int>(6));
    EXPECT_EQ(sum.final_intervals, std::vector<index_t>({608, 304, 152, 76, 38, 19, 9}));
    EXPECT_EQ(sum.intervals, std::vector<index_t>({19, 9}));  // the hierarchy it started with
    ASSERT_TRUE(sum.final_error);
    EXPECT_NEAR(*sum.final_error, 3.0588851761120806e-04, 1e-12);
    const nlohmann::json j = nlohmann::json::parse(report::mgrit_run_record(r, sum, "", 1));
    EXPECT_TRUE(j["options"]["refine"].get<bool>());
    EXPECT_EQ(j["options"]["max_intervals"].get<index_t>(), 400);
    ASSERT_EQ(j["refinements"].size(), 5u);
    EXPECT_EQ(j["refinements"][4]["iteration"].get<int>(), 6);
    EXPECT_EQ(j["refinements"][4]["intervals_before"].get<index_t>(), 304);
    EXPECT_EQ(j["refinement_stopped"].get<int>(), 6);
    EXPECT_EQ(j["final_levels"][0].get<index_t>(), 608);
  }
}

TEST(RunRequest, RefineRefusesWhatItCannotDo) {
  auto refusal = [](std::map<std::string, std::string> values, bool refine = true,
                    bool periodic = false, bool reverse = false) {
    RunText t = given(std::move(values));
    t.refine = refine;
    t.periodic = periodic;
    t.reverse = reverse;
    return error_of(t);
  };
  EXPECT_EQ(refusal({{"problem", "linear"}, {"refine_fraction", "0.5"}}), "no error");
  EXPECT_EQ(refusal({{"problem", "dahlquist"}}),
            "refine | not available for problem dahlquist; accepted: problem linear (its App "
            "asks for the refinement, as XBraid's ex-06)");
  EXPECT_EQ(refusal({{"problem", "linear"}}, true, true), "refine | not with periodic");
  EXPECT_EQ(refusal({{"problem", "linear"}}, true, false, true),
            "refine | not with reverse (forward solves only)");
  EXPECT_EQ(refusal({{"problem", "linear"}, {"levels", "1"}}),
            "refine | needs levels >= 2 (refinement follows the cycles)");
  EXPECT_EQ(refusal({{"problem", "linear"}, {"max_intervals", "100"}}, false),
            "max_intervals | needs refine");
  EXPECT_EQ(refusal({{"problem", "linear"}, {"refine_fraction", "0"}}),
            "refine_fraction | '0' is invalid; accepted: a number in (0, 1]");
  EXPECT_EQ(refusal({{"problem", "linear"}, {"max_refinements", "-1"}}).substr(0, 21),
            "max_refinements | '-1");
}

TEST(RunRequest, PeriodicRefusesWhatItCannotDo) {
  auto refusal = [](std::map<std::string, std::string> values, bool richardson = false,
                    bool gradient = false, bool reverse = false) {
    RunText t = given(std::move(values));
    t.periodic = true;
    t.richardson = richardson;
    t.gradient = gradient;
    t.reverse = reverse;
    return error_of(t);
  };
  EXPECT_EQ(refusal({{"problem", "linear"}, {"convention", "xbraid"}}), "no error");
  EXPECT_EQ(refusal({{"problem", "linear"}, {"init", "sequential"}}),
            "periodic | not with init sequential: a periodic problem has no initial value to "
            "march from");
  EXPECT_EQ(refusal({{"problem", "linear"}, {"convention", "xbraid"}}, true),
            "periodic | not with richardson");
  EXPECT_EQ(refusal({{"problem", "dahlquist"}}, false, true), "periodic | not with gradient");
  EXPECT_EQ(refusal({{"problem", "linear"}}, false, false, true),
            "periodic | not with reverse (forward solves only)");
  EXPECT_EQ(refusal({{"problem", "linear"}, {"levels", "1"}}),
            "periodic | needs levels >= 2 (the coarsest level is relaxed)");
  RunText listed = given({{"problem", "linear"}, {"nt", "8"}, {"points", "levels.json"}});
  listed.points = {{0, 4, 8}};
  listed.periodic = true;
  try {
    parse_run(listed);
    ADD_FAILURE() << "explicit levels accepted";
  } catch (const InvalidOption& e) {
    EXPECT_EQ(e.option() + " | " + e.detail(),
              "periodic | not with points (uniform coarsening only)");
  }
}

// --richardson takes the local order from the problem's fine integrator; the combinations it
// cannot honour are refused by name.
TEST(RunRequest, RichardsonTakesTheIntegratorsOrderAndRefusesWhatItCannotDo) {
  auto with_richardson = [](std::map<std::string, std::string> values) {
    RunText t = given(std::move(values));
    t.richardson = true;
    return t;
  };
  auto order = [&](std::map<std::string, std::string> values) {
    return parse_run(with_richardson(std::move(values))).settings.options.richardson_order();
  };
  EXPECT_EQ(order({{"problem", "linear"}, {"convention", "xbraid"}}), 2);
  EXPECT_EQ(order({{"problem", "linear"}, {"convention", "xbraid"}, {"integrator", "sdirk2"}}), 3);
  EXPECT_EQ(order({{"problem", "dahlquist"}, {"convention", "xbraid"}, {"integrator", "tr"}}), 3);
  EXPECT_EQ(parse_run(given({{"problem", "linear"}})).settings.options.richardson_order(), 0);
  auto refusal = [&](std::map<std::string, std::string> values, bool gradient = false) {
    RunText t = with_richardson(std::move(values));
    t.gradient = gradient;
    try {
      parse_run(t);
    } catch (const InvalidOption& e) {
      return e.option() + " | " + e.detail();
    }
    return std::string("no error");
  };
  EXPECT_EQ(refusal({{"problem", "heat1d"}, {"convention", "xbraid"}}),
            "richardson | not available for problem heat1d: its integrator declares no local "
            "order; accepted: problem linear or dahlquist");
  EXPECT_EQ(refusal({{"problem", "linear"}}),
            "richardson | needs convention xbraid (Richardson follows XBraid's relaxation)");
  EXPECT_EQ(refusal({{"problem", "linear"}, {"convention", "xbraid"}, {"cwt", "1,2"}}),
            "richardson | needs cwt 1 (a weighted C-relaxation cannot be extrapolated)");
  EXPECT_EQ(refusal({{"problem", "dahlquist"}, {"convention", "xbraid"}}, true),
            "richardson | not with gradient");
}

TEST(RunRequest, TheRecordHoldsWhatTheRunDid) {
  RunText t = given({{"problem", "dahlquist"}, {"lambda", "-0.5"}, {"nt", "16"}, {"cf", "2"}});
  t.gradient = true;
  const RunRequest r = parse_run(t);
  const RunSummary sum = r.instance->run(r.settings, MPI_COMM_WORLD);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;  // the summary is complete on rank 0
  const nlohmann::json j = nlohmann::json::parse(report::mgrit_run_record(r, sum, "", 2));
  EXPECT_EQ(j["problem"], "dahlquist");
  EXPECT_EQ(j["options"]["lambda"], -0.5);
  EXPECT_EQ(j["options"]["ranks"], 2);
  EXPECT_TRUE(j["options"]["points"].is_null());
  EXPECT_EQ(j["options"]["cf"].size(), sum.intervals.size());
  EXPECT_EQ(j["levels"].get<std::vector<index_t>>(), sum.intervals);
  ASSERT_EQ(j["residuals"].size(), sum.result.residuals.size());
  for (std::size_t k = 0; k < sum.result.residuals.size(); ++k) {
    if (!sum.result.residuals[k]) continue;
    EXPECT_EQ(j["residuals"][k].get<double>(), *sum.result.residuals[k]);
  }
  EXPECT_EQ(j["objective"].get<double>(), *sum.objective);
  EXPECT_EQ(j["gradient"].get<double>(), *sum.gradient);
  EXPECT_EQ(j["parameter"], "lambda");
  EXPECT_EQ(j["adjoint"]["iterations"], sum.adjoint.iterations);
}

}  // namespace
}  // namespace weft::mgrit::problems
