#include "weft/models/sequence_classifier.hpp"

#include <torch/torch.h>

#include "seed_scope.hpp"
#include "weft/util/error.hpp"

namespace weft::models {

SequenceOrder parse_sequence_order(const std::string& name) {
  if (name == "rows") return SequenceOrder::Rows;
  if (name == "pixels") return SequenceOrder::Pixels;
  throw InvalidOption("sequence classifier", "order",
                      "'" + name + "' is invalid; accepted: rows, pixels");
}

std::string to_string(SequenceOrder order) {
  return order == SequenceOrder::Rows ? "rows" : "pixels";
}

namespace {
SequenceClassifierSpec checked(const SequenceClassifierSpec& s) {
  auto positive = [](const char* name, std::int64_t v) {
    if (v < 1)
      throw InvalidOption("sequence classifier", name,
                          "= " + std::to_string(v) + " is invalid; need at least 1");
  };
  positive("hidden", s.hidden);
  positive("layers", s.layers);
  positive("height", s.height);
  positive("width", s.width);
  positive("classes", s.classes);
  return s;
}
}  // namespace

SequenceClassifierImpl::SequenceClassifierImpl(MPI_Comm comm, const SequenceClassifierSpec& spec)
    : spec_(checked(spec)) {
  const std::int64_t features = spec_.order == SequenceOrder::Rows ? spec_.width : 1;
  {
    // The cells' parameters come from rank 0 (Recurrent broadcasts them); the head's from the
    // seed on every rank alike.
    detail::SeedScope seed(spec_.seed);
    rnn_ = register_module(
        "rnn", nn::Recurrent(comm, nn::RecurrentOptions(spec_.cell, features, spec_.hidden)
                                       .num_layers(spec_.layers)
                                       .solver(spec_.solver)));
    head_ = register_module("head", torch::nn::Linear(spec_.hidden, spec_.classes));
  }
}

torch::Tensor SequenceClassifierImpl::as_sequence(const torch::Tensor& images) const {
  const std::int64_t batch = images.size(0);
  if (spec_.order == SequenceOrder::Rows)
    return images.reshape({batch, spec_.height, spec_.width}).permute({1, 0, 2}).contiguous();
  return images.reshape({batch, spec_.height * spec_.width}).t().unsqueeze(2).contiguous();
}

torch::Tensor SequenceClassifierImpl::forward(const torch::Tensor& images) {
  const nn::RecurrentOutput out = rnn_->forward(as_sequence(images));
  return head_->forward(out.h_n[spec_.layers - 1]);
}

}  // namespace weft::models
