#pragma once
// Private to weft_nn: the MPI tags of its messages on the module's own (duplicated)
// communicators. The solvers use tags 100 + level on theirs.
namespace weft::nn::detail::tags {
constexpr int kGhostLayers = 7001;
constexpr int kGather = 7002;
constexpr int kLoad = 7003;
constexpr int kBoundaryState = 7302;
constexpr int kRecurrentBoundary = 7303;
constexpr int kRecurrentInputs = 7304;
constexpr int kRecurrentOutputGrad = 7305;
constexpr int kInferenceState = 7306;
}  // namespace weft::nn::detail::tags
