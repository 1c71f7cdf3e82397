#pragma once
// Augmentation as CIFAR and Tiny-ImageNet recipes use it: a random crop of the image padded by
// `padding` pixels on every side (padding is black: 0 before normalization), and a horizontal
// flip with probability 1/2. Each example's draw depends only on (seed, epoch, example index),
// so a run sees the same examples at every rank count and replica split, and a resumed run the
// same as an uninterrupted one. Evaluation (range) is never augmented.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "weft/train/data_source.hpp"

namespace weft::train {

struct Augmentation {
  std::int64_t padding = 4;  ///< crop offsets in [-padding, padding] (0: no crop)
  bool flip = true;          ///< horizontal flip with probability 1/2
  std::uint64_t seed = 1;

  bool active() const { return padding > 0 || flip; }
  /// "crop 32 with padding 4, horizontal flip" for a run's header ("none" when inactive).
  std::string describe() const;
};

/// `base` with its training examples augmented (images [C, H, W] only).
class AugmentedSource : public DataSource {
 public:
  /// Throws InvalidOption("Augmentation", ...) for a negative padding, a padding not smaller
  /// than the images, or volumes.
  AugmentedSource(std::shared_ptr<const DataSource> base, Augmentation augmentation);

  std::int64_t size() const override { return base_->size(); }
  std::vector<std::int64_t> example_shape() const override { return base_->example_shape(); }
  Batch examples(const torch::Tensor& indices, int epoch) const override;
  Batch range(std::int64_t begin, std::int64_t end) const override {
    return base_->range(begin, end);
  }
  Normalization normalization() const override { return base_->normalization(); }
  torch::Tensor labels(const torch::Tensor& indices) const override {
    return base_->labels(indices);
  }
  torch::Tensor range_labels(std::int64_t begin, std::int64_t end) const override {
    return base_->range_labels(begin, end);
  }

  /// The draw for example `index` in `epoch`: offsets (dy, dx) and the flip.
  struct Draw {
    std::int64_t dy = 0, dx = 0;
    bool flip = false;
  };
  Draw draw(std::int64_t index, int epoch) const;

 private:
  std::shared_ptr<const DataSource> base_;
  Augmentation augmentation_;
  std::vector<float> black_;  ///< per channel: the normalized value of a black pixel
};

}  // namespace weft::train
