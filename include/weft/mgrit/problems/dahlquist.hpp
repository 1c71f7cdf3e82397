#pragma once
// Dahlquist's test equation u' = lambda*u, u(t_start) = 1: the scalar model problem.
#include <string>

#include "weft/mgrit/problems/initial_guess.hpp"
#include "weft/mgrit/types.hpp"

namespace weft::mgrit::problems {

enum class Integrator { BackwardEuler, ForwardEuler, Trapezoid, ImplicitMidpoint };

/// "be", "fe", "tr", "mr"; throws weft::InvalidOption naming the accepted values otherwise.
Integrator parse_integrator(const std::string& name);
std::string to_string(Integrator integrator);

class Dahlquist {
 public:
  using State = double;

  Dahlquist(double lambda, Integrator integrator, double t_start, InitialGuess guess)
      : lambda_(lambda), integrator_(integrator), t_start_(t_start), guess_(guess) {}

  State init(double t) const { return t == t_start_ ? 1.0 : guess_.at(t, 0); }

  void step(const State& in, State& out, double t0, double t1, const StepInfo&) const {
    out = in * amplification(t1 - t0);
  }

  /// The factor one step of length h multiplies u by.
  double amplification(double h) const {
    const double z = lambda_ * h;
    switch (integrator_) {
      case Integrator::BackwardEuler:
        return 1.0 / (1.0 - z);
      case Integrator::ForwardEuler:
        return 1.0 + z;
      case Integrator::Trapezoid:  // for a linear problem the implicit midpoint rule coincides
      case Integrator::ImplicitMidpoint:
        return (1.0 + 0.5 * z) / (1.0 - 0.5 * z);
    }
    return 0.0;
  }

 private:
  double lambda_;
  Integrator integrator_;
  double t_start_;
  InitialGuess guess_;
};

}  // namespace weft::mgrit::problems
