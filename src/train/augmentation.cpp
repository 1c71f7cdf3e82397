#include "weft/train/augmentation.hpp"

#include <torch/types.h>

#include <utility>

#include "weft/util/error.hpp"

namespace weft::train {

std::string Augmentation::describe() const {
  if (!active()) return "none";
  std::string text = padding > 0 ? "random crop with padding " + std::to_string(padding) : "";
  if (flip) text += std::string(text.empty() ? "" : ", ") + "horizontal flip";
  return text;
}

namespace {
// splitmix64: a well-mixed 64-bit value of (seed, epoch, index, what).
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

AugmentedSource::AugmentedSource(std::shared_ptr<const DataSource> base, Augmentation augmentation)
    : base_(std::move(base)), augmentation_(augmentation) {
  if (!base_) throw InvalidOption("Augmentation", "base", "is null; accepted: a data source");
  const std::vector<std::int64_t> shape = base_->example_shape();
  if (shape.size() != 3)
    throw InvalidOption("Augmentation", "examples",
                        "of " + std::to_string(shape.size()) +
                            " dimensions are invalid; accepted: images [channels, rows, cols]");
  if (augmentation_.padding < 0 || augmentation_.padding >= std::min(shape[1], shape[2]))
    throw InvalidOption("Augmentation", "padding",
                        "= " + std::to_string(augmentation_.padding) +
                            " is invalid; accepted: 0 .. " +
                            std::to_string(std::min(shape[1], shape[2]) - 1));
  const Normalization n = base_->normalization();
  for (std::int64_t c = 0; c < shape[0]; ++c) {
    const auto k = static_cast<std::size_t>(c);
    black_.push_back(static_cast<float>((0.0 - n.mean_of(n.per_channel() ? k : 0)) /
                                        n.std_of(n.per_channel() ? k : 0)));
  }
}

AugmentedSource::Draw AugmentedSource::draw(std::int64_t index, int epoch) const {
  const std::uint64_t key = mix(mix(mix(augmentation_.seed) ^ static_cast<std::uint64_t>(epoch)) ^
                                static_cast<std::uint64_t>(index));
  const std::int64_t span = 2 * augmentation_.padding + 1;
  Draw d;
  d.dy = static_cast<std::int64_t>(mix(key ^ 1) % static_cast<std::uint64_t>(span)) -
         augmentation_.padding;
  d.dx = static_cast<std::int64_t>(mix(key ^ 2) % static_cast<std::uint64_t>(span)) -
         augmentation_.padding;
  d.flip = augmentation_.flip && (mix(key ^ 3) & 1u) != 0;
  return d;
}

Batch AugmentedSource::examples(const torch::Tensor& indices, int epoch) const {
  Batch b = base_->examples(indices, epoch);
  if (!augmentation_.active()) return b;
  const std::int64_t p = augmentation_.padding, rows = b.inputs.size(2), cols = b.inputs.size(3);
  torch::Tensor out = b.inputs.clone();
  const torch::Tensor black = torch::tensor(black_, b.inputs.options()).view({-1, 1, 1});
  const auto idx = indices.to(torch::kInt64).contiguous();
  const std::int64_t* at = idx.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < b.inputs.size(0); ++i) {
    const Draw d = draw(at[i], epoch);
    torch::Tensor image = b.inputs[i];
    if (p > 0 && (d.dy != 0 || d.dx != 0)) {
      // The crop of the padded image at offset (p + dy, p + dx): the source window shifted.
      torch::Tensor shifted = black.expand_as(image).clone();
      const std::int64_t y0 = std::max<std::int64_t>(0, -d.dy),
                         x0 = std::max<std::int64_t>(0, -d.dx);
      const std::int64_t y1 = std::min(rows, rows - d.dy), x1 = std::min(cols, cols - d.dx);
      shifted.slice(1, y0, y1).slice(2, x0, x1).copy_(
          image.slice(1, y0 + d.dy, y1 + d.dy).slice(2, x0 + d.dx, x1 + d.dx));
      image = shifted;
    }
    if (d.flip) image = image.flip({2});
    out[i].copy_(image);
  }
  b.inputs = out;
  return b;
}

}  // namespace weft::train
