#pragma once
// `weft predict`: time per batch at P ranks from costs measured here, priced by the nn layer's
// cost model (weft/nn/cost_model.hpp). LibTorch-free: the costs come from predict_costs.cpp,
// the only file of `predict` that includes LibTorch.
#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "training.hpp"
#include "weft/mgrit/schedule.hpp"
#include "weft/nn/cost_model.hpp"

namespace weft::cli {

using nn::LinkCosts;
using nn::MeasuredCosts;
using nn::Prediction;
using nn::SpatialCosts;

struct PredictConfig {
  TrainConfig train;
  std::string json_path;
  std::vector<int> ranks;  ///< empty: 1, 2, 4, ... up to min(1024, N)
  int repeats = 9;         ///< measuring passes
  /// Weak scaling (> 0): the network has weak × P layers at P ranks (--model resnet, whose
  /// layers cost alike: the costs measured on --steps layers are extended layer by layer).
  std::int64_t weak = 0;
  double latency = -1;    ///< seconds; < 0: ping-pong with 2 ranks, else the default
  double bandwidth = -1;  ///< bytes per second; likewise
};

/// Measures the model's costs on this process (LibTorch; predict_costs.cpp): each figure is
/// the median over `passes` passes spread over time.
MeasuredCosts measure_costs(const TrainConfig& c, int passes);

/// Collective over `comm`; returns the exit code.
int run_prediction(const PredictConfig& config, MPI_Comm comm);

}  // namespace weft::cli
