// Probes (weft/nn/probes.hpp): the public face of the spatial transfer and the stacked cell.
#include "weft/nn/probes.hpp"

#include "recurrent_solve.hpp"
#include "spatial.hpp"

namespace weft::nn {

SpatialProbe::SpatialProbe() : transfer_(std::make_unique<detail::SpatialTransfer>()) {}
SpatialProbe::~SpatialProbe() = default;

torch::Tensor SpatialProbe::restrict(const torch::Tensor& fine) {
  return transfer_->restrict(fine);
}
torch::Tensor SpatialProbe::interpolate(const torch::Tensor& coarse) {
  return transfer_->interpolate(coarse);
}
std::vector<int> SpatialProbe::depths(const std::vector<int>& flags, int levels) {
  return detail::spatial_depths(flags, levels);
}
std::string SpatialProbe::why_not_coarsenable(const std::vector<std::int64_t>& shape) {
  return detail::why_not_coarsenable(shape);
}

CellProbe::CellProbe(CellKind kind, std::int64_t layers, double implicit_step,
                     int implicit_iterations)
    : cell_(std::make_unique<detail::StackedCell>()) {
  cell_->kind = kind;
  cell_->layers = layers;
  cell_->implicit_step = implicit_step;
  cell_->implicit_iterations = implicit_iterations;
}
CellProbe::~CellProbe() = default;

std::vector<torch::Tensor> CellProbe::step(const std::vector<torch::Tensor>& state,
                                           const torch::Tensor& x,
                                           const std::vector<torch::Tensor>& parameters,
                                           std::int64_t span) const {
  return cell_->step(state, x, parameters, span);
}
std::size_t CellProbe::top_h() const {
  return cell_->top_h();
}
CellKind CellProbe::kind() const {
  return cell_->kind;
}
bool CellProbe::implicit() const {
  return cell_->implicit_step > 0;
}

}  // namespace weft::nn
