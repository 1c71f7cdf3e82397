#pragma once
// Private to weft_nn. Where the inputs of coarse recurrent steps come from: every step a -> b
// with b > a + 1 that a rank evaluates (forward or adjoint solve, any level, from the solvers'
// step map) takes one input computed from the sequence rows x_a .. x_{b-1} (CoarseInput:
// the row x_a, or the mean of the rows). When each rank holds only the rows of its own steps,
// the ranks that hold rows of an interval send their part to the rank that evaluates it: the
// row x_a (Start) or the partial sum over their rows (Mean). Fine steps (b = a + 1) always use
// a local row: the forward step a runs on the owner of step a, the adjoint step into a too.
// No LibTorch here.
#include <cstdint>
#include <utility>
#include <vector>

#include "weft/mgrit/step_map.hpp"
#include "weft/nn/recurrent.hpp"

namespace weft::nn::detail {

/// The steps [a, b) of a coarse step (b - a >= 2).
using StepInterval = std::pair<std::int64_t, std::int64_t>;

class CoarseInputPlan {
 public:
  struct Peer {
    int rank = 0;
    std::vector<StepInterval> intervals;  ///< increasing, in message order
  };

  CoarseInputPlan() = default;
  /// `sites`: the steps of every solve; `step_begin[r]`: rank r's first step (ranks + 1
  /// entries, the last one the sequence length).
  CoarseInputPlan(const std::vector<mgrit::StepSite>& sites,
                  const std::vector<std::int64_t>& step_begin, int rank, CoarseInput kind);

  /// The coarse intervals this rank evaluates, increasing.
  const std::vector<StepInterval>& intervals() const { return mine_; }
  /// Whether rank q holds rows that enter interval i's input.
  bool contributes(int q, const StepInterval& i) const;
  /// The rows [begin, end) of interval i held by rank q (empty when q does not contribute).
  StepInterval part(int q, const StepInterval& i) const;
  const std::vector<Peer>& sends() const { return sends_; }  ///< my parts of others' intervals
  const std::vector<Peer>& recvs() const { return recvs_; }  ///< others' parts of mine

 private:
  int owner(std::int64_t step) const;

  CoarseInput kind_ = CoarseInput::Start;
  std::vector<std::int64_t> step_begin_;
  std::vector<StepInterval> mine_;
  std::vector<Peer> sends_, recvs_;
};

}  // namespace weft::nn::detail
