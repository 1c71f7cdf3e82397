#pragma once
// Small vocabulary types shared by the MGRIT core.
#include <cstdint>

namespace weft::mgrit {

/// Index of a time point (fine grids of 2^20 and more points are routine).
using index_t = std::int64_t;

/// Forward solves march from t_0 to t_N; reverse solves (adjoints) from t_N down to t_0.
enum class Direction { Forward, Reverse };

/// What the solver tells the App about one step evaluation.
struct StepInfo {
  int level = 0;      ///< 0 is the fine grid
  index_t from = 0;   ///< fine-grid index of the step's start point (the user's numbering)
  index_t to = 0;     ///< fine-grid index of the step's end point
  bool done = false;  ///< true in the final fine sweep after the iterations
  Direction direction = Direction::Forward;
  /// On the fine grid with Options::error_estimates: the local error estimate of the point
  /// this step computes (`to`), from the last restriction; -1 when there is none (yet).
  double error_estimate = -1;
  /// With Options::error_estimates: the largest estimate over all fine points (-1: none yet).
  double largest_error_estimate = -1;
  /// The MGRIT iteration the step belongs to (a cycle repeated after a temporal refinement
  /// keeps its number); -1 outside the iterations (a one-level solve).
  int iteration = -1;
};

}  // namespace weft::mgrit
