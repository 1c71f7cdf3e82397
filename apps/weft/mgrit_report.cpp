#include "mgrit_report.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <variant>

namespace weft::cli {

using json = nlohmann::json;
using mgrit::index_t;

std::string number(double x) {
  return fmt::format("{:g}", x);
}

namespace {
std::string residual_text(const std::optional<double>& r) {
  return r ? fmt::format("{:.9e}", *r) : std::string("-");
}
}  // namespace

void print_header(const MgritSettings& s, const Summary& sum) {
  const mgrit::Options& o = sum.options;
  std::string out;
  auto line = [&](const std::string& text) { out += text + "\n"; };
  line(fmt::format("weft mgrit: {} on {} rank{}", s.problem, s.ranks, s.ranks == 1 ? "" : "s"));
  line("  problem      " + s.instance->describe());
  line(fmt::format("  time grid    [{}, {}], {} intervals, {}", number(s.t0), number(s.t1), s.nt,
                   s.reverse ? "reverse (t1 -> t0)" : "forward (t0 -> t1)"));
  line(fmt::format("  convention   {}, cycle {}, initial phase {}, initial guess {}",
                   mgrit::to_string(o.convention()), mgrit::to_string(o.cycle()),
                   mgrit::to_string(o.effective_initial_phase()), s.init));
  line(fmt::format("  stopping     tol {}, rtol {}, tnorm {}, max-iter {}, residual {}",
                   number(s.tol), number(s.rtol), mgrit::to_string(s.tnorm), s.max_iter,
                   s.residual ? "on" : "off"));
  line(fmt::format("  storage      {}, min-coarse {}, max levels {}{}", mgrit::to_string(s.storage),
                   s.min_coarse, s.levels,
                   s.points_path.empty() ? "" : ", points from " + s.points_path));
  line("  level  intervals    cf  nrelax  cwt    treatment");
  const int L = static_cast<int>(sum.intervals.size());
  for (int l = 0; l < L; ++l) {
    const bool last = l == L - 1;
    std::string treat, cf, nrelax, cwt;
    if (last && o.coarsest_solved_sequentially(L)) {
      treat = "sequential solve";
      cf = nrelax = cwt = "-";
    } else {
      cf = sum.cf_built[static_cast<size_t>(l)] > 0
               ? std::to_string(sum.cf_built[static_cast<size_t>(l)])
               : std::string("list");
      nrelax = std::to_string(last ? o.coarsest_sweeps(l) : o.nrelax_at(l));
      cwt = last ? "1" : number(o.cweight_at(l));
      treat = last ? "relaxation only" : "";
    }
    std::string row = fmt::format("  {:>5}  {:>9}  {:>4}  {:>6}  {:<5}  {}", l,
                                  sum.intervals[static_cast<size_t>(l)], cf, nrelax, cwt, treat);
    row.erase(row.find_last_not_of(' ') + 1);
    line(row);
  }
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
}

void print_report(const Summary& sum) {
  std::string out;
  auto line = [&](const std::string& text) { out += text + "\n"; };
  line("  iter  residual          factor");
  const auto& r = sum.result;
  for (std::size_t k = 0; k < r.residuals.size(); ++k) {
    const auto& f = k < r.factors.size() ? r.factors[k] : std::nullopt;
    line(fmt::format("  {:>4}  {:<16}  {}", k, residual_text(r.residuals[k]),
                     f ? fmt::format("{:.3e}", *f) : std::string("-")));
  }
  line(fmt::format("  iterations   {}", r.iterations));
  line(fmt::format("  converged    {}", r.converged ? "yes" : "no"));
  line(
      fmt::format("  timings (s)  setup {:.3e}, solve {:.3e}; max over ranks: step {:.3e}, "
                  "comm {:.3e}, other {:.3e}",
                  sum.setup, sum.solve, sum.step, sum.comm, sum.other));
  std::string steps;
  for (std::size_t l = 0; l < sum.steps.size(); ++l)
    steps += fmt::format("{}level {}: {}", l ? ", " : "", l, sum.steps[l]);
  line("  steps        " + steps + " (summed over ranks)");
  if (sum.objective) {
    line(fmt::format("  adjoint      {} iterations, converged {}, final residual {}",
                     sum.adjoint.iterations, sum.adjoint.converged ? "yes" : "no",
                     residual_text(sum.adjoint.final_residual())));
    line(fmt::format("  objective    J = {:.15e}", *sum.objective));
    line(fmt::format("  gradient     dJ/d{} = {:.15e}", sum.parameter, *sum.gradient));
  }
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
}

namespace {

json optional_json(const std::optional<double>& x) {
  return x ? json(*x) : json(nullptr);
}

json options_json(const MgritSettings& s, const mgrit::Options& o, int built_levels) {
  json j;
  j["problem"] = s.problem;
  j["integrator"] = s.integrator;
  for (const auto& [name, value] : s.instance->parameters())
    std::visit([&j, &name = name](const auto& v) { j[name] = v; }, value);
  j["gradient"] = s.gradient;
  j["t0"] = s.t0;
  j["t1"] = s.t1;
  j["nt"] = s.nt;
  j["levels"] = s.levels;
  json cf = json::array(), nrelax = json::array(), cwt = json::array();
  for (int l = 0; l < built_levels; ++l) {
    cf.push_back(o.cfactor_at(l));
    nrelax.push_back(o.nrelax_at(l));
    cwt.push_back(o.cweight_at(l));
  }
  j["cf"] = cf;
  j["min_coarse"] = s.min_coarse;
  j["nrelax"] = nrelax;
  j["nrelax_coarsest"] = s.nrelax_coarsest ? json(*s.nrelax_coarsest) : json(nullptr);
  j["cwt"] = cwt;
  j["relax_only_coarsest"] = s.relax_only_coarsest;
  const mgrit::InitialPhase phase = o.effective_initial_phase();
  j["skip"] = phase == mgrit::InitialPhase::Skip;
  j["nested"] = phase == mgrit::InitialPhase::Nested;
  j["initial_phase"] = mgrit::to_string(phase);
  j["cycle"] = mgrit::to_string(s.cycle);
  j["tol"] = s.tol;
  j["rtol"] = s.rtol;
  j["tnorm"] = mgrit::to_string(s.tnorm);
  j["max_iter"] = s.max_iter;
  j["residual"] = s.residual;
  j["init"] = s.init;
  j["storage"] = mgrit::to_string(s.storage);
  j["convention"] = mgrit::to_string(s.convention);
  j["points"] = s.points_path.empty() ? json(nullptr) : json(s.points_path);
  j["reverse"] = s.reverse;
  j["final_sweep"] = mgrit::to_string(o.effective_final_sweep());
  j["ranks"] = s.ranks;
  return j;
}

}  // namespace

void write_json(const MgritSettings& s, const Summary& sum) {
  const mgrit::Options& o = sum.options;
  json j;
  j["problem"] = s.problem;
  j["options"] = options_json(s, o, static_cast<int>(sum.intervals.size()));
  j["levels"] = sum.intervals;
  j["iterations"] = sum.result.iterations;
  json residuals = json::array(), factors = json::array();
  for (const auto& r : sum.result.residuals) residuals.push_back(optional_json(r));
  for (const auto& f : sum.result.factors) factors.push_back(optional_json(f));
  j["residuals"] = residuals;
  j["factors"] = factors;
  j["final_residual"] = optional_json(sum.result.final_residual());
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
  std::ofstream out(s.json_path, std::ios::trunc);
  out << j.dump(2) << "\n";
  out.close();  // flushes: a full disk shows here
  if (!out) throw std::runtime_error("cannot write --json file '" + s.json_path + "'");
}

void write_csv(const MgritSettings& s, const Summary& sum) {
  std::ofstream out(s.output_path, std::ios::trunc);
  out << "t";
  if (sum.width == 1) {
    out << ",u";
  } else {
    for (int i = 1; i <= sum.width; ++i) out << ",u_" << i;
  }
  out << "\n";
  for (const auto& [index, point] : sum.solution) {
    out << fmt::format("{:.17g}", point.t);
    for (double v : point.values) out << fmt::format(",{:.17g}", v);
    out << "\n";
  }
  out.close();
  if (!out) throw std::runtime_error("cannot write --output file '" + s.output_path + "'");
}

}  // namespace weft::cli
