// Option validation: every invalid value names the option and what is accepted.
#include <gtest/gtest.h>

#include <string>

#include "weft/mgrit/options.hpp"
#include "weft/mgrit/problems/dahlquist.hpp"
#include "weft/mgrit/problems/initial_guess.hpp"
#include "weft/util/error.hpp"

namespace weft::mgrit {
namespace {

std::string error_of(const Options& o) {
  try {
    o.validate();
  } catch (const InvalidOption& e) {
    return e.what();
  }
  return "";
}

TEST(Options, DefaultsAreValid) {
  EXPECT_EQ(error_of(Options()), "");
}

TEST(Options, PerLevelValuesFallBackToTheDefault) {
  Options o;
  o.nrelax(0, 0).nrelax(2).nrelax(0, 0).cfactor(4, 1);
  EXPECT_EQ(o.nrelax_at(0), 0);
  EXPECT_EQ(o.nrelax_at(3), 2);
  EXPECT_EQ(o.cfactor_at(1), 4);
  EXPECT_EQ(o.cfactor_at(0), 2);
}

TEST(Options, InvalidValuesNameTheOption) {
  struct Case {
    Options options;
    const char* mentions;
  };
  const Case cases[] = {
      {Options().max_levels(0), "max_levels"},
      {Options().cfactor(1), "cfactor"},
      {Options().cfactor(1, 2), "on level 2"},
      {Options().nrelax(-1), "nrelax"},
      {Options().nrelax_coarsest(-3), "nrelax_coarsest"},
      {Options().cweight(0.0), "cweight"},
      {Options().abs_tol(-1e-9), "abs_tol"},
      {Options().rel_tol(-0.5), "rel_tol"},
      {Options().rel_tol(1.5), "rel_tol"},
      {Options().max_iterations(0), "max_iterations"},
      {Options().min_coarse(0), "min_coarse"},
  };
  for (const auto& c : cases) {
    const std::string what = error_of(c.options);
    EXPECT_NE(what.find(c.mentions), std::string::npos) << "'" << what << "'";
    EXPECT_NE(what.find("accepted"), std::string::npos) << what;
  }
}

TEST(Options, RichardsonNeedsAnOrderTheXBraidConventionAndUnitWeights) {
  EXPECT_EQ(error_of(Options().richardson(2)), "");
  EXPECT_NE(error_of(Options().richardson(1))
                .find("local order 1 is invalid; accepted: an "
                      "integer >= 2"),
            std::string::npos);
  EXPECT_NE(error_of(Options().richardson(2).convention(Convention::PyMGRIT))
                .find("needs convention xbraid"),
            std::string::npos);
  EXPECT_NE(error_of(Options().richardson(2).cweight(1.5, 3)).find("needs C-weight 1"),
            std::string::npos);
}

TEST(Options, ErrorEstimatesNeedAnOrderMatchingRichardsonsAndForwardSolves) {
  EXPECT_EQ(error_of(Options().error_estimates(2)), "");
  EXPECT_EQ(error_of(Options().error_estimates(3).richardson(3)), "");
  EXPECT_NE(error_of(Options().error_estimates(1)).find("local order 1 is invalid"),
            std::string::npos);
  EXPECT_NE(
      error_of(Options().error_estimates(2).richardson(3)).find("differs from richardson's 3"),
      std::string::npos);
  EXPECT_NE(error_of(Options().error_estimates(2).direction(Direction::Reverse))
                .find("forward solves only"),
            std::string::npos);
}

TEST(Options, ConventionSetsDefaultPhaseAndFinalSweep) {
  EXPECT_EQ(Options().effective_initial_phase(), InitialPhase::Skip);
  EXPECT_EQ(Options().convention(Convention::PyMGRIT).effective_initial_phase(),
            InitialPhase::Nested);
  EXPECT_EQ(Options()
                .convention(Convention::PyMGRIT)
                .initial_phase(InitialPhase::None)
                .effective_initial_phase(),
            InitialPhase::None);
  EXPECT_EQ(Options().effective_final_sweep(), FinalSweep::F);
  EXPECT_EQ(Options().convention(Convention::PyMGRIT).effective_final_sweep(), FinalSweep::None);
}

TEST(ProblemOptions, InitialGuessParsing) {
  using problems::InitialGuess;
  EXPECT_EQ(InitialGuess::parse("zero").kind, InitialGuess::Kind::Zero);
  EXPECT_DOUBLE_EQ(InitialGuess::parse("value:0.456").value, 0.456);
  EXPECT_EQ(InitialGuess::parse("random:7").seed, 7u);
  for (const char* bad :
       {"", "zero:1", "value:", "value:x", "value:1e999", "random:-1", "random:1.5", "noise:3"})
    EXPECT_THROW(InitialGuess::parse(bad), InvalidOption) << bad;
  const auto r = InitialGuess::random(3);
  EXPECT_EQ(r.at(0.25, 1), InitialGuess::random(3).at(0.25, 1));  // reproducible
  EXPECT_NE(r.at(0.25, 1), r.at(0.5, 1));
  EXPECT_GE(r.at(0.25, 1), 0.0);
  EXPECT_LT(r.at(0.25, 1), 1.0);
}

TEST(ProblemOptions, IntegratorNames) {
  EXPECT_EQ(problems::parse_integrator("mr"), problems::Integrator::ImplicitMidpoint);
  try {
    problems::parse_integrator("rk4");
    FAIL() << "no exception";
  } catch (const InvalidOption& e) {
    EXPECT_NE(std::string(e.what()).find("be, fe, tr, mr"), std::string::npos);
  }
}

}  // namespace
}  // namespace weft::mgrit
