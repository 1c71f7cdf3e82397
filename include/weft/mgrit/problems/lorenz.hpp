#pragma once
// The Lorenz system, chaotic for the classical parameters (sigma 10, rho 28, beta 8/3):
//   x' = sigma (y - x),   y' = x (rho - z) - y,   z' = x y - beta z,
// from a point near the strange attractor (XBraid's examples/ex-07.c). Integrators per level:
// be (backward Euler, Newton's method on each step: stable at the coarse levels' large steps),
// fe (forward Euler, ex-07's) or rk4. Spatial norm: the Euclidean norm. Plain MGRIT stalls on it
// for long horizons (perturbations grow like e^{0.9 t}), the case XBraid's Delta correction
// addresses.
#include <array>
#include <cmath>
#include <string>
#include <utility>

#include "weft/mgrit/problems/initial_guess.hpp"
#include "weft/mgrit/problems/level_list.hpp"
#include "weft/mgrit/types.hpp"

namespace weft::mgrit::problems {

class Lorenz {
 public:
  using State = std::array<double, 3>;  // trivially copyable: copy and MPI buffers are automatic
  enum class Method { BackwardEuler, ForwardEuler, Rk4 };
  struct Parameters {
    double sigma = 10.0, rho = 28.0, beta = 8.0 / 3.0;
  };
  /// ex-07's initial point, near the attractor.
  static constexpr State kInitial{9.614521163788712, 17.519127090401067, 13.94230712158098};

  Lorenz(Parameters p, LevelList<Method> methods, double t_start, InitialGuess guess)
      : p_(p), methods_(std::move(methods)), t_start_(t_start), guess_(guess) {}

  /// "be", "fe" or "rk4"; throws weft::InvalidOption naming the accepted values.
  static Method parse_method(const std::string& name);
  static LevelList<Method> parse_methods(const std::string& text);

  /// The initial point at t_start; elsewhere the guess (InitialGuess::initial(): the initial
  /// point everywhere, as ex-07).
  State init(double t) const {
    if (t == t_start_ || guess_.kind == InitialGuess::Kind::Initial) return kInitial;
    return {guess_.at(t, 0), guess_.at(t, 1), guess_.at(t, 2)};
  }
  void step(const State& in, State& out, double t0, double t1, const StepInfo& info) const;
  void sum(double a, const State& x, double b, State& y) const {
    for (int i = 0; i < 3; ++i) y[i] = a * x[i] + b * y[i];
  }
  double norm(const State& u) const {
    double dot = 0;
    for (double v : u) dot += v * v;
    return std::sqrt(dot);
  }
  // Delta correction (weft/mgrit/delta.hpp): the step's Jacobian, the Euclidean inner
  // product, and the unit vectors as the initial basis (ex-07's).
  /// v <- (dPhi/du)(in) v for the step in -> out of this level's integrator.
  void step_tangent(const State& in, const State& out, State& v, double t0, double t1,
                    const StepInfo& info) const;
  double inner_product(const State& a, const State& b) const {
    double dot = 0;
    for (int i = 0; i < 3; ++i) dot += a[i] * b[i];
    return dot;
  }
  State basis_vector(double, int index) const {
    State e{};
    e[static_cast<size_t>(index % 3)] = 1.0;
    return e;
  }

  /// The right-hand side f(u).
  State rhs(const State& u) const {
    return {p_.sigma * (u[1] - u[0]), u[0] * (p_.rho - u[2]) - u[1], u[0] * u[1] - p_.beta * u[2]};
  }

  /// The Jacobian of f at u, row by row.
  std::array<State, 3> jacobian(const State& u) const {
    return {State{-p_.sigma, p_.sigma, 0.0}, State{p_.rho - u[2], -1.0, -u[0]},
            State{u[1], u[0], -p_.beta}};
  }

  void check_levels(int levels) const {
    check_list_length("Lorenz", "integrator", methods_.size(), levels);
  }
  const Parameters& parameters() const { return p_; }

 private:
  /// u1 = u0 + h f(u1) by Newton's method from u0; throws weft::Divergence if it fails.
  State backward_euler(const State& u0, double h) const;

  Parameters p_;
  LevelList<Method> methods_;
  double t_start_;
  InitialGuess guess_;
};

}  // namespace weft::mgrit::problems
