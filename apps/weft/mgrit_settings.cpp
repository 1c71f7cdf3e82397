#include "mgrit_settings.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_support.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace weft::cli {

namespace mg = weft::mgrit;
namespace pr = weft::mgrit::problems;
using json = nlohmann::json;
using mg::index_t;

std::string flag_of_parameter(const std::string& name) {
  std::string flag = "--" + name;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

bool MgritArgs::given(const std::string& flag) const {
  return options.at(flag)->count() > 0;
}

std::string MgritArgs::get(const std::string& flag, const std::string& fallback) const {
  return given(flag) ? text.at(flag) : fallback;
}

namespace {

// Defaults of the shared flags: the PyMGRIT heat reference run (docs/mgrit.md, §4), iterated to the
// tolerance (its first two residuals are the reference figures; --max-iter 2 reproduces the
// reference run exactly). The problems' own defaults are in their registry entries.
struct Defaults {
  static constexpr const char* t0 = "0";
  static constexpr const char* t1 = "2";
  static constexpr const char* nt = "64";
  static constexpr const char* levels = "3";
  static constexpr const char* cf = "4";
  static constexpr const char* min_coarse = "2";
  static constexpr const char* nrelax = "1";
  static constexpr const char* cwt = "1";
  static constexpr const char* cycle = "V";
  static constexpr const char* tol = "1e-10";
  static constexpr const char* rtol = "0";
  static constexpr const char* tnorm = "2";
  static constexpr const char* max_iter = "100";
  static constexpr const char* init = "zero";
  static constexpr const char* storage = "all";
  static constexpr const char* convention = "pymgrit";
};

struct FlagHelp {
  std::string name, type, help;
};

// --problem, then every problem flag once (in registry order), its help gathered per problem.
std::vector<FlagHelp> problem_flags() {
  std::vector<std::string> names;
  for (const pr::CatalogueEntry& e : pr::catalogue()) names.push_back(e.name);
  std::vector<FlagHelp> out{
      {"--problem", "NAME",
       fmt::format("model problem: {} (default {})", join(names), pr::catalogue().front().name)}};
  for (const pr::CatalogueEntry& e : pr::catalogue())
    for (const pr::Parameter& f : e.parameters) {
      const std::string flag = flag_of_parameter(f.name);
      auto it =
          std::find_if(out.begin(), out.end(), [&](const FlagHelp& h) { return h.name == flag; });
      const std::string text =
          fmt::format("{}: {}{}", e.name, f.help,
                      *f.fallback ? fmt::format(" (default {})", f.fallback) : std::string());
      if (it == out.end())
        out.push_back({flag, f.type, text});
      else
        it->help += "; " + text;
    }
  return out;
}

}  // namespace

void add_mgrit_flags(CLI::App& cmd, MgritArgs& args) {
  using D = Defaults;
  const std::string list = " (one value, or a comma list: one per level, the last repeats)";
  std::vector<FlagHelp> flags = problem_flags();
  const std::vector<FlagHelp> shared = {
      {"--t0", "T", fmt::format("start time (default {})", D::t0)},
      {"--t1", "T", fmt::format("end time, > t0 (default {})", D::t1)},
      {"--nt", "INT", fmt::format("fine time intervals (default {})", D::nt)},
      {"--levels", "INT", fmt::format("maximum number of levels (default {})", D::levels)},
      {"--cf", "INT[,INT...]", fmt::format("coarsening factor >= 2{} (default {})", list, D::cf)},
      {"--min-coarse", "INT",
       fmt::format("coarsen only while this many intervals remain (default {})", D::min_coarse)},
      {"--nrelax", "INT[,INT...]",
       fmt::format("extra CF sweeps after the first F: 0 F, 1 FCF{} (default {})", list,
                   D::nrelax)},
      {"--nrelax-coarsest", "INT",
       "sweeps on a relaxation-only coarsest level (default: that level's --nrelax)"},
      {"--cwt", "X[,X...]", fmt::format("C-relaxation weight > 0{} (default {})", list, D::cwt)},
      {"--skip", "0|1", "skip the first down-cycle (default: the convention's; xbraid 1)"},
      {"--nested", "0|1", "nested iteration first (default: the convention's; pymgrit 1)"},
      {"--cycle", "V|F", fmt::format("cycle type (default {})", D::cycle)},
      {"--tol", "X", fmt::format("absolute residual tolerance, 0 off (default {})", D::tol)},
      {"--rtol", "X",
       fmt::format("tolerance relative to the first residual, 0 off (default {})", D::rtol)},
      {"--tnorm", "1|2|inf", fmt::format("temporal norm of the residual (default {})", D::tnorm)},
      {"--max-iter", "INT", fmt::format("maximum iterations (default {})", D::max_iter)},
      {"--init", "GUESS",
       fmt::format("guess away from the initial point: zero, value:X, random:SEED, sequential "
                   "(default {})",
                   D::init)},
      {"--storage", "all|cpoints",
       fmt::format("what every level but the coarsest stores (default {})", D::storage)},
      {"--convention", "NAME",
       fmt::format("residual convention and default initial phase: xbraid, pymgrit (default {})",
                   D::convention)},
      {"--points", "FILE", "explicit coarse levels: JSON {\"levels\": [[0, ...], ...]}"},
      {"--json", "PATH", "write a JSON summary of the run"},
      {"--output", "PATH", "write the final fine-grid solution as CSV"},
  };
  flags.insert(flags.end(), shared.begin(), shared.end());
  for (const FlagHelp& f : flags)
    args.options[f.name] = cmd.add_option(f.name, args.text[f.name], f.help)->type_name(f.type);
  std::vector<std::string> with_gradient;
  for (const pr::CatalogueEntry& e : pr::catalogue())
    if (e.gradient_parameter)
      with_gradient.push_back(fmt::format("{} (dJ/d{})", e.name, e.gradient_parameter));
  cmd.add_flag("--relax-only-coarsest", args.relax_only_coarsest,
               "relax the coarsest level instead of solving it sequentially");
  cmd.add_flag("--no-residual", args.no_residual,
               "do not compute residuals: run exactly --max-iter iterations");
  cmd.add_flag("--reverse", args.reverse,
               "solve from t1 down to t0 (the initial value is then at t1)");
  cmd.add_flag("--gradient", args.gradient,
               "also J = |u_N|^2/2 and dJ/dp (an adjoint MGRIT solve) for " + join(with_gradient));
}

namespace {

std::string list_accepted(const std::string& what) {
  return what + ", or a comma list of them, one per level (at most --levels values)";
}

// Rank 0 reads the file; every rank gets the same bytes (or the same error).
std::string read_shared_file(const std::string& option, const std::string& path, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::string content, reason;
  long long size = -1;
  if (rank == 0) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream buffer;
      buffer << in.rdbuf();
      if (in.good() || in.eof()) {
        content = buffer.str();
        size = static_cast<long long>(content.size());
      }
    }
    if (size < 0) reason = std::strerror(errno);
  }
  mpi::check(MPI_Bcast(&size, 1, MPI_LONG_LONG, 0, comm), "MPI_Bcast (file size)");
  if (size < 0) {
    int len = static_cast<int>(reason.size());
    mpi::check(MPI_Bcast(&len, 1, MPI_INT, 0, comm), "MPI_Bcast");
    reason.resize(static_cast<size_t>(len));
    mpi::check(MPI_Bcast(reason.data(), len, MPI_CHAR, 0, comm), "MPI_Bcast");
    invalid_value(option, path, "a readable JSON file {\"levels\": [[0, ...], ...]}",
                  "cannot read it: " + reason);
  }
  content.resize(static_cast<size_t>(size));
  mpi::check(MPI_Bcast(content.data(), static_cast<int>(size), MPI_CHAR, 0, comm),
             "MPI_Bcast (file)");
  return content;
}

// {"levels": [[...], ...]}: level l+1's points as fine indices, each list a subset of the one
// above, containing the initial point (0, or nt for reverse solves).
std::vector<std::vector<index_t>> parse_points(const std::string& path, const std::string& text,
                                               index_t nt, bool reverse) {
  const std::string accepted =
      "a JSON file {\"levels\": [[0, ...], ...]}: per coarse level, strictly increasing fine "
      "indices in [0, nt], a subset of the level above, containing the initial point";
  auto fail = [&](const std::string& why) { invalid_value("--points", path, accepted, why); };
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    std::string what = e.what();
    fail("not valid JSON: " + what);
  }
  if (!doc.is_object() || !doc.contains("levels") || !doc["levels"].is_array())
    fail("no \"levels\" array");
  if (doc["levels"].empty()) fail("\"levels\" is empty");
  std::vector<std::vector<index_t>> levels;
  const index_t initial = reverse ? nt : 0;
  for (std::size_t c = 0; c < doc["levels"].size(); ++c) {
    const json& list = doc["levels"][c];
    const std::string name = "level " + std::to_string(c + 1);
    if (!list.is_array()) fail(name + " is not an array");
    std::vector<index_t> points;
    for (const json& v : list) {
      if (!v.is_number_integer()) fail(name + ": " + v.dump() + " is not an integer index");
      const auto i = v.get<long long>();
      if (i < 0 || i > nt) fail(name + ": index " + std::to_string(i) + " is outside [0, nt]");
      if (!points.empty() && i <= points.back())
        fail(name + ": indices must increase strictly (" + std::to_string(points.back()) +
             " then " + std::to_string(i) + ")");
      points.push_back(i);
    }
    if (points.size() < 2) fail(name + " needs at least 2 points");
    if (!std::binary_search(points.begin(), points.end(), initial))
      fail(name + " lacks the initial point " + std::to_string(initial));
    if (!levels.empty())
      for (index_t i : points)
        if (!std::binary_search(levels.back().begin(), levels.back().end(), i))
          fail(name + ": index " + std::to_string(i) + " is not a point of level " +
               std::to_string(c));
    levels.push_back(std::move(points));
  }
  return levels;
}

// Rank 0 checks that an output file can be written, before the solve; all ranks learn it.
void check_writable(const std::string& option, const std::string& path, MPI_Comm comm) {
  mpi::collectively(comm, [&] {
    if (mpi::rank(comm) == 0) check_output_file(option, path);
  });
}

}  // namespace

MgritSettings resolve(const MgritArgs& a, MPI_Comm comm) {
  using D = Defaults;
  MgritSettings s;
  s.ranks = mpi::size(comm);

  // Problem: its flags only, then its own checks.
  s.problem = a.get("--problem", pr::catalogue().front().name);
  std::vector<std::string> names;
  for (const pr::CatalogueEntry& e : pr::catalogue()) names.push_back(e.name);
  parse_choice("--problem", s.problem, names);
  s.entry = pr::find_problem(s.problem);
  for (const auto& [flag, option] : a.options) {
    if (option->count() == 0) continue;
    std::vector<std::string> users;  // the problems that read `flag` (none: a shared flag)
    for (const pr::CatalogueEntry& e : pr::catalogue())
      for (const pr::Parameter& f : e.parameters)
        if (flag == flag_of_parameter(f.name)) users.push_back(e.name);
    if (users.empty() || std::find(users.begin(), users.end(), s.problem) != users.end()) continue;
    std::vector<std::string> with;
    for (const std::string& u : users) with.push_back("--problem " + u);
    invalid_value(flag, a.text.at(flag), "only with " + join(with),
                  "not used by --problem " + s.problem);
  }
  std::map<std::string, std::string> given;
  for (const pr::Parameter& f : s.entry->parameters)
    if (a.given(flag_of_parameter(f.name))) given[f.name] = a.text.at(flag_of_parameter(f.name));
  const pr::ParameterValues values(*s.entry, given);
  s.integrator = values.text("integrator");
  s.instance = s.entry->make(values);
  s.gradient = a.gradient;
  if (s.gradient) {
    if (!s.entry->gradient_parameter) {
      std::vector<std::string> with;
      for (const pr::CatalogueEntry& e : pr::catalogue())
        if (e.gradient_parameter)
          with.push_back(fmt::format("{} (dJ/d{})", e.name, e.gradient_parameter));
      std::string accepted;
      for (std::size_t i = 0; i < with.size(); ++i)
        accepted += (i == 0 ? "--problem " : i + 1 == with.size() ? " or " : ", ") + with[i];
      throw InvalidOption("option --gradient: not available for --problem " + s.problem +
                          "; accepted: " + accepted);
    }
    for (const char* flag : {"--points", "--output"})
      if (a.given(flag))
        throw InvalidOption(std::string("option --gradient: not with ") + flag +
                            "; accepted: --gradient without " + flag);
    if (a.reverse)
      throw InvalidOption(
          "option --gradient: not with --reverse; accepted: --gradient on a forward solve (the "
          "adjoint solve runs in reverse by itself)");
  }

  // Time grid and hierarchy
  s.t0 = parse_number("--t0", a.get("--t0", D::t0), "a finite number");
  const std::string t1 = a.get("--t1", D::t1);
  s.t1 = parse_number("--t1", t1, "a finite number > --t0");
  if (!(s.t1 > s.t0))
    invalid_value(
        "--t1", t1,
        fmt::format("a finite number > --t0 ({}); use --reverse to solve backward", s.t0));
  s.nt = parse_integer("--nt", a.get("--nt", D::nt), 1, "an integer >= 1",
                       std::numeric_limits<index_t>::max() / 2);
  s.levels_given = a.given("--levels");
  s.levels = static_cast<int>(
      parse_integer("--levels", a.get("--levels", D::levels), 1, "an integer >= 1"));
  s.reverse = a.reverse;
  if (a.given("--points")) {
    s.points_path = a.text.at("--points");
    s.points = parse_points(s.points_path, read_shared_file("--points", s.points_path, comm), s.nt,
                            s.reverse);
    const int file_levels = static_cast<int>(s.points.size()) + 1;
    if (s.levels_given && s.levels != file_levels)
      invalid_value("--points", s.points_path, "a file whose levels agree with --levels",
                    fmt::format("it gives {} levels, --levels is {}", file_levels, s.levels));
    s.levels = file_levels;
  }
  auto check_length = [&](const std::string& flag, std::size_t n, const std::string& accepted) {
    if (n > static_cast<std::size_t>(s.levels))
      invalid_value(flag, a.text.at(flag), accepted,
                    fmt::format("{} values for {} levels", n, s.levels));
  };
  const std::string cf_accepted = list_accepted("an integer >= 2");
  s.cf = parse_int_list("--cf", a.get("--cf", D::cf), 2, cf_accepted);
  check_length("--cf", s.cf.size(), cf_accepted);
  s.min_coarse =
      parse_integer("--min-coarse", a.get("--min-coarse", D::min_coarse), 1, "an integer >= 1");

  // Relaxation and cycles
  const std::string nrelax_accepted = list_accepted("an integer >= 0");
  s.nrelax = parse_int_list("--nrelax", a.get("--nrelax", D::nrelax), 0, nrelax_accepted);
  check_length("--nrelax", s.nrelax.size(), nrelax_accepted);
  if (a.given("--nrelax-coarsest"))
    s.nrelax_coarsest = static_cast<int>(
        parse_integer("--nrelax-coarsest", a.text.at("--nrelax-coarsest"), 0, "an integer >= 0"));
  const std::string cwt_accepted = list_accepted("a number > 0");
  const std::string cwt_text = a.get("--cwt", D::cwt);
  for (const std::string& item : split_list("--cwt", cwt_text, cwt_accepted)) {
    double w = 0;
    try {
      w = parse_number("--cwt", item, cwt_accepted);
    } catch (const InvalidOption&) {
      invalid_value("--cwt", cwt_text, cwt_accepted, "item '" + item + "'");
    }
    if (!(w > 0)) invalid_value("--cwt", cwt_text, cwt_accepted, "item '" + item + "'");
    s.cwt.push_back(w);
  }
  check_length("--cwt", s.cwt.size(), cwt_accepted);
  s.relax_only_coarsest = a.relax_only_coarsest;
  s.cycle = parse_choice("--cycle", a.get("--cycle", D::cycle), {"V", "F"}) == 0 ? mg::Cycle::V
                                                                                 : mg::Cycle::F;
  s.convention =
      parse_choice("--convention", a.get("--convention", D::convention), {"xbraid", "pymgrit"}) == 0
          ? mg::Convention::XBraid
          : mg::Convention::PyMGRIT;
  if (a.given("--skip")) s.skip = parse_switch("--skip", a.text.at("--skip"));
  if (a.given("--nested")) s.nested = parse_switch("--nested", a.text.at("--nested"));
  if (s.skip.value_or(false) && s.nested.value_or(false))
    invalid_value("--nested", "1", "0 when --skip is 1",
                  "--skip 1 and --nested 1 exclude each other");

  // Convergence
  s.tol = parse_number("--tol", a.get("--tol", D::tol), "a number >= 0 (0 switches it off)");
  if (s.tol < 0) invalid_value("--tol", a.text.at("--tol"), "a number >= 0 (0 switches it off)");
  s.rtol = parse_number("--rtol", a.get("--rtol", D::rtol), "a number in [0, 1) (0: off)");
  if (s.rtol < 0 || s.rtol >= 1)
    invalid_value("--rtol", a.text.at("--rtol"), "a number in [0, 1) (0: off)");
  const std::size_t tnorm = parse_choice("--tnorm", a.get("--tnorm", D::tnorm), {"1", "2", "inf"});
  s.tnorm = tnorm == 0   ? mg::TemporalNorm::One
            : tnorm == 1 ? mg::TemporalNorm::Two
                         : mg::TemporalNorm::Inf;
  s.max_iter = static_cast<int>(
      parse_integer("--max-iter", a.get("--max-iter", D::max_iter), 1, "an integer >= 1"));
  s.residual = !a.no_residual;

  // Initial guess and storage
  s.init = a.get("--init", D::init);
  if (s.init == "sequential") {
    s.sequential_guess = true;
  } else {
    s.guess = mgrit::problems::InitialGuess::parse(s.init);
  }
  s.storage = parse_choice("--storage", a.get("--storage", D::storage), {"all", "cpoints"}) == 0
                  ? mg::Storage::All
                  : mg::Storage::CPoints;

  // Files
  if (a.given("--json")) {
    s.json_path = a.text.at("--json");
    check_writable("--json", s.json_path, comm);
  }
  if (a.given("--output")) {
    s.output_path = a.text.at("--output");
    check_writable("--output", s.output_path, comm);
  }
  return s;
}

// A per-level list: one value sets every level; a longer list sets level i to value i (an
// explicit value for the coarsest level then wins over --nrelax-coarsest) and the last value
// also covers the levels beyond the list.
namespace {

template <class T, class Set>
void set_per_level(const std::vector<T>& values, Set set) {
  set(values.back(), -1);
  if (values.size() > 1)
    for (std::size_t l = 0; l < values.size(); ++l) set(values[l], static_cast<int>(l));
}

// --skip / --nested on top of the convention's own initial phase (which the options tell).
mgrit::InitialPhase initial_phase(const MgritSettings& s) {
  mgrit::InitialPhase phase = mgrit::Options().convention(s.convention).effective_initial_phase();
  if (!s.skip && !s.nested) return mgrit::InitialPhase::Default;
  if (s.skip) {
    if (*s.skip)
      phase = mgrit::InitialPhase::Skip;
    else if (phase == mgrit::InitialPhase::Skip)
      phase = mgrit::InitialPhase::None;
  }
  if (s.nested) {
    if (*s.nested)
      phase = mgrit::InitialPhase::Nested;
    else if (phase == mgrit::InitialPhase::Nested)
      phase = mgrit::InitialPhase::None;
  }
  return phase;
}

}  // namespace

mgrit::Options make_options(const MgritSettings& s) {
  mgrit::Options o;
  o.max_levels(s.levels).min_coarse(s.min_coarse);
  set_per_level(s.cf, [&](int v, int l) { o.cfactor(v, l); });
  set_per_level(s.nrelax, [&](int v, int l) { o.nrelax(v, l); });
  set_per_level(s.cwt, [&](double v, int l) { o.cweight(v, l); });
  if (s.nrelax_coarsest) o.nrelax_coarsest(*s.nrelax_coarsest);
  o.relax_only_coarsest(s.relax_only_coarsest).cycle(s.cycle).convention(s.convention);
  o.initial_phase(initial_phase(s));
  o.initial_guess(s.sequential_guess ? mgrit::InitialGuess::Sequential : mgrit::InitialGuess::App);
  o.storage(s.storage).abs_tol(s.tol).rel_tol(s.rtol).temporal_norm(s.tnorm);
  o.max_iterations(s.max_iter).compute_residual(s.residual);
  o.direction(s.reverse ? mgrit::Direction::Reverse : mgrit::Direction::Forward);
  return o;
}

pr::RunSettings run_settings(const MgritSettings& s) {
  pr::RunSettings run;
  run.t0 = s.t0;
  run.t1 = s.t1;
  run.nt = s.nt;
  run.options = make_options(s);
  run.points = s.points;
  run.guess = s.guess;
  run.gradient = s.gradient;
  run.record_solution = !s.output_path.empty();
  return run;
}

}  // namespace weft::cli
