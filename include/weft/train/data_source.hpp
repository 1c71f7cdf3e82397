#pragma once
// Where a Trainer's examples come from: a source gives the examples at given indices, for an
// epoch, as a batch of tensors and labels. The Trainer chooses the indices (the per-epoch
// shuffle and each replica's share of the global batch), so a source only stores and reads;
// readers of other formats, generated sets and augmentation plug in by implementing it.
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "weft/data/idx.hpp"
#include "weft/data/image_folder.hpp"
#include "weft/train/checkpoint_info.hpp"

namespace weft::train {

struct Batch {
  torch::Tensor inputs;  ///< [n, ...example shape]
  torch::Tensor labels;  ///< [n] int64 class indices
};

class DataSource {
 public:
  virtual ~DataSource() = default;
  /// Examples per epoch.
  virtual std::int64_t size() const = 0;
  /// One example's shape: [channels, rows, cols] or [channels, depth, rows, cols].
  virtual std::vector<std::int64_t> example_shape() const = 0;
  /// The examples at `indices` (int64, each in [0, size())) for `epoch` (1-based; a source
  /// that augments draws from it).
  virtual Batch examples(const torch::Tensor& indices, int epoch) const = 0;
  /// Examples [begin, end) without augmentation (evaluation).
  virtual Batch range(std::int64_t begin, std::int64_t end) const = 0;
  /// The normalization the examples carry (stored in checkpoints).
  virtual Normalization normalization() const { return {}; }
  /// The labels at `indices` alone: what a rank that does not take the inputs (the other ranks
  /// of a layer-parallel chain) loads. Sources that can read labels without the examples
  /// override these.
  virtual torch::Tensor labels(const torch::Tensor& indices) const {
    return examples(indices, 1).labels;
  }
  virtual torch::Tensor range_labels(std::int64_t begin, std::int64_t end) const {
    return range(begin, end).labels;
  }
};

/// Examples held in memory as two tensors.
class TensorSource : public DataSource {
 public:
  TensorSource(torch::Tensor inputs, torch::Tensor labels, Normalization normalization = {});
  /// An IDX image set (weft/data/idx.hpp) as float tensors, normalized with `normalization`:
  /// [count, 1, rows, cols], or [count, 1, depth, rows, cols] for volumes.
  static std::shared_ptr<TensorSource> from_images(const data::ImageSet& set,
                                                   const Normalization& normalization);

  std::int64_t size() const override;
  std::vector<std::int64_t> example_shape() const override;
  Batch examples(const torch::Tensor& indices, int epoch) const override;
  Batch range(std::int64_t begin, std::int64_t end) const override;
  Normalization normalization() const override { return normalization_; }
  torch::Tensor labels(const torch::Tensor& indices) const override {
    return labels_.index_select(0, indices);
  }
  torch::Tensor range_labels(std::int64_t begin, std::int64_t end) const override {
    return labels_.slice(0, begin, end);
  }

 private:
  torch::Tensor inputs_, labels_;
  Normalization normalization_;
};

/// Image files (weft/data/image_folder.hpp) decoded when asked for, fitted to side x side RGB
/// and normalized as TensorSource::from_images would: memory is bounded by a batch, not by the
/// set. The same examples as from_images(data::read_images(files, side), normalization).
class ImageFileSource : public DataSource {
 public:
  ImageFileSource(data::ImageFiles files, std::int64_t side, Normalization normalization);

  std::int64_t size() const override { return files_.count(); }
  std::vector<std::int64_t> example_shape() const override { return {3, side_, side_}; }
  Batch examples(const torch::Tensor& indices, int epoch) const override;
  Batch range(std::int64_t begin, std::int64_t end) const override;
  Normalization normalization() const override { return normalization_; }
  torch::Tensor labels(const torch::Tensor& indices) const override;
  torch::Tensor range_labels(std::int64_t begin, std::int64_t end) const override;
  const data::ImageFiles& files() const { return files_; }

 private:
  Batch decode(const std::vector<std::int64_t>& indices) const;
  torch::Tensor labels_of(const std::vector<std::int64_t>& indices) const;
  data::ImageFiles files_;
  std::int64_t side_;
  Normalization normalization_;
};

/// The per-channel mean and standard deviation of image files fitted to side x side, measured
/// on at most `sample` of them, evenly spaced (all of a smaller set: then exactly
/// measure_normalization of the decoded set).
Normalization measure_normalization(const data::ImageFiles& files, std::int64_t side,
                                    std::int64_t sample = 5000);

/// The mean and standard deviation of the pixels of `set` (scaled to [0, 1]); with
/// `per_channel` and several channels, one pair per channel (CIFAR's recipes normalize so).
Normalization measure_normalization(const data::ImageSet& set, bool per_channel = false);

/// The example shape of `source` as checkpoints describe it.
ExampleShape example_shape_of(const DataSource& source);

}  // namespace weft::train
