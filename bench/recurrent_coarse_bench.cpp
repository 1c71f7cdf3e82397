// MGRIT convergence of weft::nn::Recurrent by coarse-step choice (docs/training.md §7): for a
// GRU on Fashion-MNIST read as rows (T = 28) or pixels (T = 784), the forward and adjoint
// residual after each iteration and the mean convergence factor, for the coarse inputs Start and
// Mean and the implicit cell, at 2-3 levels and cf 2-4. One rank (the MGRIT iterates do not
// depend on the rank count). Random initialisation (torch's), optionally scaled (--scale) to
// mimic the larger weights of a trained network. Prints one line per case.
//
//   build/bench/recurrent_coarse_bench --hidden 32 --batch 16 --iterations 5 --scale 1
#include <mpi.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "weft/data/idx.hpp"
#include "weft/nn/recurrent.hpp"
#include "weft/util/mpi.hpp"

namespace {

namespace nn = weft::nn;
namespace mgrit = weft::mgrit;

struct Variant {
  const char* name;
  nn::CoarseInput coarse;
  double implicit_step;
};

/// "r1 r2 ... | factor": residuals per iteration and their geometric mean ratio.
std::string describe(const mgrit::Result& result) {
  std::string text;
  std::vector<double> r;
  for (const auto& v : result.residuals)
    if (v) {
      r.push_back(*v);
      char buffer[32];
      std::snprintf(buffer, sizeof buffer, "%.2e ", *v);
      text += buffer;
    }
  double factor = NAN;
  if (r.size() >= 2 && r.front() > 0)
    factor = std::pow(r.back() / r.front(), 1.0 / static_cast<double>(r.size() - 1));
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "| %.3f", factor);
  return text + buffer;
}

}  // namespace

int main(int argc, char** argv) {
  weft::mpi::Environment env(&argc, &argv);
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::int64_t hidden = 32, batch = 16;
  int iterations = 5;
  double scale = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--data")
      data = v;
    else if (k == "--hidden")
      hidden = std::atoll(v.c_str());
    else if (k == "--batch")
      batch = std::atoll(v.c_str());
    else if (k == "--iterations")
      iterations = std::atoi(v.c_str());
    else if (k == "--scale")
      scale = std::atof(v.c_str());
  }
  torch::set_num_threads(1);
  const auto set = weft::data::load_mnist_split(data, weft::data::Split::Train, batch);
  std::vector<float> pixels;
  for (std::uint8_t p : set.pixels)
    pixels.push_back((static_cast<float>(p) / 255.0f - weft::data::kFashionMnistMean) /
                     weft::data::kFashionMnistStd);
  const torch::Tensor images =
      torch::from_blob(pixels.data(), {batch, 28, 28}, torch::kFloat32).to(torch::kFloat64);

  const Variant variants[] = {{"start", nn::CoarseInput::Start, 0},
                              {"mean", nn::CoarseInput::Mean, 0},
                              {"implicit1-start", nn::CoarseInput::Start, 1.0},
                              {"implicit1-mean", nn::CoarseInput::Mean, 1.0}};
  std::printf("# hidden %lld batch %lld scale %g; residuals after each iteration | factor\n",
              static_cast<long long>(hidden), static_cast<long long>(batch), scale);
  for (const char* sequence : {"rows", "pixels"}) {
    const bool rows = std::string(sequence) == "rows";
    // [T, B, F]: rows (28 steps of 28 pixels) or pixels (784 steps of 1)
    const torch::Tensor x = rows ? images.permute({1, 0, 2}).contiguous()
                                 : images.reshape({batch, 784, 1}).permute({1, 0, 2}).contiguous();
    for (const Variant& v : variants)
      for (int levels : {2, 3})
        for (int cf : {2, 4}) {
          torch::manual_seed(11);
          auto o =
              mgrit::Options().max_levels(levels).cfactor(cf).max_iterations(iterations).abs_tol(0);
          nn::Recurrent rnn(MPI_COMM_WORLD,
                            nn::RecurrentOptions(nn::CellKind::GRU, x.size(2), hidden)
                                .coarse_input(v.coarse)
                                .implicit_step(v.implicit_step)
                                .solver(nn::LayerParallelOptions().forward(o).backward(o)));
          rnn->to(torch::kFloat64);
          {
            torch::NoGradGuard no_grad;
            for (auto& p : rnn->parameters()) p.mul_(scale);
          }
          const torch::Tensor w = torch::randn({1, batch, hidden}, torch::kFloat64);
          (rnn->forward(x).h_n * w).sum().backward();
          const auto& s = rnn->statistics();
          std::printf("%-6s %-16s L%d cf%d  forward %s  adjoint %s\n", sequence, v.name, levels, cf,
                      describe(s.forward.result).c_str(), describe(s.backward.result).c_str());
          std::fflush(stdout);
        }
  }
  return 0;
}
