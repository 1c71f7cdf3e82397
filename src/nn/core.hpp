#pragma once
// Private to weft_nn: the machinery behind LayerParallelImpl (its pimpl). Includes LibTorch and
// the solver template; included by the two weft_nn translation units only.
#include <torch/torch.h>

#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "weft/mgrit/solver.hpp"
#include "weft/nn/layer_parallel.hpp"
#include "weft/util/mpi.hpp"

namespace weft::nn::detail {

class Core;

/// Vector operations and MPI buffers of tensor states, shared by both Apps.
struct TensorOps {
  using State = torch::Tensor;
  Core* core = nullptr;

  void sum(double a, const torch::Tensor& x, double b, torch::Tensor& y) const;
  double norm(const torch::Tensor& u) const;
  void copy(const torch::Tensor& src, torch::Tensor& dst) const;
  std::size_t buffer_size(const torch::Tensor& like) const;
  void pack(const torch::Tensor& u, void* buffer) const;
  void unpack(const void* buffer, torch::Tensor& u) const;
};

/// x_{n+1} = x_n + H F_n(x_n), H = h (to - from).
struct ForwardApp : TensorOps {
  torch::Tensor init(double t) const;
  void step(const torch::Tensor& in, torch::Tensor& out, double t0, double t1,
            const mgrit::StepInfo& info) const;
};

/// λ_n = λ_j + H (∂F_n/∂x(x_n))ᵀ λ_j from j = info.from down to n = info.to, H = h (j - n);
/// on the final fine sweep also accumulates H (∂F_n/∂θ_n)ᵀ λ_j.
struct AdjointApp : TensorOps {
  torch::Tensor init(double t) const;
  void step(const torch::Tensor& in, torch::Tensor& out, double t0, double t1,
            const mgrit::StepInfo& info) const;
};

/// A layer's autograd graph y = F_n(x) at a leaf x that shares storage with the stored x_n.
struct Graph {
  torch::Tensor x, y;
  std::int64_t version = -1;
  bool defined() const { return y.defined(); }
};

class Core {
 public:
  Core(torch::nn::Module& owner, MPI_Comm comm, Network network, LayerParallelOptions options);

  // --- layers ---------------------------------------------------------------------------
  bool is_local_layer(std::int64_t n) const { return n >= layer_begin && n < layer_end; }
  Layer& local_layer(std::int64_t n) { return local[static_cast<size_t>(n - layer_begin)]; }
  Layer& forward_layer(std::int64_t n);  ///< local or ghost
  Layer build(const LayerFactory& make, const std::string& what) const;
  int owner_of_point(std::int64_t point) const;
  std::int64_t block_begin(int r) const;  ///< first forward point of rank r
  // Rank r owns the layers of the forward steps it computes, into its points: layer n belongs
  // to the owner of point n+1. The adjoint solve moves each block boundary one point left, so
  // that its step into n (which needs layer n) runs on the same rank.
  std::int64_t layer_begin_of(int r) const;
  std::int64_t layer_end_of(int r) const;
  int layer_owner(std::int64_t n) const { return owner_of_point(n + 1); }
  std::vector<mgrit::index_t> adjoint_blocks() const;
  /// After the forward solve: x at point lo-1 from the left neighbour (the input of this rank's
  /// first layer, needed by the adjoint), into `boundary` (collective).
  void exchange_boundary();
  /// Ghost layer sets and messages from the forward hierarchy; builds missing ghosts.
  void plan();
  void exchange();
  void collect_parameters();
  void convert(std::optional<torch::Device> device, std::optional<torch::Dtype> dtype);

  // --- solves ----------------------------------------------------------------------------
  torch::Tensor zeros() const;
  /// One zero state shared by every initial guess (the Apps' init): no allocation and no fill
  /// per point and solve. TensorOps copy it on write.
  const torch::Tensor& zero_state();
  /// `message` of rank `root`, on every rank (collective).
  std::string share_message(const std::string& message, int root) const;
  /// Runs every local step layer (and the close layer on the output rank) once on zeros of the
  /// state shape, in eval mode without autograd; when any rank fails, every rank throws
  /// BadData with the first failing rank's message (collective).
  void validate_layers();
  torch::Tensor forward(const torch::Tensor& x0_in);
  /// Returns the input gradient (input rank) and the parameter gradients in the order of
  /// `trainable`.
  std::vector<torch::Tensor> backward(const torch::Tensor& grad_output);
  torch::Tensor vjp(std::int64_t n, const torch::Tensor& lambda, bool with_params, double H);

  torch::nn::Module& owner;
  mpi::OwnedComm comm;
  int rank = 0, ranks = 1;
  Network net;
  LayerParallelOptions opts;
  std::int64_t N = 0;
  double h = 0;
  std::int64_t lo = 0, hi = 0;                  ///< forward points [lo, hi)
  std::int64_t layer_begin = 0, layer_end = 0;  ///< local layers

  std::vector<Layer> local;  ///< layers [layer_begin, layer_end)
  Layer open, close;
  std::map<std::int64_t, Layer> ghosts;
  struct Peer {
    int rank = 0;
    std::vector<std::int64_t> layers;
  };
  std::vector<Peer> send_plan, recv_plan;
  std::optional<torch::Device> device_override;
  std::optional<torch::Dtype> dtype_override;
  torch::Device device = torch::kCPU;

  /// Trainable parameters of the local layers (requires_grad), per layer and flattened.
  std::vector<std::vector<torch::Tensor>> layer_params;
  std::vector<torch::Tensor> trainable;

  // --- per batch -----------------------------------------------------------------------
  std::vector<std::int64_t> shape;
  torch::Dtype dtype = torch::kFloat32;
  bool input_missing = false;
  std::exception_ptr open_failure;  ///< the open layer threw on the input rank
  std::string open_message;
  bool record_graphs = false;
  bool needs_backward = false;  ///< autograd was on for this forward
  torch::Tensor x0, lambda_N;
  torch::Tensor shared_zero;
  torch::Tensor boundary;  ///< x_{lo-1} (ranks > 0, after a forward that needs backward)
  std::vector<char> boundary_in, boundary_out;  ///< message buffers, kept between batches
  mutable torch::Tensor staging;
  ForwardApp fapp;
  AdjointApp aapp;
  std::unique_ptr<mgrit::Solver<ForwardApp>> fsolver;
  std::unique_ptr<mgrit::Solver<AdjointApp>> asolver;
  std::vector<Graph> graphs;  ///< per local layer
  std::vector<std::vector<torch::Tensor>> grad_acc;
  BatchStatistics stats;
  std::int64_t generation = 0;  ///< bumped by forward, set_options and to(): stale graphs
  std::int64_t batches = 0;
};

/// Parameters then buffers of a module (recursively), in registration order.
std::vector<torch::Tensor> state_tensors(const torch::nn::Module& m);
std::size_t state_bytes(const torch::nn::Module& m);
void pack_state(const torch::nn::Module& m, std::vector<char>& buffer);
const char* unpack_state(torch::nn::Module& m, const char* data);

double now();

}  // namespace weft::nn::detail
