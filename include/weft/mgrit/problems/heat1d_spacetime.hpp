#pragma once
// The manufactured 1-D heat problem of problems::Heat1D with a diffusion coefficient and
// space-time coarsening:
//   u_t = kappa u_xx - sin(pi x)(sin t - pi^2 cos t),  x in [x0, x1], u = 0 on the boundary,
//   u(x, t_start) = sin(pi x) cos(t_start); exact solution sin(pi x) cos t for kappa = 1
//   (x0 = 0, x1 even). kappa = 1 with one grid and backward Euler is exactly Heat1D.
// Each level has its own spatial grid: nx_l points incl. the boundary (a per-level list, the
// last entry repeats); a coarser grid keeps the grid above or halves its intervals
// (nx_{l+1} - 1 = (nx_l - 1)/2). Between levels that differ:
//   restriction (full weighting)  c_i = f_{2i}/4 + f_{2i+1}/2 + f_{2i+2}/4  (interior unknowns)
//   interpolation (linear)        f_{2i+1} = c_i,  f_{2i} = (c_{i-1} + c_i)/2  (c_{-1} = c_n = 0)
// and the identity where two levels share a grid. Integrators per level: be, cn; each step is
// a tridiagonal (Thomas) solve.
//
// It is a *gradient App* (weft/mgrit/gradient.hpp) for the parameter kappa.
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "weft/mgrit/problems/initial_guess.hpp"
#include "weft/mgrit/problems/level_list.hpp"
#include "weft/mgrit/problems/vector_state.hpp"
#include "weft/mgrit/types.hpp"

namespace weft::mgrit::problems {

class Heat1DSpaceTime : public VectorState {
 public:
  enum class Method { BackwardEuler, CrankNicolson };

  /// Throws weft::InvalidOption when a grid cannot be reached from the one above ("Heat1DSpaceTime:
  /// nx ...").
  Heat1DSpaceTime(LevelList<int> nx, double x0, double x1, double kappa, LevelList<Method> methods,
                  double t_start, InitialGuess guess);

  /// "be" or "cn".
  static Method parse_method(const std::string& name);
  static LevelList<Method> parse_methods(const std::string& text);
  /// "33,17,9": grid points per level (library option nx); checks the halving rule.
  static LevelList<int> parse_nx(const std::string& text);

  State init(double t) const;
  /// sin(pi x) cos t on `level`'s own grid: the level's initial value (PyMGRIT convention).
  State init(double t, int level) const;
  void step(const State& in, State& out, double t0, double t1, const StepInfo& info);

  void coarsen(const State& fine, State& coarse, int fine_level) const;
  void refine(const State& coarse, State& fine, int coarse_level) const;

  // Gradient App (parameter kappa); (t0, t1) is the forward step, u = u(t0) on the fine grid.
  void step_adjoint(const State& adj_in, State& adj_out, const State& u, double t0, double t1,
                    const StepInfo& info);
  double step_parameter(const State& adj, const State& u, double t0, double t1,
                        const StepInfo& info);

  /// Interior unknowns of `level`'s grid.
  std::size_t interior(int level) const { return static_cast<std::size_t>(nx_.at(level) - 2); }
  /// Interior coordinates of `level`'s grid.
  std::vector<double> x(int level) const;
  /// sin(pi x) cos t on the fine grid.
  State exact(double t) const;
  double kappa() const { return kappa_; }
  /// Throws weft::InvalidOption when the nx or integrator list is longer than `levels`.
  void check_levels(int levels) const;

 private:
  double dx(int level) const { return (x1_ - x0_) / (nx_.at(level) - 1); }
  double forcing(double x, double t) const;
  /// (I - theta_h kappa A) out = rhs on `level`'s grid, in place.
  void solve(int level, double theta_h, std::vector<double>& x);
  void apply_laplacian(int level, const State& u, State& y) const;

  LevelList<int> nx_;
  double x0_, x1_, kappa_;
  LevelList<Method> methods_;
  double t_start_;
  InitialGuess guess_;
  std::vector<double> scratch_, lap_, tmp_, tmp2_;
};

}  // namespace weft::mgrit::problems
