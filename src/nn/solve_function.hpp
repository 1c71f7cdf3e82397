#pragma once
// Private to weft_nn. The autograd node of both layer-parallel solves (the chain of LayerParallel
// and the sequence of Recurrent): it stamps the module's core and forward generation into the
// context, refuses a backward that does not belong to the latest forward, and hands back one
// gradient per input, none where the input did not ask for one. A solve supplies a Node:
//
//   struct Node {
//     using Core = ...;
//     static constexpr const char* owner = "...";    // names the module in errors
//     static constexpr const char* advice = "...";   // what to do about a stale graph
//     static std::int64_t generation(const Core&);
//     static MPI_Comm comm(const Core&);
//     static variable_list forward(Core&, at::TensorList inputs);
//     static variable_list backward(Core&, const variable_list& grad_outputs,
//                                   const std::vector<std::int64_t>& wanted);  // per input
//   };
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "solve_pair.hpp"
#include "weft/util/error.hpp"

namespace weft::nn::detail {

template <class Node>
struct SolveFunction : public torch::autograd::Function<SolveFunction<Node>> {
  using Core = typename Node::Core;

  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                at::TensorList inputs, Core* core) {
    ctx->saved_data["core"] = static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(core));
    ctx->saved_data["generation"] = Node::generation(*core);
    std::vector<std::int64_t> wanted;
    wanted.reserve(inputs.size());
    for (const torch::Tensor& input : inputs) wanted.push_back(input.requires_grad() ? 1 : 0);
    ctx->saved_data["wanted"] = wanted;
    return Node::forward(*core, inputs);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto* core =
        reinterpret_cast<Core*>(static_cast<std::intptr_t>(ctx->saved_data["core"].toInt()));
    check_generation(ctx->saved_data["generation"].toInt(), Node::generation(*core), Node::owner,
                     Node::comm(*core), Node::advice);
    const std::vector<std::int64_t> wanted = ctx->saved_data["wanted"].toIntVector();
    torch::autograd::variable_list grads = Node::backward(*core, grad_outputs, wanted);
    if (grads.size() != wanted.size())
      throw std::logic_error(std::string(Node::owner) +
                             " backward: " + std::to_string(grads.size()) + " gradients for " +
                             std::to_string(wanted.size()) + " inputs");
    for (std::size_t i = 0; i < grads.size(); ++i)
      if (!wanted[i]) grads[i] = torch::Tensor();
    grads.emplace_back();  // the core
    return grads;
  }
};

}  // namespace weft::nn::detail
