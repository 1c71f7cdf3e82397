#pragma once
// Dahlquist's equation u' = lambda*u, u(t_start) = 1, with one integrator per level (StepInfo::
// level indexes the list, the last entry repeats): e.g. the implicit midpoint rule on the fine
// grid and backward Euler below. With a single integrator it is exactly problems::Dahlquist.
//
// It is also a *gradient App* (weft/mgrit/gradient.hpp): step_adjoint and step_parameter give
// the transposed step Jacobian and the derivative of a step with respect to lambda.
#include <string>
#include <utility>

#include "weft/mgrit/problems/dahlquist.hpp"
#include "weft/mgrit/problems/initial_guess.hpp"
#include "weft/mgrit/problems/level_list.hpp"
#include "weft/mgrit/types.hpp"

namespace weft::mgrit::problems {

class DahlquistLevels {
 public:
  using State = double;

  DahlquistLevels(double lambda, LevelList<Integrator> integrators, double t_start,
                  InitialGuess guess)
      : lambda_(lambda), integrators_(std::move(integrators)), t_start_(t_start), guess_(guess) {}

  /// "be,fe,tr,mr" lists for option `--integrator`; throws weft::InvalidOption.
  static LevelList<Integrator> parse_integrators(const std::string& text);

  State init(double t) const { return t == t_start_ ? 1.0 : guess_.at(t, 0); }
  void step(const State& in, State& out, double t0, double t1, const StepInfo& info) const {
    out = in * amplification(t1 - t0, info.level);
  }

  /// The factor one step of length h on `level` multiplies u by.
  double amplification(double h, int level) const;
  /// Its derivative with respect to lambda.
  double amplification_derivative(double h, int level) const;

  // Gradient App: the adjoint of u1 = a(h) u0 is lambda0 = a(h) lambda1; d u1 / d lambda =
  // a'(h) u0. (t0, t1) is the forward step, u = u(t0).
  void step_adjoint(const State& adj_in, State& adj_out, const State&, double t0, double t1,
                    const StepInfo& info) const {
    adj_out = adj_in * amplification(t1 - t0, info.level);
  }
  double step_parameter(const State& adj, const State& u, double t0, double t1,
                        const StepInfo& info) const {
    return adj * amplification_derivative(t1 - t0, info.level) * u;
  }

  /// Throws weft::InvalidOption when the integrator list is longer than `levels`.
  void check_levels(int levels) const {
    check_list_length("DahlquistLevels", "integrator", integrators_.size(), levels);
  }

  double lambda() const { return lambda_; }
  const LevelList<Integrator>& integrators() const { return integrators_; }

 private:
  double lambda_;
  LevelList<Integrator> integrators_;
  double t_start_;
  InitialGuess guess_;
};

}  // namespace weft::mgrit::problems
