#pragma once
// The scalar linear ODE u' = a*u + b*t + c, u(t_start) = u0, with one integrator per level:
//   be      backward Euler   u1 = (u0 + h(b*t1 + c)) / (1 - a*h)
//   sdirk2  two-stage SDIRK, gamma = (2 - sqrt 2)/2:
//           k1 = f(t + gamma*h, u + gamma*h*k1)
//           k2 = f(t + (1 - gamma)*h, u + (1 - 2*gamma)*h*k1 + gamma*h*k2)
//           u1 = u + h*(k1 + k2)/2
#include <string>
#include <utility>

#include "weft/mgrit/problems/initial_guess.hpp"
#include "weft/mgrit/problems/level_list.hpp"
#include "weft/mgrit/types.hpp"

namespace weft::mgrit::problems {

class LinearOde {
 public:
  using State = double;
  enum class Method { BackwardEuler, Sdirk2 };

  struct Parameters {
    double a = -1.0, b = 0.0, c = 0.0, u0 = 1.0;
  };

  LinearOde(Parameters p, LevelList<Method> methods, double t_start, InitialGuess guess)
      : p_(p), methods_(std::move(methods)), t_start_(t_start), guess_(guess) {}

  /// "be" or "sdirk2"; throws weft::InvalidOption naming the accepted values.
  static Method parse_method(const std::string& name);
  static std::string to_string(Method method);
  /// A comma list for option `--integrator`, one per level.
  static LevelList<Method> parse_methods(const std::string& text);

  State init(double t) const { return t == t_start_ ? p_.u0 : guess_.at(t, 0); }
  void step(const State& in, State& out, double t0, double t1, const StepInfo& info) const;

  /// Temporal refinement as XBraid's ex-06 asks for it: from iteration 2 on, a fine step whose
  /// error estimate exceeds `fraction` of the largest is split in two (1: no split).
  int refine_factor(const State&, double, double, const StepInfo& info) const {
    return info.iteration > 1 && info.error_estimate != -1 &&
                   info.error_estimate > refine_fraction_ * info.largest_error_estimate
               ? 2
               : 1;
  }
  /// The fraction refine_factor() compares with (ex-06: 0.02).
  void refine_fraction(double fraction) { refine_fraction_ = fraction; }

  /// The solution of the ODE itself (not of the discretization) at t.
  double exact(double t) const;
  /// The solution with u(t_start) = u(t_end) instead of u(t_start) = u0 (a != 0).
  double periodic_exact(double t, double t_end) const;

  void check_levels(int levels) const {
    check_list_length("LinearOde", "integrator", methods_.size(), levels);
  }
  const Parameters& parameters() const { return p_; }
  const LevelList<Method>& methods() const { return methods_; }

 private:
  double rhs(double t, double u) const { return p_.a * u + p_.b * t + p_.c; }

  Parameters p_;
  LevelList<Method> methods_;
  double t_start_;
  InitialGuess guess_;
  double refine_fraction_ = 0.02;
};

}  // namespace weft::mgrit::problems
