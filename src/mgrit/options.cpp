#include "weft/mgrit/options.hpp"

#include <cmath>
#include <string>

#include "weft/util/error.hpp"

namespace weft::mgrit {

std::string to_string(Convention c) {
  return c == Convention::XBraid ? "xbraid" : "pymgrit";
}
std::string to_string(Cycle c) {
  return c == Cycle::V ? "V" : "F";
}
std::string to_string(InitialPhase p) {
  switch (p) {
    case InitialPhase::Default:
      return "default";
    case InitialPhase::None:
      return "none";
    case InitialPhase::Skip:
      return "skip";
    case InitialPhase::Nested:
      return "nested";
  }
  return "?";
}
std::string to_string(InitialGuess g) {
  return g == InitialGuess::App ? "app" : "sequential";
}
std::string to_string(Storage s) {
  return s == Storage::All ? "all" : "cpoints";
}
std::string to_string(TemporalNorm n) {
  switch (n) {
    case TemporalNorm::One:
      return "1";
    case TemporalNorm::Two:
      return "2";
    case TemporalNorm::Inf:
      return "inf";
  }
  return "?";
}
std::string to_string(FinalSweep s) {
  switch (s) {
    case FinalSweep::Default:
      return "default";
    case FinalSweep::None:
      return "none";
    case FinalSweep::F:
      return "F";
    case FinalSweep::CF:
      return "CF";
  }
  return "?";
}
std::string to_string(Direction d) {
  return d == Direction::Forward ? "forward" : "reverse";
}

InitialPhase Options::effective_initial_phase() const {
  if (initial_phase_ != InitialPhase::Default) return initial_phase_;
  return convention_ == Convention::XBraid ? InitialPhase::Skip : InitialPhase::Nested;
}

int Options::coarsest_sweeps(int level) const {
  const bool own = nrelax_.overrides().count(level) > 0;
  return !own && nrelax_coarsest_ >= 0 ? nrelax_coarsest_ : nrelax_.at(level);
}

FinalSweep Options::effective_final_sweep() const {
  if (final_sweep_ != FinalSweep::Default) return final_sweep_;
  return convention_ == Convention::XBraid ? FinalSweep::F : FinalSweep::None;
}

namespace {
template <class T, class Ok>
void check_levels(const PerLevel<T>& values, const char* name, Ok ok, const char* accepted) {
  auto fail = [&](T value, int level) {
    throw InvalidOption(std::string("option ") + name + ": " + number_text(value) +
                        (level < 0 ? std::string() : " on level " + std::to_string(level)) +
                        " is invalid; accepted: " + accepted);
  };
  if (!ok(values.fallback())) fail(values.fallback(), -1);
  for (const auto& [level, value] : values.overrides())
    if (!ok(value)) fail(value, level);
}

void require(bool ok, const std::string& what) {
  if (!ok) throw InvalidOption(what);
}
}  // namespace

void Options::validate() const {
  require(max_levels_ >= 1, "option max_levels: " + std::to_string(max_levels_) +
                                " is invalid; accepted: an integer >= 1");
  require(min_coarse_ >= 1, "option min_coarse: " + std::to_string(min_coarse_) +
                                " is invalid; accepted: an integer >= 1");
  check_levels(
      cfactor_, "cfactor", [](int cf) { return cf >= 2; }, "an integer >= 2");
  check_levels(
      nrelax_, "nrelax", [](int n) { return n >= 0; }, "an integer >= 0");
  check_levels(
      cweight_, "cweight", [](double w) { return std::isfinite(w) && w > 0; },
      "a finite number > 0");
  require(nrelax_coarsest_ >= -1, "option nrelax_coarsest: " + std::to_string(nrelax_coarsest_) +
                                      " is invalid; accepted: an integer >= 0");
  require(std::isfinite(abs_tol_) && abs_tol_ >= 0,
          "option abs_tol: " + number_text(abs_tol_) + " is invalid; accepted: a number >= 0");
  require(std::isfinite(rel_tol_) && rel_tol_ >= 0 && rel_tol_ < 1,
          "option rel_tol: " + number_text(rel_tol_) + " is invalid; accepted: a number in [0, 1)");
  require(max_iterations_ >= 1, "option max_iterations: " + std::to_string(max_iterations_) +
                                    " is invalid; accepted: an integer >= 1");
  require(divergence_limit_ > 0, "option divergence_limit: must be > 0");
  if (richardson_order_ != 0) {
    require(richardson_order_ >= 2, "option richardson: local order " +
                                        std::to_string(richardson_order_) +
                                        " is invalid; accepted: an integer >= 2 (0: off)");
    require(convention_ == Convention::XBraid,
            "option richardson: needs convention xbraid (its relaxation order)");
    bool unit_weights = cweight_.fallback() == 1.0;
    for (const auto& [level, w] : cweight_.overrides()) unit_weights = unit_weights && w == 1.0;
    require(unit_weights, "option richardson: needs C-weight 1 on every level (cweight)");
  }
  if (error_estimate_order_ != 0) {
    require(error_estimate_order_ >= 2, "option error_estimates: local order " +
                                            std::to_string(error_estimate_order_) +
                                            " is invalid; accepted: an integer >= 2 (0: off)");
    require(richardson_order_ == 0 || richardson_order_ == error_estimate_order_,
            "option error_estimates: local order " + std::to_string(error_estimate_order_) +
                " differs from richardson's " + std::to_string(richardson_order_) +
                "; accepted: the same order");
    require(direction_ == Direction::Forward, "option error_estimates: forward solves only");
  }
  if (periodic_) {
    require(max_levels_ >= 2,
            "option periodic: needs max_levels >= 2 (a periodic solve is "
            "a relaxation on the coarsest level, not a sequential sweep)");
    require(initial_guess_ == InitialGuess::App,
            "option periodic: not with the sequential initial guess (a periodic problem has no "
            "initial value to march from)");
    require(direction_ == Direction::Forward, "option periodic: forward solves only");
    require(richardson_order_ == 0, "option periodic: not with richardson");
  }
  if (refinement_) {
    require(max_refinements_ >= 0, "option max_refinements: " + std::to_string(max_refinements_) +
                                       " is invalid; accepted: an integer >= 0");
    require(refinement_cutoff_ >= 1,
            "option refinement_cutoff: " + std::to_string(refinement_cutoff_) +
                " is invalid; accepted: an integer >= 1");
    require(direction_ == Direction::Forward, "option refinement: forward solves only");
    require(!periodic_, "option refinement: not with periodic");
    require(rank_blocks_.empty(),
            "option refinement: not with rank_blocks (a refined grid is redistributed in "
            "blocks)");
  }
}

}  // namespace weft::mgrit
