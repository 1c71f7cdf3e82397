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
    case FolderFormat::TinyImagenet:
      return to_string(ImageLayout::TinyImagenet);
    case FolderFormat::ImageFolder:
      return to_string(ImageLayout::Folder);
  }
  return "unknown";
}

FolderFormat parse_folder_format(const std::string& name) {
  for (const FolderFormat f :
       {FolderFormat::Idx, FolderFormat::IdxVolumes, FolderFormat::Cifar10, FolderFormat::Cifar100,
        FolderFormat::TinyImagenet, FolderFormat::ImageFolder})
    if (name == to_string(f)) return f;
  throw InvalidOption("data folder", "format",
                      "'" + name +
                          "' is invalid; accepted: idx, idx-volumes, cifar10, cifar100, "
                          "tiny-imagenet, folder");
}

bool is_image_files(FolderFormat format) {
  return format == FolderFormat::TinyImagenet || format == FolderFormat::ImageFolder;
}

ImageLayout image_layout(FolderFormat format) {
  return format == FolderFormat::TinyImagenet ? ImageLayout::TinyImagenet : ImageLayout::Folder;
}

FolderFormat detect_format(const std::string& dir, Split split) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw BadData(dir + " is a file, not a folder (expected a folder with " + images_file(split) +
                  "[.gz] and " + labels_file(split) + "[.gz])");
  if (holds_cifar(dir, CifarVersion::Cifar10)) return FolderFormat::Cifar10;
  if (holds_cifar(dir, CifarVersion::Cifar100)) return FolderFormat::Cifar100;
  if (holds_layout(dir, ImageLayout::TinyImagenet)) return FolderFormat::TinyImagenet;
  if (holds_layout(dir, ImageLayout::Folder)) return FolderFormat::ImageFolder;
  const std::string volumes = (fs::path(dir) / images_file(split, 3)).string();
  if (fs::is_regular_file(volumes, ec) || fs::is_regular_file(volumes + ".gz", ec))
    return FolderFormat::IdxVolumes;
  return FolderFormat::Idx;
}

ImageSet read_folder(const std::string& dir, Split split, const FolderOptions& options) {
  const std::string which = split == Split::Train ? "training" : "test";
  const FolderFormat format = options.format ? *options.format : detect_format(dir, split);
  if (format == FolderFormat::Cifar10 || format == FolderFormat::Cifar100) {
    CifarOptions cifar;
    cifar.limit = options.limit;
    cifar.label = options.label;
    const auto version =
        format == FolderFormat::Cifar10 ? CifarVersion::Cifar10 : CifarVersion::Cifar100;
    ImageSet set = read_cifar(dir, version, split, cifar);
    if (set.count == 0) throw BadData(dir + ": the " + which + " set is empty");
    return set;
  }
  if (is_image_files(format))
    return read_images(index_images(dir, image_layout(format), split, options.limit),
                       options.image_side);
  IdxOptions idx;
  idx.limit = options.limit;
  idx.spatial_dims = format == FolderFormat::IdxVolumes ? 3 : 2;
  const std::string images = (fs::path(dir) / images_file(split, idx.spatial_dims)).string();
  ImageSet set = load_idx(images, (fs::path(dir) / labels_file(split)).string(), idx);
  if (set.count == 0)
    throw BadData("the " + which + " set is empty: " + images + "[.gz] holds no images");
  return set;
}

}  // namespace weft::data
