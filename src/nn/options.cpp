#include "weft/nn/options.hpp"

#include <sstream>
#include <string>

#include "weft/util/error.hpp"

namespace weft::nn {

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
}

namespace {
std::string per_level(const mgrit::PerLevel<int>& v) {
  std::string s = std::to_string(v.fallback());
  for (const auto& [level, value] : v.overrides())
    s += " (level " + std::to_string(level) + ": " + std::to_string(value) + ")";
  return s;
}

std::string describe(const mgrit::Options& o) {
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

std::string to_string(const LayerParallelOptions& options) {
  return "forward:  " + describe(options.forward_solver_options()) +
         "\nbackward: " + describe(options.backward_solver_options()) + "\ncache graphs " +
         (options.cache_graphs() ? "yes" : "no") + ", check input " +
         (options.check_input() ? "yes" : "no") + ", seed " + std::to_string(options.seed());
}

}  // namespace weft::nn
