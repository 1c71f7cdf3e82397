#pragma once
// The 1-D heat equation u_t = u_xx on a ring: nx nodes x_i = i/(nx-1), i = 0..nx-1, the
// stencil (1, -2, 1)/dx^2 with nodes 0 and nx-1 joined as neighbours, u(x, 0) = sin(pi x), no
// forcing. Integrators per level: be (backward Euler) and cn (Crank-Nicolson); each step is a
// direct solve of the cyclic tridiagonal system (Thomas + Sherman-Morrison, factored once per
// step size). The state holds all nx nodes; spatial norm: the plain Euclidean norm.
//
// The periodic Laplacian sums to zero over the ring, so both integrators conserve sum_i u_i.
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "weft/mgrit/problems/initial_guess.hpp"
#include "weft/mgrit/problems/level_list.hpp"
#include "weft/mgrit/problems/vector_state.hpp"
#include "weft/mgrit/types.hpp"

namespace weft::mgrit::problems {

class Heat1DPeriodic : public VectorState {
 public:
  enum class Method { BackwardEuler, CrankNicolson };

  Heat1DPeriodic(int nx, LevelList<Method> methods, double t_start, InitialGuess guess);

  /// "be" or "cn"; throws weft::InvalidOption naming the accepted values.
  static Method parse_method(const std::string& name);
  static LevelList<Method> parse_methods(const std::string& text);

  State init(double t) const;
  void step(const State& in, State& out, double t0, double t1, const StepInfo& info);

  std::size_t nodes() const { return x_.size(); }
  const std::vector<double>& x() const { return x_; }
  double dx() const { return dx_; }
  /// y = A u with the periodic stencil (1, -2, 1)/dx^2.
  void apply_laplacian(const State& u, State& y) const;
  void check_levels(int levels) const {
    check_list_length("Heat1DPeriodic", "integrator", methods_.size(), levels);
  }

 private:
  // (I - theta*h*A) x = r: diagonal d = 1 + 2 s, off-diagonals and corners -s, s = theta h/dx^2.
  struct Factor {
    std::vector<double> cprime, denom;  // Thomas factors of the modified tridiagonal matrix
    std::vector<double> z;              // its solution for the Sherman-Morrison vector
    double gamma = 0, corner = 0, vz = 0;
  };
  const Factor& factor(double theta_h);
  void solve(const Factor& f, const std::vector<double>& r, std::vector<double>& x) const;
  void thomas(const Factor& f, const std::vector<double>& r, std::vector<double>& x) const;

  std::vector<double> x_;
  double dx_;
  LevelList<Method> methods_;
  double t_start_;
  InitialGuess guess_;
  std::map<double, Factor> factors_;
  std::vector<double> rhs_, y_;
};

}  // namespace weft::mgrit::problems
