// The model behind a Trainer: one training step and one evaluation pass for each kind of
// model (layer-parallel chain, sequential reference, replicated recurrent classifier).
#include "classifier.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "prefetcher.hpp"
#include "weft/train/model_zoo.hpp"
#include "weft/train/options.hpp"
#include "weft/util/clock.hpp"
#include "weft/util/mpi.hpp"
#include "weft/util/trace.hpp"

namespace weft::train {

using weft::clock::now;

namespace {
void check_finite(double loss) {
  if (!std::isfinite(loss)) throw Diverged(loss);
}
}  // namespace

Classifier::Classifier(const ModelConfig& m, const std::vector<std::int64_t>& example_shape,
                       MPI_Comm comm, MPI_Comm data, bool serial,
                       const nn::LayerParallelOptions& options)
    : comm_(comm), serial_(serial), classes_(m.classes) {
  if (is_recurrent(m)) {
    recurrent_ = models::SequenceClassifier(
        comm, sequence_classifier_spec(m, example_shape, options, serial));
    data_ = serial ? MPI_COMM_NULL : data;
    return;
  }
  build(build_network(m, example_shape), data, options);
}

Classifier::Classifier(const nn::Network& network, int classes, MPI_Comm comm, MPI_Comm data,
                       bool serial, const nn::LayerParallelOptions& options)
    : comm_(comm), serial_(serial), classes_(classes) {
  build(network, data, options);
}

void Classifier::build(const nn::Network& net, MPI_Comm data,
                       const nn::LayerParallelOptions& options) {
  if (serial_)
    sequential_ = nn::SequentialNetwork(net, options.seed());
  else
    parallel_ = nn::LayerParallel(comm_, data, net, options);
}

void Classifier::set_batch_index(std::int64_t b) {
  if (recurrent_) return;  // no random streams
  if (serial_)
    sequential_->set_batch_index(b);
  else
    parallel_->set_batch_index(b);
}

torch::nn::Module& Classifier::module() {
  if (recurrent_) return *recurrent_;
  return serial_ ? static_cast<torch::nn::Module&>(*sequential_)
                 : static_cast<torch::nn::Module&>(*parallel_);
}

std::vector<bool> Classifier::chain_parameters() {
  std::vector<bool> chain;
  for (const auto& item : module().named_parameters()) {
    const std::string& name = item.key();
    auto starts = [&](const char* prefix) { return name.rfind(prefix, 0) == 0; };
    // The layer-parallel network's chain layers are "step_N" and "transition_N"
    // (nn::detail::Chain::layer_name); the recurrent model's ends are its "head" alone.
    chain.push_back(recurrent_ ? !starts("head.") : starts("step_") || starts("transition_"));
  }
  return chain;
}

const nn::SolveReport* Classifier::solve_report(bool forward) {
  if (recurrent_ && !serial_) {
    const auto& s = recurrent_->recurrent()->statistics();
    return forward ? &s.forward : &s.backward;
  }
  if (serial_) return nullptr;
  return forward ? &parallel_->statistics().forward : &parallel_->statistics().backward;
}

nn::LayerParallelOptions Classifier::solver_options() {
  if (serial_) return nn::LayerParallelOptions::exact();
  if (recurrent_) return recurrent_->recurrent()->options().solver();
  return parallel_->options();
}

void Classifier::set_solver_options(const nn::LayerParallelOptions& options) {
  if (serial_) return;
  if (recurrent_)
    recurrent_->recurrent()->set_solver(options);
  else
    parallel_->set_options(options);
}

BatchOutcome Classifier::train(const torch::Tensor& x, const torch::Tensor& y,
                               torch::optim::Optimizer& opt, PhaseTimes& t, double weight) {
  opt.zero_grad();
  BatchOutcome out = gradients(x, y, t, weight);
  step(opt, t);
  return out;
}

void Classifier::step(torch::optim::Optimizer& opt, PhaseTimes& t) {
  const double t0 = now();
  {
    trace::Span phase("optimizer", "train", trace::Kind::Phase);
    opt.step();
  }
  t.optimizer = now() - t0;
}

BatchOutcome Classifier::gradients(const torch::Tensor& x, const torch::Tensor& y, PhaseTimes& t,
                                   double weight) {
  BatchOutcome out;
  double t0 = now();
  if (serial_ || recurrent_) {  // the same logits and loss on every rank
    torch::Tensor logits;
    {
      trace::Span phase("forward", "train", trace::Kind::Phase);
      logits = recurrent_ ? recurrent_->forward(x) : sequential_->forward(x);
    }
    double t1 = now();
    {
      trace::Span phase("backward", "train", trace::Kind::Phase);
      torch::Tensor loss = torch::nn::functional::cross_entropy(logits, y) * weight;
      out.correct = static_cast<double>(logits.argmax(1).eq(y).sum().item<std::int64_t>());
      out.loss = loss.item<double>() / weight;
      out.logits = logits.detach();
      check_finite(out.loss);
      loss.backward();
      if (recurrent_ && data_ != MPI_COMM_NULL) average_gradients();
    }
    t.forward = t1 - t0;
    t.backward = now() - t1;
    return out;
  }
  torch::Tensor logits;
  {
    trace::Span phase("forward", "train", trace::Kind::Phase);
    logits = parallel_->forward(x);
  }
  double t1 = now();
  double correct = 0;
  {
    trace::Span phase("backward", "train", trace::Kind::Phase);
    torch::Tensor loss = parallel_->loss(logits, [&](const torch::Tensor& z) {
      correct = static_cast<double>(z.argmax(1).eq(y).sum().item<std::int64_t>());
      out.logits = z.detach();
      return torch::nn::functional::cross_entropy(z, y) * weight;
    });
    out.loss = loss.item<double>() / weight;
    check_finite(out.loss);  // the same value on every rank: every rank stops together
    loss.backward();
  }
  t.forward = t1 - t0;
  t.backward = now() - t1;
  out.correct = parallel_->broadcast_from_output(correct);
  return out;
}

double Classifier::loss(const torch::Tensor& x, const torch::Tensor& y, PhaseTimes& t,
                        double weight) {
  const double t0 = now();
  torch::NoGradGuard no_grad;
  trace::Span phase("forward", "train", trace::Kind::Phase);
  const torch::Tensor logits = recurrent_ ? recurrent_->forward(x)
                               : serial_  ? sequential_->forward(x)
                                          : parallel_->forward(x);
  double value = 0;
  if (serial_ || recurrent_ || parallel_->owns_output())
    value = torch::nn::functional::cross_entropy(logits, y).item<double>() * weight;
  if (!serial_ && !recurrent_) value = parallel_->broadcast_from_output(value);
  t.forward = now() - t0;
  return value;
}

namespace {
/// Sums of the losses and correct predictions of `logits` against `y`; each prediction counted
/// into `confusion` (row = true label) when `count`.
BatchOutcome score(const torch::Tensor& logits, const torch::Tensor& y,
                   std::vector<std::int64_t>& confusion, int classes, bool count) {
  const double loss =
      torch::nn::functional::cross_entropy(
          logits, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
          .item<double>();
  const torch::Tensor predicted = logits.argmax(1);
  const double correct = static_cast<double>(predicted.eq(y).sum().item<std::int64_t>());
  auto p = predicted.accessor<std::int64_t, 1>();
  auto l = y.accessor<std::int64_t, 1>();
  for (std::int64_t i = 0; count && i < p.size(0); ++i)
    ++confusion[static_cast<size_t>(l[i] * classes + p[i])];
  return {loss, correct, {}};
}
}  // namespace

BatchOutcome Classifier::evaluate(const torch::Tensor& x, const torch::Tensor& y,
                                  std::vector<std::int64_t>& confusion, int classes) {
  torch::NoGradGuard no_grad;
  torch::Tensor logits = recurrent_ ? recurrent_->forward(x)
                         : serial_  ? sequential_->forward(x)
                                    : parallel_->forward(x);
  const bool has_logits = serial_ || recurrent_ || parallel_->owns_output();
  // Replicated logits: the confusion matrix counts them once (rank 0).
  const bool count = !recurrent_ || mpi::rank(comm_) == 0;
  BatchOutcome out;
  if (has_logits) out = score(logits, y, confusion, classes, count);
  if (!serial_ && !recurrent_) {
    out.loss = parallel_->broadcast_from_output(out.loss);
    out.correct = parallel_->broadcast_from_output(out.correct);
  }
  return out;
}

void Classifier::from_output(double* values, int count) const {
  for (int i = 0; i < count; ++i) values[i] = parallel_->broadcast_from_output(values[i]);
}

// Replicas of the recurrent model: one fused all-reduce averages every gradient.
void Classifier::average_gradients() {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads, flat;
  for (const auto& p : recurrent_->parameters())
    if (p.grad().defined()) {
      grads.push_back(p.mutable_grad());
      flat.push_back(p.grad().reshape({-1}).to(torch::kFloat64));
    }
  if (grads.empty()) return;
  torch::Tensor all = torch::cat(flat).contiguous();
  mpi::check(MPI_Allreduce(MPI_IN_PLACE, all.data_ptr(), static_cast<int>(all.numel()), MPI_DOUBLE,
                           MPI_SUM, data_),
             "MPI_Allreduce (replica gradients)");
  all.div_(mpi::size(data_));
  std::int64_t offset = 0;
  for (torch::Tensor& g : grads) {
    g.copy_(all.slice(0, offset, offset + g.numel()).view(g.sizes()));
    offset += g.numel();
  }
}

nn::LayerParallelOptions exact_version(nn::LayerParallelOptions o) {
  o.forward(mgrit::Options(o.forward()).max_levels(1));
  o.backward(mgrit::Options(o.backward()).max_levels(1));
  o.spatial_levels({}, {});
  return o;
}

bool is_exact(const nn::LayerParallelOptions& o) {
  return o.forward().max_levels() == 1;
}

namespace {

/// Sums of losses and correct predictions over `starts` (batches of `batch` from `test`), the
/// chain's exact forward pipelined over pieces of at most `piece` examples; on every rank of
/// the chain. `confusion` is accumulated on the output rank.
BatchOutcome pipelined(Classifier& model, const DataSource& test,
                       const std::vector<std::int64_t>& starts, std::int64_t batch,
                       std::int64_t piece, std::vector<std::int64_t>& confusion) {
  const std::int64_t count = test.size();
  struct Piece {
    std::size_t batch;        // index into starts
    std::int64_t begin, end;  // rows of that batch
  };
  std::vector<Piece> pieces;
  for (std::size_t k = 0; k < starts.size(); ++k) {
    const std::int64_t rows = std::min(count, starts[k] + batch) - starts[k];
    for (std::int64_t b = 0; b < rows; b += piece)
      pieces.push_back({k, b, std::min(rows, b + piece)});
  }
  // The input rank loads the inputs, the output rank the labels; the ranks between need neither.
  const MPI_Comm comm = model.layer_comm();
  const bool input_rank = mpi::rank(comm) == 0,
             output_rank = mpi::rank(comm) == mpi::size(comm) - 1;
  std::optional<Prefetcher> ahead;
  if (input_rank || output_rank)
    ahead.emplace(static_cast<std::int64_t>(starts.size()), [&](std::int64_t j) {
      const std::int64_t start = starts[static_cast<std::size_t>(j)];
      const std::int64_t end = std::min(count, start + batch);
      return input_rank ? test.range(start, end)
                        : Batch{torch::Tensor(), test.range_labels(start, end)};
    });
  Batch current;
  std::size_t loaded = starts.size();  // the batch in `current` (none yet)
  auto rows_of = [&](std::int64_t j) {
    const Piece& p = pieces[static_cast<std::size_t>(j)];
    if (loaded != p.batch) {
      current = ahead->next();
      loaded = p.batch;
    }
    return p;
  };
  double sums[2] = {0, 0};
  model.infer(
      static_cast<std::int64_t>(pieces.size()),
      [&](std::int64_t j) {
        const Piece p = rows_of(j);
        return current.inputs.slice(0, p.begin, p.end);
      },
      [&](std::int64_t j, const torch::Tensor& logits) {
        const Piece p = rows_of(j);
        const BatchOutcome o = score(logits, current.labels.slice(0, p.begin, p.end), confusion,
                                     model.classes(), true);
        sums[0] += o.loss;
        sums[1] += o.correct;
      });
  model.from_output(sums, 2);
  return {sums[0], sums[1], {}};
}

}  // namespace

Evaluation evaluate(Classifier& model, const DataSource& test, std::int64_t batch, MPI_Comm world,
                    MPI_Comm data, EvaluationForward forward) {
  const int kClasses = model.classes();
  const int replicas = data == MPI_COMM_NULL ? 1 : mpi::size(data);
  const int replica = data == MPI_COMM_NULL ? 0 : mpi::rank(data);
  Evaluation out;
  out.classes = kClasses;
  std::vector<std::int64_t> local(kClasses * kClasses, 0);
  double sums[2] = {0, 0};  // loss, correct
  const std::int64_t count = test.size();
  std::int64_t k = 0;
  std::vector<std::int64_t> starts;  // this replica's batches
  std::int64_t examples = 0;
  for (std::int64_t start = 0; start < count; start += batch, ++k)
    if (k % replicas == replica) {
      starts.push_back(start);
      examples += std::min(count, start + batch) - start;
    }
  model.module().eval();
  // The recurrent model's exact forward is its exact mode, for the evaluation's length.
  const nn::LayerParallelOptions solver = model.solver_options();
  if (forward == EvaluationForward::both) forward = EvaluationForward::exact;
  const bool swap =
      forward == EvaluationForward::exact && !model.layer_parallel() && !is_exact(solver);
  try {
    if (forward == EvaluationForward::exact && model.layer_parallel()) {
      // At least 4 pieces per rank where the share allows: the pipeline then runs
      // (pieces + P - 1) / pieces times one rank's work, at most 1.25 times it.
      const std::int64_t ranks = mpi::size(model.layer_comm());
      const std::int64_t piece =
          std::max<std::int64_t>(1, std::min(batch, (examples + 4 * ranks - 1) / (4 * ranks)));
      const BatchOutcome o = pipelined(model, test, starts, batch, piece, local);
      sums[0] = o.loss;
      sums[1] = o.correct;
    } else {
      if (swap) model.set_solver_options(exact_version(solver));
      // Loaded ahead; ranks that do not take the inputs load labels only.
      const bool inputs = model.needs_inputs();
      Prefetcher ahead(static_cast<std::int64_t>(starts.size()), [&](std::int64_t j) {
        const std::int64_t start = starts[static_cast<std::size_t>(j)];
        const std::int64_t end = std::min(count, start + batch);
        return inputs ? test.range(start, end)
                      : Batch{torch::Tensor(), test.range_labels(start, end)};
      });
      // A damaged example is known to the loading rank first: the replica's ranks agree on it.
      const MPI_Comm together = replicas > 1 ? model.layer_comm() : world;
      for (std::size_t j = 0; j < starts.size(); ++j) {
        Batch b;
        mpi::collectively(together, [&] { b = ahead.next(); });
        const BatchOutcome o = model.evaluate(b.inputs, b.labels, local, kClasses);
        sums[0] += o.loss;
        sums[1] += o.correct;
      }
      if (swap) model.set_solver_options(solver);
    }
  } catch (...) {
    if (swap) model.set_solver_options(solver);
    model.module().train();
    throw;
  }
  model.module().train();
  if (replicas > 1)
    mpi::check(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, data),
               "MPI_Allreduce (evaluation)");
  out.confusion.assign(local.size(), 0);
  mpi::check(MPI_Allreduce(local.data(), out.confusion.data(), static_cast<int>(local.size()),
                           MPI_INT64_T, MPI_SUM, world),
             "MPI_Allreduce (confusion matrix)");
  out.loss = sums[0] / static_cast<double>(count);
  out.accuracy = sums[1] / static_cast<double>(count);
  return out;
}

}  // namespace weft::train
