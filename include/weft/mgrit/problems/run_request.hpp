#pragma once
// A catalogue run described as text, as front ends take it (the flags of `weft mgrit`, keyword
// arguments, a config file): the problem, its parameters and the shared settings below, each
// value checked here. Errors are weft::InvalidOption naming the value (option() is its name);
// the front end says how it spells names inside messages (RunText::spell).
//
// Shared settings (name: default): t0: 0, t1: 2, nt: 64, levels: 3, cf: 4, min_coarse: 2,
// nrelax: 1, nrelax_coarsest (that level's nrelax), cwt: 1, skip and nested (the convention's),
// cycle: V, tol: 1e-10, rtol: 0, tnorm: 2, max_iter: 100, init: zero, storage: all,
// convention: pymgrit, refine_fraction: 0.02, max_refinements: 200, max_intervals (none),
// delta_rank: 0 (Delta correction off). cf,
// nrelax and cwt take one value or a comma list, one per level (the last repeats). The defaults are
// PyMGRIT's heat reference run (docs/mgrit.md, §4) iterated to the tolerance.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "weft/mgrit/options.hpp"
#include "weft/mgrit/problems/catalogue.hpp"

namespace weft::mgrit::problems {

/// The shared settings with their default text, in the order front ends list them.
const std::vector<std::pair<std::string, std::string>>& run_setting_defaults();
/// The default text of shared setting `name` ("" where the default is derived).
const std::string& run_setting_default(const std::string& name);

struct RunText {
  /// name -> text for the values given: "problem", the problem's parameters (a parameter of
  /// another problem is refused) and the shared settings; "points" names where `points` came
  /// from (a file), for messages.
  std::map<std::string, std::string> values;
  bool relax_only_coarsest = false;
  bool no_residual = false;
  bool reverse = false;
  bool gradient = false;
  /// Richardson extrapolation with the problem's own local order.
  bool richardson = false;
  /// A time-periodic problem: u(t0) = u(t1) instead of an initial value.
  bool periodic = false;
  /// Richardson-based error estimates with the problem's own local order.
  bool error_estimates = false;
  /// Temporal refinement where the error estimates are large (linear; settings
  /// refine_fraction, max_refinements, max_intervals).
  bool refine = false;
  /// With the setting delta_rank >= 1: Delta correction with a static basis (no Lyapunov
  /// estimation).
  bool delta_static = false;
  /// With delta_rank >= 1: the basis also propagated in the relaxations (ex-07's -fcfLyap).
  bool delta_relax = false;
  /// Explicit coarse levels (fine indices per coarse level, checked by the front end that read
  /// them); they fix the number of levels.
  std::vector<std::vector<index_t>> points;
  /// How the front end spells a name in messages (the CLI: "min_coarse" -> "--min-coarse").
  TextValues::Spelling spell;
};

/// A checked run: the problem, the library's settings of the run, and the values as given (for
/// reports).
struct RunRequest {
  std::string problem;
  const CatalogueEntry* entry = nullptr;
  std::shared_ptr<ModelProblem> instance;
  std::string integrator;  ///< the integrator list as given (or defaulted)
  RunSettings settings;    ///< record_solution and on_setup are the caller's to set

  int levels = 3;
  std::vector<int> cf, nrelax;
  std::vector<double> cwt;
  index_t min_coarse = 2;
  std::optional<int> nrelax_coarsest;
  bool relax_only_coarsest = false;
  std::optional<bool> skip, nested;
  Cycle cycle = Cycle::V;
  double tol = 0, rtol = 0;
  TemporalNorm tnorm = TemporalNorm::Two;
  int max_iter = 100;
  bool residual = true;
  std::string init;  ///< the guess as given ("zero", "value:X", "random:SEED", "sequential")
  Storage storage = Storage::All;
  Convention convention = Convention::PyMGRIT;
  int richardson = 0;       ///< the local order Richardson uses; 0: off
  int error_estimates = 0;  ///< the local order of the error estimates; 0: off
  bool periodic = false;
  bool reverse = false;
  bool refine = false;
  double refine_fraction = 0.02;
  int max_refinements = 200;
  std::optional<index_t> max_intervals;  ///< the cutoff; none: no limit
  int delta_rank = 0;                    ///< Delta correction's basis size; 0: off
  bool delta_lyapunov = true;            ///< with it: Lyapunov estimation
  bool delta_relax = false;              ///< with it: the basis propagated in relaxation
};

/// Checks every value of `text` and builds the run. Throws InvalidOption naming the value.
RunRequest parse_run(const RunText& text);

}  // namespace weft::mgrit::problems
