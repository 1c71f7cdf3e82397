#include "chain.hpp"

#include <algorithm>

namespace weft::nn::detail {

Chain::Chain(std::vector<StageSpan> stages) : stages_(std::move(stages)) {
  std::int64_t n = 0;
  for (size_t s = 0; s < stages_.size(); ++s) {
    begin_.push_back(n);
    n += stages_[s].steps;
    if (s + 1 < stages_.size()) transitions_.push_back(n++);
  }
  layers_ = n;
}

bool Chain::is_transition(std::int64_t n) const {
  return std::binary_search(transitions_.begin(), transitions_.end(), n);
}

int Chain::stage_of_point(std::int64_t p) const {
  return static_cast<int>(std::lower_bound(transitions_.begin(), transitions_.end(), p) -
                          transitions_.begin());
}

std::int64_t Chain::transition_after(int s) const {
  return s < static_cast<int>(transitions_.size()) ? transitions_[static_cast<size_t>(s)] : -1;
}

double Chain::step_size(int s) const {
  const StageSpan& st = stages_[static_cast<size_t>(s)];
  return st.t_final / static_cast<double>(st.steps);
}

std::vector<Segment> Chain::segments(std::int64_t a, std::int64_t b) const {
  std::vector<Segment> out;
  std::int64_t start = a;
  auto run = [&](std::int64_t end) {  // residual steps [start, end)
    if (end > start)
      out.push_back(Segment{start, false,
                            step_size(stage_of_point(start)) * static_cast<double>(end - start)});
  };
  for (auto it = std::lower_bound(transitions_.begin(), transitions_.end(), a);
       it != transitions_.end() && *it < b; ++it) {
    run(*it);
    out.push_back(Segment{*it, true, 0.0});
    start = *it + 1;
  }
  run(b);
  return out;
}

std::string Chain::layer_name(std::int64_t n) const {
  return (is_transition(n) ? "transition_" : "step_") + std::to_string(n);
}

std::string Chain::layer_label(std::int64_t n) const {
  return (is_transition(n) ? "transition layer " : "step layer ") + std::to_string(n);
}

}  // namespace weft::nn::detail
