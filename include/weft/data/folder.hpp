#pragma once
// A data folder read by its layout: the published CIFAR binaries (cifar.hpp), tiny-imagenet or
// ImageNet-style class folders of JPEG/PNG files (image_folder.hpp), MNIST-format IDX images,
// or IDX volumes (the 3-D shapes set, shapes3d.hpp). Front ends point at a folder; this
// tells what it holds and reads a split of it.
#include <cstdint>
#include <string>

#include <optional>

#include "weft/data/cifar.hpp"
#include "weft/data/idx.hpp"
#include "weft/data/image_folder.hpp"

namespace weft::data {

enum class FolderFormat {
  Idx,           ///< train-images-idx3-ubyte[.gz] ... (Fashion-MNIST, MNIST)
  IdxVolumes,    ///< train-volumes-idx4-ubyte[.gz] ... (the 3-D shapes set)
  Cifar10,       ///< data_batch_1..5.bin, test_batch.bin
  Cifar100,      ///< train.bin, test.bin
  TinyImagenet,  ///< wnids.txt, train/<wnid>/images/, val/images/ + val/val_annotations.txt
  ImageFolder,   ///< train/<class>/*.{jpg,jpeg,png}, val/<class>/...
};

/// Whether `format` is a set of image files (streamed by ImageFileSource, not held in memory).
bool is_image_files(FolderFormat format);
/// The image-file layout of such a format.
ImageLayout image_layout(FolderFormat format);
/// The side image-file sets are fitted to unless told (tiny-imagenet's native 64).
inline constexpr std::int64_t kDefaultImageSide = 64;

/// "idx", "idx-volumes", "cifar10", "cifar100", "tiny-imagenet", "folder": the reader's name in
/// headers and metrics.
std::string to_string(FolderFormat format);
/// The format named `name` (to_string's names). Throws InvalidOption("data folder", "format").
FolderFormat parse_folder_format(const std::string& name);

struct FolderOptions {
  std::int64_t limit = -1;              ///< read only the first `limit` examples (negative: all)
  CifarLabel label = CifarLabel::Fine;  ///< CIFAR-100: fine (100 classes) or coarse (20) labels
  std::optional<FolderFormat> format;   ///< read as this format instead of detecting it
  std::int64_t image_side = kDefaultImageSide;  ///< image files: fitted to side x side
};

/// The format of `dir` by its files (CIFAR by its binaries, tiny-imagenet by wnids.txt, folder
/// by train/'s class folders, IDX volumes by the volume file of `split`, IDX images otherwise).
/// Throws BadData when `dir` is a file.
FolderFormat detect_format(const std::string& dir, Split split = Split::Train);

/// Split `split` of `dir` in its detected (or given) format, in memory; ImageSet::classes tells
/// the labels' range. Image files are decoded whole (index_images + read_images). Throws BadData
/// naming the file for a set that is missing, damaged or empty.
ImageSet read_folder(const std::string& dir, Split split, const FolderOptions& options = {});

}  // namespace weft::data
