#pragma once
// MG/Opt's V-cycle over the depth hierarchy (weft/train/mgopt.hpp), one per batch. The coarser
// levels' networks live here, over the same ranks as the model, each in its own layout: the
// parameters, gradients and corrections move between levels by name (nn/depth.hpp), each rank
// receiving from the chain's other ranks only what its layers read. Private to weft_train.
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "classifier.hpp"
#include "named_exchange.hpp"
#include "weft/nn/depth.hpp"
#include "weft/train/mgopt.hpp"

namespace weft::train {

/// What the V-cycles did (this rank; the decisions are the same on every rank).
struct MGOptTally {
  std::int64_t corrections = 0;  ///< coarse corrections tried (one per level pair and cycle)
  std::int64_t rejected = 0;     ///< ... of which no step length decreased the objective
  double step_sum = 0;           ///< the sum of the accepted step lengths α
  std::int64_t steps = 0;        ///< step evaluations of this rank's MGRIT solves, every level
  /// Bytes this rank received from the chain's other ranks in the transfers between levels.
  std::int64_t received_bytes = 0;
};

class MultilevelOptimizer {
 public:
  using OptimizerFactory =
      std::function<std::unique_ptr<torch::optim::Optimizer>(torch::nn::Module&)>;
  /// `model` is level 0's network (the Trainer's, given to cycle()); levels 1 … L−1 are built
  /// here over `comm` (this replica's chain) with `solver`, each with an optimizer of
  /// `make_optimizer`. `data` reduces the replicas' losses, `agree` agrees on every decision.
  MultilevelOptimizer(const MGOpt& mgopt, const ModelConfig& model,
                      const std::vector<std::int64_t>& example_shape, MPI_Comm comm, MPI_Comm data,
                      MPI_Comm agree, bool serial, const nn::LayerParallelOptions& solver,
                      const OptimizerFactory& make_optimizer);
  ~MultilevelOptimizer();

  /// One V-cycle on the batch from level 0 = (`fine`, `optimizer`) at learning rate `lr`
  /// (every level). Returns the loss and correct predictions at the parameters the batch
  /// started from, as Classifier::train. Throws Diverged on every rank.
  BatchOutcome cycle(Classifier& fine, torch::optim::Optimizer& optimizer, const Batch& batch,
                     double weight, std::int64_t global_batch, double lr, PhaseTimes& t);

  /// Steps 2–3 of the V-cycle at level l (mgopt.hpp): F_l(θ_l) and its gradient, θ_{l+1} =
  /// Rθ_l with the optimizer state restricted, and the coherence term v_{l+1} (collective).
  /// Returns F_l(θ_l); `transposed` receives Pᵀ∇F_l in the order of level l+1's parameters.
  double coarse_problem(int level, const Batch& batch, double weight, std::int64_t global_batch,
                        std::vector<torch::Tensor>* transposed = nullptr);
  /// F_l at level l's current parameters, its gradient left in the parameters' gradients.
  double gradient(int level, const Batch& batch, double weight, std::int64_t global_batch);
  /// Level l's network (level 0: the one bound last) and its coherence term v_l (empty at
  /// level 0), in the order of module().parameters().
  Classifier& level_model(int level);
  const std::vector<torch::Tensor>& coherence(int level) const;

  /// The tally so far, and the same starting over (per epoch).
  const MGOptTally& tally() const { return tally_; }
  MGOptTally take_tally();
  /// Makes (`fine`, `optimizer`) level 0 (cycle() does; tests call it before coarse_problem).
  void bind_fine(Classifier& fine, torch::optim::Optimizer& optimizer);

 private:
  struct Level;
  struct Transfers;
  /// The plan of the transfers between level l and l+1, made at their first use (collective).
  Transfers& transfers(int level);
  void vcycle(int level, const Batch& batch, double weight, std::int64_t global_batch,
              PhaseTimes& t, BatchOutcome* first);
  double objective(int level, const Batch& batch, double weight, std::int64_t global_batch,
                   bool with_gradient, PhaseTimes& t, BatchOutcome* first);
  void smooth(int level, int steps, const Batch& batch, double weight, std::int64_t global_batch,
              PhaseTimes& t, BatchOutcome* first);
  double coarse_problem(int level, const Batch& batch, double weight, std::int64_t global_batch,
                        PhaseTimes& t, BatchOutcome* first, std::vector<torch::Tensor>* transposed);
  std::vector<torch::Tensor> restrict_to(int level);
  void correct(int level, const std::vector<torch::Tensor>& start, double f0, const Batch& batch,
               double weight, std::int64_t global_batch, PhaseTimes& t);

  MGOpt mgopt_;
  MPI_Comm comm_, data_, agree_;
  std::vector<std::unique_ptr<Level>> levels_;
  std::vector<nn::DepthRefinement> between_;  ///< between_[l]: level l+1 refined to level l
  std::vector<std::unique_ptr<Transfers>> transfers_;
  MGOptTally tally_;
};

}  // namespace weft::train
