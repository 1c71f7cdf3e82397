// The iteration controller's policy (weft/train/iteration_control.hpp) on synthetic residual
// sequences and gradient errors: converging, stalling and diverging solves, checks that raise
// and lower the counts, loss jumps that bring a check forward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "weft/train/iteration_control.hpp"
#include "weft/util/error.hpp"

namespace {

namespace train = weft::train;
using train::SolveVerdict;
using History = std::vector<std::optional<double>>;

TEST(IterationControl, JudgesResidualHistories) {
  EXPECT_EQ(train::judge({1.0, 0.1, 0.01}), SolveVerdict::Converging);
  EXPECT_EQ(train::judge({std::nullopt, 0.5, 0.04}), SolveVerdict::Converging);  // skip: none
  EXPECT_EQ(train::judge({1.0}), SolveVerdict::Converging);  // one residual: nothing to compare
  EXPECT_EQ(train::judge({}), SolveVerdict::Converging);
  EXPECT_EQ(train::judge({1.0, 0.5, 0.46}), SolveVerdict::Stalled);         // the last cut 8 %
  EXPECT_EQ(train::judge({1.0, 0.5, 0.44}), SolveVerdict::Converging);      // 12 %
  EXPECT_EQ(train::judge({1.0, 1e-7, 0.99e-7}), SolveVerdict::Converging);  // round-off
  EXPECT_EQ(train::judge({1.0, 2.0, 1.5}), SolveVerdict::Diverged);         // above the first
  EXPECT_EQ(train::judge({1.0, std::numeric_limits<double>::quiet_NaN()}), SolveVerdict::Diverged);
  EXPECT_EQ(train::judge({std::numeric_limits<double>::infinity()}), SolveVerdict::Diverged);
}

train::IterationControl both(int min = 1, int max = 4) {
  train::IterationControl c;
  c.forward = c.backward = true;
  c.min_iterations = min;
  c.max_iterations = max;
  c.gradient_tolerance = 0.04;
  c.check_every = 10;
  return c;
}

TEST(IterationControl, ChecksRaiseUntilTheGradientIsGoodEnoughThenLowerOneAtATime) {
  train::IterationController c(both(), 1, 1);
  EXPECT_TRUE(c.check_due(0));  // the first batch is a check
  c.observe_check(0, 0.2);      // too large: both up, check again at once
  EXPECT_EQ(c.forward_iterations(), 2);
  EXPECT_EQ(c.backward_iterations(), 2);
  EXPECT_TRUE(c.check_due(1));
  c.observe_check(1, 0.02);  // good, not 4x better: keep, next check after 10 batches
  EXPECT_EQ(c.forward_iterations(), 2);
  EXPECT_EQ(c.backward_iterations(), 2);
  EXPECT_FALSE(c.check_due(2));
  EXPECT_FALSE(c.check_due(10));
  EXPECT_TRUE(c.check_due(11));
  c.observe_check(11, 0.005);  // 8x better than needed: the adjoint's count down, verified next
  EXPECT_EQ(c.forward_iterations(), 2);
  EXPECT_EQ(c.backward_iterations(), 1);
  EXPECT_TRUE(c.check_due(12));
  c.observe_check(12, 0.001);  // verified, and still better than needed: the forward's
  EXPECT_EQ(c.forward_iterations(), 1);
  EXPECT_EQ(c.backward_iterations(), 1);
  c.observe_check(13, 0.001);  // both at the minimum: nothing to lower
  EXPECT_EQ(c.forward_iterations(), 1);
  EXPECT_EQ(c.backward_iterations(), 1);
  EXPECT_FALSE(c.check_due(14));
  EXPECT_TRUE(c.check_due(23));
}

// A lowering that fails its verification is undone (not answered by raising both counts) and
// that setting is barred for 2 check periods, so the counts do not oscillate.
TEST(IterationControl, AFailedLoweringIsUndoneAndBarred) {
  train::IterationController c(both(), 2, 2);
  c.observe_check(0, 0.001);  // lower the adjoint's: (2, 1), verified at batch 1
  ASSERT_EQ(c.backward_iterations(), 1);
  EXPECT_TRUE(c.check_due(1));
  c.observe_check(1, 0.1);  // (2, 1) fails: back to (2, 2), barred until batch 21
  EXPECT_EQ(c.forward_iterations(), 2);
  EXPECT_EQ(c.backward_iterations(), 2);
  EXPECT_FALSE(c.check_due(10));  // (2, 2) was good: the next check after a period
  c.observe_check(11, 0.001);     // the forward's turn: (1, 2)
  EXPECT_EQ(c.forward_iterations(), 1);
  c.observe_check(12, 0.1);  // fails too: back to (2, 2), (1, 2) barred until batch 32
  EXPECT_EQ(c.forward_iterations(), 2);
  EXPECT_EQ(c.backward_iterations(), 2);
  c.observe_check(20, 0.001);  // both lowerings barred: kept
  EXPECT_EQ(c.forward_iterations(), 2);
  EXPECT_EQ(c.backward_iterations(), 2);
  c.observe_check(30, 0.001);  // (2, 1)'s bar has ended
  EXPECT_EQ(c.forward_iterations(), 2);
  EXPECT_EQ(c.backward_iterations(), 1);
}

// Each further failure of a setting bars it twice as long, up to 64 check periods; a setting
// that passes its verification starts over at 2 periods.
TEST(IterationControl, BarsGrowWithEachFailureAndStartOverAfterAPass) {
  train::IterationControl adjoint_only = both();
  adjoint_only.forward = false;
  train::IterationController c(adjoint_only, 2, 2);
  std::int64_t batch = 0;
  c.observe_check(batch, 0.001);  // lowers the adjoint's: (2, 1)
  for (int failure = 1; failure <= 8; ++failure) {
    ASSERT_EQ(c.backward_iterations(), 1) << failure;
    c.observe_check(++batch, 0.1);  // the verification fails: (2, 2), barred
    const std::int64_t until = batch + 10 * (std::int64_t{1} << std::min(failure, 6));
    ASSERT_EQ(c.state().bars.size(), 1u);
    EXPECT_EQ(c.state().bars[0].until, until) << failure;
    EXPECT_EQ(c.backward_iterations(), 2);
    c.observe_check(until - 1, 0.001);  // still barred: kept
    EXPECT_EQ(c.backward_iterations(), 2) << failure;
    batch = until;
    c.observe_check(batch, 0.001);  // the bar has ended: lowered again
  }
  c.observe_check(++batch, 0.02);  // passes (not 4x better: kept): the record is gone
  EXPECT_EQ(c.backward_iterations(), 1);
  EXPECT_TRUE(c.state().bars.empty());
  c.observe_check(batch + 10, 0.1);  // not a verification: raised, checked again at once
  EXPECT_EQ(c.backward_iterations(), 2);
  c.observe_check(batch + 11, 0.001);  // lowered
  c.observe_check(batch + 12, 0.1);    // fails: a first failure again, 2 periods
  ASSERT_EQ(c.state().bars.size(), 1u);
  EXPECT_EQ(c.state().bars[0].until, batch + 12 + 20);
}

// A controller restored from another's state (what a checkpoint stores) decides from then on
// as the original does: the counts, the verification of a pending lowering, the bars, the
// running loss mean behind the loss-jump rule.
TEST(IterationControl, ARestoredStateDecidesAsTheOriginal) {
  train::IterationController original(both(), 2, 2);
  original.observe_check(0, 0.001);  // lowers the adjoint's: (2, 1)
  original.observe_check(1, 0.1);    // fails: (2, 2), (2, 1) barred until 21
  for (std::int64_t batch = 0; batch < 20; ++batch) original.observe_loss(batch, 1.0);
  original.observe_check(11, 0.001);  // lowers the forward's: (1, 2), pending verification
  train::IterationController resumed(both(), 5, 5);
  resumed.restore(original.state());
  EXPECT_EQ(resumed.forward_iterations(), 1);
  EXPECT_EQ(resumed.backward_iterations(), 2);
  EXPECT_TRUE(resumed.check_due(12));
  for (train::IterationController* c : {&original, &resumed}) {
    c->observe_check(12, 0.1);  // the pending lowering fails: undone, (1, 2) barred
    EXPECT_EQ(c->forward_iterations(), 2);
    c->observe_check(20, 0.001);  // both lowerings barred: kept
    EXPECT_EQ(c->backward_iterations(), 2);
    c->observe_loss(23, 2.5);  // above twice the running mean of 1: the check comes forward
    EXPECT_TRUE(c->check_due(24));
  }
  // Counts outside this control's bounds are clamped; a direction it does not choose keeps
  // the solver's count.
  train::IterationControl forward_only = both();
  forward_only.backward = false;
  forward_only.max_iterations = 3;
  train::IterationController::State state = original.state();
  state.forward = 7;
  train::IterationController narrow(forward_only, 1, 4);
  narrow.restore(state);
  EXPECT_EQ(narrow.forward_iterations(), 3);
  EXPECT_EQ(narrow.backward_iterations(), 4);
  // A pending lowering undone after the restore keeps the solver's adjoint count too.
  state.before_lowering = std::make_pair(9, 9);
  narrow.restore(state);
  narrow.observe_check(30, 0.9);
  EXPECT_EQ(narrow.forward_iterations(), 3);
  EXPECT_EQ(narrow.backward_iterations(), 4);
}

TEST(IterationControl, StallsAndDivergenceFallBackAndRaiseTheirDirection) {
  train::IterationController c(both(), 2, 2);
  EXPECT_FALSE(c.observe_solves(0, train::judge({1.0, 0.1}), train::judge({1.0, 0.2})));
  EXPECT_EQ(c.forward_iterations(), 2);
  EXPECT_TRUE(c.observe_solves(1, train::judge({1.0, 0.5, 0.49}),
                               train::judge({1.0, 0.2})));  // forward stalls
  EXPECT_EQ(c.forward_iterations(), 3);
  EXPECT_EQ(c.backward_iterations(), 2);
  EXPECT_TRUE(
      c.observe_solves(2, train::judge({1.0, 0.1}), train::judge({1.0, 3.0})));  // adjoint grows
  EXPECT_EQ(c.backward_iterations(), 3);
  for (int k = 0; k < 5; ++k)
    c.observe_solves(3 + k, SolveVerdict::Diverged, SolveVerdict::Converging);
  EXPECT_EQ(c.forward_iterations(), 4);  // capped at the maximum
  // Only the adjoint automatic: a forward stall still falls back but leaves its count.
  train::IterationControl adjoint = both();
  adjoint.forward = false;
  train::IterationController d(adjoint, 2, 1);
  EXPECT_TRUE(d.observe_solves(0, SolveVerdict::Stalled, SolveVerdict::Converging));
  EXPECT_EQ(d.forward_iterations(), 2);
  EXPECT_EQ(d.backward_iterations(), 1);
}

TEST(IterationControl, ALossJumpBringsTheNextCheckForward) {
  train::IterationControl every50 = both();
  every50.check_every = 50;
  train::IterationController c(every50, 2, 2);
  c.observe_check(0, 0.02);  // the next check at batch 50
  for (int k = 1; k <= 11; ++k) c.observe_loss(k, 1.0);
  c.observe_loss(12, 1.5);  // not a jump
  EXPECT_FALSE(c.check_due(14));
  EXPECT_FALSE(c.check_due(49));
  c.observe_loss(13, 3.0);  // a jump: batch 14 is checked
  EXPECT_FALSE(c.check_due(13));
  EXPECT_TRUE(c.check_due(14));
}

TEST(IterationControl, RefusesInvalidSettings) {
  train::IterationControl c = both();
  c.min_iterations = 0;
  EXPECT_THROW(train::IterationController(c, 1, 1), weft::InvalidOption);
  c = both();
  c.max_iterations = 0;
  EXPECT_THROW(train::validate(c), weft::InvalidOption);
  c = both();
  c.gradient_tolerance = 0;
  EXPECT_THROW(train::validate(c), weft::InvalidOption);
  c = both();
  c.check_every = 0;
  EXPECT_THROW(train::validate(c), weft::InvalidOption);
  c.forward = c.backward = false;  // inactive: nothing to check
  EXPECT_NO_THROW(train::validate(c));
}

}  // namespace
