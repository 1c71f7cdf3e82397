#include "mgrit_report.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "weft/report/mgrit_record.hpp"

namespace weft::cli {

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
  line(fmt::format("weft mgrit: {} on {} rank{}", s.run.problem, s.ranks, s.ranks == 1 ? "" : "s"));
  line("  problem      " + s.run.instance->describe());
  line(fmt::format("  time grid    [{}, {}], {} intervals, {}", number(s.run.settings.t0),
                   number(s.run.settings.t1), s.run.settings.nt,
                   s.run.reverse ? "reverse (t1 -> t0)" : "forward (t0 -> t1)"));
  line(fmt::format(
      "  convention   {}, cycle {}, initial phase {}, initial guess {}{}{}{}{}",
      mgrit::to_string(o.convention()), mgrit::to_string(o.cycle()),
      mgrit::to_string(o.effective_initial_phase()), s.run.init, s.run.periodic ? ", periodic" : "",
      s.run.richardson ? fmt::format(", Richardson (local order {})", s.run.richardson)
                       : std::string(),
      s.run.refine
          ? fmt::format(", refinement where estimate > {} x largest", number(s.run.refine_fraction))
          : std::string(),
      s.run.delta_rank > 0
          ? fmt::format(", Delta correction (rank {}, {}{})", s.run.delta_rank,
                        s.run.delta_lyapunov ? "Lyapunov estimation"
                        : s.run.delta_relax  ? "basis estimated in relaxation"
                                             : "static basis",
                        s.run.delta_lyapunov && s.run.delta_relax ? ", also in relaxation" : "")
          : std::string()));
  line(fmt::format("  stopping     tol {}, rtol {}, tnorm {}, max-iter {}, residual {}",
                   number(s.run.tol), number(s.run.rtol), mgrit::to_string(s.run.tnorm),
                   s.run.max_iter, s.run.residual ? "on" : "off"));
  line(fmt::format("  storage      {}, min-coarse {}, max levels {}{}",
                   mgrit::to_string(s.run.storage), s.run.min_coarse, s.run.levels,
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
      treat = !last                                      ? ""
              : o.periodic() && !o.relax_only_coarsest() ? "relaxation, C-point 0 only"
                                                         : "relaxation only";
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
  auto factor_text = [](const std::optional<double>& f) {
    return f ? fmt::format("{:.3e}", *f) : std::string("-");
  };
  std::size_t next_refinement = 0;
  for (std::size_t k = 0; k < r.residuals.size(); ++k) {
    // A refined cycle first (its grid's residual), then the iteration again on the new grid.
    for (; next_refinement < r.refinements.size() &&
           r.refinements[next_refinement].iteration == static_cast<int>(k);
         ++next_refinement) {
      const mgrit::Refinement& f = r.refinements[next_refinement];
      const std::optional<double> before = k > 0 ? r.residuals[k - 1] : std::nullopt;
      const std::optional<double> factor = f.residual && before && *before != 0
                                               ? std::optional<double>(*f.residual / *before)
                                               : std::nullopt;
      line(fmt::format("  {:>4}  {:<16}  {:<9}  refined: {} -> {} intervals", k,
                       residual_text(f.residual), factor_text(factor), f.intervals_before,
                       f.intervals_after));
    }
    const auto& f = k < r.factors.size() ? r.factors[k] : std::nullopt;
    std::string row =
        fmt::format("  {:>4}  {:<16}  {:<9}", k, residual_text(r.residuals[k]), factor_text(f));
    if (r.refinement_stopped && *r.refinement_stopped == static_cast<int>(k))
      row += "  refinement stopped: limit reached";
    row.erase(row.find_last_not_of(' ') + 1);
    line(row);
  }
  line(fmt::format("  iterations   {}", r.iterations));
  if (sum.options.refinement()) {
    std::string levels;
    const auto& final_levels = sum.final_intervals.empty() ? sum.intervals : sum.final_intervals;
    for (std::size_t l = 0; l < final_levels.size(); ++l)
      levels += fmt::format("{}{}", l ? ", " : "", final_levels[l]);
    line(fmt::format("  refinement   {} refinement{}, final grid {} intervals, {} levels ({})",
                     r.refinements.size(), r.refinements.size() == 1 ? "" : "s", r.intervals,
                     final_levels.size(), levels));
  }
  line(fmt::format("  converged    {}", r.converged ? "yes" : "no"));
  if (sum.final_error)
    line(fmt::format("  error        {:.3e} at t = {} (norm of u - {}exact solution)",
                     *sum.final_error, sum.final_time, sum.options.periodic() ? "periodic " : ""));
  if (!sum.lyapunov_exponents.empty()) {
    std::string exponents;
    for (std::size_t i = 0; i < sum.lyapunov_exponents.size(); ++i)
      exponents += fmt::format("{}{:.6f}", i ? ", " : "", sum.lyapunov_exponents[i]);
    line("  Lyapunov     " + exponents + " (average exponents over the fine C-intervals)");
  }
  if (sum.largest_estimate)
    line(fmt::format("  estimate     {:.3e} at t = {} (largest Richardson error estimate)",
                     *sum.largest_estimate, sum.largest_estimate_time));
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

void write_json(const MgritSettings& s, const Summary& sum) {
  std::ofstream out(s.json_path, std::ios::trunc);
  out << report::mgrit_run_record(s.run, sum, s.points_path, s.ranks) << "\n";
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
