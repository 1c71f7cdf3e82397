#pragma once
// The manufactured 1-D heat problem of the PyMGRIT heat reference (docs/mgrit.md, §4):
//   u_t = u_xx - sin(pi x)(sin t - pi^2 cos t),  x in [x0, x1], u = 0 on the boundary,
//   u(x, 0) = sin(pi x); exact solution sin(pi x) cos t (for x0 = 0 and an even x1).
// Second-order differences on nx points (nx - 2 interior unknowns), backward Euler with a
// tridiagonal solve per step. The state holds the interior unknowns.
#include <cstddef>
#include <vector>

#include "weft/mgrit/problems/initial_guess.hpp"
#include "weft/mgrit/problems/vector_state.hpp"
#include "weft/mgrit/types.hpp"

namespace weft::mgrit::problems {

class Heat1D : public VectorState {
 public:
  Heat1D(int nx, double x0, double x1, double t_start, InitialGuess guess);

  State init(double t) const;
  void step(const State& in, State& out, double t0, double t1, const StepInfo&);

  std::size_t interior() const { return x_.size(); }
  const std::vector<double>& x() const { return x_; }
  /// sin(pi x) cos t at the interior points.
  State exact(double t) const;

 private:
  double forcing(double x, double t) const;

  std::vector<double> x_;
  double dx_;
  double t_start_;
  InitialGuess guess_;
  std::vector<double> scratch_;  // Thomas algorithm's modified super-diagonal
};

}  // namespace weft::mgrit::problems
