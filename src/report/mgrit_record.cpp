#include "weft/report/mgrit_record.hpp"

#include <nlohmann/json.hpp>
#include <optional>
#include <variant>

namespace weft::report {

namespace pr = mgrit::problems;
using json = nlohmann::json;

namespace {

json optional_json(const std::optional<double>& x) {
  return x ? json(*x) : json(nullptr);
}

json options_json(const pr::RunRequest& run, const mgrit::Options& o, int built_levels,
                  const std::string& points_source, int ranks) {
  json j;
  j["problem"] = run.problem;
  j["integrator"] = run.integrator;
  for (const auto& [name, value] : run.instance->parameters())
    std::visit([&j, &name = name](const auto& v) { j[name] = v; }, value);
  j["gradient"] = run.settings.gradient;
  j["t0"] = run.settings.t0;
  j["t1"] = run.settings.t1;
  j["nt"] = run.settings.nt;
  j["levels"] = run.levels;
  json cf = json::array(), nrelax = json::array(), cwt = json::array();
  for (int l = 0; l < built_levels; ++l) {
    cf.push_back(o.cfactor_at(l));
    nrelax.push_back(o.nrelax_at(l));
    cwt.push_back(o.cweight_at(l));
  }
  j["cf"] = cf;
  j["min_coarse"] = run.min_coarse;
  j["nrelax"] = nrelax;
  j["nrelax_coarsest"] = run.nrelax_coarsest ? json(*run.nrelax_coarsest) : json(nullptr);
  j["cwt"] = cwt;
  j["relax_only_coarsest"] = run.relax_only_coarsest;
  const mgrit::InitialPhase phase = o.effective_initial_phase();
  j["skip"] = phase == mgrit::InitialPhase::Skip;
  j["nested"] = phase == mgrit::InitialPhase::Nested;
  j["initial_phase"] = mgrit::to_string(phase);
  j["cycle"] = mgrit::to_string(run.cycle);
  j["tol"] = run.tol;
  j["rtol"] = run.rtol;
  j["tnorm"] = mgrit::to_string(run.tnorm);
  j["max_iter"] = run.max_iter;
  j["residual"] = run.residual;
  j["init"] = run.init;
  j["storage"] = mgrit::to_string(run.storage);
  j["convention"] = mgrit::to_string(run.convention);
  j["points"] = points_source.empty() ? json(nullptr) : json(points_source);
  j["reverse"] = run.reverse;
  j["final_sweep"] = mgrit::to_string(o.effective_final_sweep());
  j["ranks"] = ranks;
  j["richardson"] = run.richardson;
  j["periodic"] = run.periodic;
  j["error_estimates"] = run.error_estimates;
  j["refine"] = run.refine;
  j["refine_fraction"] = run.refine ? json(run.refine_fraction) : json(nullptr);
  j["max_refinements"] = run.refine ? json(run.max_refinements) : json(nullptr);
  j["max_intervals"] = run.max_intervals ? json(*run.max_intervals) : json(nullptr);
  j["delta_rank"] = run.delta_rank;
  j["delta_lyapunov"] = run.delta_rank > 0 ? json(run.delta_lyapunov) : json(nullptr);
  j["delta_relax"] = run.delta_rank > 0 ? json(run.delta_relax) : json(nullptr);
  return j;
}

}  // namespace

std::string mgrit_run_record(const pr::RunRequest& run, const pr::RunSummary& sum,
                             const std::string& points_source, int ranks) {
  const mgrit::Options& o = sum.options;
  json j;
  j["problem"] = run.problem;
  j["options"] = options_json(run, o, static_cast<int>(sum.intervals.size()), points_source, ranks);
  j["levels"] = sum.intervals;
  j["iterations"] = sum.result.iterations;
  json residuals = json::array(), factors = json::array();
  for (const auto& r : sum.result.residuals) residuals.push_back(optional_json(r));
  for (const auto& f : sum.result.factors) factors.push_back(optional_json(f));
  j["residuals"] = residuals;
  j["factors"] = factors;
  j["final_residual"] = optional_json(sum.result.final_residual());
  j["final_error"] = optional_json(sum.final_error);
  j["largest_estimate"] = optional_json(sum.largest_estimate);
  j["largest_estimate_time"] =
      sum.largest_estimate ? json(sum.largest_estimate_time) : json(nullptr);
  json refinements = json::array();
  for (const mgrit::Refinement& f : sum.result.refinements)
    refinements.push_back({{"iteration", f.iteration},
                           {"intervals_before", f.intervals_before},
                           {"intervals_after", f.intervals_after},
                           {"residual", optional_json(f.residual)}});
  j["refinements"] = refinements;
  j["refinement_stopped"] =
      sum.result.refinement_stopped ? json(*sum.result.refinement_stopped) : json(nullptr);
  j["lyapunov_exponents"] =
      sum.lyapunov_exponents.empty() ? json(nullptr) : json(sum.lyapunov_exponents);
  j["final_levels"] = sum.final_intervals.empty() ? json(sum.intervals) : json(sum.final_intervals);
  j["converged"] = sum.result.converged;
  j["timings"] = {{"setup_seconds", sum.setup},
                  {"solve_seconds", sum.solve},
                  {"step_seconds_max", sum.step},
                  {"comm_seconds_max", sum.comm},
                  {"other_seconds_max", sum.other}};
  j["steps_per_level"] = sum.steps;
  if (sum.objective) {
    j["objective"] = *sum.objective;
    j["gradient"] = *sum.gradient;
    j["parameter"] = sum.parameter;
    json adjoint = json::array();
    for (const auto& r : sum.adjoint.residuals) adjoint.push_back(optional_json(r));
    j["adjoint"] = {{"iterations", sum.adjoint.iterations},
                    {"converged", sum.adjoint.converged},
                    {"residuals", adjoint}};
  }
  return j.dump(2);
}

}  // namespace weft::report
