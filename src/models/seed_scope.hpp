#pragma once
// Private to weft_models. Parameters of a layer come from their own seed, whichever rank builds
// the layer; the global generator's state is restored afterwards so that building a layer does
// not disturb the caller.
#include <torch/torch.h>

#include <cstdint>

namespace weft::models::detail {

class SeedScope {
 public:
  explicit SeedScope(std::uint64_t seed)
      : generator_(at::detail::getDefaultCPUGenerator()), saved_(generator_.get_state()) {
    torch::manual_seed(seed);
  }
  ~SeedScope() { generator_.set_state(saved_); }
  SeedScope(const SeedScope&) = delete;
  SeedScope& operator=(const SeedScope&) = delete;

 private:
  at::Generator generator_;
  torch::Tensor saved_;
};

}  // namespace weft::models::detail
