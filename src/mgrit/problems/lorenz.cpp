#include "weft/mgrit/problems/lorenz.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "weft/util/error.hpp"

namespace weft::mgrit::problems {

Lorenz::Method Lorenz::parse_method(const std::string& name) {
  if (name == "be") return Method::BackwardEuler;
  if (name == "fe") return Method::ForwardEuler;
  if (name == "rk4") return Method::Rk4;
  throw InvalidOption("Lorenz", "integrator", "'" + name + "' is unknown; accepted: be, fe, rk4");
}

LevelList<Lorenz::Method> Lorenz::parse_methods(const std::string& text) {
  return parse_level_list<Method>("Lorenz", "integrator", text, "be, fe, rk4", parse_method);
}

namespace {

// x with A x = b for a 3x3 A, by elimination with partial pivoting; false if A is singular.
bool solve3(std::array<std::array<double, 3>, 3> a, std::array<double, 3> b,
            std::array<double, 3>& x) {
  for (int c = 0; c < 3; ++c) {
    int pivot = c;
    for (int r = c + 1; r < 3; ++r)
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    if (a[pivot][c] == 0.0) return false;
    std::swap(a[c], a[pivot]);
    std::swap(b[c], b[pivot]);
    for (int r = c + 1; r < 3; ++r) {
      const double m = a[r][c] / a[c][c];
      for (int k = c; k < 3; ++k) a[r][k] -= m * a[c][k];
      b[r] -= m * b[c];
    }
  }
  for (int r = 2; r >= 0; --r) {
    double v = b[r];
    for (int k = r + 1; k < 3; ++k) v -= a[r][k] * x[k];
    x[r] = v / a[r][r];
  }
  return true;
}

}  // namespace

Lorenz::State Lorenz::backward_euler(const State& u0, double h) const {
  State u = u0;
  for (int it = 0; it < 50; ++it) {
    const State f = rhs(u);
    State g;  // the residual u - u0 - h f(u)
    for (int i = 0; i < 3; ++i) g[i] = u[i] - u0[i] - h * f[i];
    std::array<State, 3> jac = jacobian(u);
    for (int i = 0; i < 3; ++i)
      for (int k = 0; k < 3; ++k) jac[i][k] = (i == k ? 1.0 : 0.0) - h * jac[i][k];
    State du{};
    if (!solve3(jac, g, du)) break;
    double change = 0, size = 0;
    for (int i = 0; i < 3; ++i) {
      u[i] -= du[i];
      change = std::max(change, std::abs(du[i]));
      size = std::max(size, std::abs(u[i]));
    }
    if (!std::isfinite(change)) break;
    if (change <= 1e-14 * std::max(1.0, size)) return u;
  }
  throw Divergence("Lorenz: Newton's method for a backward Euler step of length " + number_text(h) +
                   " did not converge");
}

void Lorenz::step(const State& in, State& out, double t0, double t1, const StepInfo& info) const {
  const double h = t1 - t0;
  if (methods_.at(info.level) == Method::BackwardEuler) {
    out = backward_euler(in, h);
    return;
  }
  const State k1 = rhs(in);
  if (methods_.at(info.level) == Method::ForwardEuler) {
    for (int i = 0; i < 3; ++i) out[i] = h * k1[i] + in[i];  // ex-07's order of operations
    return;
  }
  auto shifted = [&](const State& k, double c) {
    return State{in[0] + c * k[0], in[1] + c * k[1], in[2] + c * k[2]};
  };
  const State k2 = rhs(shifted(k1, 0.5 * h));
  const State k3 = rhs(shifted(k2, 0.5 * h));
  const State k4 = rhs(shifted(k3, h));
  for (int i = 0; i < 3; ++i)
    out[i] = in[i] + h / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
}

namespace {

using Matrix = std::array<std::array<double, 3>, 3>;

// x <- A x, ex-07's MatVec (row sums from 0, in column order).
void multiply(const Matrix& a, std::array<double, 3>& x) {
  const std::array<double, 3> tmp = x;
  for (int i = 0; i < 3; ++i) {
    x[i] = 0.0;
    for (int j = 0; j < 3; ++j) x[i] += a[i][j] * tmp[j];
  }
}

}  // namespace

void Lorenz::step_tangent(const State& in, const State& out, State& v, double t0, double t1,
                          const StepInfo& info) const {
  const double h = t1 - t0;
  const Method method = methods_.at(info.level);
  if (method == Method::ForwardEuler) {  // I + h J(u0), as ex-07 builds it
    Matrix f = jacobian(in);
    for (int i = 0; i < 3; ++i)
      for (int k = 0; k < 3; ++k) f[i][k] = h * f[i][k] + (i == k ? 1.0 : 0.0);
    multiply(f, v);
    return;
  }
  if (method == Method::BackwardEuler) {  // (I - h J(u1)) w = v
    Matrix a = jacobian(out);
    for (int i = 0; i < 3; ++i)
      for (int k = 0; k < 3; ++k) a[i][k] = (i == k ? 1.0 : 0.0) - h * a[i][k];
    State w{};
    if (!solve3(a, v, w))
      throw Divergence("Lorenz: the backward Euler step's Jacobian is singular (step " +
                       number_text(h) + ")");
    v = w;
    return;
  }
  // RK4 differentiated stage by stage: dk_s = J(stage point) (v + c h dk_{s-1}).
  auto shifted = [](const State& u, const State& k, double c) {
    return State{u[0] + c * k[0], u[1] + c * k[1], u[2] + c * k[2]};
  };
  auto tangent = [&](const State& at, const State& d) {
    State r = d;
    multiply(jacobian(at), r);
    return r;
  };
  const State k1 = rhs(in);
  const State p2 = shifted(in, k1, 0.5 * h);
  const State k2 = rhs(p2);
  const State p3 = shifted(in, k2, 0.5 * h);
  const State k3 = rhs(p3);
  const State p4 = shifted(in, k3, h);
  const State d1 = tangent(in, v);
  const State d2 = tangent(p2, shifted(v, d1, 0.5 * h));
  const State d3 = tangent(p3, shifted(v, d2, 0.5 * h));
  const State d4 = tangent(p4, shifted(v, d3, h));
  for (int i = 0; i < 3; ++i) v[i] += h / 6.0 * (d1[i] + 2.0 * d2[i] + 2.0 * d3[i] + d4[i]);
}

}  // namespace weft::mgrit::problems
