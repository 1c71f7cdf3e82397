#include "weft/mgrit/problems/heat1d_periodic.hpp"

#include <cmath>
#include <cstring>

#include "weft/util/error.hpp"

namespace weft::mgrit::problems {

namespace {
constexpr double kPi = 3.14159265358979323846;
}

Heat1DPeriodic::Heat1DPeriodic(int nx, LevelList<Method> methods, double t_start,
                               InitialGuess guess)
    : methods_(std::move(methods)), t_start_(t_start), guess_(guess) {
  if (nx < 3)
    throw InvalidOption(
        "Heat1DPeriodic", "nx",
        "'" + std::to_string(nx) + "' is invalid; accepted: an integer >= 3 (nodes on the ring)");
  dx_ = 1.0 / (nx - 1);
  for (int i = 0; i < nx; ++i) x_.push_back(i * dx_);
}

Heat1DPeriodic::Method Heat1DPeriodic::parse_method(const std::string& name) {
  if (name == "be") return Method::BackwardEuler;
  if (name == "cn") return Method::CrankNicolson;
  throw InvalidOption("Heat1DPeriodic", "integrator",
                      "'" + name + "' is unknown; accepted: be, cn");
}

LevelList<Heat1DPeriodic::Method> Heat1DPeriodic::parse_methods(const std::string& text) {
  return parse_level_list<Method>("Heat1DPeriodic", "integrator", text, "be, cn", parse_method);
}

Heat1DPeriodic::State Heat1DPeriodic::init(double t) const {
  State u(nodes());
  for (std::size_t i = 0; i < u.size(); ++i)
    u[i] = t == t_start_ ? std::sin(kPi * x_[i]) : guess_.at(t, i);
  return u;
}

void Heat1DPeriodic::apply_laplacian(const State& u, State& y) const {
  const std::size_t n = nodes();
  const double s = 1.0 / (dx_ * dx_);
  y.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double left = u[i == 0 ? n - 1 : i - 1], right = u[i + 1 == n ? 0 : i + 1];
    y[i] = s * (left - 2.0 * u[i] + right);
  }
}

// Sherman-Morrison for the cyclic system T x = r: T = B + w v^T with w = (gamma, 0, .., 0, c),
// v = (1, 0, .., 0, c/gamma), B tridiagonal with B_00 = d - gamma and B_nn = d - c^2/gamma.
const Heat1DPeriodic::Factor& Heat1DPeriodic::factor(double theta_h) {
  auto it = factors_.find(theta_h);
  if (it != factors_.end()) return it->second;
  if (factors_.size() > 64) factors_.clear();  // step sizes are few; keep the cache bounded
  const std::size_t n = nodes();
  const double s = theta_h / (dx_ * dx_);
  Factor f;
  f.corner = -s;
  f.gamma = -(1.0 + 2.0 * s);
  f.cprime.resize(n);
  f.denom.resize(n);
  const double d = 1.0 + 2.0 * s, off = -s;
  for (std::size_t i = 0; i < n; ++i) {
    double diag = d;
    if (i == 0) diag = d - f.gamma;
    if (i + 1 == n) diag = d - f.corner * f.corner / f.gamma;
    f.denom[i] = i == 0 ? diag : diag - off * f.cprime[i - 1];
    f.cprime[i] = off / f.denom[i];
  }
  std::vector<double> w(n, 0.0);
  w[0] = f.gamma;
  w[n - 1] = f.corner;
  thomas(f, w, f.z);
  f.vz = f.z[0] + f.corner / f.gamma * f.z[n - 1];
  return factors_.emplace(theta_h, std::move(f)).first->second;
}

void Heat1DPeriodic::thomas(const Factor& f, const std::vector<double>& r,
                            std::vector<double>& x) const {
  const std::size_t n = nodes();
  const double off = f.corner;  // the off-diagonal equals the corner entry (-s)
  x.resize(n);
  x[0] = r[0] / f.denom[0];
  for (std::size_t i = 1; i < n; ++i) x[i] = (r[i] - off * x[i - 1]) / f.denom[i];
  for (std::size_t i = n - 1; i-- > 0;) x[i] -= f.cprime[i] * x[i + 1];
}

void Heat1DPeriodic::solve(const Factor& f, const std::vector<double>& r,
                           std::vector<double>& x) const {
  const std::size_t n = nodes();
  thomas(f, r, x);
  const double vy = x[0] + f.corner / f.gamma * x[n - 1];
  const double scale = vy / (1.0 + f.vz);
  for (std::size_t i = 0; i < n; ++i) x[i] -= scale * f.z[i];
}

void Heat1DPeriodic::step(const State& in, State& out, double t0, double t1, const StepInfo& info) {
  const double h = t1 - t0;
  if (methods_.at(info.level) == Method::BackwardEuler) {
    solve(factor(h), in, out);
    return;
  }
  apply_laplacian(in, y_);  // Crank-Nicolson: (I - h/2 A) out = (I + h/2 A) in
  rhs_.resize(nodes());
  for (std::size_t i = 0; i < nodes(); ++i) rhs_[i] = in[i] + 0.5 * h * y_[i];
  solve(factor(0.5 * h), rhs_, out);
}

}  // namespace weft::mgrit::problems
