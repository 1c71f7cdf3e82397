// `weft train` and `weft eval`: data, model, the training loop, metrics, checkpoints.
// The only file of the CLI that includes LibTorch, which is why it runs past ~600 lines: each
// LibTorch translation unit costs ~35 s of compile time here, so the LibTorch-free parts live
// in model_config, train_report, preflight and the command files, and what needs tensors stays
// in this one file.
#include "training.hpp"

#include "model_config.hpp"
#include "network_factory.hpp"
#include "train_report.hpp"

#include "cli_support.hpp"
#include "data_command.hpp"
#include "preflight.hpp"

#include <fmt/format.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "weft/data/idx.hpp"
#include "weft/models/image_resnet.hpp"
#include "weft/models/sequence_classifier.hpp"
#include "weft/models/stages_net.hpp"
#include "weft/nn/checkpoint.hpp"
#include "weft/nn/layer_parallel.hpp"
#include "weft/util/clock.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"
#include "weft/util/trace.hpp"

namespace weft::cli {
namespace {

using json = nlohmann::json;

using weft::clock::now;

// ---------------------------------------------------------------------------------------------
// Data

struct Normalization {
  double mean = 0, std = 1;
};

struct Dataset {
  torch::Tensor images;  ///< [count, 1, rows, cols] or [count, 1, depth, rows, cols], normalized
  torch::Tensor labels;  ///< [count] int64
  std::int64_t count() const { return labels.size(0); }
};

data::ImageSet read_split(const std::string& dir, data::Split split, std::int64_t limit) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw BadData("--data " + dir + " is a file, not a folder (expected a folder with " +
                  data::images_file(split) + "[.gz] and " + data::labels_file(split) + "[.gz])");
  data::IdxOptions options;
  options.limit = limit;
  options.spatial_dims = holds_volumes(dir, split) ? 3 : 2;
  const std::string images = dir + "/" + data::images_file(split, options.spatial_dims);
  data::ImageSet set = data::load_idx(images, dir + "/" + data::labels_file(split), options);
  if (set.count == 0)
    throw BadData(std::string(split == data::Split::Train ? "the training" : "the test") +
                  " set is empty: " + images + "[.gz] holds no images");
  return set;
}

Normalization measure(const data::ImageSet& set) {
  double sum = 0, sq = 0;
  for (std::uint8_t p : set.pixels) {
    const double v = p / 255.0;
    sum += v;
    sq += v * v;
  }
  const double n = std::max<double>(1.0, static_cast<double>(set.pixels.size()));
  Normalization norm;
  norm.mean = sum / n;
  norm.std = std::sqrt(std::max(1e-12, sq / n - norm.mean * norm.mean));
  return norm;
}

Dataset to_tensors(const data::ImageSet& set, const Normalization& norm) {
  if (set.count == 0) throw BadData("data set is empty");
  std::vector<float> pixels =
      data::to_float(set, static_cast<float>(norm.mean), static_cast<float>(norm.std));
  std::vector<std::int64_t> labels = data::labels_as_int64(set);
  Dataset d;
  const std::vector<std::int64_t> shape =
      set.spatial_dims == 3 ? std::vector<std::int64_t>{set.count, 1, set.depth, set.rows, set.cols}
                            : std::vector<std::int64_t>{set.count, 1, set.rows, set.cols};
  d.images = torch::from_blob(pixels.data(), shape, torch::kFloat32).clone();
  d.labels = torch::from_blob(labels.data(), {set.count}, torch::kInt64).clone();
  return d;
}

void set_threads(int requested, MPI_Comm comm) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = requested > 0 ? requested : std::max(1, cores / mpi::size(comm));
  torch::set_num_threads(threads);
  // Subnormal floats as zero: a recurrent adjoint over hundreds of steps decays through the
  // subnormal range, where each operation costs several times more (784-step GRU backward 5x;
  // docs/benchmarks.md). Values below 1e-38 change no trained result.
  at::globalContext().setFlushDenormal(true);
}

// ---------------------------------------------------------------------------------------------
// Model: the layer-parallel module, or the plain sequential network (--serial, rank 0 only)

nn::Network make_network(const ModelConfig& m, const Dataset& like) {
  if (m.kind == "stages" || m.kind == "conv3d") {
    models::StagesNetSpec spec;
    spec.dims = static_cast<int>(like.images.dim()) - 2;
    if (spec.dims == 3) spec.depth = like.images.size(-3);
    spec.channels = m.stage_channels;
    spec.steps = m.stage_steps;
    spec.t_final = m.t_final;
    spec.batchnorm = m.batchnorm;
    spec.dropout = m.dropout;
    spec.height = like.images.size(-2);
    spec.width = like.images.size(-1);
    spec.seed = m.seed;
    return models::stages_net(spec);
  }
  models::ImageResNetSpec spec;
  spec.channels = m.channels;
  spec.steps = m.steps;
  spec.t_final = m.t_final;
  spec.open = models::parse_open_layer(m.open);
  spec.height = like.images.size(2);
  spec.width = like.images.size(3);
  spec.seed = m.seed;
  return models::image_resnet(spec);
}

struct BatchOutcome {
  double loss = 0;     ///< mean over the batch, on every rank
  double correct = 0;  ///< on every rank
};

struct Timing {
  double forward = 0, backward = 0, optimizer = 0;
};

class Model {
 public:
  // Layer-parallel over `comm` (replicas over `data`), or sequential when `comm` is
  // MPI_COMM_SELF and serial is set. gru/lstm: the recurrent classifier, parallel over the
  // sequence and replicated on every rank of `comm` (serial: torch::nn::GRU/LSTM).
  Model(const ModelConfig& m, const Dataset& like, MPI_Comm comm, MPI_Comm data, bool serial,
        const nn::LayerParallelOptions& opts)
      : comm_(comm), serial_(serial) {
    if (m.kind == "gru" || m.kind == "lstm") {
      models::SequenceClassifierSpec spec;
      spec.cell = m.kind == "gru" ? nn::CellKind::GRU : nn::CellKind::LSTM;
      spec.order = models::parse_sequence_order(m.sequence);
      spec.hidden = m.hidden;
      spec.layers = m.rnn_layers;
      spec.height = like.images.size(2);
      spec.width = like.images.size(3);
      spec.seed = m.seed;
      spec.solver = opts;
      spec.coarse_input = m.coarse_input == "mean" ? nn::CoarseInput::Mean : nn::CoarseInput::Start;
      spec.implicit_step = m.implicit_step;
      spec.implicit_iterations = m.implicit_iterations;
      spec.serial = serial;
      recurrent_ = models::SequenceClassifier(comm, spec);
      data_ = serial ? MPI_COMM_NULL : data;
      return;
    }
    const nn::Network net = make_network(m, like);
    if (serial_)
      sequential_ = nn::SequentialNetwork(net, opts.seed());
    else
      parallel_ = nn::LayerParallel(comm, data, net, opts);
  }
  /// Random streams continue from batch `b` (resume).
  void set_batch_index(std::int64_t b) {
    if (recurrent_) return;  // no random streams
    if (serial_)
      sequential_->set_batch_index(b);
    else
      parallel_->set_batch_index(b);
  }

  torch::nn::Module& module() {
    if (recurrent_) return *recurrent_;
    return serial_ ? static_cast<torch::nn::Module&>(*sequential_)
                   : static_cast<torch::nn::Module&>(*parallel_);
  }
  const nn::LayerParallel* parallel() const { return serial_ || recurrent_ ? nullptr : &parallel_; }
  /// The last batch's MGRIT solves on this rank (none for the sequential reference).
  const nn::SolveReport* solve_report(bool forward) {
    if (recurrent_ && !serial_) {
      const auto& s = recurrent_->recurrent()->statistics();
      return forward ? &s.forward : &s.backward;
    }
    if (serial_) return nullptr;
    return forward ? &parallel_->statistics().forward : &parallel_->statistics().backward;
  }
  /// Checkpoints: the recurrent model is replicated, so rank 0 of `comm` saves it alone, over
  /// this communicator, and every rank loads it whole.
  bool replicated() const { return static_cast<bool>(recurrent_); }
  MPI_Comm checkpoint_comm() const { return recurrent_ ? MPI_COMM_SELF : comm_; }

  // `weight` scales the mean loss of this replica's rows so that the replicas' average is the
  // mean over the global batch (rows / (global rows / replicas)).
  BatchOutcome train(const torch::Tensor& x, const torch::Tensor& y, torch::optim::Optimizer& opt,
                     Timing& t, double weight = 1.0) {
    BatchOutcome out;
    opt.zero_grad();
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
        check_finite(out.loss);
        loss.backward();
        if (recurrent_ && data_ != MPI_COMM_NULL) average_gradients();
      }
      double t2 = now();
      {
        trace::Span phase("optimizer", "train", trace::Kind::Phase);
        opt.step();
      }
      t = {t1 - t0, t2 - t1, now() - t2};
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
        return torch::nn::functional::cross_entropy(z, y) * weight;
      });
      out.loss = loss.item<double>() / weight;
      check_finite(out.loss);  // the same value on every rank: every rank stops together
      loss.backward();
    }
    double t2 = now();
    {
      trace::Span phase("optimizer", "train", trace::Kind::Phase);
      opt.step();
    }
    t = {t1 - t0, t2 - t1, now() - t2};
    out.correct = parallel_->broadcast_from_output(correct);
    return out;
  }

  // Sum of losses and correct predictions over the batch, on every rank; `confusion` (classes x
  // classes, row = true label) is accumulated on the rank that has the logits.
  BatchOutcome evaluate(const torch::Tensor& x, const torch::Tensor& y,
                        std::vector<std::int64_t>& confusion, int classes) {
    torch::NoGradGuard no_grad;
    torch::Tensor logits = recurrent_ ? recurrent_->forward(x)
                           : serial_  ? sequential_->forward(x)
                                      : parallel_->forward(x);
    const bool has_logits = serial_ || recurrent_ || parallel_->owns_output();
    // Replicated logits: the confusion matrix counts them once (rank 0).
    const bool count = !recurrent_ || mpi::rank(comm_) == 0;
    double loss = 0, correct = 0;
    if (has_logits) {
      loss = torch::nn::functional::cross_entropy(
                 logits, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                 .item<double>();
      torch::Tensor predicted = logits.argmax(1);
      correct = static_cast<double>(predicted.eq(y).sum().item<std::int64_t>());
      auto p = predicted.accessor<std::int64_t, 1>();
      auto l = y.accessor<std::int64_t, 1>();
      for (std::int64_t i = 0; count && i < p.size(0); ++i)
        ++confusion[static_cast<size_t>(l[i] * classes + p[i])];
    }
    if (!serial_ && !recurrent_) {
      loss = parallel_->broadcast_from_output(loss);
      correct = parallel_->broadcast_from_output(correct);
    }
    return {loss, correct};
  }

 private:
  void check_finite(double loss) const {
    if (!std::isfinite(loss))
      throw Divergence("training diverged: the loss is " + number_text(loss) +
                       " (try a smaller --lr)");
  }

  /// Replicas of the recurrent model: one fused all-reduce averages every gradient.
  void average_gradients() {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> grads, flat;
    for (const auto& p : recurrent_->parameters())
      if (p.grad().defined()) {
        grads.push_back(p.mutable_grad());
        flat.push_back(p.grad().reshape({-1}).to(torch::kFloat64));
      }
    if (grads.empty()) return;
    torch::Tensor all = torch::cat(flat).contiguous();
    mpi::check(MPI_Allreduce(MPI_IN_PLACE, all.data_ptr(), static_cast<int>(all.numel()),
                             MPI_DOUBLE, MPI_SUM, data_),
               "MPI_Allreduce (replica gradients)");
    all.div_(mpi::size(data_));
    std::int64_t offset = 0;
    for (torch::Tensor& g : grads) {
      g.copy_(all.slice(0, offset, offset + g.numel()).view(g.sizes()));
      offset += g.numel();
    }
  }

  MPI_Comm comm_;
  MPI_Comm data_ = MPI_COMM_NULL;
  bool serial_;
  nn::SequentialNetwork sequential_{nullptr};
  nn::LayerParallel parallel_{nullptr};
  models::SequenceClassifier recurrent_{nullptr};
};

// --lr-schedule at global batch k (0-based).
double learning_rate(const TrainConfig& c, std::int64_t k, std::int64_t batches_per_epoch) {
  if (c.lr_schedule == "constant") return c.lr;
  const double total = static_cast<double>(c.epochs) * static_cast<double>(batches_per_epoch);
  return c.lr * 0.5 * (1.0 + std::cos(M_PI * static_cast<double>(k) / total));
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainConfig& c, Model& model) {
  auto params = model.module().parameters();
  if (c.optimizer == "sgd")
    return std::make_unique<torch::optim::SGD>(params,
                                               torch::optim::SGDOptions(c.lr).momentum(c.momentum));
  if (c.optimizer == "adam")
    return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(c.lr));
  throw InvalidOption("option --optimizer: '" + c.optimizer + "' is invalid; accepted: sgd, adam");
}

struct EvalOutcome {
  double loss = 0, accuracy = 0;
  std::vector<std::int64_t> confusion;  ///< summed onto every rank
};

/// In eval mode (batch norm with running statistics, no dropout). With replicas, replica r
/// takes every D-th batch; sums are reduced over `data` (replicas) and the confusion matrix
/// over `world`.
EvalOutcome evaluate(Model& model, const Dataset& test, std::int64_t batch, MPI_Comm world,
                     MPI_Comm data = MPI_COMM_NULL) {
  constexpr int kClasses = 10;
  const int replicas = data == MPI_COMM_NULL ? 1 : mpi::size(data);
  const int replica = data == MPI_COMM_NULL ? 0 : mpi::rank(data);
  EvalOutcome out;
  std::vector<std::int64_t> local(kClasses * kClasses, 0);
  double sums[2] = {0, 0};  // loss, correct
  model.module().eval();
  std::int64_t k = 0;
  for (std::int64_t start = 0; start < test.count(); start += batch, ++k) {
    if (k % replicas != replica) continue;
    const std::int64_t end = std::min(test.count(), start + batch);
    const BatchOutcome b = model.evaluate(test.images.slice(0, start, end),
                                          test.labels.slice(0, start, end), local, kClasses);
    sums[0] += b.loss;
    sums[1] += b.correct;
  }
  model.module().train();
  if (replicas > 1)
    mpi::check(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, data),
               "MPI_Allreduce (evaluation)");
  const double loss = sums[0], correct = sums[1];
  out.confusion.assign(local.size(), 0);
  mpi::check(MPI_Allreduce(local.data(), out.confusion.data(), static_cast<int>(local.size()),
                           MPI_INT64_T, MPI_SUM, world),
             "MPI_Allreduce (confusion matrix)");
  out.loss = loss / static_cast<double>(test.count());
  out.accuracy = correct / static_cast<double>(test.count());
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

int run_training(const TrainConfig& config_in, MPI_Comm world) {
  TrainConfig c = config_in;
  const int rank = mpi::rank(world), ranks = mpi::size(world);
  set_threads(c.threads, world);

  const int replicas = c.serial ? 1 : c.data_ranks;
  if (ranks % replicas != 0)  // every rank knows: checked before any work
    throw InvalidOption(
        fmt::format("option --data-ranks: '{}' is invalid (the {} ranks do not "
                    "split into {} replicas); accepted: a divisor of the ranks",
                    replicas, ranks, replicas));

  // Every output is checked before any work; each check is agreed over all ranks.
  if (!c.checkpoint_dir.empty())
    mpi::collectively(world,
                      [&]() { check_output_folder("--checkpoint", c.checkpoint_dir, rank); });
  if (!c.metrics_path.empty())
    mpi::collectively(world, [&]() {
      if (rank == 0) check_output_file("--metrics", c.metrics_path);
    });
  if (!c.trace_path.empty())
    mpi::collectively(world, [&]() {
      if (rank == 0) check_output_file("--trace", c.trace_path);
    });

  int start_epoch = 1;
  std::optional<Normalization> stored_norm;
  std::optional<std::pair<std::int64_t, std::int64_t>> stored_size;
  std::int64_t stored_depth = 1;
  if (!c.resume_dir.empty()) {
    mpi::collectively(world, [&]() {
      const json meta = checkpoint_metadata(c.resume_dir);
      const ModelConfig stored = model_from_json(meta.at("model"));
      const int epoch = meta.at("epoch").get<int>();
      check_resume(c, stored, meta.at("optimizer").get<std::string>(), epoch);
      c.model = stored;
      start_epoch = epoch + 1;
      stored_norm = Normalization{meta.at("normalization").at("mean").get<double>(),
                                  meta.at("normalization").at("std").get<double>()};
      stored_size = image_size(meta);
      stored_depth = image_depth(meta);
    });
  }
  c.data_dir = data_folder(c.data_dir, world);

  // Every rank reads the (small) data set: the input rank needs the images, the output rank the
  // labels, and the batches must agree.
  data::ImageSet train_raw, test_raw;
  mpi::collectively(world, [&]() {
    train_raw = read_split(c.data_dir, data::Split::Train, c.train_size);
    test_raw = read_split(c.data_dir, data::Split::Test, c.test_size);
    if (size_text(test_raw) != size_text(train_raw))
      throw BadData(fmt::format("wrong image size: test images are {}, training images {}",
                                size_text(test_raw), size_text(train_raw)));
    check_model_data(c.model.kind, train_raw.spatial_dims, c.data_dir);
    if (stored_size && (*stored_size != std::make_pair(train_raw.rows, train_raw.cols) ||
                        stored_depth != train_raw.depth))
      throw BadData(fmt::format("wrong image size {}: the model of checkpoint {} takes {}{}x{}",
                                size_text(train_raw), c.resume_dir,
                                stored_depth > 1 ? std::to_string(stored_depth) + "x" : "",
                                stored_size->first, stored_size->second));
    check_memory(c, train_raw, test_raw, ranks);
  });
  const Normalization norm = stored_norm ? *stored_norm : measure(train_raw);
  const Dataset train = to_tensors(train_raw, norm), test = to_tensors(test_raw, norm);

  // --serial: the reference, plain LibTorch on rank 0; the other ranks have nothing to do.
  // --data-ranks D: D replicas of P/D layer-parallel ranks.
  MPI_Comm comm = world, data = MPI_COMM_NULL;
  std::unique_ptr<nn::ReplicaGroups> groups;
  if (replicas > 1) {
    groups = std::make_unique<nn::ReplicaGroups>(world, replicas);
    comm = groups->layer_comm();
    data = groups->data_comm();
  }
  const int replica = groups ? groups->replica() : 0;
  if (c.serial) {
    if (rank != 0) return 0;
    comm = MPI_COMM_SELF;
  }
  Model model(c.model, train, comm, data, c.serial, c.parallel);
  auto optimizer = make_optimizer(c, model);
  if (!c.resume_dir.empty())
    mpi::collectively(comm, [&] {
      nn::load_checkpoint(c.resume_dir, model.checkpoint_comm(), model.module(), optimizer.get());
    });
  const std::int64_t batches_per_epoch = (train.count() + c.batch - 1) / c.batch;

  const bool root = rank == 0;
  if (root) {
    std::printf("weft train: %s, %lld training / %lld test images %s from %s\n",
                c.serial && c.model.implicit_step > 0
                    ? "sequential (--serial: weft's implicit cell on one rank, exact mode)"
                : c.serial     ? "sequential LibTorch (--serial)"
                : replicas > 1 ? fmt::format("{} replicas x layer-parallel on {} rank(s)", replicas,
                                             ranks / replicas)
                                     .c_str()
                               : fmt::format("layer-parallel on {} rank(s)", ranks).c_str(),
                static_cast<long long>(train.count()), static_cast<long long>(test.count()),
                size_text(train_raw).c_str(), c.data_dir.c_str());
    std::printf("  model: %s\n",
                describe(c.model, train.images.size(-2), train.images.size(-1)).c_str());
    std::printf("  training: %s lr %g%s%s, batch %lld, epochs %d (from %d), %d torch thread(s)\n",
                c.optimizer.c_str(), c.lr, c.lr_schedule == "cosine" ? " (cosine decay)" : "",
                c.optimizer == "sgd" ? fmt::format(" momentum {}", c.momentum).c_str() : "",
                static_cast<long long>(c.batch), c.epochs, start_epoch, torch::get_num_threads());
    if (!c.serial) {
      const bool batchnorm =
          (c.model.kind == "stages" || c.model.kind == "conv3d") && c.model.batchnorm;
      std::string text = nn::to_string(c.parallel, batchnorm);
      for (size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', at + 1))
        text.replace(at, 1, "\n    ");
      std::printf("  mgrit:\n    %s\n", text.c_str());
    }
    std::fflush(stdout);
  }
  std::ofstream metrics;
  mpi::collectively(comm, [&]() {
    if (!root || c.metrics_path.empty()) return;
    metrics.open(c.metrics_path, start_epoch > 1 ? std::ios::app : std::ios::trunc);
    if (!metrics) throw BadData("cannot write --metrics file " + c.metrics_path);
  });

  // --trace: batches first_batch .. first_batch + trace_batches - 1 of this run (counted over
  // epochs), written as soon as the last of them ends.
  const MPI_Comm trace_comm = c.serial ? comm : world;
  std::int64_t run_batch = 0;
  bool trace_pending = !c.trace_path.empty();
  trace::Settings trace_settings;
  trace_settings.batches = c.trace_batches;
  auto write_trace = [&]() {
    trace_pending = false;
    trace::write(c.trace_path, trace_comm,
                 fmt::format("\"source\": \"weft train\", \"model\": \"{}\", \"serial\": {}, "
                             "\"layer_ranks\": {}, \"data_ranks\": {}, \"torch_threads\": {}",
                             c.model.kind, c.serial ? "true" : "false", mpi::size(comm), replicas,
                             torch::get_num_threads()));
    if (root) std::printf("wrote the trace to %s\n", c.trace_path.c_str());
  };
  if (trace_pending) trace::start(trace_settings);

  std::vector<std::int64_t> order(static_cast<size_t>(train.count()));
  for (int epoch = start_epoch; epoch <= c.epochs; ++epoch) {
    const double epoch_start = now();
    // The same shuffle on every rank, and on resume: it depends on (seed, epoch) only.
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(c.model.seed * 7919 + static_cast<std::uint64_t>(epoch));
    std::shuffle(order.begin(), order.end(), rng);
    const torch::Tensor perm = torch::from_blob(order.data(), {train.count()}, torch::kInt64);

    Progress progress(root && c.progress, epoch, train.count());
    std::vector<double> fwd_ms, bwd_ms, opt_ms, fwd_it, bwd_it, fwd_res, bwd_res;
    // Wall time of each loop iteration: the time per batch. forward_ms and backward_ms are each
    // the slowest rank's phase, which in a chain over ranks includes waiting for the other
    // ranks' previous phase, so their sum overstates the time per batch.
    std::vector<double> batch_ms;
    double batch_start = now();
    // This rank's solver time per batch, forward + backward: steps, waiting, bookkeeping,
    // outside the solve (ghost exchange, open/close layers) [ms] (`weft plot timing`).
    std::array<double, 4> split_ms{};
    double loss_sum = 0, correct_sum = 0;
    std::int64_t seen = 0, fwd_levels = 1, bwd_levels = 1;
    std::int64_t k = 0;
    for (std::int64_t start = 0; start < train.count(); start += c.batch, ++k) {
      const std::int64_t end = std::min(train.count(), start + c.batch);
      const std::int64_t n = end - start;
      if (n < replicas) continue;  // a last batch too small to split: dropped on every rank
      trace::batch_begin(run_batch);
      // Replica r takes its share of the global batch (the first n % D replicas one row more).
      const std::int64_t base = n / replicas, extra = n % replicas;
      const std::int64_t mine = base + (replica < extra ? 1 : 0);
      const std::int64_t first = start + replica * base + std::min<std::int64_t>(replica, extra);
      const torch::Tensor idx = perm.slice(0, first, first + mine);
      const std::int64_t global_batch =
          static_cast<std::int64_t>(epoch - 1) * batches_per_epoch + k;
      model.set_batch_index(global_batch);
      set_learning_rate(*optimizer, learning_rate(c, global_batch, batches_per_epoch));
      Timing t;
      torch::Tensor images, labels;
      {
        trace::Span load("load", "train");
        images = train.images.index_select(0, idx);
        labels = train.labels.index_select(0, idx);
      }
      BatchOutcome b = model.train(images, labels, *optimizer, t,
                                   static_cast<double>(mine * replicas) / static_cast<double>(n));
      if (replicas > 1) {
        double sums[2] = {b.loss * static_cast<double>(mine), b.correct};
        trace::Span reduce("allreduce", "mpi", trace::Kind::Reduce);
        reduce.reduction(data, sizeof(sums));
        mpi::check(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, data),
                   "MPI_Allreduce (batch loss)");
        b.loss = sums[0] / static_cast<double>(n);
        b.correct = sums[1];
      }
      fwd_ms.push_back(1e3 * t.forward);
      bwd_ms.push_back(1e3 * t.backward);
      opt_ms.push_back(1e3 * t.optimizer);
      if (model.solve_report(true)) {
        struct {
          const nn::SolveReport& forward;
          const nn::SolveReport& backward;
        } s{*model.solve_report(true), *model.solve_report(false)};
        fwd_it.push_back(s.forward.result.iterations);
        bwd_it.push_back(s.backward.result.iterations);
        if (auto r = s.forward.result.final_residual()) fwd_res.push_back(*r);
        if (auto r = s.backward.result.final_residual()) bwd_res.push_back(*r);
        fwd_levels = static_cast<std::int64_t>(s.forward.statistics.intervals_per_level.size());
        bwd_levels = static_cast<std::int64_t>(s.backward.statistics.intervals_per_level.size());
        for (const nn::SolveReport* r : {&s.forward, &s.backward}) {
          const auto& st = r->statistics;
          split_ms[0] += 1e3 * st.step_seconds;
          split_ms[1] += 1e3 * st.comm_seconds;
          split_ms[2] += 1e3 * st.other_seconds();
          split_ms[3] += 1e3 * (r->seconds - st.solve_seconds);
        }
      }
      const double batch_end = now();
      batch_ms.push_back(1e3 * (batch_end - batch_start));
      batch_start = batch_end;
      seen += n;
      loss_sum += b.loss * static_cast<double>(n);
      correct_sum += b.correct;
      progress.update(seen, loss_sum / static_cast<double>(seen),
                      correct_sum / static_cast<double>(seen));
      trace::batch_end(run_batch);
      if (trace_pending && run_batch + 1 == trace_settings.first_batch + c.trace_batches)
        write_trace();
      ++run_batch;
    }
    double times[4] = {steady_mean(fwd_ms), steady_mean(bwd_ms), steady_mean(opt_ms),
                       steady_mean(batch_ms)},
           slowest[4];
    mpi::check(MPI_Allreduce(times, slowest, 4, MPI_DOUBLE, MPI_MAX, c.serial ? comm : world),
               "MPI_Allreduce");
    const EvalOutcome ev =
        evaluate(model, test, std::max<std::int64_t>(c.batch, 500), c.serial ? comm : world, data);
    const double epoch_seconds = now() - epoch_start;
    auto mean = [](const std::vector<double>& v) -> std::optional<double> {
      if (v.empty()) return std::nullopt;
      return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    };
    json per_rank = nullptr;
    if (model.solve_report(true)) {
      const double batches = static_cast<double>(fwd_it.size());
      for (double& v : split_ms) v /= batches;
      const int layer_ranks = mpi::size(comm);  // this replica's ranks
      std::vector<double> all(4 * static_cast<size_t>(layer_ranks));
      mpi::check(MPI_Gather(split_ms.data(), 4, MPI_DOUBLE, all.data(), 4, MPI_DOUBLE, 0, comm),
                 "MPI_Gather (per-rank timing)");
      per_rank = json::array();
      for (int r = 0; r < layer_ranks; ++r) {
        const double* v = &all[4 * static_cast<size_t>(r)];
        per_rank.push_back({{"rank", r},
                            {"steps_ms", v[0]},
                            {"waiting_ms", v[1]},
                            {"bookkeeping_ms", v[2]},
                            {"outside_ms", v[3]}});
      }
    }
    json record = {
        {"epoch", epoch},
        {"train_loss", loss_sum / static_cast<double>(seen)},
        {"train_accuracy", correct_sum / static_cast<double>(seen)},
        {"test_loss", ev.loss},
        {"test_accuracy", ev.accuracy},
        {"epoch_seconds", epoch_seconds},
        {"forward_ms", slowest[0]},
        {"backward_ms", slowest[1]},
        {"optimizer_ms", slowest[2]},
        {"batch_ms", slowest[3]},
        {"fwd_iterations", optional_number(mean(fwd_it))},
        {"fwd_residual", optional_number(mean(fwd_res))},
        {"bwd_iterations", optional_number(mean(bwd_it))},
        {"bwd_residual", optional_number(mean(bwd_res))},
        {"ranks", c.serial ? 1 : ranks},
        {"fwd_levels", fwd_levels},
        {"bwd_levels", bwd_levels},
        {"data_ranks", replicas},
        {"lr_end", learning_rate(c, static_cast<std::int64_t>(epoch) * batches_per_epoch - 1,
                                 batches_per_epoch)},
        {"model", c.model.kind},
        {"serial", c.serial}};
    if (!per_rank.is_null()) record["per_rank"] = per_rank;
    if (root) {
      std::printf(
          "epoch %d: train loss %.4f acc %.4f | test loss %.4f acc %.4f | %.1f s | "
          "per batch %.1f ms (forward %.1f ms, backward %.1f ms, optimizer %.2f ms)\n",
          epoch, record["train_loss"].get<double>(), record["train_accuracy"].get<double>(),
          ev.loss, ev.accuracy, epoch_seconds, slowest[3], slowest[0], slowest[1], slowest[2]);
      std::fflush(stdout);
    }
    mpi::collectively(comm, [&]() {
      if (!metrics.is_open()) return;
      metrics << record.dump() << "\n" << std::flush;
      if (!metrics) throw BadData("cannot write --metrics file " + c.metrics_path);
    });
    if (!c.checkpoint_dir.empty()) {
      const json meta = {{"model", to_json(c.model)},
                         {"image", image_json(train_raw)},
                         {"epoch", epoch},
                         {"normalization", {{"mean", norm.mean}, {"std", norm.std}}},
                         {"optimizer", c.optimizer},
                         {"metrics", record}};
      // One checkpoint, written by the first replica (the replicas hold the same parameters);
      // it loads at any (replicas, ranks per replica).
      if (replica == 0)
        mpi::collectively(comm, [&] {
          if (model.replicated() && mpi::rank(comm) != 0) return;
          nn::save_checkpoint(c.checkpoint_dir, model.checkpoint_comm(), model.module(),
                              optimizer.get(), meta.dump());
        });
      if (!c.serial && replicas > 1) mpi::check(MPI_Barrier(world), "MPI_Barrier (checkpoint)");
    }
  }
  if (trace_pending) write_trace();  // the run had fewer batches than the traced window
  return 0;
}

int run_evaluation(const EvalConfig& c, MPI_Comm comm) {
  set_threads(c.threads, comm);
  const bool root = mpi::rank(comm) == 0;
  if (!c.json_path.empty())
    mpi::collectively(comm, [&]() {
      if (root) check_output_file("--json", c.json_path);
    });
  json meta;
  data::ImageSet raw;
  mpi::collectively(comm, [&]() { meta = checkpoint_metadata(c.resume_dir); });
  const std::string dir = data_folder(c.data_dir, comm);
  mpi::collectively(comm, [&]() {
    raw = read_split(dir, data::Split::Test, c.test_size);
    const auto size = image_size(meta);
    const std::int64_t depth = image_depth(meta);
    if (size != std::make_pair(raw.rows, raw.cols) || depth != raw.depth ||
        (model_from_json(meta.at("model")).kind == "conv3d") != (raw.spatial_dims == 3))
      throw BadData(fmt::format(
          "wrong image size {}: the model of checkpoint {} takes {}{}x{}", size_text(raw),
          c.resume_dir, depth > 1 ? std::to_string(depth) + "x" : "", size.first, size.second));
  });
  const ModelConfig m = model_from_json(meta.at("model"));
  const Normalization norm{meta.at("normalization").at("mean").get<double>(),
                           meta.at("normalization").at("std").get<double>()};
  const Dataset test = to_tensors(raw, norm);
  Model model(m, test, comm, MPI_COMM_NULL, false, nn::LayerParallelOptions::exact());
  mpi::collectively(comm, [&] {
    nn::load_checkpoint(c.resume_dir, model.checkpoint_comm(), model.module(), nullptr);
  });
  const EvalOutcome ev = evaluate(model, test, c.batch, comm);
  if (root) {
    std::printf("weft eval: checkpoint %s (epoch %d), %lld test images, %d rank(s)\n",
                c.resume_dir.c_str(), meta.at("epoch").get<int>(),
                static_cast<long long>(test.count()), mpi::size(comm));
    std::printf("test loss %.4f  accuracy %.4f\n", ev.loss, ev.accuracy);
    print_confusion(ev.confusion, 10);
    std::fflush(stdout);
  }
  mpi::collectively(comm, [&]() {
    if (!root || c.json_path.empty()) return;
    std::ofstream out(c.json_path);
    out << json{{"checkpoint", c.resume_dir}, {"epoch", meta.at("epoch")},
                {"test_loss", ev.loss},       {"test_accuracy", ev.accuracy},
                {"confusion", ev.confusion},  {"ranks", mpi::size(comm)}}
               .dump(1)
        << "\n";
    out.flush();
    if (!out)
      throw BadData("cannot write --json file " + c.json_path + ": " + std::strerror(errno));
  });
  return 0;
}

// For `weft predict` (network_factory.hpp): the network `weft train` builds, for images of
// the training set's shape.
std::vector<std::int64_t> training_image_shape(const TrainConfig& c) {
  const data::ImageSet one = read_split(c.data_dir, data::Split::Train, 1);
  return to_tensors(one, Normalization{}).images.sizes().vec();
}

nn::Network make_training_network(const ModelConfig& m, const std::vector<std::int64_t>& shape) {
  if (m.kind == "gru" || m.kind == "lstm")  // a replicated cell: predict_costs measures it
    throw InvalidOption("option --model: '" + m.kind +
                        "' has no chain of layers; accepted: resnet, stages, conv3d");
  Dataset like;
  like.images = torch::empty(shape);
  return make_network(m, like);
}

}  // namespace weft::cli
