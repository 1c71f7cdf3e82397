#pragma once
// `weft predict`: time per batch at P ranks from costs measured here (weft/train/
// cost_measurement.hpp), priced by the nn layer's cost model (weft/nn/cost_model.hpp).
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
  /// Busy-core slowdown of every rank's computing at P > 1: < 0 measured here
  /// (weft::train::measure_busy_slowdown, with as many cores busy as P ranks keep busy on this
  /// machine), 0 none, >= 1 this factor.
  double contention = -1;
};

/// Collective over `comm`; returns the exit code.
int run_prediction(const PredictConfig& config, MPI_Comm comm);

}  // namespace weft::cli
