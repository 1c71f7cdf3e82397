#pragma once
// Probes: the kernels the layer-parallel modules run inside their solves, callable on their
// own, so that a cost model (`weft predict`), a benchmark or a test can time or check exactly
// what a solve evaluates without reaching into the module's internals.
//
//   weft::nn::SpatialProbe spatial;                   // LayerParallel's spatial coarsening
//   torch::Tensor coarse = spatial.restrict(state);   // [N, C, H, W] -> [N, C, H/2, W/2]
//   weft::nn::CellProbe cell(weft::nn::CellKind::GRU, /*layers=*/2);
//   auto next = cell.step(state, x_t, parameters);    // one MGRIT step of Recurrent
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "weft/nn/recurrent.hpp"

namespace weft::nn {

namespace detail {
class SpatialTransfer;
struct StackedCell;
}  // namespace detail

/// The transfers between a level and the level coarsened in space from it (full weighting
/// with stride 2 and its transpose; LayerParallelOptions::spatial_levels), without graphs.
class SpatialProbe {
 public:
  SpatialProbe();
  ~SpatialProbe();
  SpatialProbe(const SpatialProbe&) = delete;
  SpatialProbe& operator=(const SpatialProbe&) = delete;

  torch::Tensor restrict(const torch::Tensor& fine);
  torch::Tensor interpolate(const torch::Tensor& coarse);

  /// Each level's depth (how often its states are restricted) for the flags of
  /// spatial_levels over `levels` levels.
  static std::vector<int> depths(const std::vector<int>& flags, int levels);
  /// Empty when a state of `shape` can be restricted, else why not.
  static std::string why_not_coarsenable(const std::vector<std::int64_t>& shape);

 private:
  std::unique_ptr<detail::SpatialTransfer> transfer_;
};

/// One step of Recurrent's stacked cell as its MGRIT steps evaluate it: the state is the
/// layers' h (and, for LSTM, c: h_0, c_0, h_1, c_1, ...), `parameters` torch's weight_ih,
/// weight_hh, bias_ih, bias_hh of every layer in order.
class CellProbe {
 public:
  CellProbe(CellKind kind, std::int64_t layers, double implicit_step = 0,
            int implicit_iterations = 3);
  ~CellProbe();
  CellProbe(const CellProbe&) = delete;
  CellProbe& operator=(const CellProbe&) = delete;

  /// The state after one step from `state` with input `x` (`span` fine steps for the implicit
  /// cell's coarse steps; the explicit cell evaluates once).
  std::vector<torch::Tensor> step(const std::vector<torch::Tensor>& state, const torch::Tensor& x,
                                  const std::vector<torch::Tensor>& parameters,
                                  std::int64_t span = 1) const;
  /// The index of the top layer's h in the state.
  std::size_t top_h() const;
  CellKind kind() const;
  bool implicit() const;

 private:
  std::unique_ptr<detail::StackedCell> cell_;
};

}  // namespace weft::nn
