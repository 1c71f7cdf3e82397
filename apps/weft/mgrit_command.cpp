#include "mgrit_command.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
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
#include <type_traits>
#include <utility>
#include <vector>

#include "weft/mgrit/app.hpp"
#include "weft/mgrit/gradient.hpp"
#include "weft/mgrit/hierarchy.hpp"
#include "weft/mgrit/options.hpp"
#include "weft/mgrit/problems/advection1d.hpp"
#include "weft/mgrit/problems/brusselator.hpp"
#include "weft/mgrit/problems/dahlquist_levels.hpp"
#include "weft/mgrit/problems/heat1d_periodic.hpp"
#include "weft/mgrit/problems/heat1d_spacetime.hpp"
#include "weft/mgrit/problems/heat2d.hpp"
#include "weft/mgrit/problems/initial_guess.hpp"
#include "weft/mgrit/problems/linear.hpp"
#include "weft/mgrit/problems/space_time.hpp"
#include "weft/mgrit/solver.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

#ifdef WEFT_HAVE_PETSC
#include "weft/mgrit/problems/petsc_heat2d.hpp"
#endif

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
  bool gradient = false;

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
  static constexpr const char* integrator = "be";  ///< brusselator: rk4
  static constexpr const char* nx = "5";           ///< heat1d-periodic, heat2d: 33; advection1d: 64
  static constexpr const char* x0 = "0";
  static constexpr const char* x1 = "2";
  static constexpr const char* kappa = "1";
  static constexpr const char* a = "-1";
  static constexpr const char* b = "1";
  static constexpr const char* c = "0";
  static constexpr const char* u0 = "1";
  static constexpr const char* A = "1";
  static constexpr const char* B = "3";
  static constexpr const char* speed = "1";
  static constexpr const char* side = "1";
  static constexpr const char* space_ranks = "1";
  static constexpr const char* ksp = "cg";
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
       fmt::format("model problem: heat1d, dahlquist, linear, heat1d-periodic, heat2d, "
                   "advection1d, brusselator (default {})",
                   D::problem)},
      {"--lambda", "X", fmt::format("dahlquist: u' = lambda u (default {})", D::lambda)},
      {"--integrator", "NAME[,NAME...]",
       "integrator per level (the last repeats): dahlquist be, fe, tr, mr; linear be, sdirk2; "
       "heat1d, heat1d-periodic, heat2d be, cn; advection1d fe, be; brusselator rk4, rk2 "
       "(default rk4 for brusselator, be otherwise)"},
      {"--nx", "INT[,INT...]",
       "grid points: heat1d one per level incl. the boundary, each coarser grid keeping or "
       "halving the intervals (default 5); heat1d-periodic nodes (default 33); heat2d points "
       "in x incl. the boundary (default 33); advection1d nodes (default 64)"},
      {"--x0", "X", fmt::format("heat1d: left end of the domain (default {})", D::x0)},
      {"--x1", "X", fmt::format("heat1d: right end of the domain (default {})", D::x1)},
      {"--kappa", "X", fmt::format("heat1d: diffusion coefficient > 0 (default {})", D::kappa)},
      {"--ny", "INT", "heat2d: grid points in y incl. the boundary (default: --nx)"},
      {"--lx", "X", fmt::format("heat2d: width of the rectangle (default {})", D::side)},
      {"--ly", "X", fmt::format("heat2d: height of the rectangle (default {})", D::side)},
      {"--space-ranks", "INT",
       fmt::format("heat2d: ranks per time step (PETSc; must divide the rank count; default {})",
                   D::space_ranks)},
      {"--ksp", "cg|lu",
       fmt::format("heat2d with PETSc: linear solver of each step (default {})", D::ksp)},
      {"--a", "X", fmt::format("linear: u' = a u + b t + c (default {})", D::a)},
      {"--b", "X", fmt::format("linear: see --a (default {})", D::b)},
      {"--c", "X", fmt::format("linear: see --a (default {})", D::c)},
      {"--u0", "X", fmt::format("linear: initial value (default {})", D::u0)},
      {"--A", "X", fmt::format("brusselator: parameter A (default {})", D::A)},
      {"--B", "X", fmt::format("brusselator: parameter B (default {})", D::B)},
      {"--speed", "X", fmt::format("advection1d: advection speed a != 0 (default {})", D::speed)},
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
  cmd.add_flag("--gradient", args.gradient,
               "dahlquist, heat1d: also J = |u_N|^2/2 and dJ/dlambda or dJ/dkappa (an adjoint "
               "MGRIT solve)");
}

// ---------------------------------------------------------------------------------------------
// Resolved settings

struct Settings {
  std::string problem;
  double lambda = -1;
  std::string integrator = "be";  ///< the --integrator list, parsed by the problem's class
  std::string nx_text = "5";      ///< heat1d: the --nx list
  int nx = 5;                     ///< the (fine) grid points
  int ny = 5;
  double lx = 1, ly = 1;
  double x0 = 0, x1 = 2, kappa = 1;
  double a = -1, b = 1, c = 0, u0 = 1;  ///< linear
  double A = 1, B = 3;                  ///< brusselator
  double speed = 1;
  int space_ranks = 1;
  std::string ksp = "cg";
  bool ksp_given = false;
  bool gradient = false;
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
  const std::vector<std::string> problems = {
      "heat1d", "dahlquist", "linear", "heat1d-periodic", "heat2d", "advection1d", "brusselator"};
  parse_choice("--problem", s.problem, problems);
  auto only_for = [&](const std::string& flag, const std::vector<std::string>& users) {
    if (!a.given(flag) || std::find(users.begin(), users.end(), s.problem) != users.end()) return;
    std::vector<std::string> with;
    for (const std::string& u : users) with.push_back("--problem " + u);
    invalid_value(flag, a.text.at(flag), "only with " + join(with),
                  "not used by --problem " + s.problem);
  };
  only_for("--lambda", {"dahlquist"});
  only_for("--nx", {"heat1d", "heat1d-periodic", "heat2d", "advection1d"});
  only_for("--x0", {"heat1d"});
  only_for("--x1", {"heat1d"});
  only_for("--kappa", {"heat1d"});
  for (const char* flag : {"--ny", "--lx", "--ly", "--space-ranks", "--ksp"})
    only_for(flag, {"heat2d"});
  for (const char* flag : {"--a", "--b", "--c", "--u0"}) only_for(flag, {"linear"});
  only_for("--A", {"brusselator"});
  only_for("--B", {"brusselator"});
  only_for("--speed", {"advection1d"});
  // The integrator list is parsed (and checked) by the problem's class when it is built.
  s.integrator = a.get("--integrator", s.problem == "brusselator" ? "rk4" : D::integrator);
  auto finite = [&](const std::string& flag, const char* fallback) {
    return parse_number(flag, a.get(flag, fallback), "a finite number");
  };
  s.lambda = finite("--lambda", D::lambda);
  if (s.problem == "heat1d") {
    s.nx_text = a.get("--nx", D::nx);
    s.nx = mg::problems::Heat1DSpaceTime::parse_nx(s.nx_text).at(0);
  } else {
    const char* fallback = s.problem == "advection1d" ? "64" : "33";
    s.nx_text = a.get("--nx", fallback);
    s.nx = static_cast<int>(parse_integer(
        "--nx", s.nx_text, 3,
        s.problem == "heat2d" ? "an integer >= 3 (grid points incl. the 2 boundary points)"
                              : "an integer >= 3 (grid nodes)"));
  }
  s.ny = a.given("--ny") ? static_cast<int>(parse_integer(
                               "--ny", a.text.at("--ny"), 3,
                               "an integer >= 3 (grid points incl. the 2 boundary points)"))
                         : s.nx;
  auto positive = [&](const std::string& flag, const char* fallback) {
    const std::string text = a.get(flag, fallback);
    const double v = parse_number(flag, text, "a finite number > 0");
    if (!(v > 0)) invalid_value(flag, text, "a finite number > 0");
    return v;
  };
  s.lx = positive("--lx", D::side);
  s.ly = positive("--ly", D::side);
  s.kappa = positive("--kappa", D::kappa);
  s.a = finite("--a", D::a);
  s.b = finite("--b", D::b);
  s.c = finite("--c", D::c);
  s.u0 = finite("--u0", D::u0);
  s.A = finite("--A", D::A);
  s.B = finite("--B", D::B);
  const std::string speed = a.get("--speed", D::speed);
  s.speed = parse_number("--speed", speed, "a finite number != 0");
  if (s.speed == 0) invalid_value("--speed", speed, "a finite number != 0");
  s.space_ranks =
      static_cast<int>(parse_integer("--space-ranks", a.get("--space-ranks", D::space_ranks), 1,
                                     "an integer >= 1 that divides the rank count"));
  s.ksp = a.get("--ksp", D::ksp);
  s.ksp_given = a.given("--ksp");
  parse_choice("--ksp", s.ksp, {"cg", "lu"});
  s.x0 = parse_number("--x0", a.get("--x0", D::x0), "a finite number");
  const std::string x1 = a.get("--x1", D::x1);
  s.x1 = parse_number("--x1", x1, "a finite number > --x0");
  if (!(s.x1 > s.x0))
    invalid_value("--x1", x1, "a finite number > --x0 (" + fmt::format("{}", s.x0) + ")");
  s.gradient = a.gradient;
  if (s.gradient) {
    if (s.problem != "dahlquist" && s.problem != "heat1d")
      throw InvalidOption("option --gradient: not available for --problem " + s.problem +
                          "; accepted: --problem dahlquist (dJ/dlambda) or heat1d (dJ/dkappa)");
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
std::vector<double> values_of(const std::array<double, 2>& u) {
  return {u[0], u[1]};
}

// The values to record for the observed state `u`, or nothing on the ranks that do not record.
template <class Problem>
std::optional<std::vector<double>> record_values(Problem&, const typename Problem::State& u) {
  return values_of(u);
}
#ifdef WEFT_HAVE_PETSC
// Collective over the space ranks (which all observe the same points); space rank 0 records.
std::optional<std::vector<double>> record_values(mg::problems::PetscHeat2D& problem,
                                                 const mg::problems::PetscVector& u) {
  std::vector<double> all = problem.gather(u);
  if (mpi::rank(problem.space()) != 0) return std::nullopt;
  return all;
}
#endif

struct Record {
  double t = 0;
  std::vector<double> values;
};

template <class Problem>
class Observed {
  using Ops = mg::AppOps<Problem>;

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
  // Spatial transfers only where the problem has them (AppOps detects these members).
  template <class P = Problem, std::enable_if_t<mg::AppOps<P>::spatial, int> = 0>
  void coarsen(const State& fine, State& coarse, int fine_level) {
    Ops::coarsen(problem_, fine, coarse, fine_level);
  }
  template <class P = Problem, std::enable_if_t<mg::AppOps<P>::spatial, int> = 0>
  void refine(const State& coarse, State& fine, int coarse_level) {
    Ops::refine(problem_, coarse, fine, coarse_level);
  }
  void observe(const State& u, double t, index_t index) {
    if (auto values = record_values(problem_, u)) observed_[index] = Record{t, std::move(*values)};
  }
  void check_levels(int levels) const { problem_.check_levels(levels); }

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
  /// --gradient: J, dJ/dp (p named by `parameter`) and the adjoint solve's result.
  std::optional<double> objective, gradient;
  std::string parameter;
  mg::Result adjoint;
};

std::string number(double x) {
  return fmt::format("{:g}", x);
}

std::string residual_text(const std::optional<double>& r) {
  return r ? fmt::format("{:.9e}", *r) : std::string("-");
}

std::string problem_line(const Settings& s) {
  const std::string integ = "integrator " + s.integrator;
  if (s.problem == "heat1d")
    return fmt::format("heat1d: u_t = kappa u_xx + f(x,t), kappa {}, nx {} on [{}, {}], {}",
                       number(s.kappa), s.nx_text, number(s.x0), number(s.x1), integ);
  if (s.problem == "linear")
    return fmt::format("linear: u' = a u + b t + c, a {}, b {}, c {}, u0 {}, {}", number(s.a),
                       number(s.b), number(s.c), number(s.u0), integ);
  if (s.problem == "heat1d-periodic")
    return fmt::format("heat1d-periodic: u_t = u_xx on a ring, nx {}, {}", s.nx, integ);
  if (s.problem == "heat2d")
    return fmt::format("heat2d: u_t = Laplace u + f, {} x {} points on [0, {}] x [0, {}], {}{}",
                       s.nx, s.ny, number(s.lx), number(s.ly), integ,
                       mg::problems::petsc_available()
                           ? fmt::format(", PETSc ksp {}, space ranks {}", s.ksp, s.space_ranks)
                           : std::string());
  if (s.problem == "advection1d")
    return fmt::format("advection1d: u_t + a u_x = 0 on a ring, a {}, nx {}, {}", number(s.speed),
                       s.nx, integ);
  if (s.problem == "brusselator")
    return fmt::format("brusselator: A {}, B {}, {}", number(s.A), number(s.B), integ);
  return fmt::format("dahlquist: u' = lambda u, lambda {}, {}", number(s.lambda), integ);
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

json optional_json(const std::optional<double>& x) {
  return x ? json(*x) : json(nullptr);
}

json options_json(const Settings& s, const mg::Options& o, int built_levels) {
  json j;
  j["problem"] = s.problem;
  j["integrator"] = s.integrator;
  if (s.problem == "heat1d") {
    j["nx"] = s.nx;
    j["nx_per_level"] = mg::problems::Heat1DSpaceTime::parse_nx(s.nx_text).items();
    j["x0"] = s.x0;
    j["x1"] = s.x1;
    j["kappa"] = s.kappa;
  } else if (s.problem == "dahlquist") {
    j["lambda"] = s.lambda;
  } else if (s.problem == "linear") {
    j["a"] = s.a;
    j["b"] = s.b;
    j["c"] = s.c;
    j["u0"] = s.u0;
  } else if (s.problem == "heat2d") {
    j["nx"] = s.nx;
    j["ny"] = s.ny;
    j["lx"] = s.lx;
    j["ly"] = s.ly;
    j["space_ranks"] = s.space_ranks;
    j["petsc"] = mg::problems::petsc_available();
    if (mg::problems::petsc_available()) j["ksp"] = s.ksp;
  } else if (s.problem == "brusselator") {
    j["A"] = s.A;
    j["B"] = s.B;
  } else {
    j["nx"] = s.nx;
    if (s.problem == "advection1d") j["speed"] = s.speed;
  }
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

// Where a run happens: the solver's (time) communicator; whether this rank prints and writes
// the JSON file (world rank 0 only) and whether it takes part in writing the CSV solution (the
// ranks that record observed states: all of them, or space rank 0 of each time group).
struct Layout {
  MPI_Comm time = MPI_COMM_WORLD;
  bool leader = false;
  bool writer = true;
};

Layout world_layout(MPI_Comm comm) {
  return Layout{comm, mpi::rank(comm) == 0, true};
}

// Timings (max over the ranks of `comm`) and steps per level (summed) of one solve.
void collect_statistics(const mg::Statistics& st, MPI_Comm comm, Summary& sum) {
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
}

void describe_hierarchy(const mg::Hierarchy& h, Summary& sum) {
  sum.intervals = h.intervals_per_level();
  for (int l = 0; l < h.levels(); ++l) sum.cf_built.push_back(h.level(l).cfactor);
}

// Solves with `app` (the problem itself, or the problem wrapped in Observed when --output asks
// for the solution: an observer costs an extra fine sweep in some configurations, so it is only
// there when needed).
template <class App>
int run_app(App& app, const std::map<index_t, Record>* observed, int width, const Settings& s,
            const Layout& layout) {
  const MPI_Comm comm = layout.time;
  const mg::Options options = make_options(s);
  const mg::TimeGrid grid = mg::TimeGrid::uniform(s.t0, s.t1, s.nt);
  std::unique_ptr<mg::Solver<App>> solver =
      s.points.empty() ? std::make_unique<mg::Solver<App>>(app, comm, grid, options)
                       : std::make_unique<mg::Solver<App>>(app, comm, grid, s.points, options);
  app.check_levels(solver->hierarchy().levels());

  Summary sum;
  describe_hierarchy(solver->hierarchy(), sum);
  if (layout.leader) print_header(s, solver->options(), sum);

  sum.result = solver->solve();
  collect_statistics(solver->statistics(), comm, sum);

  if (observed && layout.writer) write_csv(s, *observed, comm, width);
  if (layout.leader) {
    print_report(sum);
    if (!s.json_path.empty()) write_json(s, solver->options(), sum);
  }
  return kExitOk;
}

template <class Problem>
int run_problem(Problem& problem, int width, const Settings& s, const Layout& layout) {
  if (s.output_path.empty()) return run_app(problem, nullptr, width, s, layout);
  Observed<Problem> app(problem);
  return run_app(app, &app.observed(), width, s, layout);
}

// --gradient: the forward solve, then the adjoint solve (mgrit::gradient); the report shows
// the forward solve's residuals, then the adjoint's summary, J and dJ/dp.
template <class Problem>
int run_gradient(Problem& problem, const std::string& parameter, const Settings& s, MPI_Comm comm) {
  const mg::Options options = make_options(s);
  const mg::TimeGrid grid = mg::TimeGrid::uniform(s.t0, s.t1, s.nt);
  const mg::Hierarchy h = mg::Hierarchy::uniform(grid, options);
  problem.check_levels(h.levels());

  Summary sum;
  describe_hierarchy(h, sum);
  const bool leader = mpi::rank(comm) == 0;
  if (leader) print_header(s, options, sum);

  const mg::GradientResult g = mg::gradient(problem, comm, grid, options);
  sum.result = g.forward;
  collect_statistics(g.forward_statistics, comm, sum);
  sum.objective = g.objective;
  sum.gradient = g.gradient;
  sum.parameter = parameter;
  sum.adjoint = g.adjoint;
  if (leader) {
    print_report(sum);
    if (!s.json_path.empty()) write_json(s, options, sum);
  }
  return kExitOk;
}

namespace pr = mg::problems;

int run_heat2d(const Settings& s, double t_start, MPI_Comm comm) {
  const pr::Heat2DGrid grid{s.nx, s.ny, s.lx, s.ly};
  const auto methods = pr::Heat2D::parse_methods(s.integrator);
  const std::string space_text = std::to_string(s.space_ranks);
  if (s.space_ranks > 1) pr::require_petsc("--space-ranks", space_text);
#ifdef WEFT_HAVE_PETSC
  // PETSc for every space rank count, so that runs at different counts compare like with like.
  auto comms = pr::split_space_time(comm, s.space_ranks);
  const pr::KspSettings ksp = pr::KspSettings::parse(s.ksp);
  pr::PetscSession session;
  const Layout layout{comms.time.get(), mpi::rank(comm) == 0, comms.space_rank == 0};
  // The App (and every PETSc object) ends before the session.
  pr::PetscHeat2D app(comms.space.get(), grid, methods, t_start, s.guess, ksp);
  try {
    return run_problem(app, static_cast<int>(grid.unknowns()), s, layout);
  } catch (const Divergence& e) {
    // A KSP failure is collective over one time group only: with several groups the others
    // wait for it in the time communicator, so it must abort every rank (still exit code 1).
    // MGRIT's own divergence (a reduced residual) is collective and stays a Divergence.
    const std::string what = e.what();
    if (comms.time_ranks > 1 && what.rfind("PetscHeat2D:", 0) == 0) throw Error(what);
    throw;
  }
#else
  if (s.ksp_given) pr::require_petsc("--ksp", s.ksp);
  pr::Heat2D app(grid, methods, t_start, s.guess);
  return run_problem(app, static_cast<int>(grid.unknowns()), s, world_layout(comm));
#endif
}

int run_mgrit(const Args& args, MPI_Comm comm) {
  const Settings s = resolve(args, comm);
  // Reverse solves start from the value at t1.
  const double t_start = s.reverse ? s.t1 : s.t0;
  const Layout world = world_layout(comm);
  if (s.problem == "heat1d") {
    pr::Heat1DSpaceTime heat(pr::Heat1DSpaceTime::parse_nx(s.nx_text), s.x0, s.x1, s.kappa,
                             pr::Heat1DSpaceTime::parse_methods(s.integrator), t_start, s.guess);
    if (s.gradient) return run_gradient(heat, "kappa", s, comm);
    return run_problem(heat, static_cast<int>(heat.interior(0)), s, world);
  }
  if (s.problem == "dahlquist") {
    pr::DahlquistLevels dahlquist(s.lambda, pr::DahlquistLevels::parse_integrators(s.integrator),
                                  t_start, s.guess);
    if (s.gradient) return run_gradient(dahlquist, "lambda", s, comm);
    return run_problem(dahlquist, 1, s, world);
  }
  if (s.problem == "linear") {
    pr::LinearOde ode(pr::LinearOde::Parameters{s.a, s.b, s.c, s.u0},
                      pr::LinearOde::parse_methods(s.integrator), t_start, s.guess);
    return run_problem(ode, 1, s, world);
  }
  if (s.problem == "heat1d-periodic") {
    pr::Heat1DPeriodic heat(s.nx, pr::Heat1DPeriodic::parse_methods(s.integrator), t_start,
                            s.guess);
    return run_problem(heat, static_cast<int>(heat.nodes()), s, world);
  }
  if (s.problem == "heat2d") return run_heat2d(s, t_start, comm);
  if (s.problem == "advection1d") {
    pr::Advection1D adv(s.nx, s.speed, pr::Advection1D::parse_methods(s.integrator), t_start,
                        s.guess);
    return run_problem(adv, static_cast<int>(adv.nodes()), s, world);
  }
  pr::Brusselator bru(s.A, s.B, pr::Brusselator::parse_methods(s.integrator), t_start, s.guess);
  return run_problem(bru, 2, s, world);
}

}  // namespace

Subcommand add_mgrit_command(CLI::App& weft) {
  CLI::App* cmd = weft.add_subcommand(
      "mgrit",
      "Solve a model problem (heat1d, dahlquist, linear, heat1d-periodic, heat2d, advection1d, "
      "brusselator) with MGRIT and print the residual history. "
      "Without flags: the PyMGRIT heat reference run of DESIGN.md.");
  auto args = std::make_shared<Args>();
  add_flags(*cmd, *args);
  return Subcommand{cmd, [args](MPI_Comm comm) { return run_mgrit(*args, comm); }};
}

}  // namespace weft::cli
