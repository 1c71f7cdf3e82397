#pragma once
// What the extension's modules share (weft_module.cpp: LayerParallel and Recurrent;
// trainer_module.cpp: the Trainer): Python layers as weft layers, networks from Python layer
// factories, and the agreement that makes every rank raise the same Python exception.
//
// Errors: every collective call runs to its end on every rank and then agrees on the outcome
// (an allreduce and a broadcast on a private communicator), so all ranks raise the same Python
// exception with the same message, or none does. A failure inside a layer (a Python exception,
// a TorchScript error) is not thrown through the solver, which would leave the other ranks
// waiting in MPI: the layer records it and returns NaN, the solve runs to its end, and the
// agreement raises weft.StepError on every rank.
#include <c10/util/Exception.h>
#include <mpi.h>
#include <pybind11/pybind11.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "weft/nn/coarse_kernels.hpp"
#include "weft/nn/network.hpp"
#include "weft/util/error.hpp"

namespace weft::python {

namespace py = pybind11;
using torch::Tensor;

// Python exception types (created in PYBIND11_MODULE, alive as module attributes).
enum class Kind : int { Step = 0, Type, Invalid, BadData, Divergence, Mpi, Other, None };
extern PyObject* exception_types[static_cast<int>(Kind::None)];

[[noreturn]] void raise(Kind kind, const std::string& message);

/// "Type: message" of a Python exception, without the traceback pybind11 appends.
std::string python_message(const py::error_already_set& e);

/// A Python object that may be released on a thread without the GIL (acquired then).
std::shared_ptr<py::object> hold(py::object object);
/// Releases a Python object under the GIL (its holder may die on a thread without it).
void release(py::object& object);

/// The first layer failure of a collective call on this rank, kept until the call agrees.
class Failures {
 public:
  explicit Failures(int rank) : rank_(rank) {}
  void record(const std::string& what, const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (first_.empty()) first_ = what + " failed on rank " + std::to_string(rank_) + ": " + message;
  }
  std::string take() {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::exchange(first_, std::string());
  }

 private:
  int rank_;
  std::mutex mutex_;
  std::string first_;
};

/// A module from Python (its parameters and buffers registered under their Python names) with
/// a forward that never throws. Its torch.nn.Conv2d/Conv3d submodules take the coarse kernels of
/// LayerParallelOptions::spatial_kernels (SwapsCoarseKernels).
class PythonLayer : public torch::nn::Module, public nn::SwapsCoarseKernels {
 public:
  PythonLayer(py::object module, std::string what, std::shared_ptr<Failures> failures)
      : module_(std::move(module)), what_(std::move(what)), failures_(std::move(failures)) {}
  ~PythonLayer() override { release(module_); }
  PythonLayer(const PythonLayer&) = delete;
  PythonLayer& operator=(const PythonLayer&) = delete;

  virtual Tensor forward(const Tensor& x) = 0;
  const py::object& module() const { return module_; }

 protected:
  /// Records the failure and returns NaN of x's shape, so the solve runs to its end. Under
  /// autograd the NaN depends on x and on every parameter, so that an adjoint step that
  /// differentiates it (a failure during backward) completes too, with NaN gradients.
  Tensor failed(const Tensor& x, const std::string& message) {
    failures_->record(what_, message);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    Tensor y = x * nan;
    if (torch::GradMode::is_enabled())
      for (const Tensor& p : parameters())
        if (p.requires_grad()) y = y + p.sum() * nan;
    return y;
  }

 private:
  py::object module_;
  std::string what_;
  std::shared_ptr<Failures> failures_;
};

/// What a factory call returns, as a weft layer: failures are recorded and an identity layer
/// stands in until the collective call agrees. Takes the GIL.
nn::Layer build(const std::function<py::object()>& call, const std::string& what,
                const std::shared_ptr<Failures>& failures);

/// The network of Python factories: `step(n)`, `open()`, `close()` (each may be None), or
/// `stages`: None or a list of (steps, t_final, step factory, transition factory or None).
nn::Network python_network(std::int64_t steps, double t_final, py::object step, py::object open,
                           py::object close, const py::object& stages,
                           const std::shared_ptr<Failures>& failures);

/// Loads mpi4py's C API for communicator_of (its pointers are per translation unit); call once
/// when the extension loads. False (with the Python error set) when mpi4py cannot be imported.
bool import_mpi4py_api();

/// The MPI communicator of an mpi4py communicator (TypeError naming `owner` otherwise).
MPI_Comm communicator_of(const py::object& comm, const char* owner = "weft.LayerParallel");

/// Collective calls that agree: run() calls without the GIL on every rank, then every rank
/// raises the same exception or none does.
class Agreement {
 public:
  /// Collective over `parent` (duplicated for the agreement's own messages).
  explicit Agreement(MPI_Comm parent);
  ~Agreement();
  Agreement(const Agreement&) = delete;
  Agreement& operator=(const Agreement&) = delete;

  const std::shared_ptr<Failures>& failures() const { return failures_; }

  /// `bad_argument`: this rank's argument error (a TypeError on every rank once the call has
  /// run with an undefined tensor).
  template <class F>
  void run(F&& call, const std::string& bad_argument = std::string()) {
    Kind kind = Kind::None;
    std::string message;
    {
      py::gil_scoped_release nogil;
      try {
        call();
      } catch (const InvalidOption& e) {
        kind = Kind::Invalid, message = e.what();
      } catch (const BadData& e) {
        kind = Kind::BadData, message = e.what();
      } catch (const Divergence& e) {
        kind = Kind::Divergence, message = e.what();
      } catch (const MpiError& e) {
        kind = Kind::Mpi, message = e.what();
      } catch (const c10::Error& e) {
        kind = Kind::Other, message = e.what_without_backtrace();
      } catch (const std::exception& e) {
        kind = Kind::Other, message = e.what();
      }
      std::string step = failures_->take();
      if (!bad_argument.empty()) kind = Kind::Type, message = bad_argument;
      if (!step.empty()) kind = Kind::Step, message = std::move(step);
      if (!agree(kind, message)) return;
    }
    raise(kind, message);
  }

 private:
  /// True when some rank failed; then `kind` and `message` are the same on every rank, by the
  /// rule of the C++ front end (weft::mpi::agree): a layer failure first, then the lowest rank.
  bool agree(Kind& kind, std::string& message);

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::shared_ptr<Failures> failures_;
};

}  // namespace weft::python
