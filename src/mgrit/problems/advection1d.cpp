#include "weft/mgrit/problems/advection1d.hpp"

#include <cmath>
#include <cstring>

#include "weft/util/error.hpp"

namespace weft::mgrit::problems {

Advection1D::Advection1D(int nx, double speed, LevelList<Method> methods, double t_start,
                         InitialGuess guess)
    : nx_(nx), speed_(speed), methods_(std::move(methods)), t_start_(t_start), guess_(guess) {
  if (nx < 2)
    throw InvalidOption("Advection1D", "nx",
                        "'" + std::to_string(nx) +
                            "' is invalid; accepted: an integer >= 2 (nodes on the periodic grid)");
  if (!std::isfinite(speed))
    throw InvalidOption("Advection1D", "speed",
                        "'" + number_text(speed) + "' is invalid; accepted: a finite number");
}

Advection1D::Method Advection1D::parse_method(const std::string& name) {
  if (name == "fe") return Method::ExplicitUpwind;
  if (name == "be") return Method::ImplicitUpwind;
  throw InvalidOption(
      "Advection1D", "integrator",
      "'" + name + "' is unknown; accepted: fe (explicit upwind), be (implicit upwind)");
}

LevelList<Advection1D::Method> Advection1D::parse_methods(const std::string& text) {
  return parse_level_list<Method>("Advection1D", "integrator", text, "fe, be", parse_method);
}

double Advection1D::pulse(double x) const {
  x -= std::floor(x);  // periodic
  const double d = x - 0.5;
  return std::exp(-100.0 * d * d);
}

Advection1D::State Advection1D::init(double t) const {
  State u(nodes());
  for (std::size_t i = 0; i < u.size(); ++i)
    u[i] = t == t_start_ ? pulse(static_cast<double>(i) * dx()) : guess_.at(t, i);
  return u;
}

Advection1D::State Advection1D::exact(double t) const {
  State u(nodes());
  for (std::size_t i = 0; i < u.size(); ++i)
    u[i] = pulse(static_cast<double>(i) * dx() - speed_ * (t - t_start_));
  return u;
}

void Advection1D::step(const State& in, State& out, double t0, double t1,
                       const StepInfo& info) const {
  const std::size_t n = nodes();
  const double nu = std::abs(speed_) * (t1 - t0) / dx();
  // Upwind neighbour of node i, in the direction the flow comes from.
  const bool right_moving = speed_ >= 0.0;
  auto up = [&](std::size_t i) {
    if (right_moving) return i == 0 ? n - 1 : i - 1;
    return i + 1 == n ? std::size_t{0} : i + 1;
  };
  out.resize(n);
  if (methods_.at(info.level) == Method::ExplicitUpwind) {
    for (std::size_t i = 0; i < n; ++i) out[i] = in[i] - nu * (in[i] - in[up(i)]);
    return;
  }
  // (1 + nu) u_i - nu u_up(i) = in_i around the ring. March along the flow from node k0 (the
  // first node downstream of the wrap), writing u_i = p_i + r^(m+1) * u_last, r = nu/(1 + nu),
  // m the distance from k0; the last node closes the ring: u_last = p_last / (1 - r^n).
  const double r = nu / (1.0 + nu);
  std::vector<std::size_t> order(n);
  for (std::size_t m = 0; m < n; ++m) order[m] = right_moving ? m : n - 1 - m;
  double p = in[order[0]] / (1.0 + nu);
  out[order[0]] = p;
  for (std::size_t m = 1; m < n; ++m) {
    p = (in[order[m]] + nu * p) / (1.0 + nu);
    out[order[m]] = p;
  }
  const double u_last = p / (1.0 - std::pow(r, static_cast<double>(n)));
  double rk = r;
  for (std::size_t m = 0; m + 1 < n; ++m, rk *= r) out[order[m]] += rk * u_last;
  out[order[n - 1]] = u_last;
}

}  // namespace weft::mgrit::problems
