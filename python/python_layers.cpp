// Python layers as weft layers, networks of Python factories, the agreement of collective
// calls (python_layers.hpp).
#include "python_layers.hpp"

#include <mpi4py/mpi4py.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/module_python.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/nn/modules/linear.h>
#include <torch/script.h>

#include "weft/util/mpi.hpp"

namespace weft::python {

using torch::Tensor;

PyObject* exception_types[static_cast<int>(Kind::None)] = {};

[[noreturn]] void raise(Kind kind, const std::string& message) {
  PyErr_SetString(exception_types[static_cast<int>(kind)], message.c_str());
  throw py::error_already_set();
}

/// "Type: message" of a Python exception, without the traceback pybind11 appends.
std::string python_message(const py::error_already_set& e) {
  std::string text = e.what();
  const auto traceback = text.find("\n\nAt:\n");
  if (traceback != std::string::npos) text.erase(traceback);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

/// Releases a Python object under the GIL (its holder may die on a thread without it).
void release(py::object& object) {
  if (!object || !Py_IsInitialized()) {
    object.release();
    return;
  }
  py::gil_scoped_acquire gil;
  object = py::object();
}

std::shared_ptr<py::object> hold(py::object object) {
  return std::shared_ptr<py::object>(new py::object(std::move(object)), [](py::object* p) {
    release(*p);
    delete p;
  });
}

namespace {

/// A TorchScript module: forward through its torch::jit::Module, no GIL.
class ScriptLayer final : public PythonLayer {
 public:
  ScriptLayer(py::object module, torch::jit::Module script, std::string what,
              std::shared_ptr<Failures> failures)
      : PythonLayer(std::move(module), std::move(what), std::move(failures)),
        script_(std::move(script)) {
    register_tree(*this, script_);
  }
  Tensor forward(const Tensor& x) override {
    try {
      torch::jit::IValue y = script_.forward({x});
      if (!y.isTensor()) return failed(x, "forward returned " + y.tagKind() + ", not a tensor");
      return y.toTensor();
    } catch (const c10::Error& e) {
      return failed(x, e.what_without_backtrace());
    } catch (const std::exception& e) {
      return failed(x, e.what());
    }
  }
  void train(bool on) override {
    torch::nn::Module::train(on);
    script_.train(on);
  }
  void use_coarse_kernels(const KernelMap& map) override {
    for (torch::jit::Module sub : script_.modules()) {
      const auto type = sub.type()->name();
      const std::string name = type ? type->name() : "";
      if ((name != "Conv2d" && name != "Conv3d") || !sub.hasattr("weight")) continue;
      const Tensor w = sub.attr("weight").toTensor();
      Tensor c = map(w);
      if (c.is_same(w)) continue;
      swapped_.emplace_back(sub, w);
      sub.setattr("weight", std::move(c));
    }
  }
  void restore_kernels() override {
    for (auto& [sub, w] : swapped_) sub.setattr("weight", w);
    swapped_.clear();
  }

 private:
  std::vector<std::pair<torch::jit::Module, Tensor>> swapped_;
  static void register_tree(torch::nn::Module& into, const torch::jit::Module& from) {
    for (const auto& p : from.named_parameters(/*recurse=*/false))
      into.register_parameter(p.name, p.value, p.value.requires_grad());
    for (const auto& b : from.named_buffers(/*recurse=*/false))
      if (b.value.defined()) into.register_buffer(b.name, b.value);
    for (const auto& c : from.named_children()) {
      auto child = std::make_shared<torch::nn::Module>(c.name);
      register_tree(*child, c.value);
      into.register_module(c.name, child);
    }
  }
  torch::jit::Module script_;
};

/// A plain torch.nn.Module: forward under the GIL.
class EagerLayer final : public PythonLayer {
 public:
  EagerLayer(const py::object& module, std::string what, std::shared_ptr<Failures> failures)
      : PythonLayer(module, std::move(what), std::move(failures)) {
    register_tree(*this, module);
  }
  Tensor forward(const Tensor& x) override {
    py::gil_scoped_acquire gil;
    try {
      py::object y = module()(x);
      if (!THPVariable_Check(y.ptr()))
        return failed(x, "forward returned " + std::string(py::str(y.get_type().attr("__name__"))) +
                             ", not a tensor");
      return THPVariable_Unpack(y.ptr());
    } catch (py::error_already_set& e) {
      return failed(x, python_message(e));
    } catch (const std::exception& e) {
      return failed(x, e.what());
    }
  }
  void train(bool on) override {
    torch::nn::Module::train(on);
    py::gil_scoped_acquire gil;
    module().attr("train")(on);
  }
  // The kernel in the module's _parameters is replaced for the evaluation (what F.conv2d reads
  // through self.weight), as torch.func's functional calls do; the Parameter is put back after.
  void use_coarse_kernels(const KernelMap& map) override {
    py::gil_scoped_acquire gil;
    const py::module_ nn = py::module_::import("torch.nn");
    const py::object conv2d = nn.attr("Conv2d"), conv3d = nn.attr("Conv3d");
    for (py::handle sub : module().attr("modules")()) {
      if (!py::isinstance(sub, conv2d) && !py::isinstance(sub, conv3d)) continue;
      py::dict parameters = sub.attr("_parameters");
      if (!parameters.contains("weight")) continue;
      py::object w = parameters["weight"];
      if (!THPVariable_Check(w.ptr())) continue;
      const Tensor t = THPVariable_Unpack(w.ptr());
      Tensor c = map(t);
      if (c.is_same(t)) continue;
      parameters["weight"] = py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(c)));
      swapped_.emplace_back(std::move(parameters), std::move(w));
    }
  }
  void restore_kernels() override {
    py::gil_scoped_acquire gil;
    for (auto& [parameters, w] : swapped_) parameters["weight"] = w;
    swapped_.clear();
  }

 private:
  static void register_tree(torch::nn::Module& into, const py::object& from) {
    for (auto item : from.attr("named_parameters")(py::arg("recurse") = false)) {
      auto pair = item.cast<py::tuple>();
      const Tensor t = pair[1].cast<Tensor>();
      into.register_parameter(pair[0].cast<std::string>(), t, t.requires_grad());
    }
    for (auto item : from.attr("named_buffers")(py::arg("recurse") = false)) {
      auto pair = item.cast<py::tuple>();
      if (!pair[1].is_none())
        into.register_buffer(pair[0].cast<std::string>(), pair[1].cast<Tensor>());
    }
    for (auto item : from.attr("named_children")()) {
      auto pair = item.cast<py::tuple>();
      const auto name = pair[0].cast<std::string>();
      auto child = std::make_shared<torch::nn::Module>(name);
      register_tree(*child, py::reinterpret_borrow<py::object>(pair[1]));
      into.register_module(name, child);
    }
  }
  std::vector<std::pair<py::dict, py::object>> swapped_;  ///< _parameters, its Parameter
};

/// What a factory returned, as a weft layer; called with the GIL held.
nn::Layer to_layer(const py::object& module, const std::string& what,
                   const std::shared_ptr<Failures>& failures) {
  if (auto script = torch::jit::as_module(module))
    return nn::Layer(std::make_shared<ScriptLayer>(module, *script, what, failures));
  static py::handle module_type = py::module_::import("torch.nn").attr("Module");
  if (py::isinstance(module, module_type))
    return nn::Layer(std::make_shared<EagerLayer>(module, what, failures));
  throw InvalidOption("it returned a " + std::string(py::str(module.get_type().attr("__name__"))) +
                      ", not a torch.nn.Module or TorchScript module");
}

}  // namespace

/// A factory call from C++ (layer construction happens inside collective calls): failures are
/// recorded and an identity layer stands in until the call agrees.
nn::Layer build(const std::function<py::object()>& call, const std::string& what,
                const std::shared_ptr<Failures>& failures) {
  py::gil_scoped_acquire gil;
  try {
    return to_layer(call(), what, failures);
  } catch (py::error_already_set& e) {
    failures->record("the factory of the " + what, python_message(e));
  } catch (const std::exception& e) {
    failures->record("the factory of the " + what, e.what());
  }
  return nn::Layer(torch::nn::Identity());
}

nn::Network python_network(std::int64_t steps, double t_final, py::object step, py::object open,
                           py::object close, const py::object& stages,
                           const std::shared_ptr<Failures>& failures) {
  nn::Network net;
  net.steps = steps;
  net.t_final = t_final;
  if (!step.is_none()) {
    auto factory = hold(std::move(step));
    net.step = [factory, failures](std::int64_t n) {
      return build([&] { return (*factory)(n); }, "step layer " + std::to_string(n), failures);
    };
  }
  if (!stages.is_none()) {
    for (const py::handle item : stages) {
      const auto t = py::reinterpret_borrow<py::tuple>(item);
      nn::Stage st;
      st.steps = t[0].cast<std::int64_t>();
      st.t_final = t[1].cast<double>();
      auto step_factory = hold(py::reinterpret_borrow<py::object>(t[2]));
      st.step = [step_factory, failures](std::int64_t n) {
        return build([&] { return (*step_factory)(n); }, "step layer " + std::to_string(n),
                     failures);
      };
      if (!t[3].is_none()) {
        auto transition = hold(py::reinterpret_borrow<py::object>(t[3]));
        st.transition = [transition, failures](std::int64_t n) {
          return build([&] { return (*transition)(n); }, "transition layer " + std::to_string(n),
                       failures);
        };
      }
      net.stages.push_back(st);
    }
  }
  if (!open.is_none()) {
    auto factory = hold(std::move(open));
    net.open = [factory, failures] {
      return build([&] { return (*factory)(); }, "open layer", failures);
    };
  }
  if (!close.is_none()) {
    auto factory = hold(std::move(close));
    net.close = [factory, failures] {
      return build([&] { return (*factory)(); }, "close layer", failures);
    };
  }
  return net;
}

bool import_mpi4py_api() {
  return import_mpi4py() >= 0;
}

MPI_Comm communicator_of(const py::object& comm, const char* owner) {
  if (!PyObject_TypeCheck(comm.ptr(), &PyMPIComm_Type)) {
    PyErr_SetString(PyExc_TypeError, (std::string(owner) +
                                      ": comm must be an mpi4py communicator (mpi4py.MPI.Comm), "
                                      "not a " +
                                      std::string(py::str(comm.get_type().attr("__name__"))))
                                         .c_str());
    throw py::error_already_set();
  }
  MPI_Comm* c = PyMPIComm_Get(comm.ptr());
  if (!c) throw py::error_already_set();
  if (*c == MPI_COMM_NULL) throw py::type_error(std::string(owner) + ": comm is MPI.COMM_NULL");
  return *c;
}

Agreement::Agreement(MPI_Comm parent) {
  {
    py::gil_scoped_release nogil;
    MPI_Comm_dup(parent, &comm_);
  }
  int rank = 0;
  MPI_Comm_rank(comm_, &rank);
  failures_ = std::make_shared<Failures>(rank);
}

Agreement::~Agreement() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

bool Agreement::agree(Kind& kind, std::string& message) {
  // Codes: 0 for success, kind + 1 otherwise (Kind::None is the last kind).
  const int code = kind == Kind::None ? 0 : static_cast<int>(kind) + 1;
  // A layer's own failure comes first: the NaN it stood in for may make other ranks fail too.
  const std::optional<mpi::AgreedFailure> f =
      mpi::agree(comm_, code, message, kind == Kind::Step ? 0 : 1);
  if (!f) return false;
  kind = static_cast<Kind>(f->code - 1);
  message = f->message;
  return true;
}

}  // namespace weft::python
