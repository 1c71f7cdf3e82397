// The iteration controller's policy (iteration_control.hpp).
#include "weft/train/iteration_control.hpp"

#include <algorithm>
#include <cmath>

#include "weft/util/error.hpp"

namespace weft::train {

namespace {
[[noreturn]] void invalid(const std::string& detail) {
  throw InvalidOption("Trainer", "iteration_control", detail);
}
}  // namespace

void validate(const IterationControl& c) {
  if (!c.active()) return;
  if (c.min_iterations < 1 || c.max_iterations < c.min_iterations || c.max_iterations > 100)
    invalid("iterations " + std::to_string(c.min_iterations) + " to " +
            std::to_string(c.max_iterations) + " are invalid; accepted: 1 <= min <= max <= 100");
  if (!(c.gradient_tolerance > 0) || !(c.gradient_tolerance < 1))
    invalid("gradient tolerance " + number_text(c.gradient_tolerance) +
            " is invalid; accepted: a number in (0, 1)");
  if (!(c.forward_tolerance > 0) || !(c.forward_tolerance < 1))
    invalid("forward tolerance " + number_text(c.forward_tolerance) +
            " is invalid; accepted: a number in (0, 1)");
  if (c.check_every < 1)
    invalid("check_every " + std::to_string(c.check_every) + " is invalid; accepted: >= 1");
}

std::int64_t retry_every(const IterationControl& control) {
  return std::max(1, control.check_every / 5);
}

bool skips_first_relaxation(const mgrit::Options& solver) {
  return solver.effective_initial_phase() == mgrit::InitialPhase::Skip;
}

bool half_steps_in(const IterationControl& control, bool forward, bool skips) {
  return control.half_steps && (forward ? control.forward : control.backward) && skips;
}

bool uses_half_steps(const IterationControl& control, const mgrit::Options& forward,
                     const mgrit::Options& backward) {
  return half_steps_in(control, true, skips_first_relaxation(forward)) ||
         half_steps_in(control, false, skips_first_relaxation(backward));
}

SolveVerdict judge(const std::vector<std::optional<double>>& residuals) {
  std::vector<double> r;
  for (const auto& v : residuals)
    if (v) {
      if (!std::isfinite(*v)) return SolveVerdict::Diverged;
      r.push_back(*v);
    }
  if (r.size() < 2) return SolveVerdict::Converging;
  if (r.back() > r.front()) return SolveVerdict::Diverged;
  // A residual at round-off (1e-5 of the first) has converged, whether or not it still falls.
  const double before = r[r.size() - 2];
  if (before > 0 && r.back() > 0.9 * before && r.back() > 1e-5 * r.front())
    return SolveVerdict::Stalled;
  return SolveVerdict::Converging;
}

std::string to_string(SolveVerdict verdict) {
  switch (verdict) {
    case SolveVerdict::Stalled:
      return "stalled";
    case SolveVerdict::Diverged:
      return "diverged";
    default:
      return "converging";
  }
}

IterationController::IterationController(IterationControl control, int forward, int backward,
                                         bool forward_skips, bool backward_skips)
    : control_(control) {
  validate(control_);
  s_.forward_half_steps = half_steps_in(control_, true, forward_skips);
  s_.backward_half_steps = half_steps_in(control_, false, backward_skips);
  // The solver's k iterations skip: the half-step setting 2k - 1.
  s_.forward = s_.forward_half_steps ? 2 * forward - 1 : forward;
  s_.backward = s_.backward_half_steps ? 2 * backward - 1 : backward;
  restore(s_);
}

void IterationController::restore(const State& state) {
  const State own = s_;  // this controller's steps, and the solver's counts
  // A count from `from_half` steps in `to_half` steps: k whole iterations are k skipping.
  auto convert = [](int count, bool from_half, bool to_half) {
    if (from_half == to_half) return count;
    return to_half ? 2 * count - 1 : iterations(count, true);
  };
  // A direction this control chooses takes the stored count within its bounds; the other keeps
  // the solver's count (also in a pending lowering, which an undo would bring back).
  auto count = [&](bool forward, int stored) {
    const bool from = forward ? state.forward_half_steps : state.backward_half_steps;
    const bool to = forward ? own.forward_half_steps : own.backward_half_steps;
    if (!(forward ? control_.forward : control_.backward))
      return forward ? own.forward : own.backward;
    return std::clamp(convert(stored, from, to), lowest(to), highest(to));
  };
  s_ = state;
  s_.forward_half_steps = own.forward_half_steps;
  s_.backward_half_steps = own.backward_half_steps;
  s_.forward = count(true, state.forward);
  s_.backward = count(false, state.backward);
  if (s_.before_lowering)
    s_.before_lowering = std::make_pair(count(true, state.before_lowering->first),
                                        count(false, state.before_lowering->second));
  for (State::Bar& bar : s_.bars) {
    bar.forward = convert(bar.forward, state.forward_half_steps, own.forward_half_steps);
    bar.backward = convert(bar.backward, state.backward_half_steps, own.backward_half_steps);
  }
}

bool IterationController::check_due(std::int64_t batch) const {
  return control_.active() && batch >= s_.next_check;
}

void IterationController::raise(bool forward, bool backward) {
  if (forward && control_.forward)
    s_.forward = std::min(s_.forward + 1, highest(s_.forward_half_steps));
  if (backward && control_.backward)
    s_.backward = std::min(s_.backward + 1, highest(s_.backward_half_steps));
}

bool IterationController::observe_solves(std::int64_t, SolveVerdict forward,
                                         SolveVerdict backward) {
  if (!control_.active()) return false;
  const bool forward_failed = forward != SolveVerdict::Converging;
  const bool backward_failed = backward != SolveVerdict::Converging;
  raise(forward_failed, backward_failed);
  return forward_failed || backward_failed;
}

void IterationController::observe_loss(std::int64_t batch, double loss) {
  if (!control_.active() || !std::isfinite(loss)) return;
  if (s_.losses >= 10 && loss > 2 * s_.loss_mean)
    s_.next_check = std::min(s_.next_check, batch + 1);
  ++s_.losses;
  s_.loss_mean +=
      (loss - s_.loss_mean) / static_cast<double>(std::min<std::int64_t>(s_.losses, 50));
}

std::optional<std::int64_t> IterationController::bar_end(int forward, int backward,
                                                         std::int64_t batch) const {
  for (const State::Bar& b : s_.bars)
    if (b.forward == forward && b.backward == backward && batch < b.until) return b.until;
  return std::nullopt;
}

void IterationController::observe_check(std::int64_t batch, double error,
                                        std::optional<double> forward_error) {
  if (!control_.active()) return;
  s_.next_check = batch + control_.check_every;
  const auto verified = s_.before_lowering;
  s_.before_lowering.reset();
  const auto record = std::find_if(s_.bars.begin(), s_.bars.end(), [&](const State::Bar& b) {
    return b.forward == s_.forward && b.backward == s_.backward;
  });
  // The forward's error judges the forward's count where that count is chosen and measured.
  const bool by_forward = control_.forward && forward_error.has_value();
  const double f = forward_error.value_or(0);
  const bool gradient_fails = !(error <= control_.gradient_tolerance);  // NaN: too large
  const bool forward_fails = by_forward && !(f <= control_.forward_tolerance);
  if (gradient_fails || forward_fails) {
    if (verified) {  // the lowering was one too many: undo it, bar it for a while
      State::Bar& bar =
          record != s_.bars.end() ? *record : s_.bars.emplace_back(State::Bar{0, 0, 0, 0});
      bar = {s_.forward, s_.backward, 0, std::min(bar.failures + 1, 6)};
      const std::int64_t retry = retry_every(control_);
      bar.until = batch + (std::int64_t{1} << bar.failures) * retry;
      s_.forward = verified->first;
      s_.backward = verified->second;
      s_.next_check = batch + retry;  // the undone setting costs more: look again soon
      return;
    }
    const bool backward_can_rise =
        control_.backward && s_.backward < highest(s_.backward_half_steps);
    const bool forward_exact = by_forward && f <= control_.forward_tolerance / 4;
    const bool raise_forward =
        !by_forward || forward_fails || (gradient_fails && (!forward_exact || !backward_can_rise));
    const bool raise_backward = !by_forward || gradient_fails;
    const std::pair<int, int> before(s_.forward, s_.backward);
    raise(raise_forward, raise_backward);
    if (before != std::make_pair(s_.forward, s_.backward)) s_.next_check = batch + 1;
    return;
  }
  if (verified && record != s_.bars.end()) s_.bars.erase(record);  // it passed: starts over
  const bool backward_spare = error <= control_.gradient_tolerance / 4;
  const bool forward_spare =
      by_forward ? f <= control_.forward_tolerance / 4 : error <= control_.gradient_tolerance / 4;
  if (!backward_spare && !forward_spare) return;
  // Lower one count, the adjoint's and the forward's in turn, to a setting not barred.
  std::optional<std::int64_t> first_bar_end;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool backward = control_.backward && (s_.lower_backward_next || !control_.forward);
    s_.lower_backward_next = !s_.lower_backward_next;
    if (!(backward ? backward_spare : forward_spare)) continue;
    int fw = s_.forward, bw = s_.backward;
    (backward ? bw : fw) -= 1;
    const bool half = backward ? s_.backward_half_steps : s_.forward_half_steps;
    if ((backward ? bw : fw) < lowest(half)) continue;
    if (const auto until = bar_end(fw, bw, batch)) {
      first_bar_end = std::min(first_bar_end.value_or(*until), *until);
      continue;
    }
    s_.before_lowering = std::make_pair(s_.forward, s_.backward);
    s_.forward = fw;
    s_.backward = bw;
    s_.next_check = batch + 1;  // verify the lower setting at once
    return;
  }
  // Only bars stood in the way: try again when the first of them ends.
  if (first_bar_end) s_.next_check = std::min(s_.next_check, *first_bar_end);
}

}  // namespace weft::train
