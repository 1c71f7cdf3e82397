// How fast a data folder's training batches can be loaded on one core, as the Trainer's
// background loader loads them: `loader_bench DIR [BATCH] [BATCHES] [SIDE]` builds the source
// `weft train --data DIR` builds (in memory for IDX and CIFAR, streamed from disk for
// tiny-imagenet and folder sets; crop-flip augmentation for colour sets) and times batches of a
// shuffled epoch. Prints one line: the format, images per second (median of 5 repeats) and the
// milliseconds per batch. bench/run_loader_bench.sh compares it with what training consumes.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "weft/data/folder.hpp"
#include "weft/data/image_folder.hpp"
#include "weft/train/augmentation.hpp"
#include "weft/train/data_source.hpp"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  namespace data = weft::data;
  namespace train = weft::train;
  if (argc < 2) {
    std::fprintf(stderr, "usage: loader_bench DIR [BATCH] [BATCHES] [SIDE]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::int64_t batch = argc > 2 ? std::atoll(argv[2]) : 64;
  const std::int64_t batches = argc > 3 ? std::atoll(argv[3]) : 20;
  const std::int64_t side = argc > 4 ? std::atoll(argv[4]) : data::kDefaultImageSide;
  torch::set_num_threads(1);
  const data::FolderFormat format = data::detect_format(dir);
  std::shared_ptr<const train::DataSource> source;
  if (data::is_image_files(format)) {
    data::ImageFiles files =
        data::index_images(dir, data::image_layout(format), data::Split::Train);
    const train::Normalization norm = train::measure_normalization(files, side, 200);
    source = std::make_shared<train::ImageFileSource>(std::move(files), side, norm);
  } else {
    const data::ImageSet set = data::read_folder(dir, data::Split::Train);
    source = train::TensorSource::from_images(set, train::measure_normalization(set, true));
  }
  const bool colour = source->example_shape().front() == 3;
  if (colour) source = std::make_shared<train::AugmentedSource>(source, train::Augmentation{});
  const std::int64_t count = source->size();
  const torch::Tensor order = torch::randperm(count, torch::kInt64);
  std::vector<double> rates;
  for (int repeat = 0; repeat < 5; ++repeat) {
    const auto start = std::chrono::steady_clock::now();
    std::int64_t images = 0;
    for (std::int64_t k = 0; k < batches; ++k) {
      const std::int64_t first = (k * batch) % std::max<std::int64_t>(1, count - batch);
      const train::Batch b =
          source->examples(order.slice(0, first, std::min(count, first + batch)), 1);
      images += b.labels.size(0);
    }
    rates.push_back(
        static_cast<double>(images) /
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const double rate = median(rates);
  std::printf("%s %.0f images/s %.2f ms/batch%s\n", data::to_string(format).c_str(), rate,
              1e3 * static_cast<double>(batch) / rate, colour ? " (crop-flip)" : "");
  return 0;
}
