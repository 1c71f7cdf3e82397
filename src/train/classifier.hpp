#pragma once
// The model a Trainer trains, behind one interface: the layer-parallel chain (replicas over a
// data communicator), the plain sequential network (serial), or the recurrent classifier
// (replicated on every rank, parallel over the sequence). Private to weft_train.
#include <mpi.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "weft/models/sequence_classifier.hpp"
#include "weft/nn/layer_parallel.hpp"
#include "weft/train/data_source.hpp"
#include "weft/train/metrics.hpp"
#include "weft/train/model_config.hpp"
#include "weft/train/options.hpp"

namespace weft::train {

struct BatchOutcome {
  double loss = 0;     ///< mean over the batch, on every rank
  double correct = 0;  ///< on every rank
  /// The logits (detached), where this rank has them: the chain's output rank, every rank of
  /// a replicated or sequential model. Set by Classifier::gradients.
  torch::Tensor logits;
};

struct PhaseTimes {
  double forward = 0, backward = 0, optimizer = 0;  ///< [s]
};

class Classifier {
 public:
  Classifier(const ModelConfig& m, const std::vector<std::int64_t>& example_shape, MPI_Comm comm,
             MPI_Comm data, bool serial, const nn::LayerParallelOptions& options);
  /// A network of the user's own (layer-parallel over `comm`, or sequential when serial) whose
  /// close layer gives `classes` logits.
  Classifier(const nn::Network& network, int classes, MPI_Comm comm, MPI_Comm data, bool serial,
             const nn::LayerParallelOptions& options);
  /// The logits per example (the model's classes).
  int classes() const { return classes_; }
  /// Random streams continue from batch `b` (resume).
  void set_batch_index(std::int64_t b);
  torch::nn::Module& module();
  /// For each of module().parameters(), in order: whether it belongs to a layer the MGRIT
  /// solves run over (a step or transition layer; the recurrent model's cells), not to the
  /// open or close layer or the recurrent model's head.
  std::vector<bool> chain_parameters();
  /// The last batch's MGRIT solves on this rank (none for the sequential reference).
  const nn::SolveReport* solve_report(bool forward);
  /// The recurrent model is replicated: rank 0 of the layer communicator saves it alone, over
  /// this communicator, and every rank loads it whole.
  bool replicated() const { return static_cast<bool>(recurrent_); }
  /// This rank's chain layers [first, end) of the layer-parallel model; {0, 0} for the others.
  std::pair<std::int64_t, std::int64_t> local_layers() const {
    if (serial_ || recurrent_) return {0, 0};
    return {parallel_->first_layer(), parallel_->end_layer()};
  }
  MPI_Comm checkpoint_comm() const { return recurrent_ ? MPI_COMM_SELF : comm_; }
  /// Whether this rank takes the inputs; the others load the labels alone. Every rank of a
  /// replicated model does, only the chain's first rank of a layer-parallel one.
  bool needs_inputs() const { return serial_ || recurrent_ || parallel_->owns_input(); }
  /// The ranks that go through every batch together (one replica's chain).
  MPI_Comm layer_comm() const { return comm_; }

  /// One optimizer step. `weight` scales the mean loss of this replica's rows so that the
  /// replicas' average is the mean over the global batch. Throws Diverged (on every rank).
  BatchOutcome train(const torch::Tensor& x, const torch::Tensor& y, torch::optim::Optimizer& opt,
                     PhaseTimes& t, double weight = 1.0);
  /// train() in two halves: the batch's gradients, accumulated into the parameters' (zero them
  /// first) [t.forward, t.backward], and the optimizer step [t.optimizer].
  BatchOutcome gradients(const torch::Tensor& x, const torch::Tensor& y, PhaseTimes& t,
                         double weight = 1.0);
  void step(torch::optim::Optimizer& opt, PhaseTimes& t);
  /// The mean loss of the batch in training mode (batch statistics, dropout), without
  /// gradients, times `weight`, on every rank of the chain [t.forward].
  double loss(const torch::Tensor& x, const torch::Tensor& y, PhaseTimes& t, double weight = 1.0);
  /// The solvers' options in force (exact mode for the sequential reference), and new ones
  /// (collective; ignored by the sequential reference).
  nn::LayerParallelOptions solver_options();
  void set_solver_options(const nn::LayerParallelOptions& options);
  /// Sums of losses and correct predictions over the batch, on every rank; `confusion`
  /// (classes x classes, row = true label) is accumulated on the rank that has the logits.
  BatchOutcome evaluate(const torch::Tensor& x, const torch::Tensor& y,
                        std::vector<std::int64_t>& confusion, int classes);
  /// Whether the model is a layer-parallel chain (nn::LayerParallelImpl::infer applies).
  bool layer_parallel() const { return !serial_ && !recurrent_; }
  /// The layer-parallel chain's pipelined exact inference (nn::LayerParallelImpl::infer).
  void infer(std::int64_t count, const std::function<torch::Tensor(std::int64_t)>& input,
             const std::function<void(std::int64_t, const torch::Tensor&)>& output) {
    parallel_->infer(count, input, output);
  }
  /// Broadcasts `values` from the chain's output rank over layer_comm() (layer-parallel only).
  void from_output(double* values, int count) const;

 private:
  void build(const nn::Network& net, MPI_Comm data, const nn::LayerParallelOptions& options);
  void average_gradients();

  MPI_Comm comm_;
  MPI_Comm data_ = MPI_COMM_NULL;
  bool serial_;
  int classes_ = 10;
  nn::SequentialNetwork sequential_{nullptr};
  nn::LayerParallel parallel_{nullptr};
  models::SequenceClassifier recurrent_{nullptr};
};

/// `options` with one level in both directions and no spatial coarsening: exact mode.
nn::LayerParallelOptions exact_version(nn::LayerParallelOptions options);
/// Whether the forward solve of `options` is the network's own forward (one level).
bool is_exact(const nn::LayerParallelOptions& options);

/// In eval mode (batch norm with running statistics, no dropout), with `forward` (both: exact).
/// With replicas,
/// replica r takes every D-th batch; sums are reduced over `data` (replicas) and the confusion
/// matrix over `world`. A layer-parallel chain with the exact forward pipelines each replica's
/// examples in pieces of at most `batch` (fewer, smaller pieces where the replica's share would
/// give less than 4 per rank); per-example results are those of whole batches up to round-off.
Evaluation evaluate(Classifier& model, const DataSource& test, std::int64_t batch, MPI_Comm world,
                    MPI_Comm data = MPI_COMM_NULL,
                    EvaluationForward forward = EvaluationForward::exact);

}  // namespace weft::train
