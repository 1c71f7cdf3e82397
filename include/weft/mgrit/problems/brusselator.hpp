#pragma once
// The Brusselator, a nonlinear oscillator with a limit cycle:
//   x' = A + x^2 y - (B + 1) x,   y' = B x - x^2 y,   (x, y)(t_start) = u0 (default (0, 1)),
// A = 1, B = 3 by default. Integrators per level: rk4 (classical Runge-Kutta) or rk2 (the
// explicit midpoint rule). Spatial norm: the Euclidean norm of (x, y).
#include <array>
#include <cmath>
#include <string>
#include <utility>

#include "weft/mgrit/problems/initial_guess.hpp"
#include "weft/mgrit/problems/level_list.hpp"
#include "weft/mgrit/types.hpp"

namespace weft::mgrit::problems {

class Brusselator {
 public:
  using State = std::array<double, 2>;  // trivially copyable: copy and MPI buffers are automatic
  enum class Method { Rk4, Rk2 };

  Brusselator(double a, double b, LevelList<Method> methods, double t_start, InitialGuess guess,
              State u0 = {0.0, 1.0})
      : a_(a), b_(b), methods_(std::move(methods)), t_start_(t_start), guess_(guess), u0_(u0) {}

  /// "rk4" or "rk2"; throws weft::InvalidOption naming the accepted values.
  static Method parse_method(const std::string& name);
  static LevelList<Method> parse_methods(const std::string& text);

  State init(double t) const {
    return t == t_start_ ? u0_ : State{guess_.at(t, 0), guess_.at(t, 1)};
  }
  void step(const State& in, State& out, double t0, double t1, const StepInfo& info) const;
  void sum(double a, const State& x, double b, State& y) const {
    y[0] = a * x[0] + b * y[0];
    y[1] = a * x[1] + b * y[1];
  }
  double norm(const State& u) const { return std::hypot(u[0], u[1]); }

  /// The right-hand side f(u).
  State rhs(const State& u) const {
    const double x2y = u[0] * u[0] * u[1];
    return {a_ + x2y - (b_ + 1.0) * u[0], b_ * u[0] - x2y};
  }

  void check_levels(int levels) const {
    check_list_length("Brusselator", "integrator", methods_.size(), levels);
  }

 private:
  double a_, b_;
  LevelList<Method> methods_;
  double t_start_;
  InitialGuess guess_;
  State u0_;
};

}  // namespace weft::mgrit::problems
