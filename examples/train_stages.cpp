// The stages network (batch norm, three resolutions) trained layer-parallel on part of
// Fashion-MNIST by the library's Trainer, with an observer of our own that prints one line per
// epoch. It exits non-zero unless the test accuracy beats chance by far, so it doubles as a test.
//
//   mpirun -np 2 ./weft_example_train [fashion-mnist folder]
#include <cstdio>
#include <memory>
#include <string>

#include "weft/data/idx.hpp"
#include "weft/train/trainer.hpp"
#include "weft/util/mpi.hpp"

namespace train = weft::train;

class EpochLine : public train::Observer {
 public:
  void epoch_done(const train::EpochDone& e) override {
    const train::EpochMetrics& m = e.metrics;
    if (e.rank == 0)
      std::printf("epoch %d: train loss %.4f, test accuracy %.4f, %.1f ms per batch\n", m.epoch,
                  m.train_loss, m.test_accuracy, m.batch_ms);
    accuracy = m.test_accuracy;
  }
  double accuracy = 0;
};

int main(int argc, char** argv) {
  weft::mpi::Environment env(&argc, &argv);
  try {
    const std::string dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
    const auto train_set = weft::data::load_mnist_split(dir, weft::data::Split::Train, 2000);
    const auto test_set = weft::data::load_mnist_split(dir, weft::data::Split::Test, 500);
    const train::Normalization norm = train::measure_normalization(train_set);

    train::TrainerOptions options;
    options.model.kind = "stages";  // 3 stages of 2 residual steps at 8, 16, 32 channels
    options.epochs = 2;
    options.lr = 3e-3;
    options.lr_schedule = "cosine";
    // 2 levels, coarsening 2, two forward iterations (converged for these 8 layers, so the
    // network trains with its own forward) and one adjoint iteration
    options.parallel = weft::nn::LayerParallelOptions::multilevel(2, 2, 2, 1);
    train::Trainer trainer(options, train::TensorSource::from_images(train_set, norm),
                           train::TensorSource::from_images(test_set, norm), MPI_COMM_WORLD);
    auto line = std::make_shared<EpochLine>();
    trainer.add_observer(line);
    trainer.fit();
    return line->accuracy > 0.5 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft_example_train: %s\n", e.what());
    return 1;
  }
}
