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
  if (name == "guess") return "--init";  // mgrit::problems::InitialGuess::parse
  if (name == "record_solution") return "--output";
  std::string flag = "--" + name;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

bool MgritArgs::given(const std::string& flag) const {
  return options.at(flag)->count() > 0;
}

namespace {

// The library's default of shared setting `flag` as help text.
std::string fallback(const char* name) {
  return pr::run_setting_default(name);
}

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
  const std::string list = " (one value, or a comma list: one per level, the last repeats)";
  std::vector<FlagHelp> flags = problem_flags();
  const std::vector<FlagHelp> shared = {
      {"--t0", "T", fmt::format("start time (default {})", fallback("t0"))},
      {"--t1", "T", fmt::format("end time, > t0 (default {})", fallback("t1"))},
      {"--nt", "INT", fmt::format("fine time intervals (default {})", fallback("nt"))},
      {"--levels", "INT", fmt::format("maximum number of levels (default {})", fallback("levels"))},
      {"--cf", "INT[,INT...]",
       fmt::format("coarsening factor >= 2{} (default {})", list, fallback("cf"))},
      {"--min-coarse", "INT",
       fmt::format("coarsen only while this many intervals remain (default {})",
                   fallback("min_coarse"))},
      {"--nrelax", "INT[,INT...]",
       fmt::format("extra CF sweeps after the first F: 0 F, 1 FCF{} (default {})", list,
                   fallback("nrelax"))},
      {"--nrelax-coarsest", "INT",
       "sweeps on a relaxation-only coarsest level (default: that level's --nrelax)"},
      {"--cwt", "X[,X...]",
       fmt::format("C-relaxation weight > 0{} (default {})", list, fallback("cwt"))},
      {"--skip", "0|1", "skip the first down-cycle (default: the convention's; xbraid 1)"},
      {"--nested", "0|1", "nested iteration first (default: the convention's; pymgrit 1)"},
      {"--cycle", "V|F", fmt::format("cycle type (default {})", fallback("cycle"))},
      {"--tol", "X",
       fmt::format("absolute residual tolerance, 0 off (default {})", fallback("tol"))},
      {"--rtol", "X",
       fmt::format("tolerance relative to the first residual, 0 off (default {})",
                   fallback("rtol"))},
      {"--tnorm", "1|2|inf",
       fmt::format("temporal norm of the residual (default {})", fallback("tnorm"))},
      {"--max-iter", "INT", fmt::format("maximum iterations (default {})", fallback("max_iter"))},
      {"--init", "GUESS",
       fmt::format("guess away from the initial point: zero, value:X, random:SEED, sequential, "
                   "initial (lorenz) (default {})",
                   fallback("init"))},
      {"--storage", "all|cpoints",
       fmt::format("what every level but the coarsest stores (default {})", fallback("storage"))},
      {"--convention", "NAME",
       fmt::format("residual convention and default initial phase: xbraid, pymgrit (default {})",
                   fallback("convention"))},
      {"--refine-fraction", "X",
       fmt::format("with --refine: split the steps whose error estimate exceeds this fraction "
                   "of the largest (default {})",
                   fallback("refine_fraction"))},
      {"--max-refinements", "INT",
       fmt::format("with --refine: stop refining after this many refinements (default {})",
                   fallback("max_refinements"))},
      {"--max-intervals", "INT",
       "with --refine: stop refining once the grid has this many intervals (checked before "
       "refining; default: no limit)"},
      {"--delta-rank", "INT",
       "Delta correction (XBraid's; lorenz, --convention xbraid): the coarse propagators are "
       "corrected by a rank-INT approximation of the fine Jacobian (default 0: off)"},
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
  cmd.add_flag("--richardson", args.richardson,
               "Richardson extrapolation at the fine C-points with the integrator's local order "
               "(linear, dahlquist; --convention xbraid): the converged solution is one order "
               "more accurate than the sequential solve");
  cmd.add_flag("--error-estimates", args.error_estimates,
               "Richardson-based local error estimates at the fine points with the integrator's "
               "local order (linear, dahlquist): the largest and its time are reported (and in "
               "--json)");
  cmd.add_flag("--refine", args.refine,
               "temporal refinement (XBraid's -refinet; linear): from iteration 2 on, steps whose "
               "Richardson error estimate is large are split in two and the hierarchy rebuilt");
  cmd.add_flag("--delta-static", args.delta_static,
               "with --delta-rank: keep the basis static (no Lyapunov-vector estimation, no "
               "exponents; XBraid's ex-07 -noLyap)");
  cmd.add_flag("--delta-relax", args.delta_relax,
               "with --delta-rank: also propagate the basis in relaxation (XBraid's ex-07 "
               "-fcfLyap)");
  cmd.add_flag("--periodic", args.periodic,
               "time-periodic: u(t0) = u(t1) instead of an initial value (XBraid's periodic "
               "mode; --nt divisible by the coarsening factors, point 0 a C-point on every level)");
  cmd.add_flag("--gradient", args.gradient,
               "also J = |u_N|^2/2 and dJ/dp (an adjoint MGRIT solve) for " + join(with_gradient));
}

namespace {

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
// above (the library checks them against the time grid).
std::vector<std::vector<index_t>> parse_points(const std::string& path, const std::string& text) {
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
  for (std::size_t c = 0; c < doc["levels"].size(); ++c) {
    const json& list = doc["levels"][c];
    const std::string name = "level " + std::to_string(c + 1);
    if (!list.is_array()) fail(name + " is not an array");
    std::vector<index_t> points;
    for (const json& v : list) {
      if (!v.is_number_integer()) fail(name + ": " + v.dump() + " is not an integer index");
      const auto i = v.get<long long>();
      if (!points.empty() && i <= points.back())
        fail(name + ": indices must increase strictly (" + std::to_string(points.back()) +
             " then " + std::to_string(i) + ")");
      points.push_back(i);
    }
    if (points.size() < 2) fail(name + " needs at least 2 points");
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
  MgritSettings s;
  s.ranks = mpi::size(comm);
  pr::RunText text;
  for (const auto& [flag, option] : a.options) {
    if (option->count() == 0 || flag == "--json" || flag == "--output" || flag == "--points")
      continue;
    std::string name = flag.substr(2);
    std::replace(name.begin(), name.end(), '-', '_');
    text.values[name] = a.text.at(flag);
  }
  text.relax_only_coarsest = a.relax_only_coarsest;
  text.no_residual = a.no_residual;
  text.reverse = a.reverse;
  text.gradient = a.gradient;
  text.richardson = a.richardson;
  text.periodic = a.periodic;
  text.error_estimates = a.error_estimates;
  text.refine = a.refine;
  text.delta_static = a.delta_static;
  text.delta_relax = a.delta_relax;
  text.spell = flag_of_parameter;
  if (a.given("--output")) text.values["record_solution"] = "1";
  if (a.given("--points")) {
    s.points_path = a.text.at("--points");
    text.values["points"] = s.points_path;
    text.points = parse_points(s.points_path, read_shared_file("--points", s.points_path, comm));
  }
  s.run = pr::parse_run(text);

  // Files
  if (a.given("--json")) {
    s.json_path = a.text.at("--json");
    check_writable("--json", s.json_path, comm);
  }
  if (a.given("--output")) {
    s.output_path = a.text.at("--output");
    check_writable("--output", s.output_path, comm);
  }
  s.run.settings.record_solution = !s.output_path.empty();
  return s;
}

}  // namespace weft::cli
