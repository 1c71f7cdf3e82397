#pragma once
// Private to weft_nn. The network as a chain of layers: stage s has N_s residual steps
// x <- x + h_s F_n(x) (h_s = T_s / N_s); a transition x <- G(x) between two stages changes the
// state's shape. Layer n maps point n to point n+1; N = sum N_s + (stages - 1).
//
// A coarse step from point a to point b > a + 1 is evaluated as the composition of its parts:
// each run of residual steps between transitions becomes one step with the layer at the run's
// start and H = h_s (run length) (the usual MGRIT coarse step with injected weights), and a
// transition inside the interval is applied exactly, because a shape change has no step size to
// scale. So any stage length works, whether or not transitions fall on coarse points.
// No LibTorch here.
#include <cstdint>
#include <string>
#include <vector>

namespace weft::nn::detail {

struct StageSpan {
  std::int64_t steps = 0;
  double t_final = 1.0;
};

/// One part of a step: x <- x + H F_layer(x), or x <- G_layer(x) for a transition.
struct Segment {
  std::int64_t layer = 0;
  bool transition = false;
  double H = 0;  ///< 0 for transitions
};

class Chain {
 public:
  Chain() = default;
  explicit Chain(std::vector<StageSpan> stages);

  std::int64_t layers() const { return layers_; }  ///< N (points 0..N)
  int stages() const { return static_cast<int>(stages_.size()); }
  bool is_transition(std::int64_t n) const;
  /// The stage of point p (its state's shape): the number of transitions before p.
  int stage_of_point(std::int64_t p) const;
  /// First layer of stage s, and its transition (-1 for the last stage).
  std::int64_t stage_begin(int s) const { return begin_[static_cast<size_t>(s)]; }
  std::int64_t transition_after(int s) const;
  double step_size(int s) const;
  const StageSpan& stage(int s) const { return stages_[static_cast<size_t>(s)]; }
  /// The parts of the step from point a to point b (a < b), in order.
  std::vector<Segment> segments(std::int64_t a, std::int64_t b) const;
  /// "step_<n>" or "transition_<n>": the name under which the layer's parameters are registered.
  std::string layer_name(std::int64_t n) const;
  /// "step layer <n>" or "transition layer <n>", for messages.
  std::string layer_label(std::int64_t n) const;

 private:
  std::vector<StageSpan> stages_;
  std::vector<std::int64_t> begin_;        ///< first layer of each stage
  std::vector<std::int64_t> transitions_;  ///< layer index of each transition, increasing
  std::int64_t layers_ = 0;
};

}  // namespace weft::nn::detail
