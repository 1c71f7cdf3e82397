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

std::shared_ptr<TensorSource> TensorSource::from_images(const data::ImageSet& set,
                                                        const Normalization& norm) {
  if (set.count == 0) throw BadData("data set is empty");
  std::vector<float> pixels;
  if (!norm.per_channel()) {
    pixels = data::to_float(set, static_cast<float>(norm.mean), static_cast<float>(norm.std));
  } else {
    if (static_cast<std::int64_t>(norm.channel_mean.size()) != set.channels ||
        norm.channel_std.size() != norm.channel_mean.size())
      throw BadData("normalization of " + std::to_string(norm.channel_mean.size()) +
                    " channels for images of " + std::to_string(set.channels));
    // to_float's formula, one table of the 256 values per channel.
    std::vector<std::array<float, 256>> tables(norm.channel_mean.size());
    for (std::size_t c = 0; c < tables.size(); ++c) {
      const auto mean = static_cast<float>(norm.channel_mean[c]);
      const auto std = static_cast<float>(norm.channel_std[c]);
      if (!(std > 0.0f)) throw BadData("normalization: channel " + std::to_string(c) + " std <= 0");
      for (std::size_t v = 0; v < 256; ++v)
        tables[c][v] = (static_cast<float>(v) / 255.0f - mean) / std;
    }
    pixels.resize(set.pixels.size());
    const auto plane = static_cast<std::size_t>(set.image_size() / set.channels);
    for (std::size_t i = 0; i < pixels.size(); ++i)
      pixels[i] = tables[(i / plane) % tables.size()][set.pixels[i]];
  }
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
