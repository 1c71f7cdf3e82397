// weft.Trainer: the library's Trainer (weft/train/trainer.hpp) for Python, with observers
// written in Python, the model zoo's configurations or a network of Python layer factories;
// and the IDX reader of weft::data for weft.data.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "bindings.hpp"
#include "python_layers.hpp"
#include "weft/data/folder.hpp"
#include "weft/data/idx.hpp"
#include "weft/train/checkpoint_info.hpp"
#include "weft/train/trainer.hpp"

namespace weft::python {
namespace {

using torch::Tensor;

py::dict evaluation_dict(const train::Evaluation& e) {
  py::dict d;
  d["loss"] = e.loss;
  d["accuracy"] = e.accuracy;
  py::list rows;
  for (int r = 0; r < e.classes; ++r) {
    py::list row;
    for (int c = 0; c < e.classes; ++c)
      row.append(e.confusion.empty() ? 0 : e.confusion[static_cast<size_t>(r * e.classes + c)]);
    rows.append(row);
  }
  d["confusion"] = rows;
  return d;
}

/// A Python object's methods named like the events, each called (under the GIL) with a dict of
/// the event's figures when the object has it. What one raises ends the run on every rank;
/// from batch_done (which runs on the hot path, where the ranks cannot agree) at the end of the
/// epoch.
class PythonObserver : public train::Observer {
 public:
  explicit PythonObserver(py::object target) : target_(hold(std::move(target))) {}

  void run_started(const train::RunStarted& e) override {
    call("run_started", [&](py::dict& d) {
      d["rank"] = e.rank, d["start_epoch"] = e.start_epoch, d["epochs"] = e.epochs;
      d["train_examples"] = e.train_examples, d["test_examples"] = e.test_examples;
      d["batches_per_epoch"] = e.batches_per_epoch, d["ranks"] = e.ranks;
      d["layer_ranks"] = e.layer_ranks, d["replicas"] = e.replicas, d["serial"] = e.serial;
      d["torch_threads"] = e.torch_threads;
      d["layers_per_rank"] = e.layers_per_rank;
      d["cost_per_rank"] = e.cost_per_rank;
    });
  }
  void epoch_started(const train::EpochStarted& e) override {
    call("epoch_started", [&](py::dict& d) {
      d["rank"] = e.rank, d["epoch"] = e.epoch, d["examples"] = e.examples;
    });
  }
  void batch_done(const train::BatchDone& e) override {
    try {
      call("batch_done", [&](py::dict& d) {
        d["rank"] = e.rank, d["epoch"] = e.epoch, d["batch"] = e.batch;
        d["global_batch"] = e.global_batch, d["seen"] = e.seen, d["examples"] = e.examples;
        d["loss"] = e.loss, d["correct"] = e.correct, d["mean_loss"] = e.mean_loss;
        d["mean_accuracy"] = e.mean_accuracy, d["learning_rate"] = e.learning_rate;
      });
    } catch (const Error& error) {
      if (pending_.empty()) pending_ = error.what();
    }
  }
  void evaluation_done(const train::EvaluationDone& e) override {
    rethrow_pending();
    call("evaluation_done", [&](py::dict& d) {
      d = evaluation_dict(e.evaluation);
      d["rank"] = e.rank, d["epoch"] = e.epoch;
    });
  }
  void epoch_done(const train::EpochDone& e) override {
    rethrow_pending();
    call("epoch_done", [&](py::dict& d) {
      d = py::module_::import("json").attr("loads")(train::to_json(e.metrics));
      d["rank"] = e.rank;
    });
  }
  void checkpoint_written(const train::CheckpointWritten& e) override {
    call("checkpoint_written",
         [&](py::dict& d) { d["rank"] = e.rank, d["epoch"] = e.epoch, d["dir"] = e.dir; });
  }
  void trace_written(const train::TraceWritten& e) override {
    call("trace_written", [&](py::dict& d) { d["rank"] = e.rank, d["path"] = e.path; });
  }
  void depth_refined(const train::DepthRefined& e) override {
    call("depth_refined", [&](py::dict& d) {
      d["rank"] = e.rank, d["epoch"] = e.epoch, d["level"] = e.level;
      d["from_steps"] = e.from_steps, d["to_steps"] = e.to_steps;
    });
  }
  void divergence(const train::DivergenceFound& e) override {
    try {
      call("divergence", [&](py::dict& d) {
        d["rank"] = e.rank, d["epoch"] = e.epoch, d["batch"] = e.batch, d["loss"] = e.loss;
      });
    } catch (const Error&) {  // the divergence itself is what the run ends with
    }
  }

 private:
  template <class Fill>
  void call(const char* name, Fill&& fill) {
    std::string failure;
    {
      py::gil_scoped_acquire gil;
      try {
        if (!py::hasattr(*target_, name)) return;
        py::dict event;
        fill(event);
        target_->attr(name)(event);
      } catch (py::error_already_set& e) {
        failure = "the observer's " + std::string(name) + " raised " + python_message(e);
      }
    }
    if (!failure.empty()) throw Error(failure);
  }
  void rethrow_pending() {
    if (!pending_.empty()) throw Error(std::exchange(pending_, std::string()));
  }

  std::shared_ptr<py::object> target_;
  std::string pending_;
};

std::shared_ptr<train::TensorSource> source(const Tensor& inputs, const Tensor& labels,
                                            const train::Normalization& norm) {
  return std::make_shared<train::TensorSource>(inputs, labels, norm);
}

/// `network`: None, or (steps, t_final, step, open, close, stages) as weft.LayerParallel takes.
bool has_network(const py::object& network) {
  return !network.is_none();
}

nn::Network network_of(const py::object& network, const std::shared_ptr<Failures>& failures) {
  const auto t = network.cast<py::tuple>();
  if (t.size() != 6)
    throw py::type_error(
        "weft.Trainer: network must be (steps, t_final, step, open, close, stages)");
  return python_network(t[0].cast<std::int64_t>(), t[1].cast<double>(), t[2], t[3], t[4], t[5],
                        failures);
}

class PyTrainer {
 public:
  PyTrainer(const py::object& comm, const train::TrainerOptions& options, const Tensor& train_x,
            const Tensor& train_y, const Tensor& test_x, const Tensor& test_y,
            std::pair<double, double> normalization, const py::object& network)
      : agreement_(communicator_of(comm, "weft.Trainer")) {
    const MPI_Comm c = communicator_of(comm, "weft.Trainer");
    train::Normalization norm;
    norm.mean = normalization.first;
    norm.std = normalization.second;
    std::optional<nn::Network> net;
    if (has_network(network)) net = network_of(network, agreement_.failures());
    agreement_.run([&] {
      auto train_data = source(train_x, train_y, norm);
      auto test_data = source(test_x, test_y, norm);
      trainer_ = net ? std::make_unique<train::Trainer>(options, *net, train_data, test_data, c)
                     : std::make_unique<train::Trainer>(options, train_data, test_data, c);
    });
  }

  void add_observer(py::object observer) {
    trainer_->add_observer(std::make_shared<PythonObserver>(std::move(observer)));
  }
  void fit() {
    agreement_.run([&] { trainer_->fit(); });
  }
  py::dict evaluate(const Tensor& inputs, const Tensor& labels) {
    train::Evaluation e;
    agreement_.run([&] { e = trainer_->evaluate(train::TensorSource(inputs, labels)); });
    return evaluation_dict(e);
  }
  /// (name, tensor) of this rank's part of the model (empty where the rank has no part).
  std::vector<std::pair<std::string, Tensor>> named_parameters() {
    std::vector<std::pair<std::string, Tensor>> out;
    if (torch::nn::Module* m = trainer_->module())
      for (const auto& item : m->named_parameters()) out.emplace_back(item.key(), item.value());
    return out;
  }
  const train::TrainerOptions& options() const { return trainer_->options(); }
  int start_epoch() const { return trainer_->start_epoch(); }
  bool active() const { return trainer_->active(); }

 private:
  Agreement agreement_;
  std::unique_ptr<train::Trainer> trainer_;
};

/// (images [count, channels, (depth,) rows, cols] uint8, labels [count] int64) of a split of a
/// data folder in any layout weft reads (weft/data/folder.hpp: IDX images or volumes, CIFAR,
/// image files fitted to 64x64).
py::tuple read_split(const std::string& folder, const std::string& split, std::int64_t limit) {
  if (split != "train" && split != "test")
    throw InvalidOption("weft.data.load_split", "split",
                        "'" + split + "' is invalid; accepted: train, test");
  const auto which = split == "train" ? data::Split::Train : data::Split::Test;
  data::FolderOptions options;
  options.limit = limit;
  const data::ImageSet set = data::read_folder(folder, which, options);
  std::vector<std::int64_t> shape{set.count, set.channels};
  if (set.spatial_dims == 3) shape.push_back(set.depth);
  shape.insert(shape.end(), {set.rows, set.cols});
  Tensor images = torch::empty(shape, torch::kUInt8);
  std::memcpy(images.data_ptr(), set.pixels.data(), set.pixels.size());
  const std::vector<std::int64_t> labels = data::labels_as_int64(set);
  Tensor label_tensor = torch::empty({set.count}, torch::kInt64);
  std::memcpy(label_tensor.data_ptr(), labels.data(), labels.size() * sizeof(std::int64_t));
  return py::make_tuple(images, label_tensor);
}

/// (mean, std) of uint8 pixels scaled to [0, 1], as `weft train` measures them.
std::pair<double, double> pixel_normalization(const Tensor& images) {
  if (images.scalar_type() != torch::kUInt8)
    throw InvalidOption("weft.data.normalization", "images",
                        "are not uint8; accepted: the pixels as load_split returns them");
  const Tensor flat = images.contiguous().reshape({-1});
  data::ImageSet set;
  const auto* begin = flat.data_ptr<std::uint8_t>();
  set.pixels.assign(begin, begin + flat.numel());
  const train::Normalization n = train::measure_normalization(set);
  return {n.mean, n.std};
}

py::dict checkpoint_info(const std::string& dir) {
  const train::CheckpointInfo info = train::read_checkpoint_info(dir);
  py::dict d;
  d["model"] = info.model;
  d["epoch"] = info.epoch;
  d["normalization"] = py::make_tuple(info.normalization.mean, info.normalization.std);
  d["optimizer"] = info.optimizer;
  d["rows"] = info.example.rows;
  d["cols"] = info.example.cols;
  d["growth"] = info.growth;
  d["growth_level"] = info.growth_level;
  d["mgopt"] = info.mgopt.active() ? py::cast(info.mgopt) : py::none();
  return d;
}

}  // namespace

void bind_training(py::module_& m) {
  using train::ModelConfig;
  using train::TrainerOptions;
  py::class_<ModelConfig>(m, "ModelConfig",
                          "The model a Trainer builds (weft::train::ModelConfig): kind resnet, "
                          "stages, conv3d, gru or lstm, and the fields of that kind")
      .def(py::init<>())
      .def_readwrite("kind", &ModelConfig::kind)
      .def_readwrite("channels", &ModelConfig::channels)
      .def_readwrite("steps", &ModelConfig::steps)
      .def_readwrite("open", &ModelConfig::open)
      .def_readwrite("stage_channels", &ModelConfig::stage_channels)
      .def_readwrite("stage_steps", &ModelConfig::stage_steps)
      .def_readwrite("batchnorm", &ModelConfig::batchnorm)
      .def_readwrite("dropout", &ModelConfig::dropout)
      .def_readwrite("stem", &ModelConfig::stem)
      .def_readwrite("hidden", &ModelConfig::hidden)
      .def_readwrite("rnn_layers", &ModelConfig::rnn_layers)
      .def_readwrite("sequence", &ModelConfig::sequence)
      .def_readwrite("coarse_input", &ModelConfig::coarse_input)
      .def_readwrite("implicit_step", &ModelConfig::implicit_step)
      .def_readwrite("implicit_iterations", &ModelConfig::implicit_iterations)
      .def_readwrite("t_final", &ModelConfig::t_final)
      .def_readwrite("seed", &ModelConfig::seed)
      .def_readwrite("classes", &ModelConfig::classes)
      .def("describe", [](const ModelConfig& c, std::int64_t rows, std::int64_t cols) {
        return train::describe(c, rows, cols);
      });
  py::class_<train::DepthGrowth>(
      m, "DepthGrowth",
      "Nested iteration over depth (weft::train::DepthGrowth): factor r, refinements K, epochs "
      "at each shallower depth, interpolation 'constant' or 'linear'")
      .def(py::init<>())
      .def_readwrite("factor", &train::DepthGrowth::factor)
      .def_readwrite("refinements", &train::DepthGrowth::refinements)
      .def_readwrite("epochs", &train::DepthGrowth::epochs)
      .def_property(
          "interpolation",
          [](const train::DepthGrowth& g) { return nn::to_string(g.interpolation); },
          [](train::DepthGrowth& g, const std::string& name) {
            g.interpolation = nn::depth_interpolation_from(name, "weft.DepthGrowth");
          });
  py::class_<train::IterationControl>(
      m, "IterationControl",
      "MGRIT iterations chosen by the training (weft::train::IterationControl): forward and "
      "backward (which counts are automatic), min_iterations, max_iterations, "
      "gradient_tolerance, forward_tolerance, check_every, half_steps, diagnostics")
      .def(py::init<>())
      .def_readwrite("forward", &train::IterationControl::forward)
      .def_readwrite("backward", &train::IterationControl::backward)
      .def_readwrite("min_iterations", &train::IterationControl::min_iterations)
      .def_readwrite("max_iterations", &train::IterationControl::max_iterations)
      .def_readwrite("gradient_tolerance", &train::IterationControl::gradient_tolerance)
      .def_readwrite("forward_tolerance", &train::IterationControl::forward_tolerance)
      .def_readwrite("check_every", &train::IterationControl::check_every)
      .def_readwrite("half_steps", &train::IterationControl::half_steps)
      .def_readwrite("diagnostics", &train::IterationControl::diagnostics);
  py::class_<train::MGOpt>(
      m, "MGOpt",
      "MG/Opt over depth (weft::train::MGOpt): levels (0 off, 1 plain training), factor, pre, "
      "post and coarse optimizer steps, line_search halvings, restriction 'injection' or "
      "'averaging', interpolation 'constant' or 'linear'")
      .def(py::init<>())
      .def_readwrite("levels", &train::MGOpt::levels)
      .def_readwrite("factor", &train::MGOpt::factor)
      .def_readwrite("pre", &train::MGOpt::pre)
      .def_readwrite("post", &train::MGOpt::post)
      .def_readwrite("coarse", &train::MGOpt::coarse)
      .def_readwrite("line_search", &train::MGOpt::line_search)
      .def_property(
          "restriction", [](const train::MGOpt& g) { return nn::to_string(g.restriction); },
          [](train::MGOpt& g, const std::string& name) {
            g.restriction = nn::depth_restriction_from(name, "weft.MGOpt");
          })
      .def_property(
          "interpolation", [](const train::MGOpt& g) { return nn::to_string(g.interpolation); },
          [](train::MGOpt& g, const std::string& name) {
            g.interpolation = nn::depth_interpolation_from(name, "weft.MGOpt");
          });
  py::class_<TrainerOptions>(m, "TrainerOptions", "weft::train::TrainerOptions")
      .def(py::init<>())
      .def_readwrite("mgopt", &TrainerOptions::mgopt)
      .def_readwrite("iterations", &TrainerOptions::iterations)
      .def_readwrite("model", &TrainerOptions::model)
      .def_readwrite("growth", &TrainerOptions::growth)
      .def_readwrite("batch", &TrainerOptions::batch)
      .def_readwrite("epochs", &TrainerOptions::epochs)
      .def_readwrite("optimizer", &TrainerOptions::optimizer)
      .def_readwrite("lr", &TrainerOptions::lr)
      .def_readwrite("lr_schedule", &TrainerOptions::lr_schedule)
      .def_readwrite("momentum", &TrainerOptions::momentum)
      .def_readwrite("threads", &TrainerOptions::threads)
      .def_readwrite("serial", &TrainerOptions::serial)
      .def_readwrite("data_ranks", &TrainerOptions::data_ranks)
      .def_readwrite("balance_cost", &TrainerOptions::balance_cost)
      .def_readwrite("parallel", &TrainerOptions::parallel)
      .def_readwrite("eval_batch", &TrainerOptions::eval_batch)
      .def_property(
          "evaluation_forward",
          [](const TrainerOptions& o) {
            return std::string(train::to_string(o.evaluation_forward));
          },
          [](TrainerOptions& o, const std::string& name) {
            if (name == "exact")
              o.evaluation_forward = train::EvaluationForward::exact;
            else if (name == "solver")
              o.evaluation_forward = train::EvaluationForward::solver;
            else if (name == "both")
              o.evaluation_forward = train::EvaluationForward::both;
            else
              throw InvalidOption("weft.TrainerOptions", "evaluation_forward",
                                  "'" + name + "' is invalid; accepted: exact, solver, both");
          })
      .def_readwrite("checkpoint_dir", &TrainerOptions::checkpoint_dir)
      .def_readwrite("resume_dir", &TrainerOptions::resume_dir)
      .def_readwrite("trace_path", &TrainerOptions::trace_path)
      .def_readwrite("trace_batches", &TrainerOptions::trace_batches)
      .def_readwrite("trace_source", &TrainerOptions::trace_source);
  py::class_<PyTrainer>(m, "TrainerCore", "weft::train::Trainer; use weft.Trainer")
      .def(py::init<const py::object&, const TrainerOptions&, const Tensor&, const Tensor&,
                    const Tensor&, const Tensor&, std::pair<double, double>, const py::object&>(),
           py::arg("comm"), py::arg("options"), py::arg("train_inputs"), py::arg("train_labels"),
           py::arg("test_inputs"), py::arg("test_labels"), py::arg("normalization"),
           py::arg("network"))
      .def("add_observer", &PyTrainer::add_observer)
      .def("fit", &PyTrainer::fit)
      .def("evaluate", &PyTrainer::evaluate, py::arg("inputs"), py::arg("labels"))
      .def("named_parameters", &PyTrainer::named_parameters)
      .def("options", &PyTrainer::options)
      .def("start_epoch", &PyTrainer::start_epoch)
      .def("active", &PyTrainer::active);
  m.def("read_split", &read_split, py::arg("folder"), py::arg("split"), py::arg("limit") = -1);
  m.def("pixel_normalization", &pixel_normalization, py::arg("images"));
  m.def("checkpoint_info", &checkpoint_info, py::arg("dir"));
}

}  // namespace weft::python
