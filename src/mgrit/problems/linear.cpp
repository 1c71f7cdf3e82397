#include "weft/mgrit/problems/linear.hpp"

#include <cmath>
#include <limits>

#include "weft/util/error.hpp"

namespace weft::mgrit::problems {

LinearOde::Method LinearOde::parse_method(const std::string& name) {
  if (name == "be") return Method::BackwardEuler;
  if (name == "sdirk2") return Method::Sdirk2;
  throw InvalidOption("LinearOde", "integrator", "'" + name + "' is unknown; accepted: be, sdirk2");
}

std::string LinearOde::to_string(Method method) {
  return method == Method::BackwardEuler ? "be" : "sdirk2";
}

LevelList<LinearOde::Method> LinearOde::parse_methods(const std::string& text) {
  return parse_level_list<Method>("LinearOde", "integrator", text, "be, sdirk2", parse_method);
}

void LinearOde::step(const State& in, State& out, double t0, double t1,
                     const StepInfo& info) const {
  const double h = t1 - t0, a = p_.a;
  switch (methods_.at(info.level)) {
    case Method::BackwardEuler:
      out = (in + h * (p_.b * t1 + p_.c)) / (1.0 - a * h);
      return;
    case Method::Sdirk2: {
      const double gamma = (2.0 - std::sqrt(2.0)) / 2.0;
      // Each stage is linear in its own slope k: k = rhs(t, base + gamma*h*k).
      const double k1 = rhs(t0 + gamma * h, in) / (1.0 - a * gamma * h);
      const double k2 =
          rhs(t0 + (1.0 - gamma) * h, in + (1.0 - 2.0 * gamma) * h * k1) / (1.0 - a * gamma * h);
      out = in + h * 0.5 * (k1 + k2);
      return;
    }
  }
}

double LinearOde::exact(double t) const {
  const double a = p_.a, b = p_.b, c = p_.c;
  if (a == 0.0) return p_.u0 + c * (t - t_start_) + 0.5 * b * (t * t - t_start_ * t_start_);
  // A particular solution alpha*t + beta plus the homogeneous part.
  const double alpha = -b / a, beta = (alpha - c) / a;
  return (p_.u0 - alpha * t_start_ - beta) * std::exp(a * (t - t_start_)) + alpha * t + beta;
}

double LinearOde::periodic_exact(double t, double t_end) const {
  const double a = p_.a, b = p_.b, c = p_.c;
  if (a == 0.0) return std::numeric_limits<double>::quiet_NaN();  // no periodic solution
  // alpha*t + beta + K e^{a (t - t_start)}, with K chosen so that u(t_start) = u(t_end).
  const double alpha = -b / a, beta = (alpha - c) / a;
  const double k = alpha * (t_end - t_start_) / (1.0 - std::exp(a * (t_end - t_start_)));
  return k * std::exp(a * (t - t_start_)) + alpha * t + beta;
}

}  // namespace weft::mgrit::problems
