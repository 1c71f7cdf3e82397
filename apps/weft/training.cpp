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

// How --data-format, --label and --image-size read the folder.
data::FolderOptions folder_options(const std::string& format, const std::string& label,
                                   std::int64_t limit, std::int64_t image_side = 0) {
  data::FolderOptions o;
  o.limit = limit;
  if (!format.empty()) o.format = data::parse_folder_format(format);
  o.label = label == "coarse" ? data::CifarLabel::Coarse : data::CifarLabel::Fine;
  if (image_side > 0) o.image_side = image_side;
  return o;
}

// A split as training reads it: in memory, or image files streamed from disk (`files`; `set`
// then holds the sizes and classes only, no pixels).
struct SplitData {
  data::ImageSet set;
  std::optional<data::ImageFiles> files;

  std::shared_ptr<const train::DataSource> source(const train::Normalization& norm) const {
    if (files) return std::make_shared<train::ImageFileSource>(*files, set.rows, norm);
    return train::TensorSource::from_images(set, norm);
  }
};

// data::read_folder (or data::index_images for image files), its errors about the folder itself
// naming the flag ("--data DIR is a file"). --label coarse is for CIFAR-100 only.
SplitData read_data(const std::string& dir, data::Split split, const data::FolderOptions& options) {
  const data::FolderFormat format =
      options.format ? *options.format : data::detect_format(dir, split);
  if (options.label == data::CifarLabel::Coarse && format != data::FolderFormat::Cifar100)
    invalid_value("--label", "coarse", "fine, or coarse with CIFAR-100 data",
                  "--data " + dir + " is " + data::to_string(format));
  try {
    SplitData d;
    if (!data::is_image_files(format)) {
      d.set = data::read_folder(dir, split, options);
      return d;
    }
    d.files = data::index_images(dir, data::image_layout(format), split, options.limit);
    d.set.count = d.files->count();
    d.set.channels = 3;
    d.set.rows = d.set.cols = options.image_side;
    d.set.classes = d.files->classes();
    return d;
  } catch (const BadData& e) {
    const std::string what = e.what();
    if (what.rfind(dir + " ", 0) == 0 || what.rfind(dir + ":", 0) == 0)
      throw BadData("--data " + what);
    throw;
  }
}

/// `body` collectively, with a data set found bad there (missing or corrupt files, labels out of
/// range, sizes or classes that do not match) rejected as input before any work: exit 2, like a
/// bad option (docs/errors.md). A bad image found later, at its batch, ends the run with exit 1.
template <class Body>
void reading_data(MPI_Comm comm, Body&& body) {
  try {
    mpi::collectively(comm, std::forward<Body>(body));
  } catch (const BadData& e) {
    throw InvalidOption(e.what());
  }
}

// --normalize for the training set `set`: measured (per channel for colour images), none, or
// the values given (one pair, or one per channel).
train::Normalization normalization_of(const TrainConfig& c, const SplitData& data) {
  const data::ImageSet& set = data.set;
  if (c.normalize == "measured")
    return data.files ? train::measure_normalization(*data.files, set.rows)
                      : train::measure_normalization(set, set.channels > 1);
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
      // Mid-way through nested iteration the checkpoint's model is shallower than the run's.
      const train::DepthGrowth& g = stored->growth;
      const ModelConfig full = g.active()
                                   ? train::full_depth_model(stored->model, g, stored->growth_level)
                                   : stored->model;
      check_resume(c, full, stored->optimizer, stored->epoch);
      check_resume_growth(c, g);
      c.model = full;
      c.growth = g;
      // The checkpoint fixes the optimizer; it continues MG/Opt unless --mgopt says otherwise
      // (MG/Opt keeps nothing beyond the optimizer's state, so a run may switch it).
      c.optimizer = stored->optimizer;
      if (!c.given.count("--mgopt")) c.mgopt = stored->mgopt;
      if (c.mgopt.active() && c.growth.active())
        throw InvalidOption(fmt::format(
            "option --mgopt: checkpoint {} grows the depth (nested iteration), which MG/Opt is "
            "not used with",
            c.resume_dir));
      if (c.mgopt.active() && c.iterations.active())
        throw InvalidOption(fmt::format(
            "option --fwd-iters/--bwd-iters: auto is not used with MG/Opt, which checkpoint {} "
            "continues (give --mgopt 0 to resume without it)",
            c.resume_dir));
    });
  // Every rank knows: checked before any work, in the flags' names.
  try {
    train::validate_growth(c.growth, c.model, c.epochs, c.serial ? 1 : ranks / replicas,
                           !c.checkpoint_dir.empty());
  } catch (const InvalidOption& e) {
    const std::string flag = e.option() == "grow_epochs" ? "--grow-epochs" : "--grow-depth";
    throw InvalidOption("option " + flag + ": " + e.detail());
  }
  try {
    train::validate_mgopt(c.mgopt, c.model, c.serial ? 1 : ranks / replicas);
  } catch (const InvalidOption& e) {
    const std::string flag = e.option() == "mgopt_factor"        ? "--mgopt-factor"
                             : e.option() == "mgopt_relax"       ? "--mgopt-relax"
                             : e.option() == "mgopt_line_search" ? "--mgopt-line-search"
                                                                 : "--mgopt";
    throw InvalidOption("option " + flag + ": " + e.detail());
  }
  c.data_dir = data_folder(c.data_dir, world);

  // Every rank reads the (small) data set, or indexes the image files it streams: the input
  // rank needs the images, the output rank the labels, and the batches must agree.
  data::FolderFormat format_id = data::FolderFormat::Idx;
  reading_data(world, [&]() {  // a --data that is a file: every rank knows
    format_id = c.data_format.empty() ? data::detect_format(c.data_dir)
                                      : data::parse_folder_format(c.data_format);
  });
  if (c.image_size > 0 && !data::is_image_files(format_id))
    invalid_value("--image-size", std::to_string(c.image_size),
                  "no --image-size with this data (tiny-imagenet and folder data only)",
                  "--data " + c.data_dir + " is " + data::to_string(format_id));
  const std::int64_t side = stored && data::is_image_files(format_id) && c.image_size == 0
                                ? stored->example.rows
                                : c.image_size;
  SplitData train_split, test_split;
  reading_data(world, [&]() {
    train_split = read_data(c.data_dir, data::Split::Train,
                            folder_options(c.data_format, c.label, c.train_size, side));
    test_split = read_data(c.data_dir, data::Split::Test,
                           folder_options(c.data_format, c.label, c.test_size, side));
    const data::ImageSet& train_raw = train_split.set;
    const data::ImageSet& test_raw = test_split.set;
    if (size_text(test_raw) != size_text(train_raw))
      throw BadData(fmt::format("wrong image size: test images are {}, training images {}",
                                size_text(test_raw), size_text(train_raw)));
    if (test_raw.classes != train_raw.classes)
      throw BadData(fmt::format("--data {}: the test set has {} classes, the training set {}",
                                c.data_dir, test_raw.classes, train_raw.classes));
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
    // Streamed sets hold a batch in memory, not the set.
    data::ImageSet train_held = train_raw, test_held = test_raw;
    if (train_split.files) train_held.count = std::min<std::int64_t>(train_raw.count, 2 * c.batch);
    if (test_split.files) test_held.count = std::min<std::int64_t>(test_raw.count, 2 * c.batch);
    check_memory(c, train_held, test_held, ranks);
  });
  if (c.check_images) {
    if (!train_split.files)
      invalid_value("--check-images", "given", "no --check-images with this data",
                    "--data " + c.data_dir + " is " + data::to_string(format_id) +
                        ", whose reader decodes the whole set before training already");
    reading_data(world, [&]() {  // each rank decodes a share; the first damaged file is named
      for (const SplitData* split : {&train_split, &test_split})
        for (std::int64_t i = rank; i < split->files->count(); i += ranks)
          data::read_image_file(*split->files, i, split->set.rows);
    });
  }
  const data::ImageSet& train_raw = train_split.set;
  const std::string format = data::to_string(format_id);
  const std::string reader = fmt::format(
      "{}{}, {} classes{}", format, c.label == "coarse" ? " coarse labels" : "", train_raw.classes,
      train_split.files ? fmt::format(", {} + {} image files streamed, fitted to {}",
                                      train_raw.count, test_split.set.count, size_text(train_raw))
                        : "");
  train::Normalization norm;
  reading_data(world,
               [&]() { norm = stored ? stored->normalization : normalization_of(c, train_split); });
  std::shared_ptr<const train::DataSource> train_data = train_split.source(norm);
  train::Augmentation augmentation;
  const bool colour_set = train_raw.channels == 3 && train_raw.spatial_dims == 2;
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
  auto test_data = test_split.source(norm);

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
                             {"classes", train_raw.classes},
                             {"image_size", size_text(train_raw)},
                             {"streamed", train_split.files.has_value()}}));
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
  SplitData test_split;
  mpi::collectively(comm, [&]() { info = train::read_checkpoint_info(c.resume_dir); });
  const std::string dir = data_folder(c.data_dir, comm);
  reading_data(comm, [&]() {
    // Image files are fitted to the size the checkpoint's model takes.
    test_split = read_data(dir, data::Split::Test,
                           folder_options(c.data_format, c.label, c.test_size,
                                          info.example.volume ? 0 : info.example.rows));
    const data::ImageSet& raw = test_split.set;
    if (raw.classes != info.model.classes)
      throw BadData(
          fmt::format("--data {} has {} classes; the model of checkpoint {} classifies {}", dir,
                      raw.classes, c.resume_dir, info.model.classes));
    if (!same_size(info.example, raw) ||
        (train::model_kind(info.model).spatial_dims == 3) != (raw.spatial_dims == 3))
      throw BadData(fmt::format("wrong image size {}: the model of checkpoint {} takes {}",
                                size_text(raw), c.resume_dir, stored_size_text(info.example)));
  });
  const auto test = test_split.source(info.normalization);
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
  const data::ImageSet one = read_data(c.data_dir, data::Split::Train,
                                       folder_options(c.data_format, c.label, 1, c.image_size))
                                 .set;
  return one.spatial_dims == 3
             ? std::vector<std::int64_t>{one.channels, one.depth, one.rows, one.cols}
             : std::vector<std::int64_t>{one.channels, one.rows, one.cols};
}

}  // namespace weft::cli
