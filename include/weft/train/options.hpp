#pragma once
// How a Trainer trains: the model, the loop's settings, the MPI layout, checkpoints and the
// timeline. No LibTorch: front ends fill it from their own flags.
#include <cstdint>
#include <string>

#include "weft/nn/options.hpp"
#include "weft/train/depth_growth.hpp"
#include "weft/train/iteration_control.hpp"
#include "weft/train/mgopt.hpp"
#include "weft/train/model_config.hpp"
#include "weft/util/error.hpp"

namespace weft::train {

/// The forward that evaluates the test set after every epoch (and Trainer::evaluate).
enum class EvaluationForward {
  /// The network's own forward (no MGRIT): what serial LibTorch and `weft eval` compute. A
  /// layer-parallel chain runs it pipelined over the evaluation batches
  /// (nn::LayerParallelImpl::infer); the recurrent model runs its exact mode.
  exact,
  /// The training's forward solve (its levels and iterations) in evaluation mode: an
  /// approximation of the network's forward, as good as the solve.
  solver,
  /// Both, where they differ (a multilevel forward solve): the exact figures as the test loss
  /// and accuracy, the solve's beside them (EpochMetrics::mgrit_test_loss).
  both,
};
/// "exact", "solver" or "both".
const char* to_string(EvaluationForward forward);

struct TrainerOptions {
  ModelConfig model;  ///< with resume_dir: replaced by the checkpoint's
  /// Nested iteration over depth: `model` is the full depth, reached after growth.refinements
  /// refinements (depth_growth.hpp). With resume_dir: replaced by the checkpoint's.
  DepthGrowth growth;
  std::int64_t batch = 50;
  int epochs = 2;  ///< the last epoch; a resumed run continues after the checkpoint's epoch
  std::string optimizer = "adam";  ///< sgd | adam
  double lr = 1e-3;
  /// constant | cosine: lr · (1 + cos(π k / K)) / 2 at global batch k of K = epochs × batches
  /// per epoch (a function of the batch index only, so resumed runs follow the same curve).
  std::string lr_schedule = "constant";
  double momentum = 0.9;  ///< sgd
  int threads = 0;        ///< torch intra-op threads per rank; 0: cores / ranks
  bool serial = false;    ///< plain sequential LibTorch on rank 0: the reference
  int data_ranks = 1;     ///< replicas of ranks / data_ranks layer-parallel ranks each
  nn::LayerParallelOptions parallel;
  /// Place the layers by cost (nn::LayerParallelOptions::layer_costs): at the start and at
  /// each depth refinement, rank 0 times every chain layer's fine steps at the training batch
  /// (measure_layer_costs) and every rank builds the model with blocks of equal cost. Off:
  /// equal numbers of layers per rank. Where the layers run changes, not what they compute.
  bool balance_cost = false;
  /// MGRIT iterations chosen by the training (iteration_control.hpp): the automatic
  /// directions start from parallel's counts.
  IterationControl iterations;
  /// MG/Opt over depth (mgopt.hpp): each batch a V-cycle over `model` and its shallower
  /// versions (levels 0: plain training).
  MGOpt mgopt;
  /// Evaluation batch; 0: max(batch, 500).
  std::int64_t eval_batch = 0;
  EvaluationForward evaluation_forward = EvaluationForward::both;
  std::string checkpoint_dir;               ///< a checkpoint after every epoch (empty: none)
  std::string resume_dir;                   ///< continue from this checkpoint (empty: a new run)
  std::string trace_path;                   ///< a timeline of a few batches (docs/tracing.md)
  std::int64_t trace_batches = 4;           ///< traced batches, after the first two of the run
  std::string trace_source = "weft train";  ///< the trace's "source" field
};

/// Throws weft::InvalidOption("Trainer", FIELD, DETAIL) for a value outside what is accepted.
void validate(const TrainerOptions& options, int ranks);

/// The learning rate at global batch k (0-based) of a run with `batches_per_epoch`.
double learning_rate(const TrainerOptions& options, std::int64_t k, std::int64_t batches_per_epoch);

/// The loss became NaN or infinite (on every rank together: the loss is reduced).
class Diverged : public Divergence {
 public:
  explicit Diverged(double loss);
  double loss() const noexcept { return loss_; }

 private:
  double loss_;
};

}  // namespace weft::train
