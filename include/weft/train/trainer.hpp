#pragma once
// weft::train::Trainer: the training loop of `weft train` as a library. It builds the model a
// ModelConfig names (layer-parallel over the ranks, with replicas, or the sequential
// reference), trains it epoch by epoch with the documented shuffles and per-replica splits,
// evaluates after every epoch, writes and resumes crash-safe checkpoints, and reports to
// observers (observer.hpp) instead of printing.
//
//   weft::train::TrainerOptions options;              // the model, batch, epochs, optimizer ...
//   weft::train::Trainer trainer(options, train_data, test_data, MPI_COMM_WORLD);
//   trainer.add_observer(std::make_shared<MyLogger>());
//   trainer.fit();                                     // collective over the communicator
#include <mpi.h>

#include <memory>
#include <string>

#include "weft/nn/network.hpp"
#include "weft/train/data_source.hpp"
#include "weft/train/metrics.hpp"
#include "weft/train/observer.hpp"
#include "weft/train/options.hpp"

namespace torch {
namespace nn {
class Module;
}
namespace optim {
class Optimizer;
}
}  // namespace torch

namespace weft::train {

class Trainer {
 public:
  /// Collective over `comm`. Validates `options` (weft::InvalidOption naming the field), builds
  /// the model and the optimizer and, with options.resume_dir, loads the checkpoint (its model
  /// replaces options.model; weft::BadData when it does not fit the data). With
  /// options.serial, rank 0 trains alone and the other ranks' fit() returns at once.
  Trainer(TrainerOptions options, std::shared_ptr<const DataSource> train,
          std::shared_ptr<const DataSource> test, MPI_Comm comm);
  /// The same for a network of the user's own (its layers, stages, open and close layers;
  /// weft/nn/network.hpp) instead of options.model, whose kind becomes "custom" (t_final and
  /// seed are stored in checkpoints). A resumed run must be given the same network.
  Trainer(TrainerOptions options, nn::Network network, std::shared_ptr<const DataSource> train,
          std::shared_ptr<const DataSource> test, MPI_Comm comm);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Observers receive every event on every rank that trains (observer.hpp).
  void add_observer(std::shared_ptr<Observer> observer);

  /// Trains the epochs from start_epoch() to options().epochs; collective. Throws Diverged
  /// (on every rank) when the loss becomes NaN or infinite.
  void fit();

  /// `data` in eval mode (batch norm with running statistics, no dropout), in batches of
  /// options().eval_batch (0: max(batch, 500)) as after every epoch, with the forward of
  /// options().evaluation_forward (both: the exact one); collective.
  Evaluation evaluate(const DataSource& data);

  /// The options in force (with resume: the checkpoint's model).
  const TrainerOptions& options() const;
  /// The first epoch fit() trains: 1, or the checkpoint's epoch + 1.
  int start_epoch() const;
  /// False on the ranks that have nothing to do (serial: every rank but 0).
  bool active() const;
  /// This rank's part of the model (null where !active()).
  torch::nn::Module* module();
  torch::optim::Optimizer* optimizer();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// Evaluates the model of checkpoint `dir` on `data` in exact mode, at any rank count (the
/// checkpoint's own rank count does not matter); collective over `comm`.
Evaluation evaluate_checkpoint(const std::string& dir, const DataSource& data, std::int64_t batch,
                               MPI_Comm comm);
/// The same for a checkpoint of a network of the user's own (`network` as it was trained).
Evaluation evaluate_checkpoint(const std::string& dir, const nn::Network& network,
                               const DataSource& data, std::int64_t batch, MPI_Comm comm);

/// torch intra-op threads per rank: `requested`, or cores / ranks of `comm` when 0. Also makes
/// subnormal floats zero (a long recurrent adjoint decays through them at several times the
/// cost of each operation; no trained result changes).
void set_torch_threads(int requested, MPI_Comm comm);

}  // namespace weft::train
