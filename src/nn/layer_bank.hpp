#pragma once
// Private to weft_nn. The layers a rank holds: its own chain layers (registered on the module
// under their sequential names), the open and close layers on the input and output ranks, ghost
// copies of the remote layers its coarse steps need (parameters and buffers refreshed every
// batch), and shape probes (copies of transitions, to find each stage's state shape).
#include <mpi.h>
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "chain.hpp"
#include "placement.hpp"
#include "weft/nn/network.hpp"

namespace weft::nn::detail {

/// Builds chain layer n from the network's stages.
Layer make_chain_layer(const std::vector<Stage>& stages, const Chain& chain, std::int64_t n);

/// Parameters then buffers of a module (recursively), in registration order, as bytes.
std::vector<torch::Tensor> state_tensors(const torch::nn::Module& m);
std::size_t state_bytes(const torch::nn::Module& m);
void pack_state(const torch::nn::Module& m, std::vector<char>& buffer);
const char* unpack_state(torch::nn::Module& m, const char* data);

class LayerBank {
 public:
  /// `placement` is the owner's (Core's), read at construction and by replan(): it must
  /// outlive the bank.
  LayerBank(torch::nn::Module& owner, std::vector<Stage> stages, const Chain& chain,
            LayerFactory open, LayerFactory close, const Placement& placement);

  bool is_local(std::int64_t n) const { return n >= begin_ && n < end_; }
  std::int64_t begin() const { return begin_; }
  std::int64_t end() const { return end_; }
  Layer& local(std::int64_t n) { return local_[static_cast<size_t>(n - begin_)]; }
  /// A local layer or a ghost copy; throws MpiError for any other.
  Layer& at(std::int64_t n);
  /// Any copy of layer n, for its output shape only (builds a probe when none is held).
  Layer& probe(std::int64_t n);
  Layer& open() { return open_; }
  Layer& close() { return close_; }
  const std::map<std::int64_t, Layer>& ghosts() const { return ghosts_; }
  /// Layer n (local or ghost) has buffers (batch-norm statistics) that evaluations could change.
  bool has_buffers(std::int64_t n) const;
  bool any_buffers() const { return any_buffers_; }

  /// Ghost copies after the placement changed: kept where still needed, built where missing.
  void replan();
  /// Collective: the owners' parameters and buffers into the ghost copies; the ghosts follow
  /// the module's training mode. Returns the bytes received.
  std::int64_t exchange(MPI_Comm comm);

  /// The trainable parameters of each local layer, gathered now (requires_grad may change).
  void collect_trainable();
  const std::vector<std::vector<torch::Tensor>>& layer_params() const { return layer_params_; }
  const std::vector<torch::Tensor>& trainable() const { return trainable_; }

  /// Own modules in the order they travel: open, local chain layers, close.
  std::vector<std::shared_ptr<torch::nn::Module>> own_modules() const;
  std::int64_t own_bytes() const;
  std::int64_t ghost_bytes() const;

  void convert(std::optional<torch::Device> device, std::optional<torch::Dtype> dtype);
  torch::Device device() const { return device_; }
  /// Moves a module to the overridden device/dtype (as the bank's own layers were).
  void place(torch::nn::Module& m) const;

 private:
  Layer build(std::int64_t n, const char* what) const;

  torch::nn::Module& owner_;
  std::vector<Stage> stages_;
  const Chain& chain_;
  const Placement& placement_;
  std::int64_t begin_ = 0, end_ = 0;
  std::vector<Layer> local_;
  Layer open_, close_;
  std::map<std::int64_t, Layer> ghosts_, probes_;
  std::vector<bool> local_buffers_;
  bool any_buffers_ = false;
  std::vector<std::vector<torch::Tensor>> layer_params_;
  std::vector<torch::Tensor> trainable_;
  std::optional<torch::Device> device_override_;
  std::optional<torch::Dtype> dtype_override_;
  torch::Device device_ = torch::kCPU;
};

}  // namespace weft::nn::detail
