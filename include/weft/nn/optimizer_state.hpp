#pragma once
// The per-parameter state of torch::optim::SGD (momentum buffers) and torch::optim::Adam (step,
// first and second moments) by field name: what checkpoints store and MG/Opt restricts to its
// coarser levels. Defined with the checkpoints (src/nn/checkpoint.cpp).
#include <torch/optim/optimizer.h>

#include <map>
#include <string>

namespace weft::nn {

/// Every field name, SGD's and Adam's.
inline constexpr const char* kOptimizerFields[] = {"momentum_buffer", "step", "exp_avg",
                                                   "exp_avg_sq", "max_exp_avg_sq"};

/// `param`'s state in `optimizer` ("step" as an int64 scalar); empty before its first step.
std::map<std::string, torch::Tensor> optimizer_fields(const torch::optim::Optimizer& optimizer,
                                                      const torch::Tensor& param);

/// Replaces `param`'s state by `fields` when they are complete for the optimizer's kind
/// (SGD: momentum_buffer; Adam: step, exp_avg, exp_avg_sq); leaves it otherwise.
void set_optimizer_fields(torch::optim::Optimizer& optimizer, const torch::Tensor& param,
                          const std::map<std::string, torch::Tensor>& fields);

}  // namespace weft::nn
