#pragma once
// What the Trainer's tests share: a small easy data set, small options, an observer that
// records every event, and the checks of resumed runs and refused options.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "weft/train/data_source.hpp"
#include "weft/train/trainer.hpp"
#include "weft/util/error.hpp"
#include "world.hpp"

namespace weft::test {

namespace train = weft::train;

/// 8x8 images whose label (0..2) is the brightest of three bands of rows.
inline std::shared_ptr<train::TensorSource> bands(std::int64_t count, std::uint64_t seed) {
  torch::manual_seed(seed);  // the same data on every rank
  torch::Tensor x = torch::rand({count, 1, 8, 8});
  const torch::Tensor band = torch::randint(0, 3, {count}, torch::kInt64);
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t b = band[i].item<std::int64_t>();
    x[i].slice(1, 3 * b, 3 * b + 2).add_(1.0);
  }
  return std::make_shared<train::TensorSource>(x, band);
}

inline train::TrainerOptions small_options() {
  train::TrainerOptions o;
  o.model.kind = "resnet";
  o.model.channels = 2;
  o.model.steps = 6;
  o.batch = 16;
  o.epochs = 2;
  o.lr = 1e-2;
  o.lr_schedule = "cosine";
  o.threads = 1;
  return o;
}

/// Everything an observer can see, in order.
class Recorder : public train::Observer {
 public:
  void run_started(const train::RunStarted& e) override {
    log.push_back("run");
    started = e;
  }
  void epoch_started(const train::EpochStarted& e) override {
    log.push_back("epoch " + std::to_string(e.epoch));
  }
  void batch_done(const train::BatchDone& e) override {
    log.push_back("batch");
    batches.push_back(e);
  }
  void evaluation_done(const train::EvaluationDone& e) override {
    log.push_back("evaluation");
    evaluations.push_back(e.evaluation);
  }
  void epoch_done(const train::EpochDone& e) override {
    log.push_back("done");
    epochs.push_back(e.metrics);
  }
  void checkpoint_written(const train::CheckpointWritten&) override { log.push_back("checkpoint"); }
  void divergence(const train::DivergenceFound& e) override {
    log.push_back("divergence");
    diverged_loss = e.loss;
  }
  void depth_refined(const train::DepthRefined& e) override {
    log.push_back("refined " + std::to_string(e.from_steps) + "->" + std::to_string(e.to_steps) +
                  " level " + std::to_string(e.level));
  }
  std::vector<std::string> log;
  train::RunStarted started;
  std::vector<train::BatchDone> batches;
  std::vector<train::Evaluation> evaluations;
  std::vector<train::EpochMetrics> epochs;
  double diverged_loss = 0;
};

inline std::shared_ptr<Recorder> fit(const train::TrainerOptions& o,
                                     MPI_Comm comm = MPI_COMM_WORLD) {
  train::Trainer trainer(o, bands(64, 1), bands(32, 2), comm);
  auto recorder = std::make_shared<Recorder>();
  trainer.add_observer(recorder);
  trainer.fit();
  return recorder;
}

/// A folder every rank of this job names alike (jobs at other rank counts use others).
inline std::string shared_folder(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("weft-trainer-test-np" + std::to_string(world_size()) + "-" + name);
  if (world_rank() == 0) std::filesystem::remove_all(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  return dir.string();
}

/// A run resumed after epoch 1 of 3 trains epochs 2 and 3 exactly as the uninterrupted one.
inline void expect_resumed_follows(const Recorder& resumed, const Recorder& straight) {
  ASSERT_EQ(resumed.epochs.size(), 2u);
  EXPECT_EQ(resumed.started.start_epoch, 2);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(resumed.epochs[e].epoch, straight.epochs[e + 1].epoch);
    EXPECT_EQ(resumed.epochs[e].depth, straight.epochs[e + 1].depth);
    EXPECT_DOUBLE_EQ(resumed.epochs[e].train_loss, straight.epochs[e + 1].train_loss);
    EXPECT_DOUBLE_EQ(resumed.epochs[e].test_loss, straight.epochs[e + 1].test_loss);
  }
}

/// `o` trained 3 epochs straight, and trained 1 epoch into a checkpoint (in shared folder
/// `name`) then resumed to 3 with `resume` (the options of the resumed run: `o` with the
/// checkpoint as resume_dir, after `adjust`); the resumed run must follow the straight one.
struct StraightAndResumed {
  std::shared_ptr<Recorder> straight, resumed;
  train::TrainerOptions resume;
};
inline StraightAndResumed resume_after_first_epoch(
    train::TrainerOptions o, const std::string& name,
    const std::function<void(train::TrainerOptions&)>& adjust = {}) {
  o.lr_schedule = "constant";  // the 1-epoch run's schedule is then the 3-epoch run's
  o.epochs = 3;
  StraightAndResumed r;
  r.straight = fit(o);
  o.epochs = 1;
  o.checkpoint_dir = shared_folder(name);
  fit(o);
  o.epochs = 3;
  o.resume_dir = o.checkpoint_dir;
  o.checkpoint_dir.clear();
  if (adjust) adjust(o);
  r.resumed = fit(o);
  r.resume = o;
  expect_resumed_follows(*r.resumed, *r.straight);
  return r;
}

/// Building a Trainer with `o` throws InvalidOption naming `field`.
inline void expect_invalid_field(const train::TrainerOptions& o, const std::string& field) {
  try {
    train::Trainer trainer(o, bands(8, 1), bands(8, 2), MPI_COMM_WORLD);
    ADD_FAILURE() << field << " accepted";
  } catch (const weft::InvalidOption& e) {
    EXPECT_EQ(e.option(), field) << e.what();
  }
}

}  // namespace weft::test
