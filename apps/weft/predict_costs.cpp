// `weft predict`: the costs of the model's own layers on this process (the only LibTorch file
// of `predict`). Each figure is the median of `repeats` timings after one warm-up, at the
// training batch size, in training mode, on the states the network actually produces.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "network_factory.hpp"
#include "predict.hpp"
#include "weft/util/error.hpp"

namespace weft::cli {
namespace {

using torch::Tensor;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Median seconds of `body` over `repeats` runs after a warm-up; `setup` runs untimed first.
/// Figures that take long (a deep network's serial batch) stop after a few seconds of timings.
double median_seconds(int repeats, const std::function<void()>& setup,
                      const std::function<void()>& body) {
  constexpr double kBudget = 3.0;
  std::vector<double> t;
  const double start = now();
  for (int k = 0; k <= repeats; ++k) {
    setup();
    const double t0 = now();
    body();
    if (k > 0) t.push_back(now() - t0);
    if (k > 0 && now() - start > kBudget) break;
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
double median_seconds(int repeats, const std::function<void()>& body) {
  return median_seconds(
      repeats, [] {}, body);
}

double count_parameters(const torch::nn::Module& m) {
  double n = 0;
  for (const Tensor& p : m.parameters()) n += static_cast<double>(p.numel());
  return n;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainConfig& c,
                                                        std::vector<Tensor> params) {
  if (c.optimizer == "sgd")
    return std::make_unique<torch::optim::SGD>(params,
                                               torch::optim::SGDOptions(c.lr).momentum(c.momentum));
  return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(c.lr));
}

MeasuredCosts measure(const TrainConfig& c, int repeats) {
  MeasuredCosts m;
  m.threads = c.threads > 0 ? c.threads : 1;  // one core per rank unless --threads says
  torch::set_num_threads(m.threads);
  torch::manual_seed(static_cast<std::uint64_t>(c.model.seed));
  std::vector<std::int64_t> shape = training_image_shape(c);
  shape[0] = c.batch;
  nn::SequentialNetwork net(make_training_network(c.model, shape), c.parallel.seed());
  net->train();
  const std::int64_t N = net->steps();
  m.layers = N;
  const Tensor images = torch::randn(shape);
  const Tensor labels = torch::randint(0, 10, {c.batch}, torch::kInt64);

  // Each stage's layers share one structure: measure the first residual layer of each stage and
  // every transition, and give the others their stage's figures.
  std::vector<std::int64_t> representative(static_cast<size_t>(N));
  for (std::int64_t n = 0; n < N; ++n) {
    const bool first_of_stage = n == 0 || net->is_transition(n - 1);
    representative[static_cast<size_t>(n)] =
        net->is_transition(n) || first_of_stage ? n : representative[static_cast<size_t>(n - 1)];
  }

  // The states the chain produces.
  std::vector<Tensor> x;
  {
    torch::NoGradGuard no_grad;
    Tensor z = net->open().is_empty() ? images : net->open().forward(images);
    x.push_back(z);
    for (std::int64_t n = 0; n < N; ++n) {
      const Tensor y = net->step(n).forward(z);
      z = net->is_transition(n) ? y : z + net->step_size(n) * y;
      x.push_back(z);
    }
  }
  for (const Tensor& s : x)
    m.state_bytes.push_back(static_cast<std::size_t>(s.numel()) * s.element_size());
  for (const Tensor& s : x) {
    Tensor y = s.clone();
    m.axpy.push_back(median_seconds(repeats, [&] { y.add_(s, 0.5); }));
  }

  m.transition.resize(static_cast<size_t>(N));
  m.step_size.resize(static_cast<size_t>(N));
  for (auto* v : {&m.forward, &m.forward_record, &m.adjoint_reuse, &m.adjoint_final,
                  &m.adjoint_build, &m.parameters})
    v->assign(static_cast<size_t>(N), 0.0);
  for (std::int64_t n = 0; n < N; ++n) {
    const auto k = static_cast<size_t>(n);
    const bool tr = net->is_transition(n);
    m.transition[k] = tr;
    m.step_size[k] = tr ? 0.0 : net->step_size(n);
    m.parameters[k] = count_parameters(net->step(n).module());
    const auto r = static_cast<size_t>(representative[k]);
    if (r != k) {
      m.forward[k] = m.forward[r];
      m.forward_record[k] = m.forward_record[r];
      m.adjoint_reuse[k] = m.adjoint_reuse[r];
      m.adjoint_final[k] = m.adjoint_final[r];
      m.adjoint_build[k] = m.adjoint_build[r];
      continue;
    }
    nn::Layer& layer = net->step(n);
    const Tensor& xn = x[k];
    const double h = m.step_size[k];
    const Tensor lambda = torch::randn_like(x[k + 1]);
    auto apply = [&](const Tensor& in, const Tensor& y) {
      torch::NoGradGuard no_grad;
      return tr ? y : torch::add(in, y, h);
    };
    m.forward[k] = median_seconds(repeats, [&] {
      torch::NoGradGuard no_grad;
      apply(xn, layer.forward(xn));
    });
    Tensor leaf, y;
    auto record = [&] {
      torch::AutoGradMode on(true);
      leaf = xn.detach().requires_grad_(true);
      y = layer.forward(leaf);
    };
    m.forward_record[k] = median_seconds(repeats, [&] {
      record();
      apply(xn, y.detach());
    });
    auto vjp = [&](bool with_params, bool retain) {
      std::vector<Tensor> inputs{leaf};
      if (with_params)
        for (const Tensor& p : layer.module().parameters()) inputs.push_back(p);
      const auto g = torch::autograd::grad({y}, inputs, {lambda}, retain, false, true);
      apply(lambda, g[0]);
    };
    record();
    m.adjoint_reuse[k] = median_seconds(repeats, [&] { vjp(false, true); });
    m.adjoint_final[k] = median_seconds(repeats, record, [&] { vjp(true, false); });
    m.adjoint_build[k] = median_seconds(repeats, [&] {
      record();
      vjp(false, false);
    });
  }

  // Open, close and loss on their ranks.
  if (!net->open().is_empty()) {
    m.open_parameters = count_parameters(net->open().module());
    Tensor out;
    m.open_forward = median_seconds(repeats, [&] { out = net->open().forward(images); });
    const Tensor lambda0 = torch::randn_like(x.front());
    if (out.requires_grad())  // an open layer without parameters (--open copy) has no backward
      m.open_backward = median_seconds(
          repeats, [&] { out = net->open().forward(images); }, [&] { out.backward(lambda0); });
  }
  m.open_close_parameters = m.open_parameters;
  m.close = median_seconds(repeats, [&] {
    const Tensor xN = x.back().detach().requires_grad_(true);
    const Tensor logits = net->close().is_empty() ? xN.flatten(1) : net->close().forward(xN);
    torch::nn::functional::cross_entropy(logits, labels).backward();
  });
  if (!net->close().is_empty()) m.open_close_parameters += count_parameters(net->close().module());
  for (const auto& b : net->buffers())
    if (b.defined()) m.has_buffers = true;

  // The optimizer over every parameter, and the plain LibTorch batch (`weft train --serial`).
  auto optimizer = make_optimizer(c, net->parameters());
  auto serial_step = [&] {
    optimizer->zero_grad();
    const Tensor logits = net->forward(images);
    torch::nn::functional::cross_entropy(logits, labels).backward();
  };
  m.serial_batch = median_seconds(repeats, [&] {
    serial_step();
    optimizer->step();
  });
  serial_step();  // the gradients the optimizer steps with; their values do not change its cost
  m.optimizer = median_seconds(repeats, [&] { optimizer->step(); });
  return m;
}

}  // namespace

MeasuredCosts measure_costs(const TrainConfig& c, int repeats) {
  try {
    return measure(c, repeats);
  } catch (const c10::Error& e) {  // LibTorch's message without its C++ backtrace
    throw BadData(std::string("measuring the model's costs: ") + e.what_without_backtrace());
  }
}

}  // namespace weft::cli
