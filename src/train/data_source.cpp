// Data sources: examples in memory, and IDX image sets turned into them.
#include "weft/train/data_source.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <utility>

#include "weft/util/error.hpp"

namespace weft::train {

TensorSource::TensorSource(torch::Tensor inputs, torch::Tensor labels, Normalization normalization)
    : inputs_(std::move(inputs)), labels_(std::move(labels)), normalization_(normalization) {
  if (!inputs_.defined() || !labels_.defined() || inputs_.dim() < 2 || labels_.dim() != 1 ||
      inputs_.size(0) != labels_.size(0))
    throw BadData("TensorSource: inputs [n, ...] and labels [n] must have the same n (inputs " +
                  (inputs_.defined() ? std::to_string(inputs_.dim()) + "-D" : "undefined") +
                  ", labels " +
                  (labels_.defined() ? std::to_string(labels_.numel()) : "undefined") + ")");
  if (labels_.scalar_type() != torch::kInt64)
    throw BadData("TensorSource: labels must be int64 class indices");
}

namespace {

using Tables = std::vector<std::array<float, 256>>;

// to_float's formula, one table of the 256 values per channel of `norm`.
Tables normalization_tables(const Normalization& norm, std::int64_t channels) {
  if (norm.per_channel() && (static_cast<std::int64_t>(norm.channel_mean.size()) != channels ||
                             norm.channel_std.size() != norm.channel_mean.size()))
    throw BadData("normalization of " + std::to_string(norm.channel_mean.size()) +
                  " channels for images of " + std::to_string(channels));
  Tables tables(norm.per_channel() ? norm.channel_mean.size() : 1);
  for (std::size_t c = 0; c < tables.size(); ++c) {
    const auto mean = static_cast<float>(norm.mean_of(c));
    const auto std = static_cast<float>(norm.std_of(c));
    if (!(std > 0.0f)) throw BadData("normalization: channel " + std::to_string(c) + " std <= 0");
    for (std::size_t v = 0; v < 256; ++v)
      tables[c][v] = (static_cast<float>(v) / 255.0f - mean) / std;
  }
  return tables;
}

// `count` bytes of images of `plane` pixels per channel through `tables`.
void normalize(const std::uint8_t* in, std::size_t count, std::size_t plane, const Tables& tables,
               float* out) {
  for (std::size_t i = 0; i < count; ++i) out[i] = tables[(i / plane) % tables.size()][in[i]];
}

}  // namespace

std::shared_ptr<TensorSource> TensorSource::from_images(const data::ImageSet& set,
                                                        const Normalization& norm) {
  if (set.count == 0) throw BadData("data set is empty");
  const Tables tables = normalization_tables(norm, set.channels);
  std::vector<float> pixels(set.pixels.size());
  normalize(set.pixels.data(), pixels.size(),
            static_cast<std::size_t>(set.image_size() / set.channels), tables, pixels.data());
  std::vector<std::int64_t> labels = data::labels_as_int64(set);
  const std::vector<std::int64_t> shape =
      set.spatial_dims == 3
          ? std::vector<std::int64_t>{set.count, set.channels, set.depth, set.rows, set.cols}
          : std::vector<std::int64_t>{set.count, set.channels, set.rows, set.cols};
  return std::make_shared<TensorSource>(
      torch::from_blob(pixels.data(), shape, torch::kFloat32).clone(),
      torch::from_blob(labels.data(), {set.count}, torch::kInt64).clone(), norm);
}

std::int64_t TensorSource::size() const {
  return labels_.size(0);
}

std::vector<std::int64_t> TensorSource::example_shape() const {
  const auto sizes = inputs_.sizes();
  return {sizes.begin() + 1, sizes.end()};
}

Batch TensorSource::examples(const torch::Tensor& indices, int /*epoch*/) const {
  return {inputs_.index_select(0, indices), labels_.index_select(0, indices)};
}

Batch TensorSource::range(std::int64_t begin, std::int64_t end) const {
  return {inputs_.slice(0, begin, end), labels_.slice(0, begin, end)};
}

ImageFileSource::ImageFileSource(data::ImageFiles files, std::int64_t side,
                                 Normalization normalization)
    : files_(std::move(files)), side_(side), normalization_(std::move(normalization)) {
  if (files_.count() == 0) throw BadData("image set is empty");
  if (side_ < 1) throw InvalidOption("ImageFileSource", "side", "must be at least 1");
  normalization_tables(normalization_, 3);  // checked now, not at the first batch
}

Batch ImageFileSource::decode(const std::vector<std::int64_t>& indices) const {
  const auto n = static_cast<std::int64_t>(indices.size());
  const std::int64_t values = 3 * side_ * side_;
  const Tables tables = normalization_tables(normalization_, 3);
  torch::Tensor inputs = torch::empty({n, 3, side_, side_}, torch::kFloat32);
  float* out = inputs.data_ptr<float>();
  const torch::Tensor labels = labels_of(indices);  // checks the indices
  for (std::int64_t i = 0; i < n; ++i) {
    const std::vector<std::uint8_t> pixels =
        data::read_image_file(files_, indices[static_cast<std::size_t>(i)], side_);
    normalize(pixels.data(), pixels.size(), static_cast<std::size_t>(side_ * side_), tables,
              out + i * values);
  }
  return {inputs, labels};
}

namespace {

std::vector<std::int64_t> index_list(const torch::Tensor& indices) {
  const torch::Tensor idx = indices.to(torch::kInt64).contiguous();
  const std::int64_t* p = idx.data_ptr<std::int64_t>();
  return std::vector<std::int64_t>(p, p + idx.numel());
}

std::vector<std::int64_t> index_range(std::int64_t begin, std::int64_t end) {
  std::vector<std::int64_t> indices;
  for (std::int64_t i = begin; i < end; ++i) indices.push_back(i);
  return indices;
}

}  // namespace

torch::Tensor ImageFileSource::labels_of(const std::vector<std::int64_t>& indices) const {
  torch::Tensor labels = torch::empty({static_cast<std::int64_t>(indices.size())}, torch::kInt64);
  std::int64_t* label = labels.data_ptr<std::int64_t>();
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const std::int64_t j = indices[i];
    if (j < 0 || j >= files_.count())
      throw InvalidOption("ImageFileSource", "index",
                          std::to_string(j) + " is outside [0, " + std::to_string(size()) + ")");
    label[i] = files_.labels[static_cast<std::size_t>(j)];
  }
  return labels;
}

Batch ImageFileSource::examples(const torch::Tensor& indices, int /*epoch*/) const {
  return decode(index_list(indices));
}

Batch ImageFileSource::range(std::int64_t begin, std::int64_t end) const {
  return decode(index_range(begin, end));
}

torch::Tensor ImageFileSource::labels(const torch::Tensor& indices) const {
  return labels_of(index_list(indices));
}

torch::Tensor ImageFileSource::range_labels(std::int64_t begin, std::int64_t end) const {
  return labels_of(index_range(begin, end));
}

Normalization measure_normalization(const data::ImageFiles& files, std::int64_t side,
                                    std::int64_t sample) {
  const std::int64_t count = std::min(files.count(), std::max<std::int64_t>(1, sample));
  // Decoded one image at a time into running sums: memory stays one image.
  std::array<double, 3> sums{}, squares{};
  const auto plane = static_cast<std::size_t>(side * side);
  for (std::int64_t i = 0; i < count; ++i) {
    const std::vector<std::uint8_t> pixels =
        data::read_image_file(files, i * files.count() / count, side);
    for (std::size_t k = 0; k < pixels.size(); ++k) {
      const double v = pixels[k] / 255.0;
      sums[k / plane] += v;
      squares[k / plane] += v * v;
    }
  }
  // measure_normalization(ImageSet, true)'s formulas, in the same order of summation.
  const double per = static_cast<double>(count) * static_cast<double>(plane);
  Normalization norm;
  norm.mean = norm.std = 0;
  for (std::size_t c = 0; c < 3; ++c) {
    const double m = sums[c] / per;
    norm.channel_mean.push_back(m);
    norm.channel_std.push_back(std::sqrt(std::max(1e-12, squares[c] / per - m * m)));
    norm.mean += m / 3.0;
    norm.std += norm.channel_std.back() / 3.0;
  }
  return norm;
}

Normalization measure_normalization(const data::ImageSet& set, bool per_channel) {
  double sum = 0, sq = 0;
  for (std::uint8_t p : set.pixels) {
    const double v = p / 255.0;
    sum += v;
    sq += v * v;
  }
  const double n = std::max<double>(1.0, static_cast<double>(set.pixels.size()));
  Normalization norm;
  norm.mean = sum / n;
  norm.std = std::sqrt(std::max(1e-12, sq / n - norm.mean * norm.mean));
  if (!per_channel || set.channels < 2) return norm;
  const auto channels = static_cast<std::size_t>(set.channels);
  const auto plane = static_cast<std::size_t>(set.image_size() / set.channels);
  std::vector<double> sums(channels, 0.0), squares(channels, 0.0);
  for (std::size_t i = 0; i < set.pixels.size(); ++i) {
    const double v = set.pixels[i] / 255.0;
    sums[(i / plane) % channels] += v;
    squares[(i / plane) % channels] += v * v;
  }
  const double per = std::max<double>(1.0, n / static_cast<double>(channels));
  norm.mean = norm.std = 0;
  for (std::size_t c = 0; c < channels; ++c) {
    const double mean = sums[c] / per;
    norm.channel_mean.push_back(mean);
    norm.channel_std.push_back(std::sqrt(std::max(1e-12, squares[c] / per - mean * mean)));
    norm.mean += mean / static_cast<double>(channels);
    norm.std += norm.channel_std.back() / static_cast<double>(channels);
  }
  return norm;
}

ExampleShape example_shape_of(const DataSource& source) {
  const std::vector<std::int64_t> shape = source.example_shape();
  ExampleShape e;
  if (shape.size() < 3) return e;
  e.rows = shape[shape.size() - 2];
  e.cols = shape.back();
  e.volume = shape.size() == 4;
  if (e.volume) e.depth = shape[1];
  e.channels = shape.front();
  return e;
}

}  // namespace weft::train
