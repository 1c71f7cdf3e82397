#pragma once
// Private to weft_nn: the parts behind LayerParallelImpl (its pimpl), each in its own file:
// chain (the network's layers and stages), placement (who owns and evaluates what), layer bank
// (the layers held here), layer evaluator (every evaluation: streams, buffers, graphs, VJPs),
// batch solve (the two MGRIT solves of a batch) and gradient sync (data parallelism).
#include <torch/torch.h>

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "batch_solve.hpp"
#include "chain.hpp"
#include "gradient_sync.hpp"
#include "layer_bank.hpp"
#include "layer_evaluator.hpp"
#include "placement.hpp"
#include "weft/nn/layer_parallel.hpp"
#include "weft/util/clock.hpp"
#include "weft/util/mpi.hpp"

namespace weft::nn::detail {

/// The chain of a network description (checks it: InvalidOption naming the problem).
Chain chain_of(const std::vector<Stage>& stages);

struct Core {
  Core(torch::nn::Module& owner, MPI_Comm layer_comm, MPI_Comm data_comm, Network network,
       LayerParallelOptions options);

  torch::nn::Module& owner;
  mpi::OwnedComm comm, data;
  int rank = 0, ranks = 1;
  Network net;
  std::vector<Stage> stages;
  Chain chain;
  LayerParallelOptions opts;
  Placement placement;
  LayerBank bank;
  LayerEvaluator evaluator;
  GradientSync sync;
  BatchStatistics stats;
  BatchSolve solve;

  std::int64_t generation = 0;   ///< bumped by forward, set_options and to(): stale graphs
  std::int64_t batches = 0;      ///< forward calls
  std::int64_t batch_index = 0;  ///< training-mode forwards (random streams)
};

using weft::clock::now;  // the timers of the batch statistics

}  // namespace weft::nn::detail
