#pragma once
// Linear advection u_t + a u_x = 0 on the periodic unit interval, nx nodes x_i = i/nx,
// u(x, t_start) = exp(-100 (x - 1/2)^2), first-order upwind differences (the upwind side follows
// the sign of a). Integrators per level:
//   fe  explicit upwind:  u_i' = u_i - nu (u_i - u_{i-1})        (stable for CFL nu = |a| h/dx <=
//   1) be  implicit upwind:  u_i' + nu (u_i' - u_{i-1}') = u_i       (unconditionally stable; a
//       cyclic bidiagonal system, solved directly)
// (written for a > 0; for a < 0 the neighbour is i+1). The state holds the nx nodes; spatial
// norm: the Euclidean norm.
//
// This is the hard case for MGRIT: the coarse-grid operators of a hyperbolic problem are poor
// approximations of the fine propagator (phase errors, and a coarse explicit step may violate
// the CFL bound), so convergence is slow compared to diffusion; see docs/mgrit-problems.md.
#include <cstddef>
#include <string>
#include <vector>

#include "weft/mgrit/problems/initial_guess.hpp"
#include "weft/mgrit/problems/level_list.hpp"
#include "weft/mgrit/problems/vector_state.hpp"
#include "weft/mgrit/types.hpp"

namespace weft::mgrit::problems {

class Advection1D : public VectorState {
 public:
  enum class Method { ExplicitUpwind, ImplicitUpwind };

  Advection1D(int nx, double speed, LevelList<Method> methods, double t_start, InitialGuess guess);

  /// "fe" (explicit upwind) or "be" (implicit upwind); throws weft::InvalidOption otherwise.
  static Method parse_method(const std::string& name);
  static LevelList<Method> parse_methods(const std::string& text);

  State init(double t) const;
  void step(const State& in, State& out, double t0, double t1, const StepInfo& info) const;

  std::size_t nodes() const { return static_cast<std::size_t>(nx_); }
  double dx() const { return 1.0 / nx_; }
  /// The pulse translated by a (t - t_start), periodically: the PDE's own solution.
  State exact(double t) const;
  void check_levels(int levels) const {
    check_list_length("Advection1D", "integrator", methods_.size(), levels);
  }

 private:
  double pulse(double x) const;

  int nx_;
  double speed_;
  LevelList<Method> methods_;
  double t_start_;
  InitialGuess guess_;
};

}  // namespace weft::mgrit::problems
