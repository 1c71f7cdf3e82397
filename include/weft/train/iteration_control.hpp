#pragma once
// MGRIT iterations chosen by the training itself (`--fwd-iters auto`, `--bwd-iters auto`): a
// controller that sets the forward and adjoint iteration counts batch by batch from what the
// solves report and from exact-gradient checks, so that the gradient is as good as training
// needs and no better. No LibTorch: the Trainer feeds it (docs/training.md, "Iterations chosen
// by the training").
//
// The policy:
//  1. Checks. At the run's first batch and every `check_every` batches (and at the next batch
//     after a loss jump, 3.), the Trainer recomputes the batch in exact mode and measures the
//     relative error e = ‖g − g*‖ / ‖g*‖ of the MGRIT gradient g against the exact-mode
//     gradient g* of the same batch, and the forward's error f = ‖z − z*‖ / ‖z*‖ of the MGRIT
//     forward's outputs z (the logits) against the network's own z*; it steps with g*. A
//     setting passes when e <= gradient_tolerance and (where the forward's iterations are
//     chosen and f was measured) f <= forward_tolerance.
//     - A failure right after a count was lowered: the lowering is undone, the lowered
//       setting is barred for 2 retry periods (retry_every(): a fifth of check_every, at least
//       1 batch), twice as long at each further failure of that setting (at most 64 retry
//       periods), and the next check comes one retry period later. The setting returned to
//       costs more than needed when another lowering passes; a setting that fails early in
//       training, when gradients are least like later ones, is tried again soon, and one that
//       keeps failing ever more rarely. A setting that passes its verification starts over
//       at 2 retry periods.
//     - A failure otherwise: the counts go up by one (up to max_iterations), and the next
//       batch is checked again, until the setting passes or the counts are at their maximum.
//       With f measured: the forward's count when f is too large; the adjoint's when e is,
//       and the forward's too unless f <= forward_tolerance / 4 (an exact forward) and the
//       adjoint's count can still go up. Without f: every automatic count.
//     - A pass: one count goes down by one (the adjoint's and the forward's in turn, not below
//       min_iterations, nor to a barred setting) where its error is 4x below its tolerance:
//       the adjoint's where e <= gradient_tolerance / 4, the forward's where f <=
//       forward_tolerance / 4 (without f: e <= gradient_tolerance / 4); the next batch
//       verifies it. The forward's lowering is judged by the forward's own error because the
//       gradient's error is mostly the adjoint's: the verification says whether the gradient
//       stays within its tolerance. Where the only lowerings its errors allow are barred, the
//       next check comes when the first of those bars ends, if that is sooner: a barred
//       setting is tried again at the end of its bar, not up to a check period after it.
//     - otherwise the counts stay.
//     Why the forward's error: with too few forward iterations the weights fit the MGRIT
//     forward, a different function from the network's, while the gradient of that function
//     stays close to its exact-mode gradient (docs/training.md §4a, §5c).
//  2. Stalls and divergence. After every batch the residual histories are judged: a
//     non-finite residual, a final residual above the first one (growth), or a last iteration
//     that reduced the residual by less than 10 % while it is above 1e-5 of the first (a stall;
//     needs two residuals; below that it is round-off, not a stall) sends the
//     batch back to exact mode: the Trainer recomputes it exactly, steps with that gradient
//     and counts a fallback. A stall or divergence of a direction raises its count by one.
//  3. Loss jumps. A batch loss above 2x the running mean of the losses (after 10 batches)
//     brings the next check forward to the next batch.
//  4. Half steps. Where a solve skips the relaxation of its first down-cycle (MGRIT's skip,
//     the default), "one count" in 1. and 2. is half an iteration: the settings of a direction
//     run 1 iteration skipping, 1 not skipping, 2 skipping, 2 not skipping, ... Each costs
//     more than the one before and is normally more exact (not skipping adds that first
//     relaxation; the next iteration adds a whole cycle), so the controller can stop between
//     k and k + 1 iterations.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "weft/mgrit/options.hpp"

namespace weft::train {

struct IterationControl {
  bool forward = false;   ///< choose the forward solve's iterations
  bool backward = false;  ///< choose the adjoint solve's
  int min_iterations = 1;
  int max_iterations = 8;
  /// The relative gradient error training accepts, ‖g − g*‖ / ‖g*‖ (at the checks). 0.3: on
  /// the stages and gru models, settings with errors up to about this train as accurately as
  /// exact mode (docs/benchmarks.md, "Iterations chosen by the training").
  double gradient_tolerance = 0.3;
  /// The relative error of the MGRIT forward's outputs training accepts, ‖z − z*‖ / ‖z*‖ (at
  /// the checks; used where the forward's iterations are chosen).
  double forward_tolerance = 0.1;
  int check_every = 50;  ///< batches between exact-gradient checks (K)
  /// Rule 4 (half steps) in the directions whose solver skips (none where no solver skips).
  /// On stages one forward iteration without skip is the exact forward, as two with skip are,
  /// in 36 step evaluations a batch instead of 40, and on gru the controller reaches exact
  /// mode's accuracy with fewer evaluations with them than without (docs/benchmarks.md,
  /// "Iterations chosen by the training").
  bool half_steps = true;
  /// Two more measurements at each check, reported, not used by the policy: the sampling noise
  /// of the exact gradient (‖g*_A − g*_B‖ / 2 over ‖g*‖, from two exact passes over the
  /// batch's halves; 2 more exact recomputations) and the persistence of the gradient error
  /// (the cosine between g − g* and the previous check's, where that check ran the same
  /// setting). They tell a random error, which SGD averages out like its own noise, from a
  /// systematic one (docs/training.md, "Iterations chosen by the training").
  bool diagnostics = false;

  bool active() const { return forward || backward; }
};

/// weft::InvalidOption("Trainer", "iteration_control", ...) for values outside what is accepted.
void validate(const IterationControl& control);
/// Batches from an undone lowering to the next check, and the unit of the bars (rule 1).
std::int64_t retry_every(const IterationControl& control);
/// Whether `solver` skips the relaxation of its first down-cycle: what gives half steps.
bool skips_first_relaxation(const mgrit::Options& solver);
/// Whether `control` runs half steps (rule 4) in the forward (adjoint) solve, given whether
/// that solve skips its first down-cycle's relaxation.
bool half_steps_in(const IterationControl& control, bool forward, bool skips);
/// Whether `control` runs half steps in either solve, with these solvers.
bool uses_half_steps(const IterationControl& control, const mgrit::Options& forward,
                     const mgrit::Options& backward);

enum class SolveVerdict { Converging, Stalled, Diverged };
/// One solve's residual history (entries may be missing where none was measured).
SolveVerdict judge(const std::vector<std::optional<double>>& residuals);
std::string to_string(SolveVerdict verdict);

class IterationController {
 public:
  /// Everything the controller decides from: what a checkpoint stores, so that a resumed run
  /// takes the decisions the uninterrupted one would. Batches are counted over the whole run
  /// (the global batch index, which continues across a resume).
  struct State {
    /// The counts in force, and those in before_lowering and bars: iterations, or in a
    /// direction with half steps (rule 4) settings numbered 1, 2, 3, ... = 1 iteration
    /// skipping, 1 not skipping, 2 skipping, ...
    int forward = 1, backward = 1;
    bool forward_half_steps = false, backward_half_steps = false;
    std::int64_t next_check = 0;  ///< the first batch of the next exact-gradient check
    bool lower_backward_next = true;
    /// The counts before the last lowering, while the next check verifies it.
    std::optional<std::pair<int, int>> before_lowering;
    /// Lowered settings (forward, backward) that failed their verification `failures` times
    /// since they last passed one, barred until `until` (kept after that, for the next bar's
    /// length: at most one per setting).
    struct Bar {
      int forward, backward;
      std::int64_t until;
      int failures = 1;
    };
    std::vector<Bar> bars;
    double loss_mean = 0;  ///< running mean of the batch losses (rule 3)
    std::int64_t losses = 0;
  };

  /// Starts from `forward` and `backward` iterations (the solver options' counts);
  /// `forward_skips`, `backward_skips`: whether those solvers skip the first down-cycle's
  /// relaxation, which gives a direction half steps (rule 4) when the control allows them.
  IterationController(IterationControl control, int forward, int backward,
                      bool forward_skips = false, bool backward_skips = false);

  int forward_iterations() const { return iterations(s_.forward, s_.forward_half_steps); }
  int backward_iterations() const { return iterations(s_.backward, s_.backward_half_steps); }
  /// Whether the forward (adjoint) solve must skip its first relaxation, in a direction with
  /// half steps; none where the solver's own setting stands.
  std::optional<bool> forward_skips() const { return skips(s_.forward, s_.forward_half_steps); }
  std::optional<bool> backward_skips() const { return skips(s_.backward, s_.backward_half_steps); }
  /// Whether batch `batch` is an exact-gradient check.
  bool check_due(std::int64_t batch) const;

  /// After a batch solved with MGRIT: the verdicts on its solves (judge(), agreed over the
  /// ranks). Returns true when the batch must be recomputed in exact mode (rule 2).
  bool observe_solves(std::int64_t batch, SolveVerdict forward, SolveVerdict backward);
  void observe_loss(std::int64_t batch, double loss);
  /// After check batch `batch`: the errors measured with the counts in force (rule 1), the
  /// gradient's and the forward's outputs' (none where not measured: the gradient's decides).
  void observe_check(std::int64_t batch, double gradient_error,
                     std::optional<double> forward_error = std::nullopt);

  const State& state() const { return s_; }
  /// Continues from `state` (a checkpoint's); the counts of the directions this control
  /// chooses are converted to this controller's steps (a whole count k becomes k iterations
  /// skipping; a half-step setting its iterations) and clamped to its bounds, the others keep
  /// the solver options' counts.
  void restore(const State& state);

 private:
  static int iterations(int count, bool half) { return half ? (count + 1) / 2 : count; }
  static std::optional<bool> skips(int count, bool half) {
    return half ? std::optional<bool>(count % 2 == 1) : std::nullopt;
  }
  int lowest(bool half) const {
    return half ? 2 * control_.min_iterations - 1 : control_.min_iterations;
  }
  int highest(bool half) const {
    return half ? 2 * control_.max_iterations : control_.max_iterations;
  }
  void raise(bool forward, bool backward);
  /// The batch at which the bar on (forward, backward) ends, if that setting is barred now.
  std::optional<std::int64_t> bar_end(int forward, int backward, std::int64_t batch) const;
  IterationControl control_;
  State s_;
};

}  // namespace weft::train
