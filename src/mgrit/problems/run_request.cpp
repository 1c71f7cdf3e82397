// A catalogue run from text: every shared setting checked in the order front ends list them
// (the first bad value is the one reported), then the solver options the values describe.
#include "weft/mgrit/problems/run_request.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "weft/util/error.hpp"

namespace weft::mgrit::problems {

const std::vector<std::pair<std::string, std::string>>& run_setting_defaults() {
  static const std::vector<std::pair<std::string, std::string>> defaults = {
      {"t0", "0"},
      {"t1", "2"},
      {"nt", "64"},
      {"levels", "3"},
      {"cf", "4"},
      {"min_coarse", "2"},
      {"nrelax", "1"},
      {"nrelax_coarsest", ""},
      {"cwt", "1"},
      {"skip", ""},
      {"nested", ""},
      {"cycle", "V"},
      {"tol", "1e-10"},
      {"rtol", "0"},
      {"tnorm", "2"},
      {"max_iter", "100"},
      {"init", "zero"},
      {"storage", "all"},
      {"convention", "pymgrit"},
      {"refine_fraction", "0.02"},
      {"max_refinements", "200"},
      {"max_intervals", ""},
      {"delta_rank", "0"},
  };
  return defaults;
}

const std::string& run_setting_default(const std::string& name) {
  for (const auto& [n, fallback] : run_setting_defaults())
    if (n == name) return fallback;
  throw std::logic_error("run_setting_default: no setting " + name);
}

namespace {

// The shortest text that reads back as x ("0.1", not "0.10000000000000001").
std::string shortest(double x) {
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  return buf;
}

// --skip / --nested on top of the convention's own initial phase (which the options tell).
InitialPhase initial_phase(const RunRequest& r) {
  InitialPhase phase = Options().convention(r.convention).effective_initial_phase();
  if (!r.skip && !r.nested) return InitialPhase::Default;
  if (r.skip) {
    if (*r.skip)
      phase = InitialPhase::Skip;
    else if (phase == InitialPhase::Skip)
      phase = InitialPhase::None;
  }
  if (r.nested) {
    if (*r.nested)
      phase = InitialPhase::Nested;
    else if (phase == InitialPhase::Nested)
      phase = InitialPhase::None;
  }
  return phase;
}

// A per-level list: one value sets every level; a longer list sets level i to value i (an
// explicit value for the coarsest level then wins over nrelax_coarsest) and the last value
// also covers the levels beyond the list.
template <class T, class Set>
void set_per_level(const std::vector<T>& values, Set set) {
  set(values.back(), -1);
  if (values.size() > 1)
    for (std::size_t l = 0; l < values.size(); ++l) set(values[l], static_cast<int>(l));
}

Options options_of(const RunRequest& r) {
  Options o;
  o.max_levels(r.levels).min_coarse(r.min_coarse);
  set_per_level(r.cf, [&](int v, int l) { o.cfactor(v, l); });
  set_per_level(r.nrelax, [&](int v, int l) { o.nrelax(v, l); });
  set_per_level(r.cwt, [&](double v, int l) { o.cweight(v, l); });
  if (r.nrelax_coarsest) o.nrelax_coarsest(*r.nrelax_coarsest);
  o.relax_only_coarsest(r.relax_only_coarsest).cycle(r.cycle).convention(r.convention);
  o.initial_phase(initial_phase(r));
  o.initial_guess(r.init == "sequential" ? mgrit::InitialGuess::Sequential
                                         : mgrit::InitialGuess::App);
  o.storage(r.storage).abs_tol(r.tol).rel_tol(r.rtol).temporal_norm(r.tnorm);
  o.max_iterations(r.max_iter).compute_residual(r.residual);
  o.direction(r.reverse ? Direction::Reverse : Direction::Forward);
  o.richardson(r.richardson).error_estimates(r.error_estimates).periodic(r.periodic);
  o.refinement(r.refine).max_refinements(r.max_refinements);
  if (r.max_intervals) o.refinement_cutoff(*r.max_intervals);
  return o;
}

// The problem, its own values (a value of another problem is refused), and the gradient's
// conditions.
void parse_problem(const RunText& text, RunRequest& r) {
  auto spell = [&](const std::string& name) { return text.spell ? text.spell(name) : name; };
  const auto given = text.values.find("problem");
  std::vector<std::string> names;
  for (const CatalogueEntry& e : catalogue()) names.push_back(e.name);
  r.problem = given == text.values.end() ? names.front() : given->second;
  TextValues("run", {{"problem", r.problem}}, {{"problem", ""}}, text.spell)
      .choice("problem", names);
  r.entry = find_problem(r.problem);

  std::map<std::string, std::string> own;
  for (const auto& [name, value] : text.values) {
    std::vector<std::string> users;  // the problems that read `name` (none: a shared value)
    for (const CatalogueEntry& e : catalogue())
      for (const Parameter& p : e.parameters)
        if (name == p.name) users.push_back(e.name);
    if (users.empty()) continue;
    if (std::find(users.begin(), users.end(), r.problem) != users.end()) {
      own[name] = value;
      continue;
    }
    std::string with;
    for (const std::string& u : users)
      with += (with.empty() ? "" : ", ") + spell("problem") + " " + u;
    TextValues("run", {{name, value}}, {{name, ""}}, text.spell)
        .invalid(name, "only with " + with, "not used by " + spell("problem") + " " + r.problem);
  }
  const ParameterValues values(*r.entry, own, text.spell);
  r.integrator = values.text("integrator");
  r.instance = r.entry->make(values);

  if (!text.gradient) return;
  if (!r.entry->gradient_parameter) {
    std::vector<std::string> with;
    for (const CatalogueEntry& e : catalogue())
      if (e.gradient_parameter)
        with.push_back(std::string(e.name) + " (dJ/d" + e.gradient_parameter + ")");
    std::string accepted;
    for (std::size_t i = 0; i < with.size(); ++i)
      accepted += (i == 0                 ? spell("problem") + " "
                   : i + 1 == with.size() ? " or "
                                          : ", ") +
                  with[i];
    throw InvalidOption(
        "run", "gradient",
        "not available for " + spell("problem") + " " + r.problem + "; accepted: " + accepted);
  }
  for (const std::string& other : {std::string("points"), std::string("record_solution")})
    if ((other == "points" && !text.points.empty()) ||
        (other == "record_solution" && text.values.count("record_solution")))
      throw InvalidOption("run", "gradient",
                          "not with " + spell(other) + "; accepted: " + spell("gradient") +
                              " without " + spell(other));
  if (text.reverse)
    throw InvalidOption("run", "gradient",
                        "not with " + spell("reverse") + "; accepted: " + spell("gradient") +
                            " on a forward solve (the adjoint solve runs in reverse by itself)");
}

}  // namespace

RunRequest parse_run(const RunText& text) {
  RunRequest r;
  parse_problem(text, r);
  std::map<std::string, std::string> shared;
  for (const auto& given : text.values) {
    const std::string& name = given.first;  // (a structured binding cannot be captured in C++17)
    if (name != "problem" && name != "points" && name != "record_solution" &&
        std::none_of(catalogue().begin(), catalogue().end(), [&](const CatalogueEntry& e) {
          return std::any_of(e.parameters.begin(), e.parameters.end(),
                             [&](const Parameter& p) { return name == p.name; });
        }))
      shared[name] = given.second;
  }
  std::vector<std::pair<std::string, std::string>> fallbacks = run_setting_defaults();
  fallbacks.emplace_back("points", text.values.count("points") ? text.values.at("points") : "");
  if (text.values.count("points")) shared["points"] = text.values.at("points");
  const TextValues v("run", shared, fallbacks, text.spell);
  auto spell = [&](const std::string& name) { return v.spell(name); };

  // Time grid and hierarchy
  r.settings.gradient = text.gradient;
  r.settings.t0 = v.number("t0");
  r.settings.t1 = v.number("t1", "a finite number > " + spell("t0"));
  if (!(r.settings.t1 > r.settings.t0))
    v.invalid("t1", "a finite number > " + spell("t0") + " (" + shortest(r.settings.t0) +
                        "); use " + spell("reverse") + " to solve backward");
  r.settings.nt = v.integer("nt", 1, "an integer >= 1", std::numeric_limits<index_t>::max() / 2);
  r.levels =
      static_cast<int>(v.integer("levels", 1, "an integer >= 1", std::numeric_limits<int>::max()));
  r.reverse = text.reverse;
  if (!text.points.empty()) {
    const std::string accepted =
        "per coarse level, strictly increasing fine indices in [0, nt], a subset of the level "
        "above, containing the initial point";
    const index_t initial = r.reverse ? r.settings.nt : 0;
    for (std::size_t c = 0; c < text.points.size(); ++c) {
      const std::string level = "level " + std::to_string(c + 1);
      for (index_t i : text.points[c])
        if (i < 0 || i > r.settings.nt)
          v.invalid("points", accepted,
                    level + ": index " + std::to_string(i) + " is outside [0, nt]");
      if (!std::binary_search(text.points[c].begin(), text.points[c].end(), initial))
        v.invalid("points", accepted,
                  level + " lacks the initial point " + std::to_string(initial));
    }
    r.settings.points = text.points;
    const int file_levels = static_cast<int>(text.points.size()) + 1;
    if (v.given("levels") && r.levels != file_levels)
      v.invalid("points", "a file whose levels agree with " + spell("levels"),
                "it gives " + std::to_string(file_levels) + " levels, " + spell("levels") + " is " +
                    std::to_string(r.levels));
    r.levels = file_levels;
  }
  auto list_accepted = [&](const std::string& what) {
    return what + ", or a comma list of them, one per level (at most " + spell("levels") +
           " values)";
  };
  auto check_length = [&](const std::string& name, std::size_t n, const std::string& accepted) {
    if (n > static_cast<std::size_t>(r.levels))
      v.invalid(name, accepted,
                std::to_string(n) + " values for " + std::to_string(r.levels) + " levels");
  };
  const std::string cf_accepted = list_accepted("an integer >= 2");
  r.cf = v.int_list("cf", 2, cf_accepted);
  check_length("cf", r.cf.size(), cf_accepted);
  r.min_coarse = v.integer("min_coarse", 1, "an integer >= 1");

  // Relaxation and cycles
  const std::string nrelax_accepted = list_accepted("an integer >= 0");
  r.nrelax = v.int_list("nrelax", 0, nrelax_accepted);
  check_length("nrelax", r.nrelax.size(), nrelax_accepted);
  if (v.given("nrelax_coarsest"))
    r.nrelax_coarsest = static_cast<int>(
        v.integer("nrelax_coarsest", 0, "an integer >= 0", std::numeric_limits<int>::max()));
  const std::string cwt_accepted = list_accepted("a number > 0");
  r.cwt = v.positive_list("cwt", cwt_accepted);
  check_length("cwt", r.cwt.size(), cwt_accepted);
  r.relax_only_coarsest = text.relax_only_coarsest;
  r.cycle = v.choice("cycle", {"V", "F"}) == 0 ? Cycle::V : Cycle::F;
  r.convention =
      v.choice("convention", {"xbraid", "pymgrit"}) == 0 ? Convention::XBraid : Convention::PyMGRIT;
  if (v.given("skip")) r.skip = v.switch_value("skip");
  if (v.given("nested")) r.nested = v.switch_value("nested");
  if (r.skip.value_or(false) && r.nested.value_or(false))
    v.invalid_text("nested", "1", "0 when " + spell("skip") + " is 1",
                   spell("skip") + " 1 and " + spell("nested") + " 1 exclude each other");

  // Convergence
  r.tol = v.number("tol", "a number >= 0 (0 switches it off)");
  if (r.tol < 0) v.invalid("tol", "a number >= 0 (0 switches it off)");
  r.rtol = v.number("rtol", "a number in [0, 1) (0: off)");
  if (r.rtol < 0 || r.rtol >= 1) v.invalid("rtol", "a number in [0, 1) (0: off)");
  const std::size_t tnorm = v.choice("tnorm", {"1", "2", "inf"});
  r.tnorm = tnorm == 0 ? TemporalNorm::One : tnorm == 1 ? TemporalNorm::Two : TemporalNorm::Inf;
  r.max_iter = static_cast<int>(
      v.integer("max_iter", 1, "an integer >= 1", std::numeric_limits<int>::max()));
  r.residual = !text.no_residual;
  if (text.richardson) {
    auto refuse = [&](const std::string& why) { throw InvalidOption("run", "richardson", why); };
    r.richardson = r.instance->local_order();
    if (r.richardson == 0)
      refuse("not available for " + spell("problem") + " " + r.problem +
             ": its integrator declares no local order; accepted: " + spell("problem") +
             " linear or dahlquist");
    if (r.convention != Convention::XBraid)
      refuse("needs " + spell("convention") + " xbraid (Richardson follows XBraid's relaxation)");
    if (std::any_of(r.cwt.begin(), r.cwt.end(), [](double w) { return w != 1.0; }))
      refuse("needs " + spell("cwt") + " 1 (a weighted C-relaxation cannot be extrapolated)");
    if (text.gradient) refuse("not with " + spell("gradient"));
  }

  if (text.error_estimates) {
    auto refuse = [&](const std::string& why) {
      throw InvalidOption("run", "error_estimates", why);
    };
    r.error_estimates = r.instance->local_order();
    if (r.error_estimates == 0)
      refuse("not available for " + spell("problem") + " " + r.problem +
             ": its integrator declares no local order; accepted: " + spell("problem") +
             " linear or dahlquist");
    if (text.reverse) refuse("not with " + spell("reverse") + " (forward solves only)");
    if (text.gradient) refuse("not with " + spell("gradient"));
  }

  for (const char* limit : {"refine_fraction", "max_refinements", "max_intervals"})
    if (text.values.count(limit) && !text.refine)
      throw InvalidOption("run", limit, "needs " + spell("refine"));
  if (text.refine) {
    auto refuse = [&](const std::string& why) { throw InvalidOption("run", "refine", why); };
    if (r.problem != "linear")
      refuse("not available for " + spell("problem") + " " + r.problem + "; accepted: " +
             spell("problem") + " linear (its App asks for the refinement, as XBraid's ex-06)");
    if (text.reverse) refuse("not with " + spell("reverse") + " (forward solves only)");
    if (text.periodic) refuse("not with " + spell("periodic"));
    if (text.gradient) refuse("not with " + spell("gradient"));
    if (!text.points.empty()) refuse("not with " + spell("points") + " (uniform coarsening only)");
    if (r.levels < 2) refuse("needs " + spell("levels") + " >= 2 (refinement follows the cycles)");
    r.refine = true;
    r.error_estimates = r.instance->local_order();  // what the App's refinement reads
    r.refine_fraction = v.number("refine_fraction", "a number in (0, 1]");
    if (!(r.refine_fraction > 0 && r.refine_fraction <= 1))
      v.invalid("refine_fraction", "a number in (0, 1]");
    r.settings.refine_fraction = r.refine_fraction;
    r.max_refinements = static_cast<int>(
        v.integer("max_refinements", 0, "an integer >= 0", std::numeric_limits<int>::max()));
    if (text.values.count("max_intervals"))
      r.max_intervals = v.integer("max_intervals", 1, "an integer >= 1");
  }

  r.delta_rank = static_cast<int>(
      v.integer("delta_rank", 0, "an integer >= 0 (0: off)", std::numeric_limits<int>::max()));
  for (const auto& [on, flag] : {std::pair<bool, const char*>{text.delta_static, "delta_static"},
                                 {text.delta_relax, "delta_relax"}})
    if (on && r.delta_rank == 0)
      throw InvalidOption("run", flag, "needs " + spell("delta_rank") + " >= 1");
  if (r.delta_rank > 0) {
    auto refuse = [&](const std::string& why) { throw InvalidOption("run", "delta_rank", why); };
    const int dimension = r.instance->delta_dimension();
    if (dimension == 0)
      refuse("not available for " + spell("problem") + " " + r.problem +
             "; accepted: " + spell("problem") + " lorenz (its App gives the step's Jacobian)");
    if (r.delta_rank > dimension)
      v.invalid("delta_rank", "an integer in [0, " + std::to_string(dimension) + "] (the " +
                                  "dimension of " + r.problem + "'s state)");
    if (r.convention != Convention::XBraid)
      refuse("needs " + spell("convention") + " xbraid (Delta correction follows XBraid's cycle)");
    for (const auto& [on, flag] : {std::pair<bool, const char*>{text.reverse, "reverse"},
                                   {text.periodic, "periodic"},
                                   {text.richardson, "richardson"},
                                   {text.error_estimates, "error_estimates"},
                                   {text.refine, "refine"},
                                   {text.gradient, "gradient"}})
      if (on) refuse("not with " + spell(flag));
    r.delta_lyapunov = !text.delta_static;
    r.delta_relax = text.delta_relax;
    r.settings.delta_rank = r.delta_rank;
    r.settings.delta_lyapunov = r.delta_lyapunov;
    r.settings.delta_relax = r.delta_relax;
  }

  // Initial guess and storage
  r.init = v.text("init");
  if (text.periodic) {
    auto refuse = [&](const std::string& why) { throw InvalidOption("run", "periodic", why); };
    if (r.init == "sequential")
      refuse("not with " + spell("init") +
             " sequential: a periodic problem has no initial value to march from");
    if (text.richardson) refuse("not with " + spell("richardson"));
    if (text.gradient) refuse("not with " + spell("gradient"));
    if (text.reverse) refuse("not with " + spell("reverse") + " (forward solves only)");
    if (!text.points.empty()) refuse("not with " + spell("points") + " (uniform coarsening only)");
    if (r.levels < 2) refuse("needs " + spell("levels") + " >= 2 (the coarsest level is relaxed)");
    r.periodic = true;
  }
  if (r.init != "sequential") r.settings.guess = InitialGuess::parse(r.init);
  if (r.settings.guess.kind == InitialGuess::Kind::Initial && r.problem != "lorenz")
    v.invalid("init", "zero, value:X, random:SEED, sequential (initial: " + spell("problem") +
                          " lorenz only)");
  r.storage = v.choice("storage", {"all", "cpoints"}) == 0 ? Storage::All : Storage::CPoints;

  r.settings.options = options_of(r);
  return r;
}

}  // namespace weft::mgrit::problems
