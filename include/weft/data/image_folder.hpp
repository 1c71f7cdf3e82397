#pragma once
// Sets of image files, indexed without decoding them, so that a reader can stream images from
// disk (memory bounded by a batch, not by the set). Two published layouts:
//   tiny-imagenet  wnids.txt (one class id per line; labels follow the ids sorted, as
//                  torchvision's ImageFolder numbers train/'s folders), train/<wnid>/images/*
//                  (the training images of a class), val/images/* with val/val_annotations.txt
//                  (file name, tab, class id, ...). test/ carries no labels and is not read;
//                  the validation split is the test split, as in the literature. 64x64 RGB as
//                  published; its few greyscale images are converted to RGB.
//   folder         ImageNet-style class folders: train/<class>/* and val/<class>/* (test/ when
//                  there is no val/); classes are train's subfolders sorted by name.
// Images are *.jpg, *.jpeg, *.png (any case); other files are ignored. Every problem with the
// layout (a missing folder or file, an empty class folder, a class in val that train lacks, an
// unknown class id in the annotations) throws weft::BadData naming the file or folder, and so
// does an image file that is empty, neither JPEG nor PNG, or cut short (index_images checks
// every file's ends: image_codec.hpp's check_image_file_ends). Damage inside an image is found
// when it is decoded (read_image_file). No LibTorch.
#include <cstdint>
#include <string>
#include <vector>

#include "weft/data/idx.hpp"

namespace weft::data {

enum class ImageLayout { TinyImagenet, Folder };

/// "tiny-imagenet" / "folder".
std::string to_string(ImageLayout layout);

/// The files of one split and their labels.
struct ImageFiles {
  std::vector<std::string> paths;
  std::vector<std::int32_t> labels;      ///< in [0, class_names.size())
  std::vector<std::string> class_names;  ///< the class order (wnids, or folder names)
  int classes() const { return static_cast<int>(class_names.size()); }
  std::int64_t count() const { return static_cast<std::int64_t>(paths.size()); }
};

/// Whether `dir` has `layout`'s markers: wnids.txt (tiny-imagenet); a train/ folder whose
/// entries are folders (folder).
bool holds_layout(const std::string& dir, ImageLayout layout);

/// The files of `split` of `dir`, in a fixed order (class by class, names sorted). With
/// `limit` >= 0, an evenly spaced subset of that many (every class keeps its share).
ImageFiles index_images(const std::string& dir, ImageLayout layout, Split split,
                        std::int64_t limit = -1);

/// Image `i` of `files` decoded and fitted to `side` x `side` RGB (image_codec.hpp's
/// fit_image). Throws BadData naming the file when it is damaged.
std::vector<std::uint8_t> read_image_file(const ImageFiles& files, std::int64_t i,
                                          std::int64_t side);

/// The whole split decoded into memory as 3 x side x side images (small sets, tests, Python).
/// Throws BadData for more than 256 classes (ImageSet's labels are bytes).
ImageSet read_images(const ImageFiles& files, std::int64_t side);

/// A generated set in `layout`'s published layout, written into `dir` (created if missing), so
/// that tests and new users can run these paths offline. The images are the coloured stripe
/// patterns of the generated CIFAR sets (learnable, not trivial), drawn at `side` x `side`:
///   tiny-imagenet  JPEGs (quality 90) named as published (n<8 digits>_<i>.JPEG, val_<i>.JPEG),
///                  wnids.txt, words.txt, val_annotations.txt; every tenth image greyscale, as a
///                  few in the published set are
///   folder         class_<k>/ folders of JPEGs and PNGs alternately, each image a little larger
///                  than `side` in one direction (the reader fits them)
void write_generated_images(const std::string& dir, ImageLayout layout, int classes,
                            std::int64_t train_per_class, std::int64_t test_per_class,
                            std::int64_t side, std::uint64_t seed);

}  // namespace weft::data
