#pragma once
// The recurrent image classifier that `weft train --model gru|lstm` trains: an image read as a
// sequence (rows: H steps of W pixels; pixels: H*W steps of one pixel), a stacked GRU or LSTM
// parallel over the sequence (weft::nn::Recurrent in distributed mode: each rank reads only the
// rows of its own steps from the images), and a linear classifier on the top layer's final
// hidden state. Replicated on every rank of the communicator: logits, loss and gradients are the
// same everywhere. With `serial` the cells run on this process alone (the reference of
// `weft train --serial`), with the same parameter names and the same initial values as the
// layer-parallel model of the same seed: plain torch::nn::GRU / torch::nn::LSTM for torch's
// cell; for the implicit cell, which torch does not have, weft::nn::Recurrent on MPI_COMM_SELF
// in exact mode (one sequential chain of the same cell).
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
  /// The recurrent cell and coarse steps (nn::RecurrentOptions): coarse_input, implicit_step
  /// (0: torch's cell), implicit_iterations.
  nn::CoarseInput coarse_input = nn::CoarseInput::Start;
  double implicit_step = 0;
  int implicit_iterations = 3;
  bool serial = false;  ///< this process alone (no MGRIT over ranks; see above)
};

class SequenceClassifierImpl : public torch::nn::Module {
 public:
  /// Collective over `comm` (unused when spec.serial). Throws weft::InvalidOption for
  /// non-positive sizes and invalid cell options.
  SequenceClassifierImpl(MPI_Comm comm, const SequenceClassifierSpec& spec);
  /// Collective. images [B, 1, H, W] (the same on every rank) -> logits [B, classes], on every
  /// rank. Each rank passes only its own steps to the recurrent module (forward_local).
  torch::Tensor forward(const torch::Tensor& images);
  /// Sequence steps: H (rows) or H*W (pixels).
  std::int64_t steps() const;
  /// [B, 1, H, W] -> [steps, B, features].
  torch::Tensor as_sequence(const torch::Tensor& images) const;
  /// Steps [first, end) of as_sequence(images), [end - first, B, features], copying only them.
  torch::Tensor sequence_rows(const torch::Tensor& images, std::int64_t first,
                              std::int64_t end) const;
  /// The layer-parallel cells (null when spec.serial with torch's cell; on MPI_COMM_SELF when
  /// spec.serial with the implicit cell).
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
