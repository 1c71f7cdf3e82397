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
  // The cells' parameters come from rank 0 (Recurrent broadcasts them); the head's from the
  // seed on every rank alike. torch::nn::GRU/LSTM draw theirs in the same order and the same
  // way (uniform in ±1/sqrt(H): weight_ih, weight_hh, bias_ih, bias_hh per layer), so --serial
  // starts from the same values and the head from the same point of the stream.
  detail::SeedScope seed(spec_.seed);
  if (!spec_.serial)
    rnn_ = register_module(
        "rnn", nn::Recurrent(comm, nn::RecurrentOptions(spec_.cell, features, spec_.hidden)
                                       .num_layers(spec_.layers)
                                       .solver(spec_.solver)));
  else if (spec_.cell == nn::CellKind::GRU)
    gru_ = register_module(
        "rnn",
        torch::nn::GRU(torch::nn::GRUOptions(features, spec_.hidden).num_layers(spec_.layers)));
  else
    lstm_ = register_module(
        "rnn",
        torch::nn::LSTM(torch::nn::LSTMOptions(features, spec_.hidden).num_layers(spec_.layers)));
  head_ = register_module("head", torch::nn::Linear(spec_.hidden, spec_.classes));
}

torch::Tensor SequenceClassifierImpl::as_sequence(const torch::Tensor& images) const {
  const std::int64_t batch = images.size(0);
  if (spec_.order == SequenceOrder::Rows)
    return images.reshape({batch, spec_.height, spec_.width}).permute({1, 0, 2}).contiguous();
  return images.reshape({batch, spec_.height * spec_.width}).t().unsqueeze(2).contiguous();
}

torch::Tensor SequenceClassifierImpl::forward(const torch::Tensor& images) {
  const torch::Tensor x = as_sequence(images);
  const torch::Tensor h_n = gru_    ? std::get<1>(gru_->forward(x))
                            : lstm_ ? std::get<0>(std::get<1>(lstm_->forward(x)))
                                    : rnn_->forward(x).h_n;
  return head_->forward(h_n[spec_.layers - 1]);
}

}  // namespace weft::models
