#pragma once
// Private to weft_nn. Which rank owns which points and layers, and which remote layers each
// rank evaluates (ghost copies), read from the solvers' step map (mgrit::step_sites).
//
// Forward points 0..N are block-distributed like the solver's own distribution, or, with layer
// costs (LayerParallelOptions::layer_costs), in blocks that balance them. Layer n belongs
// to the owner of point n+1 (the rank that computes the forward step into it), so every rank
// computes as many fine steps as it owns layers. The adjoint solve moves each block boundary one
// point left (rank_blocks = first layers), so that its fine step into n runs where layer n
// lives. Coarse steps may start at a remote point or cross a transition: the layers of their
// segments (Chain::segments) that live elsewhere are the ghosts. No LibTorch here.
#include <cstdint>
#include <vector>

#include "chain.hpp"
#include "weft/mgrit/options.hpp"
#include "weft/mgrit/types.hpp"

namespace weft::nn::detail {

class Placement {
 public:
  struct Peer {
    int rank = 0;
    std::vector<std::int64_t> layers;  ///< increasing
  };

  Placement() = default;
  /// `forward` and `backward` are the solvers' options (their rank blocks are set here);
  /// `layer_costs`: one per chain layer, or empty for equal numbers of layers.
  Placement(const Chain& chain, int rank, int ranks, mgrit::Options forward,
            mgrit::Options backward, const std::vector<double>& layer_costs = {});

  /// The first forward point of every rank, then N + 1: equal numbers of layers without
  /// `layer_costs`, else blocks that balance them (weft::InvalidOption: not one per layer).
  static std::vector<mgrit::index_t> first_points(std::int64_t layers, int ranks,
                                                  const std::vector<double>& layer_costs);

  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  std::int64_t point_begin(int r) const;  ///< first forward point of rank r
  std::int64_t layer_begin(int r) const;
  std::int64_t layer_end(int r) const;
  int layer_owner(std::int64_t n) const;
  bool is_local(std::int64_t n) const { return n >= layer_begin(rank_) && n < layer_end(rank_); }
  /// The backward solve's rank blocks: the first layer of every rank.
  const std::vector<mgrit::index_t>& adjoint_blocks() const { return adjoint_blocks_; }
  const mgrit::Options& backward_options() const { return backward_; }
  /// The forward solve's options: its rank blocks follow the layer costs when there are any.
  const mgrit::Options& forward_options() const { return forward_; }

  const std::vector<std::int64_t>& ghosts() const { return ghosts_; }
  const std::vector<Peer>& sends() const { return sends_; }  ///< local layers others need
  const std::vector<Peer>& recvs() const { return recvs_; }  ///< ghosts, by owner

 private:
  int rank_ = 0, ranks_ = 1;
  std::int64_t points_ = 0;
  std::vector<mgrit::index_t> first_points_;  ///< per rank, then N + 1
  mgrit::Options forward_, backward_;
  std::vector<mgrit::index_t> adjoint_blocks_;
  std::vector<std::int64_t> ghosts_;
  std::vector<Peer> sends_, recvs_;
};

}  // namespace weft::nn::detail
