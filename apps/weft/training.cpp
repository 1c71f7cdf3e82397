// `weft train` and `weft eval`: flags → the library's Trainer (weft/train) with the CLI's
// observers. What stays here is the command line's part: which files --data names, the checks
// that speak in flags (--resume, --data-ranks, memory), the outputs checked before any work.
#include "training.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli_support.hpp"
#include "data_command.hpp"
#include "preflight.hpp"
#include "train_observers.hpp"
#include "weft/data/folder.hpp"
#include "weft/data/shapes3d_cache.hpp"
#include "weft/train/augmentation.hpp"
#include "weft/train/checkpoint_info.hpp"
#include "weft/train/model_registry.hpp"
#include "weft/train/model_zoo.hpp"
#include "weft/train/trainer.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace weft::cli {
namespace {

using json = nlohmann::json;

// How --data-format and --label read the folder.
data::FolderOptions folder_options(const std::string& format, const std::string& label,
                                   std::int64_t limit) {
  data::FolderOptions o;
  o.limit = limit;
  if (!format.empty()) o.format = data::parse_folder_format(format);
  o.label = label == "coarse" ? data::CifarLabel::Coarse : data::CifarLabel::Fine;
  return o;
}

// data::read_folder, its errors about the folder itself naming the flag ("--data DIR is a file").
// --label coarse is for CIFAR-100 only.
data::ImageSet read_data(const std::string& dir, data::Split split,
                         const data::FolderOptions& options) {
  const data::FolderFormat format =
      options.format ? *options.format : data::detect_format(dir, split);
  if (options.label == data::CifarLabel::Coarse && format != data::FolderFormat::Cifar100)
    invalid_value("--label", "coarse", "fine, or coarse with CIFAR-100 data",
                  "--data " + dir + " is " + data::to_string(format));
  try {
    return data::read_folder(dir, split, options);
  } catch (const BadData& e) {
    const std::string what = e.what();
    if (what.rfind(dir + " ", 0) == 0 || what.rfind(dir + ":", 0) == 0)
      throw BadData("--data " + what);
    throw;
  }
}

// --normalize for the training set `set`: measured (per channel for colour images), none, or
// the values given (one pair, or one per channel).
train::Normalization normalization_of(const TrainConfig& c, const data::ImageSet& set) {
  if (c.normalize == "measured") return train::measure_normalization(set, set.channels > 1);
  train::Normalization n;
  if (c.normalize == "none") return n;
  const std::vector<double>& v = c.normalize_values;
  const std::size_t channels = v.size() / 2;
  if (channels == 1) {
    n.mean = v[0];
    n.std = v[1];
    return n;
  }
  if (static_cast<std::int64_t>(channels) != set.channels)
    invalid_value(
        "--normalize", c.normalize,
        fmt::format("MEAN,STD or {} means and {} standard deviations", set.channels, set.channels),
        fmt::format("{} channels given; the images have {}", channels, set.channels));
  n.channel_mean.assign(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(channels));
  n.channel_std.assign(v.begin() + static_cast<std::ptrdiff_t>(channels), v.end());
  n.mean = n.std = 0;
  for (std::size_t k = 0; k < channels; ++k) {
    n.mean += n.channel_mean[k] / static_cast<double>(channels);
    n.std += n.channel_std[k] / static_cast<double>(channels);
  }
  return n;
}

std::string stored_size_text(const train::ExampleShape& e) {
  return fmt::format("{}{}{}x{}", e.channels != 1 ? std::to_string(e.channels) + "x" : "",
                     e.depth > 1 ? std::to_string(e.depth) + "x" : "", e.rows, e.cols);
}

bool same_size(const train::ExampleShape& e, const data::ImageSet& set) {
  return e.rows == set.rows && e.cols == set.cols && e.depth == set.depth &&
         e.channels == set.channels;
}

}  // namespace

int run_training(const TrainConfig& config_in, MPI_Comm world) {
  TrainConfig c = config_in;
  const int rank = mpi::rank(world), ranks = mpi::size(world);
  train::set_torch_threads(c.threads, world);

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

  std::optional<train::CheckpointInfo> stored;
  if (!c.resume_dir.empty())
    mpi::collectively(world, [&]() {
      stored = train::read_checkpoint_info(c.resume_dir);
      check_resume(c, stored->model, stored->optimizer, stored->epoch);
      c.model = stored->model;
    });
  c.data_dir = data_folder(c.data_dir, world);

  // Every rank reads the (small) data set: the input rank needs the images, the output rank the
  // labels, and the batches must agree.
  data::ImageSet train_raw, test_raw;
  mpi::collectively(world, [&]() {
    train_raw = read_data(c.data_dir, data::Split::Train,
                          folder_options(c.data_format, c.label, c.train_size));
    test_raw = read_data(c.data_dir, data::Split::Test,
                         folder_options(c.data_format, c.label, c.test_size));
    if (size_text(test_raw) != size_text(train_raw))
      throw BadData(fmt::format("wrong image size: test images are {}, training images {}",
                                size_text(test_raw), size_text(train_raw)));
    check_model_data(c.model, train_raw.spatial_dims, train_raw.channels, c.data_dir);
    if (stored && !same_size(stored->example, train_raw))
      throw BadData(fmt::format("wrong image size {}: the model of checkpoint {} takes {}",
                                size_text(train_raw), c.resume_dir,
                                stored_size_text(stored->example)));
    if (stored && stored->model.classes != train_raw.classes)
      throw BadData(
          fmt::format("--data {} has {} classes; the model of checkpoint {} classifies {}",
                      c.data_dir, train_raw.classes, c.resume_dir, stored->model.classes));
    c.model.classes = train_raw.classes;
    check_memory(c, train_raw, test_raw, ranks);
  });
  const std::string format =
      data::to_string(c.data_format.empty() ? data::detect_format(c.data_dir)
                                            : data::parse_folder_format(c.data_format));
  const std::string reader = fmt::format(
      "{}{}, {} classes", format, c.label == "coarse" ? " coarse labels" : "", train_raw.classes);
  const train::Normalization norm = stored ? stored->normalization : normalization_of(c, train_raw);
  std::shared_ptr<const train::DataSource> train_data =
      train::TensorSource::from_images(train_raw, norm);
  train::Augmentation augmentation;
  const bool colour_set = format == "cifar10" || format == "cifar100";
  if (c.augment == "crop-flip" || (c.augment == "auto" && colour_set)) {
    if (train_raw.spatial_dims == 3)
      invalid_value("--augment", c.augment, "none with volumes", "crop-flip augments images");
    const std::int64_t most = std::min(train_raw.rows, train_raw.cols) - 1;
    if (c.crop_padding > most)
      invalid_value("--crop-padding", std::to_string(c.crop_padding),
                    fmt::format("an integer in [0, {}] (less than the {} images)", most,
                                size_text(train_raw)));
    augmentation.padding = c.crop_padding;
    augmentation.seed = c.model.seed;
    train_data = std::make_shared<train::AugmentedSource>(train_data, augmentation);
  } else {
    augmentation.padding = 0;
    augmentation.flip = false;
  }
  auto test_data = train::TensorSource::from_images(test_raw, norm);

  train::Trainer trainer(static_cast<const train::TrainerOptions&>(c), train_data, test_data,
                         world);
  trainer.add_observer(std::make_shared<ConsoleReport>(
      c, DataText{size_text(train_raw), c.data_dir, train_raw.rows, train_raw.cols, reader,
                  augmentation.describe()}));
  if (!c.metrics_path.empty())
    trainer.add_observer(std::make_shared<MetricsFile>(
        c.metrics_path, json{{"data_format", format},
                             {"augment", augmentation.active() ? "crop-flip" : "none"},
                             {"crop_padding", augmentation.padding},
                             {"classes", train_raw.classes}}));
  try {
    trainer.fit();
  } catch (const train::Diverged& e) {
    throw Divergence("training diverged: the loss is " + number_text(e.loss()) +
                     " (try a smaller --lr)");
  }
  return 0;
}

int run_evaluation(const EvalConfig& c, MPI_Comm comm) {
  train::set_torch_threads(c.threads, comm);
  const bool root = mpi::rank(comm) == 0;
  if (!c.json_path.empty())
    mpi::collectively(comm, [&]() {
      if (root) check_output_file("--json", c.json_path);
    });
  train::CheckpointInfo info;
  data::ImageSet raw;
  mpi::collectively(comm, [&]() { info = train::read_checkpoint_info(c.resume_dir); });
  const std::string dir = data_folder(c.data_dir, comm);
  mpi::collectively(comm, [&]() {
    raw = read_data(dir, data::Split::Test, folder_options(c.data_format, c.label, c.test_size));
    if (raw.classes != info.model.classes)
      throw BadData(
          fmt::format("--data {} has {} classes; the model of checkpoint {} classifies {}", dir,
                      raw.classes, c.resume_dir, info.model.classes));
    if (!same_size(info.example, raw) ||
        (train::model_kind(info.model).spatial_dims == 3) != (raw.spatial_dims == 3))
      throw BadData(fmt::format("wrong image size {}: the model of checkpoint {} takes {}",
                                size_text(raw), c.resume_dir, stored_size_text(info.example)));
  });
  const auto test = train::TensorSource::from_images(raw, info.normalization);
  const train::Evaluation ev = train::evaluate_checkpoint(c.resume_dir, *test, c.batch, comm);
  if (root) {
    std::printf("weft eval: checkpoint %s (epoch %d), %lld test images, %d rank(s)\n",
                c.resume_dir.c_str(), info.epoch, static_cast<long long>(test->size()),
                mpi::size(comm));
    std::printf("test loss %.4f  accuracy %.4f\n", ev.loss, ev.accuracy);
    print_confusion(ev.confusion, ev.classes);
    std::fflush(stdout);
  }
  mpi::collectively(comm, [&]() {
    if (!root || c.json_path.empty()) return;
    std::ofstream out(c.json_path);
    out << json{{"checkpoint", c.resume_dir}, {"epoch", info.epoch},
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

std::vector<std::int64_t> training_example_shape(const TrainConfig& c) {
  if (c.data_dir == kShapes3dName) {
    const std::int64_t n = data::Shapes3dSpec{}.size;
    return {1, n, n, n};
  }
  const data::ImageSet one =
      read_data(c.data_dir, data::Split::Train, folder_options(c.data_format, c.label, 1));
  return one.spatial_dims == 3
             ? std::vector<std::int64_t>{one.channels, one.depth, one.rows, one.cols}
             : std::vector<std::int64_t>{one.channels, one.rows, one.cols};
}

}  // namespace weft::cli
