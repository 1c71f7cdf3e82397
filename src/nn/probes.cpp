// Probes (weft/nn/probes.hpp): the public face of the spatial transfer, the stacked cell and
// the chain's layer evaluator.
#include "weft/nn/probes.hpp"

#include "core.hpp"
#include "recurrent_solve.hpp"
#include "spatial.hpp"
#include "weft/util/error.hpp"

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
torch::Tensor SpatialProbe::coarse_kernel(const torch::Tensor& weight, int depth,
                                          SpatialKernels kernels) {
  return detail::coarse_kernel(weight, depth, kernels);
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

StepGraph::StepGraph() : graph_(std::make_unique<detail::Graph>()) {}
StepGraph::~StepGraph() = default;
StepGraph::StepGraph(StepGraph&&) noexcept = default;
StepGraph& StepGraph::operator=(StepGraph&&) noexcept = default;
bool StepGraph::recorded() const {
  return graph_ && graph_->defined();
}

ChainProbe::ChainProbe(LayerParallel module) : module_(std::move(module)) {
  const detail::LayerBank& bank = core().bank;
  if (bank.begin() != 0 || bank.end() != core().chain.layers())
    throw InvalidOption("ChainProbe: the module holds layers [" + std::to_string(bank.begin()) +
                        ", " + std::to_string(bank.end()) + ") of " +
                        std::to_string(core().chain.layers()) +
                        "; a probe needs every layer (a module on one rank)");
  core().bank.collect_trainable();
}

detail::Core& ChainProbe::core() {
  return *module_->core_;
}
std::int64_t ChainProbe::layers() const {
  return module_->steps();
}
bool ChainProbe::is_transition(std::int64_t n) const {
  return module_->is_transition(n);
}
double ChainProbe::step_size(std::int64_t n) const {
  const detail::Chain& chain = module_->core_->chain;
  return chain.is_transition(n) ? 0.0 : chain.step_size(chain.stage_of_point(n));
}

namespace {
/// InvalidOption unless 0 <= a < b <= layers.
void check_step(std::int64_t a, std::int64_t b, std::int64_t layers) {
  if (a < 0 || b <= a || b > layers)
    throw InvalidOption("ChainProbe", "step",
                        "from point " + std::to_string(a) + " to " + std::to_string(b) +
                            " is invalid; accepted: 0 <= a < b <= " + std::to_string(layers));
}
/// A graph holder that was moved from gets a fresh graph.
detail::Graph& graph_of(std::unique_ptr<detail::Graph>& g) {
  if (!g) g = std::make_unique<detail::Graph>();
  return *g;
}

/// The evaluator as a batch of the module would set it up: its random streams, no counting.
detail::LayerEvaluator& ready(detail::Core& c) {
  c.evaluator.resume_batch(c.opts.seed(), c.batch_index, c.owner.is_training());
  c.evaluator.count_into(nullptr);
  c.evaluator.at_level(0);
  return c.evaluator;
}
}  // namespace

std::vector<torch::Tensor> ChainProbe::states(const torch::Tensor& input) {
  torch::NoGradGuard no_grad;
  detail::Core& c = core();
  std::vector<torch::Tensor> x{c.bank.open().is_empty() ? input : c.bank.open().forward(input)};
  detail::LayerEvaluator& e = ready(c);
  for (std::int64_t n = 0; n < layers(); ++n) x.push_back(e.step(n, n + 1, x.back(), false));
  return x;
}

torch::Tensor ChainProbe::step(std::int64_t a, std::int64_t b, const torch::Tensor& x, int depth) {
  check_step(a, b, layers());
  return ready(core()).step(a, b, x, false, depth);
}

torch::Tensor ChainProbe::record(std::int64_t n, const torch::Tensor& x, StepGraph& graph) {
  check_step(n, n + 1, layers());
  detail::LayerEvaluator& e = ready(core());
  const torch::Tensor y = e.record(n, x, false, graph_of(graph.graph_));
  torch::NoGradGuard no_grad;
  return e.step_from(n, x, y.detach());
}

torch::Tensor ChainProbe::vjp(std::int64_t a, std::int64_t b, const torch::Tensor& x_a,
                              const torch::Tensor& lambda, StepGraph& graph, bool retain_graph,
                              std::vector<torch::Tensor>* param_grads, int depth) {
  check_step(a, b, layers());
  detail::Core& c = core();
  detail::LayerEvaluator& e = ready(c);
  std::vector<torch::Tensor> params;
  if (param_grads) params = c.bank.layer_params()[static_cast<size_t>(a)];
  bool built = false;
  torch::Tensor out = e.vjp(a, b, x_a, lambda, graph_of(graph.graph_), retain_graph,
                            param_grads ? &params : nullptr, param_grads, &built, depth);
  if (!retain_graph) graph_of(graph.graph_) = detail::Graph();
  return out;
}

}  // namespace weft::nn
