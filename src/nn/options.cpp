#include "weft/nn/options.hpp"

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "weft/util/error.hpp"

namespace weft::nn {

const char* to_string(SpatialKernels kernels) {
  switch (kernels) {
    case SpatialKernels::moments:
      return "moments";
    case SpatialKernels::galerkin:
      return "galerkin";
    case SpatialKernels::same:
      break;
  }
  return "same";
}

SpatialKernels spatial_kernels_from(const std::string& name, const std::string& where) {
  for (SpatialKernels k : {SpatialKernels::same, SpatialKernels::moments, SpatialKernels::galerkin})
    if (name == to_string(k)) return k;
  throw InvalidOption(where, "spatial_kernels",
                      "'" + name + "' is invalid; accepted: same, moments, galerkin");
}

LayerParallelOptions::LayerParallelOptions() {
  forward_.max_levels(1);
  backward_.max_levels(1);
}

LayerParallelOptions LayerParallelOptions::exact() {
  return LayerParallelOptions();
}

LayerParallelOptions LayerParallelOptions::multilevel(int levels, int cfactor,
                                                      int forward_iterations,
                                                      int backward_iterations) {
  auto make = [&](int iterations) {
    return mgrit::Options()
        .max_levels(levels)
        .cfactor(cfactor)
        .nrelax(1)
        .max_iterations(iterations)
        .abs_tol(0.0)
        .rel_tol(0.0);
  };
  LayerParallelOptions o;
  o.forward(make(forward_iterations)).backward(make(backward_iterations));
  return o;
}

namespace {
// A skip phase replaces the fine values by a coarse solve: it would discard a warm start.
void warm_start_phase(mgrit::Options& o) {
  if (o.warm_start() && o.initial_phase() == mgrit::InitialPhase::Default)
    o.initial_phase(mgrit::InitialPhase::None);
}
}  // namespace

mgrit::Options LayerParallelOptions::forward_solver_options() const {
  mgrit::Options o = forward_;
  warm_start_phase(o);
  o.direction(mgrit::Direction::Forward).storage(mgrit::Storage::All, 0);
  return o;
}

mgrit::Options LayerParallelOptions::backward_solver_options() const {
  mgrit::Options o = backward_;
  warm_start_phase(o);
  o.direction(mgrit::Direction::Reverse)
      .storage(mgrit::Storage::All, 0)
      .final_sweep(mgrit::FinalSweep::CF);
  return o;
}

void LayerParallelOptions::validate() const {
  auto check = [](const mgrit::Options& o, const char* which) {
    try {
      o.validate();
    } catch (const InvalidOption& e) {
      throw InvalidOption(std::string("layer-parallel ") + which + " solve: " + e.what());
    }
  };
  if (bucket_bytes_ < 1)
    throw InvalidOption("layer-parallel options: bucket_bytes = " + std::to_string(bucket_bytes_) +
                        "; need at least 1");
  check(forward_solver_options(), "forward");
  check(backward_solver_options(), "backward");
  for (size_t k = 0; k < layer_costs_.size(); ++k)
    if (!std::isfinite(layer_costs_[k]) || layer_costs_[k] < 0)
      throw InvalidOption("layer-parallel options: layer_costs[" + std::to_string(k) +
                          "] = " + number_text(layer_costs_[k]) + "; accepted: finite and >= 0");
  auto check_spatial = [](const std::vector<int>& flags, const mgrit::Options& o,
                          const char* which) {
    if (flags.empty()) return;
    const std::string where = std::string("layer-parallel ") + which + " solve: spatial levels ";
    if (static_cast<int>(flags.size()) != o.max_levels())
      throw InvalidOption(where + "have " + std::to_string(flags.size()) +
                          " entries for max_levels " + std::to_string(o.max_levels()) +
                          "; need one 0/1 per level");
    for (size_t l = 0; l < flags.size(); ++l)
      if (flags[l] != 0 && flags[l] != 1)
        throw InvalidOption(where + "entry " + std::to_string(l) + " is " +
                            std::to_string(flags[l]) + "; need 0 or 1");
    if (flags[0] != 0)
      throw InvalidOption(where + "entry 0 is 1; the fine level (0) cannot be coarsened in space");
    // Under F-relaxation a level's C-points change only by the coarse correction, and a level
    // coarse in space cannot correct what restriction drops: the iterations stagnate
    // (docs/training.md, "Spatial coarsening"). C-relaxation propagates the C-points' values
    // from the F-points, so FCF converges.
    for (size_t l = 1; l < flags.size(); ++l)
      if (flags[l] == 1 && o.nrelax_at(static_cast<int>(l) - 1) < 1)
        throw InvalidOption(where + "level " + std::to_string(l) +
                            " is coarse in space, so level " + std::to_string(l - 1) +
                            " needs nrelax >= 1 (FCF relaxation), not 0: under F-relaxation "
                            "iterations stagnate");
  };
  check_spatial(forward_spatial_, forward_, "forward");
  check_spatial(backward_spatial_, backward_, "backward");
}

namespace {
std::string per_level(const mgrit::PerLevel<int>& v) {
  std::string s = std::to_string(v.fallback());
  for (const auto& [level, value] : v.overrides())
    s += " (level " + std::to_string(level) + ": " + std::to_string(value) + ")";
  return s;
}

std::string flags_text(const std::vector<int>& flags) {
  if (flags.empty()) return "none";
  std::string s;
  for (int f : flags) s += (s.empty() ? "" : ",") + std::to_string(f);
  return s;
}

std::string spatial_text(const LayerParallelOptions& o) {
  if (o.forward_spatial().empty() && o.backward_spatial().empty()) return "";
  return "\nspatial levels: forward " + flags_text(o.forward_spatial()) + ", backward " +
         flags_text(o.backward_spatial()) + "; batch norm there: " +
         (o.spatial_running_statistics() ? "running statistics" : "own statistics") +
         "; kernels there: " + to_string(o.spatial_kernels());
}

std::string describe(mgrit::Options o) {
  std::ostringstream os;
  os << "max_levels " << o.max_levels() << ", cfactor " << per_level(o.cfactor_levels())
     << ", nrelax " << per_level(o.nrelax_levels()) << ", cycle " << mgrit::to_string(o.cycle())
     << ", initial phase " << mgrit::to_string(o.effective_initial_phase()) << ", max_iterations "
     << o.max_iterations() << ", abs_tol " << o.abs_tol() << ", rel_tol " << o.rel_tol()
     << ", relax-only coarsest " << (o.relax_only_coarsest() ? "yes" : "no") << ", warm start "
     << (o.warm_start() ? "yes" : "no") << ", convention " << mgrit::to_string(o.convention())
     << ", final sweep " << mgrit::to_string(o.effective_final_sweep());
  return os.str();
}
}  // namespace

std::string to_string(const LayerParallelOptions& options, bool layers_have_buffers) {
  mgrit::Options forward = options.forward_solver_options();
  // As BatchSolve::prepare decides it.
  if (layers_have_buffers && forward.max_levels() > 1) forward.final_sweep(mgrit::FinalSweep::CF);
  return "forward:  " + describe(forward) +
         "\nbackward: " + describe(options.backward_solver_options()) + "\ncache graphs " +
         (options.cache_graphs() ? "yes" : "no") + ", check input " +
         (options.check_input() ? "yes" : "no") + ", seed " + std::to_string(options.seed()) +
         spatial_text(options);
}

}  // namespace weft::nn
