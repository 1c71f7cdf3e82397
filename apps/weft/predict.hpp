#pragma once
// `weft predict`: time per batch at P ranks from costs measured here, by replaying the MGRIT
// solvers' own schedule (weft/mgrit/schedule.hpp) on virtual clocks. LibTorch-free: the costs
// come from predict_costs.cpp, the only file of `predict` that includes LibTorch.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "training.hpp"
#include "weft/mgrit/schedule.hpp"

namespace weft::cli {

/// Seconds per evaluation, measured with the model's own layers at the training batch size.
struct MeasuredCosts {
  std::int64_t layers = 0;               ///< N chain layers (steps and transitions)
  std::vector<bool> transition;          ///< per layer
  std::vector<double> step_size;         ///< per layer: h of its stage (0 for a transition)
  std::vector<std::size_t> state_bytes;  ///< per point 0..N
  // Per layer n, the step into n+1 (forward) or into n (adjoint):
  std::vector<double> forward;         ///< x + h F(x) without a graph (iterations, coarse steps)
  std::vector<double> forward_record;  ///< the same, recording the graph (final fine sweep)
  std::vector<double> adjoint_reuse;   ///< λ + h (∂F/∂x)ᵀ λ on the recorded graph
  std::vector<double> adjoint_final;   ///< the same with the parameter gradients (final sweep)
  std::vector<double> adjoint_build;   ///< record the graph, then the vjp (coarse steps)
  std::vector<double> axpy;            ///< per point: y += a x on its state (FAS updates)
  std::vector<double> parameters;      ///< per layer: parameter count
  double open_forward = 0, open_backward = 0;  ///< on the input rank
  double close = 0;                  ///< close layer, loss and their backward, on the output rank
  double open_close_parameters = 0;  ///< parameter count of open (first rank) and close (last)
  double open_parameters = 0;
  double optimizer = 0;      ///< one optimizer step over all parameters
  double serial_batch = 0;   ///< plain LibTorch: forward, loss, backward, optimizer step
  bool has_buffers = false;  ///< batch norm: the forward's final sweep is F then C
  int threads = 1;           ///< torch threads the costs were measured with
};

/// Message cost between two ranks.
struct LinkCosts {
  double latency = 0;    ///< seconds
  double bandwidth = 0;  ///< bytes per second
  std::string source;    ///< "ping-pong between ranks 0 and 1" or "default" / "flags"
};

struct PredictConfig {
  TrainConfig train;
  std::string json_path;
  std::vector<int> ranks;  ///< empty: 1, 2, 4, ... up to min(1024, N)
  int repeats = 5;
  double latency = -1;    ///< seconds; < 0: ping-pong with 2 ranks, else the default
  double bandwidth = -1;  ///< bytes per second; likewise
};

/// One rank count's figures.
struct Prediction {
  int ranks = 1;
  double batch_seconds = 0;
  double busiest_seconds = 0;  ///< steps and fixed work of the busiest rank
};

/// The price of one solver step under the measured costs (forward or adjoint, any level).
double step_seconds(const MeasuredCosts& m, const mgrit::Event& e, bool cache_graphs);

/// Every rank's events of one training batch at `ranks` ranks: open, forward solve, boundary
/// exchange, close and loss, loss broadcast, adjoint solve, open's backward, optimizer step.
mgrit::Schedule batch_schedule(const TrainConfig& c, const MeasuredCosts& m, int ranks);

Prediction predict_batch(const TrainConfig& c, const MeasuredCosts& m, const LinkCosts& link,
                         int ranks);

/// Measures the model's costs on this process (LibTorch; predict_costs.cpp).
MeasuredCosts measure_costs(const TrainConfig& c, int repeats);

/// Collective over `comm`; returns the exit code.
int run_prediction(const PredictConfig& config, MPI_Comm comm);

}  // namespace weft::cli
