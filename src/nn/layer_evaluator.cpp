#include "layer_evaluator.hpp"

#include <ATen/core/Generator.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/functions/basic_ops.h>

#include <functional>
#include <mutex>
#include <optional>
#include <utility>

#include "spatial.hpp"
#include "weft/nn/coarse_kernels.hpp"
#include "weft/nn/network.hpp"

namespace weft::nn {

std::uint64_t layer_stream_seed(std::uint64_t seed, std::int64_t batch, std::int64_t layer) {
  // splitmix64 over the three words: nearby (batch, layer) pairs get unrelated seeds.
  auto mix = [](std::uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  return mix(mix(mix(seed) ^ static_cast<std::uint64_t>(batch)) ^
             static_cast<std::uint64_t>(layer));
}

namespace detail {

using torch::Tensor;

// The lock is released during the evaluation: the layer's own draws take it.
StreamGuard::StreamGuard(bool on, torch::Device device, std::uint64_t seed) {
  if (!on) return;
  generator_ = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator_.mutex());
  saved_ = generator_.get_state();
  generator_.set_current_seed(seed);
  active_ = true;
}

StreamGuard::~StreamGuard() {
  if (!active_) return;
  std::lock_guard<std::mutex> lock(generator_.mutex());
  generator_.set_state(saved_);
}

namespace {
/// Keeps an evaluation from changing a layer's buffers. Batch-norm modules get their running
/// statistics unset for the evaluation (they then normalize with the batch's statistics and
/// update nothing): no in-place write, so graphs recorded earlier that saved those buffers stay
/// valid. Buffers of other modules (TorchScript or Python batch norm among them) are restored by
/// value afterwards, through a view with its own version counter: the values graphs saved are
/// back, and autograd's in-place check of those graphs does not see a write.
class BufferGuard {
 public:
  BufferGuard(bool on, torch::nn::Module& m) {
    if (!on) return;
    torch::NoGradGuard no_grad;
    for (const auto& sub : m.modules(/*include_self=*/true)) {
      if (hide<torch::nn::BatchNorm1dImpl>(sub.get()) ||
          hide<torch::nn::BatchNorm2dImpl>(sub.get()) ||
          hide<torch::nn::BatchNorm3dImpl>(sub.get()))
        continue;
      for (const Tensor& b : sub->buffers(/*recurse=*/false)) {
        buffers_.push_back(b);
        saved_.push_back(b.clone());
      }
    }
  }
  ~BufferGuard() {
    for (auto& [slot, value] : hidden_) *slot = value;
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].variable_data().copy_(saved_[i]);
  }
  BufferGuard(const BufferGuard&) = delete;
  BufferGuard& operator=(const BufferGuard&) = delete;

 private:
  template <class BatchNorm>
  bool hide(torch::nn::Module* m) {
    auto* bn = dynamic_cast<BatchNorm*>(m);
    if (!bn) return false;
    for (Tensor* slot : {&bn->running_mean, &bn->running_var, &bn->num_batches_tracked}) {
      hidden_.emplace_back(slot, *slot);
      *slot = Tensor();
    }
    return true;
  }

  std::vector<std::pair<Tensor*, Tensor>> hidden_;
  std::vector<Tensor> buffers_, saved_;
};

/// On a grid coarser in space, the 3x3(x3) convolutions of a module use coarse kernels
/// (`coarse`: a weight's kernel there) for one evaluation: the kernel members are swapped, not
/// written, so graphs recorded earlier keep the originals. Layers that hold their convolutions
/// elsewhere (SwapsCoarseKernels: the Python module's) swap their own.
class CoarseKernelGuard {
 public:
  using Map = SwapsCoarseKernels::KernelMap;
  CoarseKernelGuard(torch::nn::Module& m, Map coarse) : coarse_(std::move(coarse)) {
    torch::NoGradGuard no_grad;
    try {
      for (const auto& sub : m.modules(/*include_self=*/true)) {
        if (auto* c = dynamic_cast<torch::nn::Conv2dImpl*>(sub.get())) swap(c->weight);
        if (auto* c = dynamic_cast<torch::nn::Conv3dImpl*>(sub.get())) swap(c->weight);
        if (auto* s = dynamic_cast<SwapsCoarseKernels*>(sub.get())) {
          swappers_.push_back(s);  // first: what it swapped before failing is put back too
          s->use_coarse_kernels(coarse_);
        }
      }
    } catch (...) {  // no destructor runs for a guard that was never built
      restore();
      throw;
    }
  }
  ~CoarseKernelGuard() { restore(); }
  CoarseKernelGuard(const CoarseKernelGuard&) = delete;
  CoarseKernelGuard& operator=(const CoarseKernelGuard&) = delete;

 private:
  void restore() {
    for (auto& [slot, value] : swapped_) *slot = value;
    for (SwapsCoarseKernels* s : swappers_) s->restore_kernels();
  }
  void swap(Tensor& weight) {
    Tensor c = coarse_(weight);
    if (c.is_same(weight)) return;
    swapped_.emplace_back(&weight, weight);
    weight = std::move(c);
  }
  Map coarse_;
  std::vector<std::pair<Tensor*, Tensor>> swapped_;
  std::vector<SwapsCoarseKernels*> swappers_;
};

using Statistics = std::vector<std::pair<Tensor, Tensor>>;

/// Calls f(module) for every batch-norm module of m, in modules() order.
template <class F>
void for_each_batch_norm(torch::nn::Module& m, F&& f) {
  for (const auto& sub : m.modules(/*include_self=*/true)) {
    torch::nn::Module* p = sub.get();
    if (auto* b1 = dynamic_cast<torch::nn::BatchNorm1dImpl*>(p))
      f(*b1);
    else if (auto* b2 = dynamic_cast<torch::nn::BatchNorm2dImpl*>(p))
      f(*b2);
    else if (auto* b3 = dynamic_cast<torch::nn::BatchNorm3dImpl*>(p))
      f(*b3);
  }
}

/// Copies of the running statistics of a module's training-mode batch-norm modules (before the
/// first batch their initial values: mean 0, variance 1); undefined pairs where a module has
/// none or is in eval mode (those keep their own behaviour).
Statistics running_statistics(torch::nn::Module& m) {
  torch::NoGradGuard no_grad;
  Statistics out;
  for_each_batch_norm(m, [&out](auto& bn) {
    if (bn.is_training() && bn.running_mean.defined() && bn.running_var.defined())
      out.emplace_back(bn.running_mean.clone(), bn.running_var.clone());
    else
      out.emplace_back();
  });
  return out;
}

/// For one evaluation, the batch-norm modules given statistics run in eval mode on them: the
/// running-statistics members are swapped (never written), and mode and members are restored
/// afterwards. Constructed after BufferGuard, destroyed before it.
class StatisticsGuard {
 public:
  StatisticsGuard(torch::nn::Module& m, const Statistics& statistics) {
    size_t k = 0;
    for_each_batch_norm(m, [&](auto& bn) {
      if (k < statistics.size() && statistics[k].first.defined()) apply(bn, statistics[k]);
      ++k;
    });
  }
  ~StatisticsGuard() {
    for (auto& restore : restore_) restore();
  }
  StatisticsGuard(const StatisticsGuard&) = delete;
  StatisticsGuard& operator=(const StatisticsGuard&) = delete;

 private:
  template <class BatchNorm>
  void apply(BatchNorm& bn, const std::pair<Tensor, Tensor>& statistics) {
    restore_.push_back([&bn, mean = bn.running_mean, var = bn.running_var] {
      bn.running_mean = mean;
      bn.running_var = var;
      bn.train(true);
    });
    bn.running_mean = statistics.first;
    bn.running_var = statistics.second;
    bn.train(false);
  }
  std::vector<std::function<void()>> restore_;
};

/// Nothing but `t` refers to its memory, so an in-place write is seen by no one else.
/// Gradients from autograd are usually fresh, but one that passed through an operation
/// unchanged may be the caller's λ or a view of it.
bool sole_owner(const Tensor& t) {
  return t.use_count() == 1 && t.has_storage() && t.storage().use_count() == 1;
}
}  // namespace

const Tensor& LayerEvaluator::factor(double h, const Tensor& like) {
  // A 0-dim CPU tensor is a scalar operand for tensors on any device, and unlike a double it
  // needs no conversion per product.
  for (const auto& [value, f] : factors_)
    if (value == h && f.dtype() == like.dtype()) return f;
  if (factors_.size() > 8) factors_.clear();
  factors_.emplace_back(h, torch::full({}, h, torch::TensorOptions().dtype(like.dtype())));
  return factors_.back().second;
}

LayerEvaluations* LayerEvaluator::tally(std::int64_t n) {
  if (!table_) return nullptr;
  if (table_->size() <= static_cast<size_t>(level_))
    table_->resize(static_cast<size_t>(level_) + 1,
                   std::vector<LayerEvaluations>(static_cast<size_t>(chain_.layers())));
  return &(*table_)[static_cast<size_t>(level_)].at(static_cast<size_t>(n));
}

Tensor LayerEvaluator::layer(std::int64_t n, const Tensor& x, bool updates_buffers, int depth) {
  Layer& m = bank_.at(n);
  const bool training = training_ && m.ptr()->is_training();
  StreamGuard stream(training, x.device(), layer_stream_seed(seed_, batch_, n));
  const bool buffers = bank_.has_buffers(n);
  const bool running = running_when_coarsened_ && training && buffers;
  // The batch's start values, before the final sweep (on the owner) updates them.
  if (running && updates_buffers) batch_start_statistics(n);
  const Statistics* statistics = running && depth > 0 ? &batch_start_statistics(n) : nullptr;
  BufferGuard buffer_guard(training && !updates_buffers && buffers, *m.ptr());
  std::optional<CoarseKernelGuard> kernels;
  if (depth > 0 && kernels_ != SpatialKernels::same)
    kernels.emplace(*m.ptr(),
                    [this, depth](const Tensor& w) { return coarse_kernel_of(w, depth); });
  if (!statistics) return m.forward(x);
  StatisticsGuard normalise(*m.ptr(), *statistics);
  return m.forward(x);
}

Tensor LayerEvaluator::coarse_kernel_of(const Tensor& weight, int depth) {
  if (weight.dim() < 4) return weight;
  for (std::int64_t d = 2; d < weight.dim(); ++d)
    if (weight.size(d) != 3) return weight;
  CoarseKernel& entry = coarse_kernel_cache_[{weight.unsafeGetTensorImpl(), depth}];
  if (!entry.kernel.defined() || entry.version != weight._version()) {
    entry.weight = weight;  // keeps the key's tensor alive
    entry.version = weight._version();
    entry.kernel = coarse_kernel(weight, depth, kernels_);
  }
  return entry.kernel;
}

const Statistics& LayerEvaluator::batch_start_statistics(std::int64_t n) {
  auto it = running_statistics_.find(n);
  if (it == running_statistics_.end())
    it = running_statistics_.emplace(n, running_statistics(*bank_.at(n).ptr())).first;
  return it->second;
}

Tensor LayerEvaluator::step_from(std::int64_t n, const Tensor& x, const Tensor& y) const {
  if (chain_.is_transition(n)) return y;
  return torch::add(x, y, chain_.step_size(chain_.stage_of_point(n)));  // one pass, one allocation
}

Tensor LayerEvaluator::step(std::int64_t a, std::int64_t b, const Tensor& x, bool updates_buffers,
                            int depth) {
  torch::NoGradGuard no_grad;
  if (b == a + 1) {
    if (auto* t = tally(a)) ++t->plain;
    return step_from(a, x, layer(a, x, updates_buffers, depth));
  }
  Tensor z = x;
  for (const Segment& s : chain_.segments(a, b)) {
    if (auto* t = tally(s.layer)) ++t->plain;
    z = s.transition ? layer(s.layer, z, false, depth)
                     : torch::add(z, layer(s.layer, z, false, depth), s.H);
  }
  return z;
}

void Graph::hold(const Tensor& y) {
  root = y.requires_grad() ? torch::autograd::impl::gradient_edge(y) : torch::autograd::Edge();
  output_bytes = static_cast<std::int64_t>(y.numel() * y.element_size());
  recorded = true;
}

Tensor LayerEvaluator::record(std::int64_t n, const Tensor& x, bool updates_buffers, Graph& graph) {
  torch::AutoGradMode grad_on(true);
  if (auto* t = tally(n)) ++t->recorded;
  graph = Graph();
  graph.x = x.detach().requires_grad_(true);
  Tensor y = layer(n, graph.x, updates_buffers);
  graph.hold(y);
  graph.version = x._version();
  return y;
}

namespace {
/// torch::autograd::grad from y's gradient edge instead of y (allow_unused: an input the graph
/// does not reach gets an undefined gradient).
std::vector<Tensor> gradients(const torch::autograd::Edge& root, const Tensor& grad_y,
                              const std::vector<Tensor>& inputs, bool keep_graph) {
  torch::autograd::edge_list targets;
  targets.reserve(inputs.size());
  for (const Tensor& input : inputs) {
    std::shared_ptr<torch::autograd::Node> fn = input.grad_fn();
    if (!fn) fn = torch::autograd::impl::try_get_grad_accumulator(input);
    if (fn)
      targets.emplace_back(std::move(fn), input.output_nr());
    else  // a leaf no operation used: unreachable
      targets.emplace_back(std::make_shared<torch::autograd::Identity>(), 0);
  }
  return torch::autograd::Engine::get_default_engine().execute(
      {root}, {grad_y}, keep_graph, /*create_graph=*/false, /*accumulate_grad=*/false, targets);
}
}  // namespace

Tensor LayerEvaluator::vjp(std::int64_t a, std::int64_t b, const Tensor& x_a, const Tensor& lambda,
                           Graph& graph, bool retain_graph, const std::vector<Tensor>* params,
                           std::vector<Tensor>* param_grads, bool* built, int depth) {
  const auto segments = chain_.segments(a, b);
  if (segments.size() == 1) {
    // One layer: λ_a = λ_b + H (∂F/∂x)ᵀ λ_b, or (∂G/∂x)ᵀ λ_b for a transition.
    const Segment& s = segments.front();
    if (!graph.defined()) {
      torch::AutoGradMode grad_on(true);
      graph.x = x_a.detach().requires_grad_(true);
      graph.hold(layer(a, graph.x, false, depth));
      if (built) *built = true;
      if (auto* t = tally(a)) ++t->recorded;
    }
    Tensor gx;
    if (graph.root.function) {
      if (auto* t = tally(a)) ++(params ? t->vjp_params : t->vjp);
      std::vector<Tensor> inputs{graph.x};
      if (params) inputs.insert(inputs.end(), params->begin(), params->end());
      auto grads = gradients(graph.root, lambda, inputs, retain_graph);
      gx = std::move(grads[0]);
      if (params && param_grads) {
        torch::NoGradGuard no_grad;
        param_grads->resize(params->size());
        for (size_t p = 0; p < params->size(); ++p) {
          Tensor& gp = grads[p + 1];
          if (gp.defined() && !s.transition) {
            // A step's parameter gradient is h (dF/dθ)ᵀ λ: scaled in place where no one else
            // sees the write (48 small out-of-place products cost 1 % of a batch).
            if (sole_owner(gp))
              gp.mul_(factor(s.H, gp));
            else
              gp = gp * s.H;
          }
          (*param_grads)[p] = std::move(gp);
        }
      }
    }
    torch::NoGradGuard no_grad;
    if (s.transition) return gx.defined() ? gx : torch::zeros_like(x_a);
    if (!gx.defined()) return lambda.clone();
    // λ + h gx, into gx's memory when it is autograd's fresh result (still in cache).
    if (sole_owner(gx) && gx.sizes() == lambda.sizes() && gx.dtype() == lambda.dtype() &&
        gx.is_contiguous())
      return at::add_out(gx, lambda, gx, s.H);
    return torch::add(lambda, gx, s.H);
  }
  // A coarse step across a transition: the adjoint of the composition, through autograd.
  torch::AutoGradMode grad_on(true);
  const Tensor leaf = x_a.detach().requires_grad_(true);
  Tensor z = leaf;
  for (const Segment& s : segments) {
    if (auto* t = tally(s.layer)) {
      ++t->recorded;
      ++t->vjp;
    }
    z = s.transition ? layer(s.layer, z, false, depth)
                     : torch::add(z, layer(s.layer, z, false, depth), s.H);
  }
  if (built) *built = true;
  if (!z.requires_grad()) return torch::zeros_like(x_a);
  const auto grads = torch::autograd::grad({z}, {leaf}, {lambda}, /*retain_graph=*/false,
                                           /*create_graph=*/false, /*allow_unused=*/true);
  torch::NoGradGuard no_grad;
  return grads[0].defined() ? grads[0] : torch::zeros_like(x_a);
}

}  // namespace detail
}  // namespace weft::nn
