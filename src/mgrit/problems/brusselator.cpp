#include "weft/mgrit/problems/brusselator.hpp"

#include "weft/util/error.hpp"

namespace weft::mgrit::problems {

Brusselator::Method Brusselator::parse_method(const std::string& name) {
  if (name == "rk4") return Method::Rk4;
  if (name == "rk2") return Method::Rk2;
  throw InvalidOption("Brusselator", "integrator", "'" + name + "' is unknown; accepted: rk4, rk2");
}

LevelList<Brusselator::Method> Brusselator::parse_methods(const std::string& text) {
  return parse_level_list<Method>("Brusselator", "integrator", text, "rk4, rk2", parse_method);
}

void Brusselator::step(const State& in, State& out, double t0, double t1,
                       const StepInfo& info) const {
  const double h = t1 - t0;
  auto shifted = [&](const State& k, double c) {
    return State{in[0] + c * k[0], in[1] + c * k[1]};
  };
  const State k1 = rhs(in);
  if (methods_.at(info.level) == Method::Rk2) {
    const State k2 = rhs(shifted(k1, 0.5 * h));
    out = shifted(k2, h);
    return;
  }
  const State k2 = rhs(shifted(k1, 0.5 * h));
  const State k3 = rhs(shifted(k2, 0.5 * h));
  const State k4 = rhs(shifted(k3, h));
  for (int i = 0; i < 2; ++i)
    out[i] = in[i] + h / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
}

}  // namespace weft::mgrit::problems
