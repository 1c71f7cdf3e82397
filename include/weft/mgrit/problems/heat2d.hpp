#pragma once
// The 2-D heat equation with a manufactured solution on the rectangle [0, lx] x [0, ly]:
//   u_t = Laplace(u) + f,   u = 0 on the boundary,
//   u*(x, y, t) = s(x, y) cos t,   s = 16 x (lx - x) y (ly - y) / (lx^2 ly^2),
//   f = -s sin t - Laplace(s) cos t,   Laplace(s) = -32 (x (lx - x) + y (ly - y)) / (lx^2 ly^2),
// u(x, y, t_start) = u*(x, y, t_start). The 5-point stencil is exact on s (a quadratic in x and
// in y), so the discrete solution differs from u* by the time discretization error alone. nx x ny
// grid points including the boundary (the state holds the (nx-2)(ny-2) interior unknowns, x
// fastest), the 5-point stencil. Integrators per level: be (backward Euler) and cn
// (Crank-Nicolson); each step is a banded Cholesky solve of (I - theta h Laplace), factored once
// per step size. Spatial norm: the Euclidean norm.
//
// The space-parallel variant over PETSc is problems::PetscHeat2D (petsc_heat2d.hpp).
#include <cmath>
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

/// The grid and manufactured solution shared by Heat2D and PetscHeat2D.
struct Heat2DGrid {
  int nx = 17, ny = 17;
  double lx = 1.0, ly = 1.0;

  /// Throws weft::InvalidOption for nx, ny < 3 or a non-positive side.
  void validate() const;
  int mx() const { return nx - 2; }  ///< interior unknowns in x
  int my() const { return ny - 2; }
  std::size_t unknowns() const { return static_cast<std::size_t>(mx()) * my(); }
  double dx() const { return lx / (nx - 1); }
  double dy() const { return ly / (ny - 1); }
  /// Coordinates of unknown k = j*mx + i (interior node (i+1, j+1)).
  double x_of(std::size_t k) const { return (static_cast<double>(k % mx()) + 1.0) * dx(); }
  double y_of(std::size_t k) const { return (static_cast<double>(k / mx()) + 1.0) * dy(); }
  double exact(double x, double y, double t) const { return shape(x, y) * std::cos(t); }
  double forcing(double x, double y, double t) const {
    return -std::sin(t) * shape(x, y) - std::cos(t) * laplace_shape(x, y);
  }
  /// s(x, y) = 16 x(lx - x) y(ly - y) / (lx^2 ly^2): zero on the boundary, 1 at the centre.
  double shape(double x, double y) const {
    return 16.0 * x * (lx - x) * y * (ly - y) / (lx * lx * ly * ly);
  }
  double laplace_shape(double x, double y) const {
    return -32.0 * (y * (ly - y) + x * (lx - x)) / (lx * lx * ly * ly);
  }
};

class Heat2D : public VectorState {
 public:
  enum class Method { BackwardEuler, CrankNicolson };

  Heat2D(Heat2DGrid grid, LevelList<Method> methods, double t_start, InitialGuess guess);

  /// "be" or "cn"; throws weft::InvalidOption naming the accepted values.
  static Method parse_method(const std::string& name);
  static std::string to_string(Method method);
  static LevelList<Method> parse_methods(const std::string& text);

  State init(double t) const;
  void step(const State& in, State& out, double t0, double t1, const StepInfo& info);

  const Heat2DGrid& grid() const { return grid_; }
  /// u* at the interior unknowns.
  State exact(double t) const;
  /// y = Laplace(u) (5-point stencil, zero Dirichlet values).
  void apply_laplacian(const State& u, State& y) const;
  void check_levels(int levels) const {
    check_list_length("Heat2D", "integrator", methods_.size(), levels);
  }

 private:
  // Lower band of the Cholesky factor of I - theta_h Laplace, row k holds L(k, k-m..k).
  struct Factor {
    std::vector<double> band;
  };
  const Factor& factor(double theta_h);
  void solve(const Factor& f, std::vector<double>& x) const;  // in place

  Heat2DGrid grid_;
  LevelList<Method> methods_;
  double t_start_;
  InitialGuess guess_;
  std::map<double, Factor> factors_;
  std::vector<double> lap_;
};

}  // namespace weft::mgrit::problems
