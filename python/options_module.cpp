// weft.MgritOptions and weft.Options for Python: the C++ value types with the same chained
// setters (`o.cfactor(4)` sets and returns o, `o.cfactor()` reads), enums as lower-case strings.
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "weft/util/error.hpp"

namespace py = pybind11;

namespace weft::python {
namespace {

using mgrit::Options;

template <class E>
E parse_enum(const std::string& option, const std::string& text,
             const std::vector<std::pair<const char*, E>>& names) {
  std::string accepted;
  for (const auto& [name, value] : names) {
    if (text == name) return value;
    accepted += (accepted.empty() ? "" : ", ") + std::string(name);
  }
  throw InvalidOption("option " + option + ": '" + text + "' is invalid; accepted: " + accepted);
}

const std::vector<std::pair<const char*, mgrit::Cycle>> kCycles = {{"v", mgrit::Cycle::V},
                                                                   {"f", mgrit::Cycle::F}};
const std::vector<std::pair<const char*, mgrit::InitialPhase>> kPhases = {
    {"default", mgrit::InitialPhase::Default},
    {"none", mgrit::InitialPhase::None},
    {"skip", mgrit::InitialPhase::Skip},
    {"nested", mgrit::InitialPhase::Nested}};
const std::vector<std::pair<const char*, mgrit::Convention>> kConventions = {
    {"xbraid", mgrit::Convention::XBraid}, {"pymgrit", mgrit::Convention::PyMGRIT}};
const std::vector<std::pair<const char*, mgrit::TemporalNorm>> kNorms = {
    {"one", mgrit::TemporalNorm::One},
    {"two", mgrit::TemporalNorm::Two},
    {"inf", mgrit::TemporalNorm::Inf}};

template <class E>
std::string enum_name(E value, const std::vector<std::pair<const char*, E>>& names) {
  for (const auto& [name, v] : names)
    if (v == value) return name;
  return "?";
}

py::object optional_number(const std::optional<double>& v) {
  return v ? py::object(py::float_(*v)) : py::object(py::none());
}

py::dict solve_dict(const nn::SolveReport& r) {
  py::dict d;
  d["iterations"] = r.result.iterations;
  d["converged"] = r.result.converged;
  py::list residuals;
  for (const auto& v : r.result.residuals) residuals.append(optional_number(v));
  d["residuals"] = residuals;
  d["final_residual"] = optional_number(r.result.final_residual());
  d["intervals_per_level"] = r.statistics.intervals_per_level;
  d["steps_per_level"] = r.statistics.steps_per_level;
  d["setup_seconds"] = r.statistics.setup_seconds;
  d["solve_seconds"] = r.statistics.solve_seconds;
  d["step_seconds"] = r.statistics.step_seconds;
  d["comm_seconds"] = r.statistics.comm_seconds;
  d["other_seconds"] = r.statistics.other_seconds();
  d["seconds"] = r.seconds;
  return d;
}

}  // namespace

py::dict statistics_dict(const nn::BatchStatistics& s) {
  py::dict d;
  d["batch"] = s.batch;
  d["shape"] = s.shape;
  d["forward"] = solve_dict(s.forward);
  d["backward"] = solve_dict(s.backward);
  d["exchange_seconds"] = s.exchange_seconds;
  d["ghost_bytes"] = s.ghost_bytes;
  d["graphs_recorded"] = s.graphs_recorded;
  d["graphs_reused"] = s.graphs_reused;
  d["graphs_built"] = s.graphs_built;
  d["coarse_graphs_built"] = s.coarse_graphs_built;
  d["coarse_graphs_reused"] = s.coarse_graphs_reused;
  return d;
}

void bind_options(py::module_& m) {
  // A setter returns the options themselves (chaining, as in C++); without argument a getter.
  using Self = Options&;
  const auto self = py::return_value_policy::reference_internal;
  py::class_<Options>(m, "MgritOptions",
                      "Options of one MGRIT solve (weft::mgrit::Options): chained setters, "
                      "e.g. MgritOptions().max_levels(3).cfactor(4).max_iterations(2)")
      .def(py::init<>())
      .def("max_levels", py::overload_cast<>(&Options::max_levels, py::const_))
      .def(
          "max_levels", [](Self o, int n) -> Self { return o.max_levels(n); }, self)
      .def("min_coarse", py::overload_cast<>(&Options::min_coarse, py::const_))
      .def(
          "min_coarse", [](Self o, mgrit::index_t n) -> Self { return o.min_coarse(n); }, self)
      // Per-level values: cfactor() and nrelax() read level 0, cfactor_at(level) any level.
      .def("cfactor", [](const Options& o) { return o.cfactor_at(0); })
      .def("cfactor_at", &Options::cfactor_at, py::arg("level"))
      .def(
          "cfactor", [](Self o, int cf, int level) -> Self { return o.cfactor(cf, level); },
          py::arg("cf"), py::arg("level") = -1, self)
      .def("nrelax", [](const Options& o) { return o.nrelax_at(0); })
      .def("nrelax_at", &Options::nrelax_at, py::arg("level"))
      .def(
          "nrelax", [](Self o, int n, int level) -> Self { return o.nrelax(n, level); },
          py::arg("n"), py::arg("level") = -1, self)
      .def("cycle", [](const Options& o) { return enum_name(o.cycle(), kCycles); })
      .def(
          "cycle",
          [](Self o, const std::string& c) -> Self {
            return o.cycle(parse_enum("cycle", c, kCycles));
          },
          self)
      .def("initial_phase", [](const Options& o) { return enum_name(o.initial_phase(), kPhases); })
      .def(
          "initial_phase",
          [](Self o, const std::string& p) -> Self {
            return o.initial_phase(parse_enum("initial_phase", p, kPhases));
          },
          self)
      .def("convention", [](const Options& o) { return enum_name(o.convention(), kConventions); })
      .def(
          "convention",
          [](Self o, const std::string& c) -> Self {
            return o.convention(parse_enum("convention", c, kConventions));
          },
          self)
      .def("temporal_norm", [](const Options& o) { return enum_name(o.temporal_norm(), kNorms); })
      .def(
          "temporal_norm",
          [](Self o, const std::string& n) -> Self {
            return o.temporal_norm(parse_enum("temporal_norm", n, kNorms));
          },
          self)
      .def("warm_start", py::overload_cast<>(&Options::warm_start, py::const_))
      .def(
          "warm_start", [](Self o, bool on) -> Self { return o.warm_start(on); }, self)
      .def("abs_tol", py::overload_cast<>(&Options::abs_tol, py::const_))
      .def(
          "abs_tol", [](Self o, double t) -> Self { return o.abs_tol(t); }, self)
      .def("rel_tol", py::overload_cast<>(&Options::rel_tol, py::const_))
      .def(
          "rel_tol", [](Self o, double t) -> Self { return o.rel_tol(t); }, self)
      .def("max_iterations", py::overload_cast<>(&Options::max_iterations, py::const_))
      .def(
          "max_iterations", [](Self o, int n) -> Self { return o.max_iterations(n); }, self)
      .def("compute_residual", py::overload_cast<>(&Options::compute_residual, py::const_))
      .def(
          "compute_residual", [](Self o, bool on) -> Self { return o.compute_residual(on); }, self)
      .def("divergence_limit", py::overload_cast<>(&Options::divergence_limit, py::const_))
      .def(
          "divergence_limit", [](Self o, double l) -> Self { return o.divergence_limit(l); }, self)
      .def("collect_timings", py::overload_cast<>(&Options::collect_timings, py::const_))
      .def(
          "collect_timings", [](Self o, bool on) -> Self { return o.collect_timings(on); }, self)
      .def("validate", &Options::validate)
      .def("__copy__", [](const Options& o) { return Options(o); })
      .def("__repr__", [](const Options& o) {
        return "MgritOptions(max_levels=" + std::to_string(o.max_levels()) +
               ", cfactor=" + std::to_string(o.cfactor_at(0)) +
               ", max_iterations=" + std::to_string(o.max_iterations()) + ")";
      });

  using LP = nn::LayerParallelOptions;
  using LPSelf = LP&;
  py::class_<LP>(m, "Options",
                 "Options of weft.LayerParallel (weft::nn::LayerParallelOptions): Options() or "
                 "Options.exact() is exact mode; Options.multilevel(levels, cf, fwd_iters, "
                 "bwd_iters); per direction .forward(MgritOptions) and .backward(MgritOptions); "
                 "spatial coarsening of convolutional networks: .spatial_levels(forward, "
                 "backward=None), .spatial_kernels('same'|'moments'|'galerkin'), "
                 ".spatial_running_statistics(bool) (docs/training.md §2)")
      .def(py::init<>())
      .def_static("exact", &LP::exact)
      .def_static("multilevel", &LP::multilevel, py::arg("levels"), py::arg("cf"),
                  py::arg("fwd_iters"), py::arg("bwd_iters"))
      .def("forward", [](const LP& o) { return o.forward(); })
      .def(
          "forward", [](LPSelf o, const Options& f) -> LPSelf { return o.forward(f); }, self)
      .def("backward", [](const LP& o) { return o.backward(); })
      .def(
          "backward", [](LPSelf o, const Options& b) -> LPSelf { return o.backward(b); }, self)
      .def("cache_graphs", py::overload_cast<>(&LP::cache_graphs, py::const_))
      .def(
          "cache_graphs", [](LPSelf o, bool on) -> LPSelf { return o.cache_graphs(on); }, self)
      .def("check_input", py::overload_cast<>(&LP::check_input, py::const_))
      .def(
          "check_input", [](LPSelf o, bool on) -> LPSelf { return o.check_input(on); }, self)
      .def("layer_costs", py::overload_cast<>(&LP::layer_costs, py::const_))
      .def(
          "layer_costs",
          [](LPSelf o, std::vector<double> costs) -> LPSelf {
            return o.layer_costs(std::move(costs));
          },
          self)
      .def("spatial_levels",
           [](const LP& o) { return py::make_tuple(o.forward_spatial(), o.backward_spatial()); })
      .def(
          "spatial_levels",
          [](LPSelf o, std::vector<int> forward,
             std::optional<std::vector<int>> backward) -> LPSelf {
            std::vector<int> b = backward ? *backward : forward;
            return o.spatial_levels(std::move(forward), std::move(b));
          },
          py::arg("forward"), py::arg("backward") = py::none(), self,
          "one 0/1 per level: 1 where that level's states are coarsened in space (stride 2) "
          "relative to the level above; backward defaults to forward")
      .def("spatial_kernels",
           [](const LP& o) { return std::string(nn::to_string(o.spatial_kernels())); })
      .def(
          "spatial_kernels",
          [](LPSelf o, const std::string& name) -> LPSelf {
            return o.spatial_kernels(nn::spatial_kernels_from(name, "weft.Options"));
          },
          self, "same, moments or galerkin: 3x3(x3) kernels on levels coarsened in space")
      .def("spatial_running_statistics",
           py::overload_cast<>(&LP::spatial_running_statistics, py::const_))
      .def(
          "spatial_running_statistics",
          [](LPSelf o, bool on) -> LPSelf { return o.spatial_running_statistics(on); }, self)
      .def("seed", py::overload_cast<>(&LP::seed, py::const_))
      .def(
          "seed", [](LPSelf o, std::uint64_t value) -> LPSelf { return o.seed(value); }, self)
      .def("validate", &LP::validate)
      .def("__copy__", [](const LP& o) { return LP(o); })
      .def("__str__", [](const LP& o) { return nn::to_string(o); })
      .def("__repr__", [](const LP& o) { return "weft.Options:\n" + nn::to_string(o); });
}

}  // namespace weft::python
