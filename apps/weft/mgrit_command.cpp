#include "mgrit_command.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "weft/mgrit/app.hpp"
#include "weft/mgrit/options.hpp"
#include "weft/mgrit/problems/dahlquist.hpp"
#include "weft/mgrit/problems/heat1d.hpp"
#include "weft/mgrit/problems/initial_guess.hpp"
#include "weft/mgrit/solver.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace weft::cli {
namespace {

namespace mg = weft::mgrit;
using json = nlohmann::json;
using mg::index_t;

// ---------------------------------------------------------------------------------------------
// The command line: every value is taken as text and converted by resolve(), so that each bad
// value gets one message in the same form ("option --X: 'V' is invalid; accepted: ...").

struct Args {
  std::map<std::string, std::string> text;  ///< flag -> value, for the flags given
  std::map<std::string, CLI::Option*> options;
  bool relax_only_coarsest = false;
  bool no_residual = false;
  bool reverse = false;

  bool given(const std::string& flag) const { return options.at(flag)->count() > 0; }
  /// The given value, or `fallback` (the documented default).
  std::string get(const std::string& flag, const std::string& fallback) const {
    return given(flag) ? text.at(flag) : fallback;
  }
};

// Defaults: the PyMGRIT heat reference run of DESIGN.md, iterated to the tolerance (its first
// two residuals are the reference figures; --max-iter 2 reproduces the reference run exactly).
struct Defaults {
  static constexpr const char* problem = "heat1d";
  static constexpr const char* lambda = "-1";
  static constexpr const char* integrator = "be";
  static constexpr const char* nx = "5";
  static constexpr const char* x0 = "0";
  static constexpr const char* x1 = "2";
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

void add_flags(CLI::App& cmd, Args& args) {
  struct Flag {
    const char* name;
    const char* type;
    std::string help;
  };
  using D = Defaults;
  const std::string list = " (one value, or a comma list: one per level, the last repeats)";
  const Flag flags[] = {
      {"--problem", "NAME",
       fmt::format("model problem: heat1d, dahlquist (default {})", D::problem)},
      {"--lambda", "X", fmt::format("dahlquist: u' = lambda u (default {})", D::lambda)},
      {"--integrator", "NAME",
       fmt::format("dahlquist: be, fe, tr, mr (default {}); heat1d is be only", D::integrator)},
      {"--nx", "INT",
       fmt::format("heat1d: grid points incl. the 2 boundary points (default {})", D::nx)},
      {"--x0", "X", fmt::format("heat1d: left end of the domain (default {})", D::x0)},
      {"--x1", "X", fmt::format("heat1d: right end of the domain (default {})", D::x1)},
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
  for (const Flag& f : flags) {
    CLI::Option* opt = cmd.add_option(f.name, args.text[f.name], f.help)->type_name(f.type);
    args.options[f.name] = opt;
  }
  cmd.add_flag("--relax-only-coarsest", args.relax_only_coarsest,
               "relax the coarsest level instead of solving it sequentially");
  cmd.add_flag("--no-residual", args.no_residual,
               "do not compute residuals: run exactly --max-iter iterations");
  cmd.add_flag("--reverse", args.reverse,
               "solve from t1 down to t0 (the initial value is then at t1)");
}

// ---------------------------------------------------------------------------------------------
// Resolved settings

struct Settings {
  std::string problem;
  double lambda = -1;
  mg::problems::Integrator integrator = mg::problems::Integrator::BackwardEuler;
  int nx = 5;
  double x0 = 0, x1 = 2;
  double t0 = 0, t1 = 2;
  index_t nt = 64;
  int levels = 3;
  bool levels_given = false;
  std::vector<int> cf, nrelax;
  std::vector<double> cwt;
  index_t min_coarse = 2;
  std::optional<int> nrelax_coarsest;
  bool relax_only_coarsest = false;
  std::optional<bool> skip, nested;
  mg::Cycle cycle = mg::Cycle::V;
  double tol = 0, rtol = 0;
  mg::TemporalNorm tnorm = mg::TemporalNorm::Two;
  int max_iter = 2;
  bool residual = true;
  std::string init;
  mg::problems::InitialGuess guess;
  bool sequential_guess = false;
  mg::Storage storage = mg::Storage::All;
  mg::Convention convention = mg::Convention::PyMGRIT;
  std::string points_path;
  std::vector<std::vector<index_t>> points;  ///< explicit coarse levels (user numbering)
  bool reverse = false;
  std::string json_path, output_path;
  int ranks = 1;
};

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

// Rank 0 checks that the output files can be written, before the solve; all ranks learn it.
void check_writable(const std::string& option, const std::string& path, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  int ok = 1;
  std::string reason;
  if (rank == 0) {
    std::ofstream out(path, std::ios::trunc);
    if (!out) {
      ok = 0;
      reason = std::strerror(errno);
    }
  }
  mpi::check(MPI_Bcast(&ok, 1, MPI_INT, 0, comm), "MPI_Bcast");
  if (!ok)
    invalid_value(option, path, "a writable file path",
                  "cannot write it" + (reason.empty() ? "" : ": " + reason));
}

Settings resolve(const Args& a, MPI_Comm comm) {
  using D = Defaults;
  Settings s;
  s.ranks = mpi::size(comm);

  // Problem
  s.problem = a.get("--problem", D::problem);
  const std::vector<std::string> problems = {"heat1d", "dahlquist"};
  parse_choice("--problem", s.problem, problems);
  const bool heat = s.problem == "heat1d";
  auto only_for = [&](const std::string& flag, const std::string& problem) {
    if (a.given(flag) && s.problem != problem)
      invalid_value(flag, a.text.at(flag), "only with --problem " + problem,
                    "not used by --problem " + s.problem);
  };
  only_for("--lambda", "dahlquist");
  only_for("--nx", "heat1d");
  only_for("--x0", "heat1d");
  only_for("--x1", "heat1d");
  const std::string integrator = a.get("--integrator", D::integrator);
  s.integrator = mg::problems::parse_integrator(integrator);
  if (heat && s.integrator != mg::problems::Integrator::BackwardEuler)
    invalid_value("--integrator", integrator, "be (heat1d is backward Euler only)");
  s.lambda = parse_number("--lambda", a.get("--lambda", D::lambda), "a finite number");
  s.nx =
      static_cast<int>(parse_integer("--nx", a.get("--nx", D::nx), 3,
                                     "an integer >= 3 (grid points incl. the 2 boundary points)"));
  s.x0 = parse_number("--x0", a.get("--x0", D::x0), "a finite number");
  const std::string x1 = a.get("--x1", D::x1);
  s.x1 = parse_number("--x1", x1, "a finite number > --x0");
  if (!(s.x1 > s.x0))
    invalid_value("--x1", x1, "a finite number > --x0 (" + fmt::format("{}", s.x0) + ")");

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
    s.guess = mg::problems::InitialGuess::parse(s.init);
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
template <class T, class Set>
void set_per_level(const std::vector<T>& values, Set set) {
  set(values.back(), -1);
  if (values.size() > 1)
    for (std::size_t l = 0; l < values.size(); ++l) set(values[l], static_cast<int>(l));
}

mg::InitialPhase initial_phase(const Settings& s) {
  mg::InitialPhase phase =
      s.convention == mg::Convention::XBraid ? mg::InitialPhase::Skip : mg::InitialPhase::Nested;
  if (!s.skip && !s.nested) return mg::InitialPhase::Default;
  if (s.skip) {
    if (*s.skip)
      phase = mg::InitialPhase::Skip;
    else if (phase == mg::InitialPhase::Skip)
      phase = mg::InitialPhase::None;
  }
  if (s.nested) {
    if (*s.nested)
      phase = mg::InitialPhase::Nested;
    else if (phase == mg::InitialPhase::Nested)
      phase = mg::InitialPhase::None;
  }
  return phase;
}

mg::Options make_options(const Settings& s) {
  mg::Options o;
  o.max_levels(s.levels).min_coarse(s.min_coarse);
  set_per_level(s.cf, [&](int v, int l) { o.cfactor(v, l); });
  set_per_level(s.nrelax, [&](int v, int l) { o.nrelax(v, l); });
  set_per_level(s.cwt, [&](double v, int l) { o.cweight(v, l); });
  if (s.nrelax_coarsest) o.nrelax_coarsest(*s.nrelax_coarsest);
  o.relax_only_coarsest(s.relax_only_coarsest).cycle(s.cycle).convention(s.convention);
  o.initial_phase(initial_phase(s));
  o.initial_guess(s.sequential_guess ? mg::InitialGuess::Sequential : mg::InitialGuess::App);
  o.storage(s.storage).abs_tol(s.tol).rel_tol(s.rtol).temporal_norm(s.tnorm);
  o.max_iterations(s.max_iter).compute_residual(s.residual);
  o.direction(s.reverse ? mg::Direction::Reverse : mg::Direction::Forward);
  return o;
}

// ---------------------------------------------------------------------------------------------
// The App the solver runs: the model problem, plus an observer that records the final values.

std::vector<double> values_of(double u) {
  return {u};
}
std::vector<double> values_of(const std::vector<double>& u) {
  return u;
}

struct Record {
  double t = 0;
  std::vector<double> values;
};

template <class Problem>
class Observed {
  using Ops = mg::AppOps<Problem>;
  static_assert(!Ops::spatial,
                "forward coarsen/refine here before running a problem with spatial coarsening");

 public:
  using State = typename Problem::State;

  explicit Observed(Problem& problem) : problem_(problem) {}

  State init(double t) { return problem_.init(t); }
  void step(const State& in, State& out, double t0, double t1, const mg::StepInfo& info) {
    problem_.step(in, out, t0, t1, info);
  }
  void sum(double a, const State& x, double b, State& y) { Ops::sum(problem_, a, x, b, y); }
  double norm(const State& u) { return Ops::norm(problem_, u); }
  void copy(const State& src, State& dst) { Ops::copy(problem_, src, dst); }
  std::size_t buffer_size(const State& like) { return Ops::buffer_size(problem_, like); }
  void pack(const State& u, void* buffer) { Ops::pack(problem_, u, buffer); }
  void unpack(const void* buffer, State& u) { Ops::unpack(problem_, buffer, u); }
  void observe(const State& u, double t, index_t index) {
    observed_[index] = Record{t, values_of(u)};
  }

  const std::map<index_t, Record>& observed() const { return observed_; }

 private:
  Problem& problem_;
  std::map<index_t, Record> observed_;
};

// ---------------------------------------------------------------------------------------------
// Reporting

struct Summary {
  std::vector<index_t> intervals;  ///< per level
  std::vector<int> cf_built;       ///< the hierarchy's cf per level (0: explicit lists)
  mg::Result result;
  double setup = 0, solve = 0, step = 0, comm = 0, other = 0;  ///< max over ranks
  std::vector<long long> steps;                                ///< per level, summed over ranks
};

std::string number(double x) {
  return fmt::format("{:g}", x);
}

std::string residual_text(const std::optional<double>& r) {
  return r ? fmt::format("{:.9e}", *r) : std::string("-");
}

std::string problem_line(const Settings& s) {
  if (s.problem == "heat1d")
    return fmt::format("heat1d: u_t = u_xx + f(x,t), nx {} on [{}, {}], backward Euler", s.nx,
                       number(s.x0), number(s.x1));
  return fmt::format("dahlquist: u' = lambda u, lambda {}, integrator {}", number(s.lambda),
                     mg::problems::to_string(s.integrator));
}

// How the coarsest level is treated, and with how many sweeps.
int coarsest_sweeps(const mg::Options& o, int level) {
  const bool own = o.nrelax_levels().overrides().count(level) > 0;
  return !own && o.nrelax_coarsest() >= 0 ? o.nrelax_coarsest() : o.nrelax_at(level);
}

void print_header(const Settings& s, const mg::Options& o, const Summary& sum) {
  std::string out;
  auto line = [&](const std::string& text) { out += text + "\n"; };
  line(fmt::format("weft mgrit: {} on {} rank{}", s.problem, s.ranks, s.ranks == 1 ? "" : "s"));
  line("  problem      " + problem_line(s));
  line(fmt::format("  time grid    [{}, {}], {} intervals, {}", number(s.t0), number(s.t1), s.nt,
                   s.reverse ? "reverse (t1 -> t0)" : "forward (t0 -> t1)"));
  line(fmt::format("  convention   {}, cycle {}, initial phase {}, initial guess {}",
                   mg::to_string(o.convention()), mg::to_string(o.cycle()),
                   mg::to_string(o.effective_initial_phase()), s.init));
  line(fmt::format("  stopping     tol {}, rtol {}, tnorm {}, max-iter {}, residual {}",
                   number(s.tol), number(s.rtol), mg::to_string(s.tnorm), s.max_iter,
                   s.residual ? "on" : "off"));
  line(fmt::format("  storage      {}, min-coarse {}, max levels {}{}", mg::to_string(s.storage),
                   s.min_coarse, s.levels,
                   s.points_path.empty() ? "" : ", points from " + s.points_path));
  line("  level  intervals    cf  nrelax  cwt    treatment");
  const int L = static_cast<int>(sum.intervals.size());
  for (int l = 0; l < L; ++l) {
    const bool last = l == L - 1;
    std::string treat, cf, nrelax, cwt;
    if (last && (!o.relax_only_coarsest() || L == 1)) {
      treat = "sequential solve";
      cf = nrelax = cwt = "-";
    } else {
      cf = sum.cf_built[static_cast<size_t>(l)] > 0
               ? std::to_string(sum.cf_built[static_cast<size_t>(l)])
               : std::string("list");
      nrelax = std::to_string(last ? coarsest_sweeps(o, l) : o.nrelax_at(l));
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
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
}

json optional_json(const std::optional<double>& x) {
  return x ? json(*x) : json(nullptr);
}

json options_json(const Settings& s, const mg::Options& o, int built_levels) {
  json j;
  j["problem"] = s.problem;
  if (s.problem == "heat1d") {
    j["nx"] = s.nx;
    j["x0"] = s.x0;
    j["x1"] = s.x1;
    j["integrator"] = "be";
  } else {
    j["lambda"] = s.lambda;
    j["integrator"] = mg::problems::to_string(s.integrator);
  }
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
  const mg::InitialPhase phase = o.effective_initial_phase();
  j["skip"] = phase == mg::InitialPhase::Skip;
  j["nested"] = phase == mg::InitialPhase::Nested;
  j["initial_phase"] = mg::to_string(phase);
  j["cycle"] = mg::to_string(s.cycle);
  j["tol"] = s.tol;
  j["rtol"] = s.rtol;
  j["tnorm"] = mg::to_string(s.tnorm);
  j["max_iter"] = s.max_iter;
  j["residual"] = s.residual;
  j["init"] = s.init;
  j["storage"] = mg::to_string(s.storage);
  j["convention"] = mg::to_string(s.convention);
  j["points"] = s.points_path.empty() ? json(nullptr) : json(s.points_path);
  j["reverse"] = s.reverse;
  j["final_sweep"] = mg::to_string(o.effective_final_sweep());
  j["ranks"] = s.ranks;
  return j;
}

void write_json(const Settings& s, const mg::Options& o, const Summary& sum) {
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
  std::ofstream out(s.json_path, std::ios::trunc);
  out << j.dump(2) << "\n";
  out.close();  // flushes: a full disk shows here
  if (!out) throw std::runtime_error("cannot write --json file '" + s.json_path + "'");
}

// Gathers every rank's observed fine points on rank 0 and writes them sorted by index.
void write_csv(const Settings& s, const std::map<index_t, Record>& observed, MPI_Comm comm,
               int width) {
  const int rank = mpi::rank(comm), ranks = mpi::size(comm);
  const int row = 2 + width;  // index, t, values
  std::vector<double> mine;
  for (const auto& [index, rec] : observed) {
    if (static_cast<int>(rec.values.size()) != width)
      throw std::logic_error("observed state of " + std::to_string(rec.values.size()) +
                             " values, expected " + std::to_string(width));
    mine.push_back(static_cast<double>(index));
    mine.push_back(rec.t);
    mine.insert(mine.end(), rec.values.begin(), rec.values.end());
  }
  int count = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(ranks)), displs(static_cast<size_t>(ranks));
  mpi::check(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm), "MPI_Gather");
  std::vector<double> all;
  if (rank == 0) {
    int total = 0;
    for (int r = 0; r < ranks; ++r) {
      displs[static_cast<size_t>(r)] = total;
      total += counts[static_cast<size_t>(r)];
    }
    all.resize(static_cast<size_t>(total));
  }
  mpi::check(MPI_Gatherv(mine.data(), count, MPI_DOUBLE, all.data(), counts.data(), displs.data(),
                         MPI_DOUBLE, 0, comm),
             "MPI_Gatherv (solution)");
  if (rank != 0) return;
  std::map<index_t, std::size_t> rows;  // index -> offset in `all`
  for (std::size_t off = 0; off < all.size(); off += static_cast<size_t>(row))
    rows[static_cast<index_t>(all[off])] = off;
  if (static_cast<index_t>(rows.size()) != s.nt + 1)
    throw std::logic_error("observed " + std::to_string(rows.size()) + " fine points, expected " +
                           std::to_string(s.nt + 1));
  std::ofstream out(s.output_path, std::ios::trunc);
  out << "t";
  if (width == 1) {
    out << ",u";
  } else {
    for (int i = 1; i <= width; ++i) out << ",u_" << i;
  }
  out << "\n";
  for (const auto& [index, off] : rows) {
    out << fmt::format("{:.17g}", all[off + 1]);
    for (int i = 0; i < width; ++i)
      out << fmt::format(",{:.17g}", all[off + 2 + static_cast<size_t>(i)]);
    out << "\n";
  }
  out.close();
  if (!out) throw std::runtime_error("cannot write --output file '" + s.output_path + "'");
}

// ---------------------------------------------------------------------------------------------
// The run

// Solves with `app` (the problem itself, or the problem wrapped in Observed when --output asks
// for the solution: an observer costs an extra fine sweep in some configurations, so it is only
// there when needed).
template <class App>
int run_app(App& app, const std::map<index_t, Record>* observed, int width, const Settings& s,
            MPI_Comm comm) {
  const int rank = mpi::rank(comm);
  const mg::Options options = make_options(s);
  const mg::TimeGrid grid = mg::TimeGrid::uniform(s.t0, s.t1, s.nt);
  std::unique_ptr<mg::Solver<App>> solver =
      s.points.empty() ? std::make_unique<mg::Solver<App>>(app, comm, grid, options)
                       : std::make_unique<mg::Solver<App>>(app, comm, grid, s.points, options);

  Summary sum;
  const mg::Hierarchy& h = solver->hierarchy();
  sum.intervals = h.intervals_per_level();
  for (int l = 0; l < h.levels(); ++l) sum.cf_built.push_back(h.level(l).cfactor);
  if (rank == 0) print_header(s, solver->options(), sum);

  sum.result = solver->solve();

  const mg::Statistics& st = solver->statistics();
  double local[5] = {st.setup_seconds, st.solve_seconds, st.step_seconds, st.comm_seconds,
                     st.other_seconds()};
  double global[5] = {};
  mpi::check(MPI_Reduce(local, global, 5, MPI_DOUBLE, MPI_MAX, 0, comm), "MPI_Reduce (timings)");
  sum.setup = global[0];
  sum.solve = global[1];
  sum.step = global[2];
  sum.comm = global[3];
  sum.other = global[4];
  std::vector<long long> steps(st.steps_per_level.begin(), st.steps_per_level.end());
  sum.steps.assign(steps.size(), 0);
  mpi::check(MPI_Reduce(steps.data(), sum.steps.data(), static_cast<int>(steps.size()),
                        MPI_LONG_LONG, MPI_SUM, 0, comm),
             "MPI_Reduce (steps)");

  if (observed) write_csv(s, *observed, comm, width);
  if (rank == 0) {
    print_report(sum);
    if (!s.json_path.empty()) write_json(s, solver->options(), sum);
  }
  return kExitOk;
}

template <class Problem>
int run_problem(Problem& problem, int width, const Settings& s, MPI_Comm comm) {
  if (s.output_path.empty()) return run_app(problem, nullptr, width, s, comm);
  Observed<Problem> app(problem);
  return run_app(app, &app.observed(), width, s, comm);
}

int run_mgrit(const Args& args, MPI_Comm comm) {
  const Settings s = resolve(args, comm);
  // Reverse solves start from the value at t1.
  const double t_start = s.reverse ? s.t1 : s.t0;
  if (s.problem == "heat1d") {
    mg::problems::Heat1D heat(s.nx, s.x0, s.x1, t_start, s.guess);
    return run_problem(heat, static_cast<int>(heat.interior()), s, comm);
  }
  mg::problems::Dahlquist dahlquist(s.lambda, s.integrator, t_start, s.guess);
  return run_problem(dahlquist, 1, s, comm);
}

}  // namespace

Subcommand add_mgrit_command(CLI::App& weft) {
  CLI::App* cmd = weft.add_subcommand(
      "mgrit",
      "Solve a model problem (heat1d, dahlquist) with MGRIT and print the residual history. "
      "Without flags: the PyMGRIT heat reference run of DESIGN.md.");
  auto args = std::make_shared<Args>();
  add_flags(*cmd, *args);
  return Subcommand{cmd, [args](MPI_Comm comm) { return run_mgrit(*args, comm); }};
}

}  // namespace weft::cli
