#include "data_command.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "weft/data/cifar.hpp"
#include "weft/data/idx.hpp"
#include "weft/data/image_folder.hpp"
#include "weft/data/shapes3d.hpp"
#include "weft/data/shapes3d_cache.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace weft::cli {
namespace {

namespace fs = std::filesystem;

struct DataArgs {
  const data::Shapes3dSpec defaults{};
  std::string set, out, train = std::to_string(defaults.train),
                        test = std::to_string(defaults.test), size = std::to_string(defaults.size),
                        seed = std::to_string(defaults.seed);
  std::string classes, per_class = "100", test_per_class = "20";  // image sets
  std::string format, image_size = "64";                          // --format, image files
};

std::uint64_t seed_of(const DataArgs& a) {
  return static_cast<std::uint64_t>(
      parse_integer("--seed", a.seed, 0, "an integer >= 0", 1LL << 62));
}

// --out, checked by rank 0 before any work (every rank learns the outcome).
void check_out(const DataArgs& a, MPI_Comm comm) {
  mpi::collectively(comm, [&]() {
    if (mpi::rank(comm) == 0) check_output_folder("--out", a.out, 0);
  });
}

// `weft data tiny-imagenet|folder`: a generated set of JPEG/PNG files in the published layout.
int run_images(const DataArgs& a, MPI_Comm comm) {
  const auto layout =
      a.set == "tiny-imagenet" ? data::ImageLayout::TinyImagenet : data::ImageLayout::Folder;
  const auto classes = static_cast<int>(parse_integer(
      "--classes", a.classes.empty() ? "10" : a.classes, 2, "an integer in [2, 1000]", 1000));
  const std::int64_t train =
      parse_integer("--per-class", a.per_class, 1, "an integer in [1, 100000]", 100000);
  const std::int64_t test =
      parse_integer("--test-per-class", a.test_per_class, 1, "an integer in [1, 100000]", 100000);
  const std::int64_t side =
      parse_integer("--image-size", a.image_size, 8, "an integer in [8, 1024]", 1024);
  const std::uint64_t seed = seed_of(a);
  check_out(a, comm);
  mpi::collectively(comm, [&]() {
    if (mpi::rank(comm) != 0) return;
    const auto start = std::chrono::steady_clock::now();
    data::write_generated_images(a.out, layout, classes, train, test, side, seed);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf(
        "weft data: %s layout, %d classes, %lld training + %lld test images of %lldx%lld%s, "
        "seed %llu, in %s (%.1f s)\n",
        a.set.c_str(), classes, static_cast<long long>(train * classes),
        static_cast<long long>(test * classes), static_cast<long long>(side),
        static_cast<long long>(side), layout == data::ImageLayout::Folder ? " and larger" : "",
        static_cast<unsigned long long>(seed), a.out.c_str(), seconds);
    std::fflush(stdout);
  });
  return kExitOk;
}

// `weft data cifar10|cifar100`: a generated set in the published binary layout.
int run_cifar(const DataArgs& a, MPI_Comm comm) {
  const auto version =
      a.set == "cifar10" ? data::CifarVersion::Cifar10 : data::CifarVersion::Cifar100;
  const int most = data::cifar_classes(version, data::CifarLabel::Fine);
  const auto classes = static_cast<int>(
      parse_integer("--classes", a.classes.empty() ? std::to_string(most) : a.classes, 2,
                    fmt::format("an integer in [2, {}]", most), most));
  const std::int64_t train =
      parse_integer("--per-class", a.per_class, 1, "an integer in [1, 6000]", 6000);
  const std::int64_t test =
      parse_integer("--test-per-class", a.test_per_class, 1, "an integer in [1, 1000]", 1000);
  const std::uint64_t seed = seed_of(a);
  check_out(a, comm);
  mpi::collectively(comm, [&]() {
    if (mpi::rank(comm) != 0) return;
    data::write_generated_cifar(a.out, version, train, test, classes, seed);
    std::printf(
        "weft data: %s layout, %d classes, %lld training + %lld test images of 3x32x32, seed "
        "%llu, in %s\n",
        a.set.c_str(), classes, static_cast<long long>(train * classes),
        static_cast<long long>(test * classes), static_cast<unsigned long long>(seed),
        a.out.c_str());
    std::fflush(stdout);
  });
  return kExitOk;
}

int run_data(DataArgs a, MPI_Comm comm) {
  const std::vector<std::string> sets = {"shapes3d", "cifar10", "cifar100", "tiny-imagenet",
                                         "folder"};
  if (a.set.empty() == a.format.empty())
    invalid_value("--format", a.format.empty() ? "" : a.format,
                  "one set, given as 'weft data SET' or 'weft data --format SET'",
                  a.set.empty() ? "none given" : "both given");
  if (a.set.empty()) a.set = sets[parse_choice("--format", a.format, sets)];
  if (a.set == "tiny-imagenet" || a.set == "folder") return run_images(a, comm);
  if (a.set != "shapes3d") return run_cifar(a, comm);
  const std::int64_t train =
      parse_integer("--train-size", a.train, 1, "an integer in [1, 1000000]", 1000000);
  const std::int64_t test =
      parse_integer("--test-size", a.test, 1, "an integer in [1, 1000000]", 1000000);
  const std::int64_t size = parse_integer("--size", a.size, 4, "an integer in [4, 256]", 256);
  const std::uint64_t seed = seed_of(a);
  if (static_cast<double>(train + test) * static_cast<double>(size * size * size) > 4e10)
    invalid_value("--train-size", a.train, "a set of at most 40 GB",
                  fmt::format("{} + {} samples of {}^3 voxels", train, test, size));
  check_out(a, comm);
  const int rank = weft::mpi::rank(comm);
  mpi::collectively(comm, [&]() {
    if (rank != 0) return;
    const auto start = std::chrono::steady_clock::now();
    data::write_shapes3d(a.out, train, test, size, seed);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf(
        "weft data: shapes3d, %lld training + %lld test samples of %lld^3 voxels, "
        "seed %llu, in %s (%.1f s)\n",
        static_cast<long long>(train), static_cast<long long>(test), static_cast<long long>(size),
        static_cast<unsigned long long>(seed), a.out.c_str(), seconds);
    std::fflush(stdout);
  });
  return kExitOk;
}

}  // namespace

std::string shapes3d_cache(MPI_Comm comm) {
  const data::Shapes3dSpec spec;  // the defaults of `weft data shapes3d`
  std::string dir;
  mpi::collectively(comm, [&]() {
    const std::string root = data::default_cache_root();
    if (root.empty())
      throw BadData(
          "--data shapes3d: no cache folder (neither XDG_CACHE_HOME nor HOME is set); write the "
          "set with 'weft data shapes3d --out DIR' and pass --data DIR");
    dir = data::shapes3d_cache_folder(root, spec);
    if (weft::mpi::rank(comm) != 0) return;
    try {
      data::ensure_shapes3d_cache(root, spec, [](const std::string& line, bool warning) {
        std::fprintf(warning ? stderr : stdout, "weft: %s\n", line.c_str());
        std::fflush(warning ? stderr : stdout);
      });
    } catch (const BadData& e) {
      throw BadData(std::string("--data shapes3d: ") + e.what());
    }
  });
  return dir;
}

std::string data_folder(const std::string& data, MPI_Comm comm) {
  return data == kShapes3dName ? shapes3d_cache(comm) : data;
}

std::string size_text(const data::ImageSet& s) {
  const std::string channels = s.channels != 1 ? fmt::format("{}x", s.channels) : "";
  return channels + (s.spatial_dims == 3 ? fmt::format("{}x{}x{}", s.depth, s.rows, s.cols)
                                         : fmt::format("{}x{}", s.rows, s.cols));
}

Subcommand add_data_command(CLI::App& weft) {
  CLI::App* cmd = weft.add_subcommand(
      "data",
      "Write a generated data set: 'weft data shapes3d --out DIR' writes the 3-D shapes "
      "benchmark (10 classes of voxelized primitives) for 'weft train --data DIR --model conv3d'; "
      "'weft data cifar10|cifar100 --out DIR' a set of coloured stripe patterns in CIFAR's "
      "published binary layout (3x32x32 RGB); 'weft data tiny-imagenet|folder --out DIR' the "
      "same patterns as JPEG/PNG files in tiny-imagenet-200's or an ImageNet-style folder "
      "layout.");
  auto a = std::make_shared<DataArgs>();
  cmd->add_option("set", a->set,
                  "the data set: shapes3d, cifar10, cifar100, tiny-imagenet or folder")
      ->check(CLI::IsMember({"shapes3d", "cifar10", "cifar100", "tiny-imagenet", "folder"}))
      ->type_name("SET");
  cmd->add_option("--format", a->format, "the data set, instead of SET")->type_name("SET");
  cmd->add_option("--out", a->out, "output folder (created if missing)")
      ->required()
      ->type_name("DIR");
  cmd->add_option("--train-size", a->train, "training samples (default 4000)")->type_name("INT");
  cmd->add_option("--test-size", a->test, "test samples (default 1000)")->type_name("INT");
  cmd->add_option("--size", a->size, "voxels per side (default 32)")->type_name("INT");
  cmd->add_option("--seed", a->seed, "generator seed (default 1)")->type_name("INT");
  cmd->add_option("--classes", a->classes, "image sets: classes (default 10; 100 for cifar100)")
      ->type_name("K");
  cmd->add_option("--per-class", a->per_class,
                  "image sets: training images per class (default 100)")
      ->type_name("M");
  cmd->add_option("--test-per-class", a->test_per_class,
                  "image sets: test (validation) images per class (default 20)")
      ->type_name("M");
  cmd->add_option("--image-size", a->image_size,
                  "tiny-imagenet/folder: image side in pixels (default 64)")
      ->type_name("S");
  return Subcommand{cmd, [a](MPI_Comm comm) { return run_data(*a, comm); }, nullptr};
}

}  // namespace weft::cli
