#include "weft/mgrit/problems/heat2d.hpp"

#include <algorithm>
#include <cstring>

#include "weft/util/error.hpp"

namespace weft::mgrit::problems {

void Heat2DGrid::validate() const {
  if (nx < 3)
    throw InvalidOption(
        "Heat2D", "nx",
        "'" + std::to_string(nx) +
            "' is invalid; accepted: an integer >= 3 (grid points incl. the boundary)");
  if (ny < 3)
    throw InvalidOption(
        "Heat2D", "ny",
        "'" + std::to_string(ny) +
            "' is invalid; accepted: an integer >= 3 (grid points incl. the boundary)");
  if (!(lx > 0.0) || !std::isfinite(lx))
    throw InvalidOption("Heat2D", "lx",
                        "'" + number_text(lx) + "' is invalid; accepted: a number > 0");
  if (!(ly > 0.0) || !std::isfinite(ly))
    throw InvalidOption("Heat2D", "ly",
                        "'" + number_text(ly) + "' is invalid; accepted: a number > 0");
}

Heat2D::Heat2D(Heat2DGrid grid, LevelList<Method> methods, double t_start, InitialGuess guess)
    : grid_(grid), methods_(std::move(methods)), t_start_(t_start), guess_(guess) {
  grid_.validate();
}

Heat2D::Method Heat2D::parse_method(const std::string& name) {
  if (name == "be") return Method::BackwardEuler;
  if (name == "cn") return Method::CrankNicolson;
  throw InvalidOption("Heat2D", "integrator", "'" + name + "' is unknown; accepted: be, cn");
}

std::string Heat2D::to_string(Method method) {
  return method == Method::BackwardEuler ? "be" : "cn";
}

LevelList<Heat2D::Method> Heat2D::parse_methods(const std::string& text) {
  return parse_level_list<Method>("Heat2D", "integrator", text, "be, cn", parse_method);
}

Heat2D::State Heat2D::init(double t) const {
  State u(grid_.unknowns());
  for (std::size_t k = 0; k < u.size(); ++k)
    u[k] = t == t_start_ ? grid_.exact(grid_.x_of(k), grid_.y_of(k), t) : guess_.at(t, k);
  return u;
}

Heat2D::State Heat2D::exact(double t) const {
  State u(grid_.unknowns());
  for (std::size_t k = 0; k < u.size(); ++k) u[k] = grid_.exact(grid_.x_of(k), grid_.y_of(k), t);
  return u;
}

void Heat2D::apply_laplacian(const State& u, State& y) const {
  const int mx = grid_.mx(), my = grid_.my();
  const double cx = 1.0 / (grid_.dx() * grid_.dx()), cy = 1.0 / (grid_.dy() * grid_.dy());
  y.resize(u.size());
  for (int j = 0; j < my; ++j)
    for (int i = 0; i < mx; ++i) {
      const std::size_t k = static_cast<std::size_t>(j) * mx + i;
      double v = -2.0 * (cx + cy) * u[k];
      if (i > 0) v += cx * u[k - 1];
      if (i + 1 < mx) v += cx * u[k + 1];
      if (j > 0) v += cy * u[k - static_cast<std::size_t>(mx)];
      if (j + 1 < my) v += cy * u[k + static_cast<std::size_t>(mx)];
      y[k] = v;
    }
}

// Banded Cholesky of the SPD matrix I - theta_h * Laplace (half bandwidth m = mx). Storage:
// band[k*(m+1) + (m - d)] = L(k, k-d) for d = 0..m.
const Heat2D::Factor& Heat2D::factor(double theta_h) {
  auto it = factors_.find(theta_h);
  if (it != factors_.end()) return it->second;
  if (factors_.size() > 64) factors_.clear();
  const std::size_t n = grid_.unknowns(), m = static_cast<std::size_t>(grid_.mx());
  const double cx = theta_h / (grid_.dx() * grid_.dx()), cy = theta_h / (grid_.dy() * grid_.dy());
  const std::size_t w = m + 1;
  Factor f;
  f.band.assign(n * w, 0.0);
  auto L = [&](std::size_t r, std::size_t c) -> double& { return f.band[r * w + (m - (r - c))]; };
  // The matrix entries A(r, c) for c <= r.
  auto A = [&](std::size_t r, std::size_t c) {
    if (r == c) return 1.0 + 2.0 * (cx + cy);
    if (r - c == 1 && r % m != 0) return -cx;
    if (r - c == m) return -cy;
    return 0.0;
  };
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t c0 = r >= m ? r - m : 0;
    for (std::size_t c = c0; c <= r; ++c) {
      double s = A(r, c);
      const std::size_t k0 = std::max(c0, c >= m ? c - m : 0);
      for (std::size_t k = k0; k < c; ++k) s -= L(r, k) * L(c, k);
      if (c == r) {
        L(r, r) = std::sqrt(s);
      } else {
        L(r, c) = s / L(c, c);
      }
    }
  }
  return factors_.emplace(theta_h, std::move(f)).first->second;
}

void Heat2D::solve(const Factor& f, std::vector<double>& x) const {
  const std::size_t n = grid_.unknowns(), m = static_cast<std::size_t>(grid_.mx()), w = m + 1;
  auto L = [&](std::size_t r, std::size_t c) { return f.band[r * w + (m - (r - c))]; };
  for (std::size_t r = 0; r < n; ++r) {  // L y = x
    double s = x[r];
    for (std::size_t c = r >= m ? r - m : 0; c < r; ++c) s -= L(r, c) * x[c];
    x[r] = s / L(r, r);
  }
  for (std::size_t r = n; r-- > 0;) {  // L^T x = y
    double s = x[r];
    for (std::size_t c = r + 1; c <= std::min(n - 1, r + m); ++c) s -= L(c, r) * x[c];
    x[r] = s / L(r, r);
  }
}

void Heat2D::step(const State& in, State& out, double t0, double t1, const StepInfo& info) {
  const double h = t1 - t0;
  const std::size_t n = grid_.unknowns();
  out.resize(n);
  if (methods_.at(info.level) == Method::BackwardEuler) {
    for (std::size_t k = 0; k < n; ++k)
      out[k] = in[k] + h * grid_.forcing(grid_.x_of(k), grid_.y_of(k), t1);
    solve(factor(h), out);
    return;
  }
  apply_laplacian(in, lap_);
  for (std::size_t k = 0; k < n; ++k) {
    const double x = grid_.x_of(k), y = grid_.y_of(k);
    out[k] =
        in[k] + 0.5 * h * lap_[k] + 0.5 * h * (grid_.forcing(x, y, t0) + grid_.forcing(x, y, t1));
  }
  solve(factor(0.5 * h), out);
}

}  // namespace weft::mgrit::problems
