#include "weft/mgrit/problems/dahlquist_levels.hpp"

namespace weft::mgrit::problems {

LevelList<Integrator> DahlquistLevels::parse_integrators(const std::string& text) {
  return parse_level_list<Integrator>("DahlquistLevels", "integrator", text, "be, fe, tr, mr",
                                      parse_integrator);
}

double DahlquistLevels::amplification(double h, int level) const {
  const double z = lambda_ * h;
  switch (integrators_.at(level)) {
    case Integrator::BackwardEuler:
      return 1.0 / (1.0 - z);
    case Integrator::ForwardEuler:
      return 1.0 + z;
    case Integrator::Trapezoid:  // both are (1 + z/2) / (1 - z/2) for a linear problem
    case Integrator::ImplicitMidpoint:
      return (1.0 + 0.5 * z) / (1.0 - 0.5 * z);
  }
  return 0.0;
}

double DahlquistLevels::amplification_derivative(double h, int level) const {
  const double z = lambda_ * h;
  switch (integrators_.at(level)) {
    case Integrator::BackwardEuler:
      return h / ((1.0 - z) * (1.0 - z));
    case Integrator::ForwardEuler:
      return h;
    case Integrator::Trapezoid:
    case Integrator::ImplicitMidpoint:
      return h / ((1.0 - 0.5 * z) * (1.0 - 0.5 * z));
  }
  return 0.0;
}

}  // namespace weft::mgrit::problems
