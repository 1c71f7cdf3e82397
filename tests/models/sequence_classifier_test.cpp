// weft::models::SequenceClassifier (the model of `weft train --model gru|lstm`) feeds its
// recurrent module in distributed mode: each rank passes only its own rows of the image
// sequence. In exact mode its logits and every parameter gradient equal the serial model's
// (torch::nn::GRU / LSTM on this process; for the implicit cell weft's module alone on
// MPI_COMM_SELF) with the same seed, in double, for sequences whose length no rank count
// divides: a wrong or missing chunk of rows changes the result.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <string>

#include "weft/models/sequence_classifier.hpp"
#include "world.hpp"

namespace {

using torch::Tensor;
using weft::models::SequenceClassifier;
using weft::models::SequenceClassifierSpec;
using weft::models::SequenceOrder;
using weft::nn::CellKind;

constexpr std::int64_t kBatch = 3;

/// Logits and parameter gradients of one batch; the worst difference over all ranks between
/// the layer-parallel model and the serial one built from the same spec.
double worst_difference(SequenceClassifierSpec spec) {
  torch::manual_seed(7);  // the same images and labels on every rank
  const Tensor images = torch::randn({kBatch, 1, spec.height, spec.width}, torch::kFloat64);
  const Tensor labels = torch::randint(0, spec.classes, {kBatch}, torch::kInt64);
  auto run = [&](bool serial) {
    spec.serial = serial;
    SequenceClassifier model(MPI_COMM_WORLD, spec);
    model->to(torch::kFloat64);
    const Tensor logits = model->forward(images);
    torch::nn::functional::cross_entropy(logits, labels).backward();
    return std::make_pair(logits.detach(), model);
  };
  const auto [parallel_logits, parallel] = run(false);
  const auto [serial_logits, serial] = run(true);
  double worst = (parallel_logits - serial_logits).abs().max().item<double>();
  auto mine = parallel->named_parameters();
  const auto theirs = serial->named_parameters();
  EXPECT_EQ(mine.size(), theirs.size());
  for (const auto& p : theirs) {
    const Tensor* g = mine.find(p.key());
    EXPECT_NE(g, nullptr) << p.key();
    if (g == nullptr) return 1e300;
    const double d = (g->grad() - p.value().grad()).abs().max().item<double>();
    EXPECT_LE(d, 1e-6) << p.key();  // a missing or misplaced gradient fails loudly here
    worst = std::max(worst, d);
  }
  return weft::test::allreduce(worst, MPI_MAX);
}

SequenceClassifierSpec small(CellKind cell, SequenceOrder order) {
  SequenceClassifierSpec s;
  s.cell = cell;
  s.order = order;
  s.hidden = 4;
  s.layers = 2;
  s.height = 7;  // rows: 7 steps of 5; pixels: 35 steps of 1
  s.width = 5;
  s.classes = 3;
  s.seed = 3;
  return s;
}

TEST(SequenceClassifier, DistributedGruRowsEqualTorchGru) {
  EXPECT_LE(worst_difference(small(CellKind::GRU, SequenceOrder::Rows)), 1e-12);
}

TEST(SequenceClassifier, DistributedLstmPixelsEqualTorchLstm) {
  EXPECT_LE(worst_difference(small(CellKind::LSTM, SequenceOrder::Pixels)), 1e-12);
}

TEST(SequenceClassifier, DistributedImplicitCellEqualsItsSerialRunOnOneRank) {
  SequenceClassifierSpec s = small(CellKind::GRU, SequenceOrder::Rows);
  s.implicit_step = 0.5;
  s.implicit_iterations = 2;
  s.coarse_input = weft::nn::CoarseInput::Mean;  // no effect in exact mode
  EXPECT_LE(worst_difference(s), 1e-12);
}

// Rows: step t is image row t; pixels: step t is pixel t in row-major order.
TEST(SequenceClassifier, SequenceRowsAreTheStepsOfTheImageSequence) {
  for (SequenceOrder order : {SequenceOrder::Rows, SequenceOrder::Pixels}) {
    SequenceClassifierSpec s = small(CellKind::GRU, order);
    s.serial = true;
    SequenceClassifier model(MPI_COMM_SELF, s);
    const Tensor images = torch::randn({kBatch, 1, s.height, s.width});
    const bool rows = order == SequenceOrder::Rows;
    EXPECT_EQ(model->steps(), rows ? s.height : s.height * s.width);
    const Tensor part = model->sequence_rows(images, 2, 5);
    ASSERT_EQ(part.sizes(), torch::IntArrayRef({3, kBatch, rows ? s.width : 1}));
    for (std::int64_t t = 2; t < 5; ++t)
      for (std::int64_t b = 0; b < kBatch; ++b) {
        const Tensor expected = rows ? images[b][0][t] : images[b][0][t / s.width][t % s.width];
        EXPECT_TRUE(torch::equal(part[t - 2][b].reshape({-1}), expected.reshape({-1})))
            << (rows ? "rows" : "pixels") << " step " << t << " image " << b;
      }
    EXPECT_TRUE(
        torch::equal(model->as_sequence(images), model->sequence_rows(images, 0, model->steps())));
  }
}

}  // namespace
