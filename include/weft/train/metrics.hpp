#pragma once
// The figures a Trainer measures: per epoch (the `--metrics` JSON lines of `weft train`, also
// stored in each checkpoint) and per evaluation. No LibTorch.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft::train {

/// One layer-parallel rank's solver time per batch, forward + backward [ms].
struct RankTiming {
  int rank = 0;
  double steps_ms = 0;        ///< step evaluations
  double waiting_ms = 0;      ///< waiting for messages
  double bookkeeping_ms = 0;  ///< the solver's own work
  double outside_ms = 0;      ///< outside the solve (ghost exchange, open/close layers)
};

struct EpochMetrics {
  int epoch = 0;
  double train_loss = 0, train_accuracy = 0;  ///< means over the epoch's batches
  double test_loss = 0, test_accuracy = 0;
  double epoch_seconds = 0;  ///< training and evaluation
  double eval_seconds = 0;   ///< the evaluation alone
  /// The forward of the evaluation (to_string(EvaluationForward)); "exact" wherever the
  /// training's forward is (one level, or the sequential reference).
  std::string eval_forward = "exact";
  /// With EvaluationForward::both: the test figures of the training's forward solve.
  std::optional<double> mgrit_test_loss, mgrit_test_accuracy;
  /// Per batch, the slowest rank's mean over the epoch's batches after the first two [ms].
  double forward_ms = 0, backward_ms = 0, optimizer_ms = 0, batch_ms = 0;
  /// The time the slowest rank waited for its batches over the epoch's training [ms], and as a
  /// fraction of the epoch's training time (evaluation excluded): the loader keeps up when ~0.
  double data_wait_ms = 0, data_wait_fraction = 0;
  /// MGRIT iterations and final residuals per batch (means; none without MGRIT).
  std::optional<double> fwd_iterations, fwd_residual, bwd_iterations, bwd_residual;
  /// The most MGRIT iterations of a batch in the epoch (none without MGRIT).
  std::optional<double> fwd_iterations_max, bwd_iterations_max;
  /// Step evaluations per batch (mean), forward and adjoint, every level, summed over the
  /// replica's ranks; with automatic iterations including the exact recomputations.
  std::optional<double> step_evaluations;
  /// Automatic iterations (iteration_control.hpp): batches recomputed in exact mode after a
  /// stall or divergence, exact-gradient checks, their mean relative gradient error (none when
  /// no check ran), and the time of the exact recomputations [ms, the epoch's total].
  std::optional<std::int64_t> fallbacks, gradient_checks;
  std::optional<double> gradient_error, control_ms;
  /// The same error over the chain layers' parameters alone (the layers MGRIT solves over:
  /// not the open and close layers, whose gradients are often most of the norm and which the
  /// forward solve alone decides); none when no check ran.
  std::optional<double> gradient_error_layers;
  /// The checks' mean relative error of the MGRIT forward's logits against the network's own
  /// forward's, ‖z − z*‖ / ‖z*‖ over the batch; none when no check ran.
  std::optional<double> forward_error;
  /// With half steps (iteration_control.hpp, rule 4): the fraction of the epoch's batches
  /// whose forward (adjoint) solve ran without skip; none in a direction without half steps.
  std::optional<double> fwd_unskipped, bwd_unskipped;
  /// With IterationControl::diagnostics: the mean relative sampling noise of the checks'
  /// exact gradients, and the mean cosine between consecutive checks' gradient errors at the
  /// same setting (none when no such pair was measured).
  std::optional<double> gradient_noise, gradient_error_persistence;
  bool gradient_diagnostics = false;  ///< whether they were measured
  bool iteration_control = false;
  /// MG/Opt (mgopt.hpp): its levels, the coarse corrections of the epoch, the mean step
  /// length α of the accepted ones (none when none was) and how many the line search rejected.
  std::optional<int> mgopt_levels;
  std::optional<std::int64_t> mgopt_corrections, mgopt_rejected;
  std::optional<double> mgopt_step_mean;
  /// The most bytes a rank received from the chain's other ranks per batch in MG/Opt's transfers
  /// between levels [KiB]: each rank receives what its layers read, not whole levels.
  std::optional<double> mgopt_transfer_kib;
  int ranks = 1;  ///< all ranks of the run (1 with serial)
  std::int64_t fwd_levels = 1, bwd_levels = 1;
  int data_ranks = 1;  ///< replicas
  double lr_end = 0;   ///< the learning rate of the epoch's last batch
  std::string model;   ///< ModelConfig::kind
  /// With nested iteration over depth: the residual steps (all stages) trained in this epoch.
  std::optional<std::int64_t> depth;
  bool serial = false;
  /// One entry per rank of the first replica, on rank 0 (empty without MGRIT).
  std::vector<RankTiming> per_rank;
};

/// The metrics as one JSON object on one line (the keys as above).
std::string to_json(const EpochMetrics& m);

/// A classifier's figures on a data set: mean loss, accuracy, and the confusion matrix
/// (classes x classes, row = true label, column = predicted), summed over every rank.
struct Evaluation {
  double loss = 0, accuracy = 0;
  int classes = 10;
  std::vector<std::int64_t> confusion;
};

}  // namespace weft::train
