#pragma once
// The recurrent image classifier that `weft train --model gru|lstm` trains: an image read as a
// sequence (rows: H steps of W pixels; pixels: H*W steps of one pixel), a stacked GRU or LSTM
// parallel over the sequence (weft::nn::Recurrent), and a linear classifier on the top layer's
// final hidden state. Replicated on every rank of the communicator: logits, loss and gradients
// are the same everywhere. With `serial` the cells are plain torch::nn::GRU / torch::nn::LSTM on
// this process alone (the reference of `weft train --serial`), with the same parameter names
// and the same initial values as the layer-parallel model of the same seed.
#include <mpi.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>

#include <cstdint>
#include <string>

#include "weft/nn/recurrent.hpp"

namespace weft::models {

enum class SequenceOrder { Rows, Pixels };
SequenceOrder parse_sequence_order(const std::string& name);  // "rows" | "pixels"
std::string to_string(SequenceOrder order);

struct SequenceClassifierSpec {
  nn::CellKind cell = nn::CellKind::GRU;
  SequenceOrder order = SequenceOrder::Rows;
  std::int64_t hidden = 64;
  std::int64_t layers = 1;
  std::int64_t height = 28;
  std::int64_t width = 28;
  int classes = 10;
  std::uint64_t seed = 0;  ///< initial parameters (also of the recurrent cells)
  nn::LayerParallelOptions solver;
  bool serial = false;  ///< torch::nn::GRU/LSTM on this process (no MGRIT, no communicator)
};

class SequenceClassifierImpl : public torch::nn::Module {
 public:
  /// Collective over `comm` (unused when spec.serial). Throws weft::InvalidOption for
  /// non-positive sizes.
  SequenceClassifierImpl(MPI_Comm comm, const SequenceClassifierSpec& spec);
  /// Collective. images [B, 1, H, W] -> logits [B, classes], on every rank.
  torch::Tensor forward(const torch::Tensor& images);
  /// [B, 1, H, W] -> [steps, B, features].
  torch::Tensor as_sequence(const torch::Tensor& images) const;
  /// The layer-parallel cells (null when spec.serial).
  nn::Recurrent& recurrent() { return rnn_; }
  const SequenceClassifierSpec& spec() const { return spec_; }

 private:
  SequenceClassifierSpec spec_;
  nn::Recurrent rnn_{nullptr};
  torch::nn::GRU gru_{nullptr};    ///< spec.serial, GRU
  torch::nn::LSTM lstm_{nullptr};  ///< spec.serial, LSTM
  torch::nn::Linear head_{nullptr};
};
TORCH_MODULE(SequenceClassifier);

}  // namespace weft::models
