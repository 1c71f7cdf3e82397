#pragma once
// The costs a model's training batch is made of, measured on this process, for the cost model
// of weft/nn/cost_model.hpp (`weft predict` prices batches at P ranks with them):
//
//   weft::train::TrainerOptions o;                 // model, batch, optimizer, solver options
//   auto costs = weft::train::measure_costs(o, {1, 28, 28}, /*passes=*/9);
//   auto at8 = weft::nn::predict_batch(o.parallel, costs, weft::nn::LinkCosts{}, 8);
//
// Every figure is the median over passes spread over several seconds (a shared machine's speed
// drifts); the chain's steps and the recurrent cell are timed through the nn probes, i.e. the
// code the solvers run. One pass also trains one batch at one rank, whose solvers time their
// own sweeps: the in-situ factors and the per-rank fixed costs of MeasuredCosts.
#include <cstdint>
#include <vector>

#include "weft/nn/cost_model.hpp"
#include "weft/nn/network.hpp"
#include "weft/train/options.hpp"

namespace weft::train {

/// Not collective (modules on MPI_COMM_SELF). `example_shape`: one example without the batch
/// dimension ([channels, rows, cols]; [channels, depth, rows, cols] for conv3d). Uses
/// options.model, batch, optimizer, lr, momentum, threads (0: one) and parallel. At least 3
/// passes run (fewer than `passes` once 20 s have gone). Throws weft::InvalidOption
/// ("LayerParallelOptions", "spatial_levels", ...) when a state cannot be coarsened in space,
/// weft::BadData with LibTorch's message when the model cannot run on such examples.
nn::MeasuredCosts measure_costs(const TrainerOptions& options,
                                const std::vector<std::int64_t>& example_shape, int passes);

/// The cost of every chain layer of `network` for nn::LayerParallelOptions::layer_costs
/// (nn::layer_costs of its fine steps' figures), timed as measure_costs times them (the
/// median of `repeats` runs each, at options.batch examples of `example_shape`, in training
/// mode) but without the passes, the rest of the batch or the in-situ factors: seconds on this
/// process, for the layers' placement at the start of a run. The default random generator is
/// left as it was. Not collective (a module on MPI_COMM_SELF).
std::vector<double> measure_layer_costs(const TrainerOptions& options, const nn::Network& network,
                                        const std::vector<std::int64_t>& example_shape,
                                        int repeats);

/// The cores this process may run on (its CPU affinity).
int available_cores();

/// How much slower a rank computes when other cores are busy too: for each count b in
/// `busy_cores`, the model's plain LibTorch batch (`weft train --serial`) timed while b - 1
/// other threads run the same batch on their own copies, over the same batch timed alone
/// (1 for b = 1), the median over `passes` passes (at least 3, fewer once 20 s have gone), each
/// timing alone and loaded back to back. On a machine whose cores share a clock budget, host
/// or memory bandwidth, this is the factor by which every step of a P-rank run costs more than
/// measure_costs' figures, which are timed with one core busy. Not collective. Throws
/// weft::InvalidOption ("measure_busy_slowdown", "busy_cores") for a count outside 1 ..
/// available_cores() / threads.
std::vector<double> measure_busy_slowdown(const TrainerOptions& options,
                                          const std::vector<std::int64_t>& example_shape,
                                          const std::vector<int>& busy_cores, int passes);

}  // namespace weft::train
