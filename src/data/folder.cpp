#include "weft/data/folder.hpp"

#include <filesystem>
#include <system_error>

#include "weft/data/cifar.hpp"
#include "weft/util/error.hpp"

namespace weft::data {

namespace fs = std::filesystem;

std::string to_string(FolderFormat format) {
  switch (format) {
    case FolderFormat::Idx:
      return "idx";
    case FolderFormat::IdxVolumes:
      return "idx-volumes";
    case FolderFormat::Cifar10:
      return "cifar10";
    case FolderFormat::Cifar100:
      return "cifar100";
  }
  return "unknown";
}

FolderFormat detect_format(const std::string& dir, Split split) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw BadData(dir + " is a file, not a folder (expected a folder with " + images_file(split) +
                  "[.gz] and " + labels_file(split) + "[.gz])");
  if (holds_cifar(dir, CifarVersion::Cifar10)) return FolderFormat::Cifar10;
  if (holds_cifar(dir, CifarVersion::Cifar100)) return FolderFormat::Cifar100;
  const std::string volumes = (fs::path(dir) / images_file(split, 3)).string();
  if (fs::is_regular_file(volumes, ec) || fs::is_regular_file(volumes + ".gz", ec))
    return FolderFormat::IdxVolumes;
  return FolderFormat::Idx;
}

ImageSet read_folder(const std::string& dir, Split split, std::int64_t limit) {
  const std::string which = split == Split::Train ? "training" : "test";
  switch (detect_format(dir, split)) {
    case FolderFormat::Cifar10: {
      CifarOptions cifar;
      cifar.limit = limit;
      ImageSet set = read_cifar(dir, CifarVersion::Cifar10, split, cifar);
      if (set.count == 0) throw BadData(dir + ": the " + which + " set is empty");
      return set;
    }
    case FolderFormat::Cifar100:
      throw BadData(dir +
                    " holds CIFAR-100 (train.bin, test.bin): its 100 or 20 classes are more than "
                    "the 10 weft train's models classify; accepted: CIFAR-10 or MNIST-format "
                    "sets");
    case FolderFormat::Idx:
    case FolderFormat::IdxVolumes:
      break;
  }
  IdxOptions options;
  options.limit = limit;
  options.spatial_dims = detect_format(dir, split) == FolderFormat::IdxVolumes ? 3 : 2;
  const std::string images = (fs::path(dir) / images_file(split, options.spatial_dims)).string();
  ImageSet set = load_idx(images, (fs::path(dir) / labels_file(split)).string(), options);
  if (set.count == 0)
    throw BadData("the " + which + " set is empty: " + images + "[.gz] holds no images");
  return set;
}

}  // namespace weft::data
