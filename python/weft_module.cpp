// The extension weft._weft: weft::nn::LayerParallel and weft::nn::Recurrent for Python
// (python/weft/__init__.py wraps them in torch.nn.Modules). The Trainer is bound in
// trainer_module.cpp, the LibTorch-free options and statistics in options_module.cpp; Python
// layers, networks of Python factories and the agreement of collective calls (every rank
// raises the same exception, or none does) in python_layers.hpp.
//
// Step, open and close layers come from Python factories as TorchScript modules (run through
// their torch::jit::Module, without the GIL) or as plain torch.nn.Modules (called under the
// GIL). Either way the C++ side registers the module's own parameter and buffer tensors, so
// parameters seen from Python are the tensors weft updates and whose .grad autograd fills.
#include <mpi4py/mpi4py.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/module_python.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/nn/modules/linear.h>
#include <torch/script.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "python_layers.hpp"
#include "weft/nn/layer_parallel.hpp"
#include "weft/nn/recurrent.hpp"
#include "weft/util/error.hpp"
#include "weft/util/memory.hpp"
#include "weft/util/trace.hpp"

namespace py = pybind11;
using torch::Tensor;

namespace weft::python {
namespace {

class PyLayerParallel {
 public:
  /// `stages`: None, or a list of (steps, t_final, step factory, transition factory or None);
  /// `data_comm`: None, or the replicas' mpi4py communicator (data x layer parallelism).
  PyLayerParallel(const py::object& comm, std::int64_t steps, double t_final, py::object step,
                  py::object open, py::object close, const nn::LayerParallelOptions& options,
                  const py::object& stages, const py::object& data_comm)
      : agreement_(communicator_of(comm)) {
    const MPI_Comm parent = communicator_of(comm);
    const MPI_Comm data = data_comm.is_none() ? MPI_COMM_NULL : communicator_of(data_comm);
    const nn::Network net = python_network(steps, t_final, std::move(step), std::move(open),
                                           std::move(close), stages, agreement_.failures());
    collective([&] { model_ = nn::LayerParallel(parent, data, net, options); });
  }
  PyLayerParallel(const PyLayerParallel&) = delete;
  PyLayerParallel& operator=(const PyLayerParallel&) = delete;

  Tensor forward(const py::object& input) {
    std::string bad;
    const Tensor x = model_->owns_input() ? tensor_argument(input, "the input", bad) : Tensor();
    Tensor out;
    collective([&] { out = model_->forward(x); }, bad);
    return out;
  }

  Tensor loss(const py::object& output_object, py::object criterion) {
    std::string bad;
    const Tensor output = tensor_argument(output_object, "the output", bad);
    auto held = hold(std::move(criterion));
    Tensor value;
    collective(
        [&] {
          value = model_->loss(output, [&](const Tensor& logits) -> Tensor {
            py::gil_scoped_acquire gil;
            try {
              return (*held)(logits).cast<Tensor>();
            } catch (py::error_already_set& e) {
              throw BadData("the loss criterion raised on the output rank: " + python_message(e));
            } catch (const py::cast_error&) {
              throw BadData("the loss criterion must return a tensor");
            }
          });
        },
        bad);
    return value;
  }

  double broadcast_from_output(double value) {
    double out = 0;
    collective([&] { out = model_->broadcast_from_output(value); });
    return out;
  }

  /// (open, [layers], close, [h per layer, 0 for transitions]) on `root`, the modules the
  /// factories built with the gathered parameters copied in; None elsewhere.
  py::object gather_sequential(int root) {
    nn::SequentialNetwork full(nullptr);
    collective([&] { full = model_->gather_sequential(root); });
    if (full.is_empty()) return py::none();
    auto module_of = [](const nn::Layer& layer) -> py::object {
      if (layer.is_empty()) return py::none();
      const auto* python = dynamic_cast<const PythonLayer*>(layer.ptr().get());
      return python ? python->module() : py::object(py::none());
    };
    py::list steps, sizes;
    for (std::int64_t n = 0; n < full->steps(); ++n) {
      steps.append(module_of(full->step(n)));
      sizes.append(full->step_size(n));
    }
    return py::make_tuple(module_of(full->open()), steps, module_of(full->close()), sizes);
  }

  void set_options(const nn::LayerParallelOptions& options) {
    collective([&] { model_->set_options(options); });
  }

  void to(const py::object& dtype) {
    if (!THPDtype_Check(dtype.ptr())) throw py::type_error("to(): expected a torch.dtype");
    const auto type = reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type;
    collective([&] { model_->to(type); });
  }

  void train(bool on) {
    py::gil_scoped_release nogil;
    model_->train(on);
  }

  nn::LayerParallel& model() { return model_; }

 private:
  /// A tensor argument of a collective call: a tensor, or None (undefined); anything else is
  /// noted in `bad` (a TypeError on every rank once the call has run with an undefined tensor).
  static Tensor tensor_argument(const py::object& value, const char* what, std::string& bad) {
    if (value.is_none()) return Tensor();
    if (THPVariable_Check(value.ptr())) return THPVariable_Unpack(value.ptr());
    bad = std::string(what) + " is a " + std::string(py::str(value.get_type().attr("__name__"))) +
          ", not a torch.Tensor";
    return Tensor();
  }

  /// Runs `call` without the GIL on every rank, then agrees (python_layers.hpp).
  template <class F>
  void collective(F&& call, const std::string& bad_argument = std::string()) {
    agreement_.run(std::forward<F>(call), bad_argument);
  }

  Agreement agreement_;
  nn::LayerParallel model_{nullptr};
};

std::vector<std::pair<std::string, Tensor>> items(
    const torch::OrderedDict<std::string, Tensor>& d) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& item : d) out.emplace_back(item.key(), item.value());
  return out;
}

/// weft::nn::Recurrent for weft.Recurrent. The module agrees on every input error across the
/// ranks itself (every rank throws the same weft error), so calls run without the GIL and
/// errors translate directly.
class PyRecurrent {
 public:
  PyRecurrent(const py::object& comm, const std::string& cell, std::int64_t input_size,
              std::int64_t hidden_size, std::int64_t num_layers, bool output_sequence,
              const nn::LayerParallelOptions& solver, const std::string& coarse_input,
              double implicit_step, std::int64_t implicit_iterations) {
    if (cell != "gru" && cell != "lstm")
      throw InvalidOption("weft.Recurrent", "cell",
                          "'" + cell + "' is invalid; accepted: gru, lstm");
    if (coarse_input != "start" && coarse_input != "mean")
      throw InvalidOption("weft.Recurrent", "coarse_input",
                          "'" + coarse_input + "' is invalid; accepted: start, mean");
    const MPI_Comm parent = communicator_of(comm);
    nn::RecurrentOptions options(cell == "gru" ? nn::CellKind::GRU : nn::CellKind::LSTM, input_size,
                                 hidden_size);
    options.num_layers(num_layers)
        .output_sequence(output_sequence)
        .solver(solver)
        .coarse_input(coarse_input == "mean" ? nn::CoarseInput::Mean : nn::CoarseInput::Start)
        .implicit_step(implicit_step)
        .implicit_iterations(implicit_iterations);
    py::gil_scoped_release nogil;
    model_ = nn::Recurrent(parent, options);
  }

  /// (output or None, h_n, c_n or None), the same on every rank; `distributed`: forward_local.
  py::tuple forward(const Tensor& input, const py::object& h0, const py::object& c0,
                    bool distributed) {
    auto optional = [](const py::object& t) {
      return t.is_none() ? Tensor() : THPVariable_Unpack(t.ptr());
    };
    const Tensor h = optional(h0), c = optional(c0);
    nn::RecurrentOutput out;
    {
      py::gil_scoped_release nogil;
      out = distributed ? model_->forward_local(input, h, c) : model_->forward(input, h, c);
    }
    auto none_if_empty = [](const Tensor& t) -> py::object {
      return t.defined() && t.numel() > 0 ? py::cast(t) : py::object(py::none());
    };
    return py::make_tuple(none_if_empty(out.output), out.h_n, none_if_empty(out.c_n));
  }

  void set_solver(const nn::LayerParallelOptions& solver) {
    py::gil_scoped_release nogil;
    model_->set_solver(solver);
  }

  void to(const py::object& dtype) {
    if (!THPDtype_Check(dtype.ptr())) throw py::type_error("to(): expected a torch.dtype");
    const auto type = reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type;
    py::gil_scoped_release nogil;
    model_->to(type);
  }

  nn::Recurrent& model() { return model_; }

 private:
  nn::Recurrent model_{nullptr};
};

}  // namespace
}  // namespace weft::python

PYBIND11_MODULE(_weft, m) {
  using namespace weft::python;
  using weft::python::Kind;
  m.doc() = "weft's C++ layer-parallel module; use the Python package `weft`";
  if (import_mpi4py() < 0 || !import_mpi4py_api()) throw py::error_already_set();

  // weft.Error (RuntimeError) and its kinds; weft.StepError for failures inside a layer.
  PyObject* base = PyErr_NewException("weft.Error", PyExc_RuntimeError, nullptr);
  m.add_object("Error", py::handle(base));
  const std::pair<Kind, const char*> kinds[] = {{Kind::Step, "StepError"},
                                                {Kind::Invalid, "InvalidOption"},
                                                {Kind::BadData, "BadData"},
                                                {Kind::Divergence, "Divergence"},
                                                {Kind::Mpi, "MpiError"}};
  for (const auto& [kind, name] : kinds) {
    PyObject* type = PyErr_NewException(("weft." + std::string(name)).c_str(), base, nullptr);
    m.add_object(name, py::handle(type));
    exception_types[static_cast<int>(kind)] = type;
  }
  exception_types[static_cast<int>(Kind::Other)] = base;
  exception_types[static_cast<int>(Kind::Type)] = PyExc_TypeError;
  // Errors of local (non-collective) calls, such as option parsing.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const weft::InvalidOption& e) {
      PyErr_SetString(exception_types[static_cast<int>(Kind::Invalid)], e.what());
    } catch (const weft::BadData& e) {
      PyErr_SetString(exception_types[static_cast<int>(Kind::BadData)], e.what());
    } catch (const weft::Error& e) {
      PyErr_SetString(exception_types[static_cast<int>(Kind::Other)], e.what());
    }
  });

  bind_options(m);
  bind_training(m);
  m.def("layer_stream_seed", &weft::nn::layer_stream_seed, py::arg("seed"), py::arg("batch"),
        py::arg("layer"),
        "The seed of chain layer `layer`'s random stream (dropout) in training batch `batch` of a "
        "network with options seed `seed`: every evaluation of the layer in that batch, at every "
        "rank count, draws from the default generator seeded with it.");
  m.def("keep_freed_memory", &weft::keep_freed_memory,
        "Keep memory that training frees in the process (glibc: blocks up to 32 MiB from the heap, "
        "no trimming) instead of faulting it in again every batch, as the weft CLI does. "
        "Process-wide; returns what was done. WEFT_KEEP_FREED_MEMORY=0 or glibc's own MALLOC_* / "
        "GLIBC_TUNABLES settings take precedence.");

  // Timelines (weft/util/trace.hpp): the Python face of `weft train --trace`.
  m.def(
      "trace_start",
      [](std::int64_t first_batch, std::int64_t batches) {
        weft::trace::Settings s;
        s.first_batch = first_batch;
        s.batches = batches;
        weft::trace::start(s);
      },
      py::arg("first_batch") = 2, py::arg("batches") = 4,
      "Start recording a timeline of batches first_batch .. first_batch + batches - 1 on this "
      "rank (every rank calls it).");
  m.def("trace_batch_begin", &weft::trace::batch_begin, py::arg("index"),
        "Mark the start of training batch `index` (counted from 0 by the caller).");
  m.def("trace_batch_end", &weft::trace::batch_end, py::arg("index"),
        "Mark the end of training batch `index`.");
  m.def(
      "trace_write",
      [](const std::string& path, const py::object& comm) {
        const MPI_Comm c = communicator_of(comm);
        py::gil_scoped_release release;
        weft::trace::write(path, c, "\"source\": \"python\"");
      },
      py::arg("path"), py::arg("comm"),
      "Collective over comm: write every rank's timeline to `path` (Chrome trace-event JSON, "
      "rank 0 writes) and stop recording.");
  m.def("trace_stop", &weft::trace::stop, "Stop recording and discard the timeline.");
  // A phase of a batch ("forward", "backward", "optimizer"): `with weft.trace_phase(name):`.
  struct TracePhase {
    const char* name = nullptr;
    std::unique_ptr<weft::trace::Span> span;
  };
  py::class_<TracePhase>(m, "trace_phase",
                         "Marks a phase of a traced batch: with weft.trace_phase('forward'): ...")
      .def(py::init([](const std::string& name) {
             TracePhase p;
             for (const char* known : {"forward", "backward", "optimizer"})
               if (name == known) p.name = known;
             if (!p.name)
               throw weft::InvalidOption("weft.trace_phase: '" + name +
                                         "' is not a phase; accepted: forward, backward, "
                                         "optimizer");
             return p;
           }),
           py::arg("name"))
      .def("__enter__",
           [](TracePhase& p) {
             p.span =
                 std::make_unique<weft::trace::Span>(p.name, "train", weft::trace::Kind::Phase);
             return &p;
           })
      .def("__exit__", [](TracePhase& p, const py::args&) {
        p.span.reset();
        return false;
      });

  py::class_<PyLayerParallel>(m, "LayerParallelCore",
                              "weft::nn::LayerParallel; use weft.LayerParallel")
      .def(py::init<const py::object&, std::int64_t, double, py::object, py::object, py::object,
                    const weft::nn::LayerParallelOptions&, const py::object&, const py::object&>(),
           py::arg("comm"), py::arg("steps"), py::arg("t_final"), py::arg("step"), py::arg("open"),
           py::arg("close"), py::arg("options"), py::arg("stages") = py::none(),
           py::arg("data_comm") = py::none())
      .def("forward", &PyLayerParallel::forward)
      .def("loss", &PyLayerParallel::loss)
      .def("broadcast_from_output", &PyLayerParallel::broadcast_from_output)
      .def("gather_sequential", &PyLayerParallel::gather_sequential, py::arg("root") = 0)
      .def("set_options", &PyLayerParallel::set_options)
      .def("options", [](PyLayerParallel& s) { return s.model()->options(); })
      .def("statistics",
           [](PyLayerParallel& s) { return statistics_dict(s.model()->statistics()); })
      .def("named_parameters",
           [](PyLayerParallel& s) { return items(s.model()->named_parameters()); })
      .def("named_buffers", [](PyLayerParallel& s) { return items(s.model()->named_buffers()); })
      .def("train", &PyLayerParallel::train)
      .def("to", &PyLayerParallel::to)
      .def_property_readonly("rank", [](PyLayerParallel& s) { return s.model()->rank(); })
      .def_property_readonly("ranks", [](PyLayerParallel& s) { return s.model()->ranks(); })
      .def_property_readonly("steps", [](PyLayerParallel& s) { return s.model()->steps(); })
      .def_property_readonly("step_size", [](PyLayerParallel& s) { return s.model()->step_size(); })
      .def_property_readonly("owns_input",
                             [](PyLayerParallel& s) { return s.model()->owns_input(); })
      .def_property_readonly("owns_output",
                             [](PyLayerParallel& s) { return s.model()->owns_output(); })
      .def_property_readonly("first_layer",
                             [](PyLayerParallel& s) { return s.model()->first_layer(); })
      .def_property_readonly("end_layer", [](PyLayerParallel& s) { return s.model()->end_layer(); })
      .def_property(
          "batch_index", [](PyLayerParallel& s) { return s.model()->batch_index(); },
          [](PyLayerParallel& s, std::int64_t b) { s.model()->set_batch_index(b); })
      .def_property_readonly("ghost_layers",
                             [](PyLayerParallel& s) { return s.model()->ghost_layers(); });

  py::class_<PyRecurrent>(m, "RecurrentCore", "weft::nn::Recurrent; use weft.Recurrent")
      .def(py::init<const py::object&, const std::string&, std::int64_t, std::int64_t, std::int64_t,
                    bool, const weft::nn::LayerParallelOptions&, const std::string&, double,
                    std::int64_t>(),
           py::arg("comm"), py::arg("cell"), py::arg("input_size"), py::arg("hidden_size"),
           py::arg("num_layers"), py::arg("output_sequence"), py::arg("options"),
           py::arg("coarse_input") = "start", py::arg("implicit_step") = 0.0,
           py::arg("implicit_iterations") = 3)
      .def("forward", &PyRecurrent::forward, py::arg("input"), py::arg("h0") = py::none(),
           py::arg("c0") = py::none(), py::arg("distributed") = false)
      .def("local_steps",
           [](PyRecurrent& s, std::int64_t length) { return s.model()->local_steps(length); })
      .def("set_options", &PyRecurrent::set_solver)
      .def("options", [](PyRecurrent& s) { return s.model()->options().solver(); })
      .def("named_parameters", [](PyRecurrent& s) { return items(s.model()->named_parameters()); })
      .def("to", &PyRecurrent::to)
      .def_property_readonly("rank", [](PyRecurrent& s) { return s.model()->rank(); })
      .def_property_readonly("ranks", [](PyRecurrent& s) { return s.model()->ranks(); });
}
