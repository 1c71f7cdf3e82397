#include "weft/mgrit/problems/dahlquist.hpp"

#include "weft/util/error.hpp"

namespace weft::mgrit::problems {

Integrator parse_integrator(const std::string& name) {
  if (name == "be") return Integrator::BackwardEuler;
  if (name == "fe") return Integrator::ForwardEuler;
  if (name == "tr") return Integrator::Trapezoid;
  if (name == "mr") return Integrator::ImplicitMidpoint;
  throw InvalidOption("Dahlquist", "integrator",
                      "'" + name + "' is unknown; accepted: be, fe, tr, mr");
}

std::string to_string(Integrator integrator) {
  switch (integrator) {
    case Integrator::BackwardEuler:
      return "be";
    case Integrator::ForwardEuler:
      return "fe";
    case Integrator::Trapezoid:
      return "tr";
    case Integrator::ImplicitMidpoint:
      return "mr";
  }
  return "?";
}

}  // namespace weft::mgrit::problems
