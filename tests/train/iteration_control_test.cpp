// The iteration controller's policy (weft/train/iteration_control.hpp) on synthetic residual
// sequences and gradient errors: converging, stalling and diverging solves, checks that raise
// and lower the counts, loss jumps that bring a check forward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
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

// With the forward's error measured, each count answers to its own error: the forward's to
// the logits' error f, the adjoint's to the gradient's e (the forward's too where f is not
// 4x within its tolerance, or the adjoint's count cannot rise), and a lowering of the forward
// needs f 4x within its tolerance whatever e is (within its own).
TEST(IterationControl, TheForwardsErrorJudgesTheForwardsCount) {
  train::IterationControl control = both(1, 4);  // e accepted up to 0.04
  control.forward_tolerance = 0.1;
  train::IterationController c(control, 1, 1);
  c.observe_check(0, 0.01, 0.3);  // the gradient passes, the forward does not: forward up only
  EXPECT_EQ(c.forward_iterations(), 2);
  EXPECT_EQ(c.backward_iterations(), 1);
  EXPECT_TRUE(c.check_due(1));
  c.observe_check(1, 0.2, 0.01);  // the gradient fails with an exact forward: the adjoint up
  EXPECT_EQ(c.forward_iterations(), 2);
  EXPECT_EQ(c.backward_iterations(), 2);
  c.observe_check(2, 0.2, 0.05);  // fails, the forward within but not 4x: both up
  EXPECT_EQ(c.forward_iterations(), 3);
  EXPECT_EQ(c.backward_iterations(), 3);
  c.observe_check(3, 0.03, 0.05);  // both pass, neither 4x within: kept
  EXPECT_EQ(c.forward_iterations(), 3);
  EXPECT_EQ(c.backward_iterations(), 3);
  EXPECT_FALSE(c.check_due(4));
  // The adjoint's turn to be lowered, but e is not 4x within: the forward's, by f alone.
  c.observe_check(13, 0.03, 0.02);
  EXPECT_EQ(c.forward_iterations(), 2);
  EXPECT_EQ(c.backward_iterations(), 3);
  EXPECT_TRUE(c.check_due(14));
  c.observe_check(14, 0.03, 0.2);  // the lowered forward fails: undone and barred
  EXPECT_EQ(c.forward_iterations(), 3);
  ASSERT_EQ(c.state().bars.size(), 1u);
  EXPECT_EQ(c.state().bars[0].forward, 2);
  EXPECT_EQ(c.state().bars[0].backward, 3);
  // The adjoint at its most: a failing gradient raises the forward even when f is exact.
  train::IterationController top(control, 1, 4);
  top.observe_check(0, 0.2, 0.001);
  EXPECT_EQ(top.forward_iterations(), 2);
  EXPECT_EQ(top.backward_iterations(), 4);
  // A NaN forward error fails; one direction automatic ignores f for the other.
  train::IterationController nan(control, 1, 1);
  nan.observe_check(0, 0.01, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(nan.forward_iterations(), 2);
  EXPECT_EQ(nan.backward_iterations(), 1);
  train::IterationControl adjoint = control;
  adjoint.forward = false;
  train::IterationController only(adjoint, 1, 2);
  only.observe_check(0, 0.001, 0.9);  // f is not this controller's: e 4x within lowers
  EXPECT_EQ(only.forward_iterations(), 1);
  EXPECT_EQ(only.backward_iterations(), 1);
  train::IterationControl forward = control;
  forward.backward = false;
  train::IterationController fwd(forward, 2, 3);
  fwd.observe_check(0, 0.03, 0.01);  // f 4x within: lowered, though e is not
  EXPECT_EQ(fwd.forward_iterations(), 1);
  EXPECT_EQ(fwd.backward_iterations(), 3);
  train::IterationController raised(forward, 1, 3);
  raised.observe_check(0, 0.2, 0.001);  // e fails, the adjoint is not automatic: the forward up
  EXPECT_EQ(raised.forward_iterations(), 2);
}

// A lowering that fails its verification is undone (not answered by raising both counts) and
// that setting is barred for 2 retry periods (a fifth of a check period each), so the counts do
// not oscillate; the next check comes a retry period later, to try the other lowering.
TEST(IterationControl, AFailedLoweringIsUndoneAndBarred) {
  train::IterationControl every20 = both();
  every20.check_every = 20;  // retry periods of 4 batches
  EXPECT_EQ(train::retry_every(every20), 4);
  train::IterationController c(every20, 2, 2);
  c.observe_check(0, 0.001);  // lower the adjoint's: (2, 1), verified at batch 1
  ASSERT_EQ(c.backward_iterations(), 1);
  EXPECT_TRUE(c.check_due(1));
  c.observe_check(1, 0.1);  // (2, 1) fails: back to (2, 2), barred until batch 9
  EXPECT_EQ(c.forward_iterations(), 2);
  EXPECT_EQ(c.backward_iterations(), 2);
  EXPECT_FALSE(c.check_due(4));
  EXPECT_TRUE(c.check_due(5));  // a retry period later
  c.observe_check(5, 0.001);    // the forward's turn: (1, 2)
  EXPECT_EQ(c.forward_iterations(), 1);
  c.observe_check(6, 0.1);  // fails too: back to (2, 2), (1, 2) barred until batch 14
  EXPECT_EQ(c.forward_iterations(), 2);
  EXPECT_EQ(c.backward_iterations(), 2);
  // Both lowerings barred: kept, and the next check comes when the first bar ends (batch 9),
  // not a check period later.
  c.observe_check(8, 0.001);
  EXPECT_EQ(c.forward_iterations(), 2);
  EXPECT_EQ(c.backward_iterations(), 2);
  EXPECT_TRUE(c.check_due(9));
  c.observe_check(9, 0.001);  // (2, 1)'s bar has ended
  EXPECT_EQ(c.forward_iterations(), 2);
  EXPECT_EQ(c.backward_iterations(), 1);
  // A bar that ends after the next regular check does not move it; a check that lowers
  // nothing for want of spare error ignores the bars.
  train::IterationController d(every20, 2, 2);
  d.observe_check(0, 0.001);  // (2, 1)
  d.observe_check(1, 0.1);    // barred until 9
  d.observe_check(5, 0.02);   // passes, not 4x better: no lowering wanted, next check at 25
  EXPECT_FALSE(d.check_due(24));
  EXPECT_TRUE(d.check_due(25));
}

// Each further failure of a setting bars it twice as long, up to 64 retry periods; a setting
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
    const std::int64_t until = batch + 2 * (std::int64_t{1} << std::min(failure, 6));
    ASSERT_EQ(c.state().bars.size(), 1u);
    EXPECT_EQ(c.state().bars[0].until, until) << failure;
    EXPECT_EQ(c.backward_iterations(), 2);
    c.observe_check(until - 1, 0.001);  // still barred: kept, looked at again when it ends
    EXPECT_EQ(c.backward_iterations(), 2) << failure;
    EXPECT_TRUE(c.check_due(until)) << failure;
    EXPECT_FALSE(c.check_due(until - 1)) << failure;
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
  EXPECT_EQ(c.state().bars[0].until, batch + 12 + 4);
}

// A controller restored from another's state (what a checkpoint stores) decides from then on
// as the original does: the counts, the verification of a pending lowering, the bars, the
// running loss mean behind the loss-jump rule.
TEST(IterationControl, ARestoredStateDecidesAsTheOriginal) {
  train::IterationController original(both(), 2, 2);
  original.observe_check(0, 0.001);  // lowers the adjoint's: (2, 1)
  original.observe_check(1, 0.1);    // fails: (2, 2), (2, 1) barred until 5
  for (std::int64_t batch = 0; batch < 20; ++batch) original.observe_loss(batch, 1.0);
  original.observe_check(11, 0.001);  // lowers the forward's: (1, 2), pending verification
  train::IterationController resumed(both(), 5, 5);
  resumed.restore(original.state());
  EXPECT_EQ(resumed.forward_iterations(), 1);
  EXPECT_EQ(resumed.backward_iterations(), 2);
  EXPECT_TRUE(resumed.check_due(12));
  for (train::IterationController* c : {&original, &resumed}) {
    c->observe_check(12, 0.1);  // the pending lowering fails: undone, (1, 2) barred until 16
    EXPECT_EQ(c->forward_iterations(), 2);
    EXPECT_TRUE(c->check_due(14));
    c->observe_check(15, 0.001);  // (1, 2) still barred: the adjoint's lowering, (2, 1)
    EXPECT_EQ(c->forward_iterations(), 2);
    EXPECT_EQ(c->backward_iterations(), 1);
    c->observe_check(16, 0.02);  // verified, not 4x better: kept, the next check at 26
    EXPECT_EQ(c->backward_iterations(), 1);
    EXPECT_FALSE(c->check_due(24));
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

// Rule 4: where the solver skips, a raise or a lowering moves half an iteration: k iterations
// skipping, k not skipping, k + 1 skipping. The bounds are whole iterations: the most is
// max_iterations not skipping. A direction whose solver does not skip counts whole iterations.
train::IterationControl half_steps(int min = 1, int max = 4) {
  train::IterationControl c = both(min, max);
  c.half_steps = true;
  return c;
}

TEST(IterationControl, HalfStepsRunBetweenWholeIterations) {
  train::IterationController c(half_steps(1, 2), 1, 1, true, true);
  auto setting = [&](bool forward) {
    return std::make_pair(forward ? c.forward_iterations() : c.backward_iterations(),
                          *(forward ? c.forward_skips() : c.backward_skips()));
  };
  using Setting = std::pair<int, bool>;
  EXPECT_EQ(setting(true), Setting(1, true));
  c.observe_check(0, 0.2);  // too large: both up half an iteration
  EXPECT_EQ(setting(true), Setting(1, false));
  EXPECT_EQ(setting(false), Setting(1, false));
  c.observe_check(1, 0.2);
  EXPECT_EQ(setting(true), Setting(2, true));
  c.observe_check(2, 0.2);
  c.observe_check(3, 0.2);  // at the most: 2 iterations not skipping
  EXPECT_EQ(setting(true), Setting(2, false));
  EXPECT_EQ(setting(false), Setting(2, false));
  EXPECT_FALSE(c.check_due(4));  // at the most in both directions: no check at once
  c.observe_check(13, 0.001);    // the adjoint's down half an iteration
  EXPECT_EQ(setting(false), Setting(2, true));
  c.observe_check(14, 0.001);  // verified: the forward's
  EXPECT_EQ(setting(true), Setting(2, true));
  c.observe_check(15, 0.1);  // fails: undone, (2 skipping, 2 skipping) barred
  EXPECT_EQ(setting(true), Setting(2, false));
  EXPECT_EQ(setting(false), Setting(2, true));
  EXPECT_EQ(c.state().bars.at(0).forward, 3);

  train::IterationController whole(half_steps(1, 2), 1, 1, false, true);  // no forward skip
  EXPECT_FALSE(whole.forward_skips().has_value());
  whole.observe_check(0, 0.2);
  EXPECT_EQ(whole.forward_iterations(), 2);
  EXPECT_EQ(whole.backward_iterations(), 1);
  EXPECT_FALSE(*whole.backward_skips());
  // With the control's switch off: whole iterations in both directions.
  train::IterationControl off = both(1, 2);
  off.half_steps = false;
  train::IterationController none(off, 1, 1, true, true);
  none.observe_check(0, 0.2);
  EXPECT_EQ(none.forward_iterations(), 2);
  EXPECT_EQ(none.backward_iterations(), 2);
  EXPECT_FALSE(none.backward_skips().has_value());
}

// A state counted in whole iterations (a checkpoint from before half steps, or of a run
// without them) restores into half steps as those iterations skipping, and back.
TEST(IterationControl, RestoreConvertsBetweenWholeAndHalfSteps) {
  train::IterationController whole(both(), 2, 2);
  whole.observe_check(0, 0.001);  // (2, 1), verified next
  whole.observe_check(1, 0.1);    // fails: (2, 2), (2, 1) barred
  train::IterationController half(half_steps(), 1, 1, true, true);
  half.restore(whole.state());
  EXPECT_EQ(half.forward_iterations(), 2);
  EXPECT_TRUE(*half.forward_skips());
  ASSERT_EQ(half.state().bars.size(), 1u);
  EXPECT_EQ(half.state().bars[0].forward, 3);  // 2 iterations skipping
  EXPECT_EQ(half.state().bars[0].backward, 1);
  EXPECT_TRUE(half.state().forward_half_steps);
  half.observe_check(30, 0.2);  // raised half an iteration: 2 not skipping
  EXPECT_EQ(half.forward_iterations(), 2);
  EXPECT_FALSE(*half.forward_skips());
  whole.restore(half.state());
  EXPECT_EQ(whole.forward_iterations(), 2);
  EXPECT_FALSE(whole.forward_skips().has_value());
  EXPECT_FALSE(whole.state().forward_half_steps);
}

// min = max holds the count (the start is clamped into the bounds): the checks only measure,
// whatever the error, and come every check_every batches.
TEST(IterationControl, EqualBoundsHoldTheCount) {
  train::IterationControl control = both(3, 3);
  control.check_every = 10;
  train::IterationController c(control, 1, 5);
  EXPECT_EQ(c.forward_iterations(), 3);
  EXPECT_EQ(c.backward_iterations(), 3);
  std::int64_t batch = 0;
  for (const double error : {0.0, 0.9, 0.01, 5.0}) {
    ASSERT_TRUE(c.check_due(batch));
    c.observe_check(batch, error);
    EXPECT_EQ(c.forward_iterations(), 3);
    EXPECT_EQ(c.backward_iterations(), 3);
    EXPECT_FALSE(c.check_due(batch + 9));
    batch += 10;
  }
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
  c.forward_tolerance = 1;
  EXPECT_THROW(train::validate(c), weft::InvalidOption);
  c = both();
  c.check_every = 0;
  EXPECT_THROW(train::validate(c), weft::InvalidOption);
  c.forward = c.backward = false;  // inactive: nothing to check
  EXPECT_NO_THROW(train::validate(c));
}

}  // namespace
