#pragma once
// Reader for the IDX format of MNIST and Fashion-MNIST (http://yann.lecun.com/exdb/mnist/):
// a big-endian header (magic 0x00000803 for images, 0x00000801 for labels, then one 32-bit
// size per dimension) followed by unsigned bytes. Files may be gzip-compressed or plain.
// Volumes (3-D images, e.g. the generated shapes3d set) use magic 0x00000804: count, depth,
// rows, cols; a reader asks for one kind or the other (IdxOptions::spatial_dims).
// Every problem with a file throws weft::BadData naming the file and the problem.
#include <cstdint>
#include <string>
#include <vector>

namespace weft::data {

/// Images and their labels, in file order. Pixel i of image n is pixels[n*rows*cols + i]
/// (row-major); for volumes voxel i of volume n is pixels[n*depth*rows*cols + i] (depth
/// slowest); with several channels (CIFAR) each image is [channels, rows, cols]. `labels` is empty
/// when only images were read.
struct ImageSet {
  std::int64_t count = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t depth = 1;     ///< slices of a volume; 1 for 2-D images
  std::int64_t channels = 1;  ///< colour channels (3 for CIFAR's RGB), slowest within an image
  int spatial_dims = 2;       ///< 2: images (idx3 files), 3: volumes (idx4 files)
  int classes = 10;           ///< labels are 0..classes-1 (what the reader checked them against)
  /// Values per image: channels * depth * rows * cols.
  std::int64_t image_size() const { return channels * depth * rows * cols; }
  std::vector<std::uint8_t> pixels;
  std::vector<std::uint8_t> labels;
};

/// What to read and what to insist on.
struct IdxOptions {
  /// Read only the first `limit` items (all when negative or larger than the file). With a
  /// limit, the rest of the file is not read, so truncation beyond it goes unnoticed.
  std::int64_t limit = -1;
  /// Labels must be < num_classes (1..256).
  int num_classes = 10;
  /// Expected image size; 0 accepts any size.
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  /// 2: an image file must have 3 dimensions (count, rows, cols), 3: a volume file 4 (count,
  /// depth, rows, cols); any other header is refused.
  int spatial_dims = 2;
  /// Expected depth of volumes; 0 accepts any.
  std::int64_t depth = 0;
};

enum class Split { Train, Test };

/// Reads an idx3-ubyte image file (`labels` stays empty). `path` is tried as given, then with
/// ".gz" appended; gzip and plain files are both accepted whatever their name.
ImageSet read_idx_images(const std::string& path, const IdxOptions& options = {});

/// Reads an idx1-ubyte label file; each label is checked against options.num_classes.
std::vector<std::uint8_t> read_idx_labels(const std::string& path, const IdxOptions& options = {});

/// Reads an image file and its label file and checks that they hold the same number of items.
ImageSet load_idx(const std::string& images_path, const std::string& labels_path,
                  const IdxOptions& options = {});

/// The file names of a standard MNIST-layout split, without ".gz":
/// train-images-idx3-ubyte / train-labels-idx1-ubyte, t10k-images-idx3-ubyte / t10k-...
std::string images_file(Split split);
std::string labels_file(Split split);
/// The image file name for `spatial_dims` 2 (as above) or 3 (train-images-idx4-ubyte,
/// t10k-images-idx4-ubyte).
std::string images_file(Split split, int spatial_dims);

/// Writes `set`'s images (idx3, or idx4 when set.spatial_dims is 3) and labels to the two
/// paths, gzip-compressed when a path ends in ".gz". Throws weft::BadData naming the file when
/// it cannot be written, weft::InvalidOption when a size does not fit the 32-bit header or
/// pixels/labels do not match the counts.
void write_idx(const ImageSet& set, const std::string& images_path, const std::string& labels_path);

/// Loads `split` from `dir` (standard names, plain or .gz), insisting on 28x28 images and
/// labels 0..9.
ImageSet load_mnist_split(const std::string& dir, Split split, std::int64_t limit = -1);
/// Same with explicit options (image size, classes, limit).
ImageSet load_mnist_split(const std::string& dir, Split split, const IdxOptions& options);

/// Pixels as floats, normalised: (x/255 - mean)/std. Throws weft::InvalidOption if std <= 0.
std::vector<float> to_float(const ImageSet& set, float mean, float std);

/// Labels widened to int64 (the type loss functions index with).
std::vector<std::int64_t> labels_as_int64(const ImageSet& set);

/// Per-pixel mean and standard deviation of the training splits (pixels scaled to [0, 1]),
/// the customary constants for to_float.
inline constexpr float kMnistMean = 0.1307f;
inline constexpr float kMnistStd = 0.3081f;
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

}  // namespace weft::data
