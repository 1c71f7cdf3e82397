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
  const bool implicit = spec_.implicit_step > 0;
  // The implicit cell has no torch module: serial runs weft's on this process alone, in exact
  // mode, which is the same cell evaluated once per step in sequence order.
  if (!spec_.serial || implicit)
    rnn_ = register_module(
        "rnn",
        nn::Recurrent(spec_.serial ? MPI_COMM_SELF : comm,
                      nn::RecurrentOptions(spec_.cell, features, spec_.hidden)
                          .num_layers(spec_.layers)
                          .solver(spec_.serial ? nn::LayerParallelOptions::exact() : spec_.solver)
                          .coarse_input(spec_.coarse_input)
                          .implicit_step(spec_.implicit_step)
                          .implicit_iterations(spec_.implicit_iterations)));
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

std::int64_t SequenceClassifierImpl::steps() const {
  return spec_.order == SequenceOrder::Rows ? spec_.height : spec_.height * spec_.width;
}

torch::Tensor SequenceClassifierImpl::as_sequence(const torch::Tensor& images) const {
  return sequence_rows(images, 0, steps());
}

torch::Tensor SequenceClassifierImpl::sequence_rows(const torch::Tensor& images, std::int64_t first,
                                                    std::int64_t end) const {
  const std::int64_t batch = images.size(0);
  if (spec_.order == SequenceOrder::Rows)
    return images.reshape({batch, spec_.height, spec_.width})
        .slice(1, first, end)
        .permute({1, 0, 2})
        .contiguous();
  return images.reshape({batch, spec_.height * spec_.width})
      .slice(1, first, end)
      .t()
      .unsqueeze(2)
      .contiguous();
}

torch::Tensor SequenceClassifierImpl::forward(const torch::Tensor& images) {
  torch::Tensor h_n;
  if (gru_)
    h_n = std::get<1>(gru_->forward(as_sequence(images)));
  else if (lstm_)
    h_n = std::get<0>(std::get<1>(lstm_->forward(as_sequence(images))));
  else {
    // h_n is the same on every rank, so is the head's loss on it: forward_local's gradient
    // convention (h_n terms count once) holds.
    const auto [first, end] = rnn_->local_steps(steps());
    h_n = rnn_->forward_local(sequence_rows(images, first, end)).h_n;
  }
  return head_->forward(h_n[spec_.layers - 1]);
}

}  // namespace weft::models
