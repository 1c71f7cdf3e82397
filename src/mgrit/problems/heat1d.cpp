#include "weft/mgrit/problems/heat1d.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "weft/util/error.hpp"

namespace weft::mgrit::problems {

namespace {
constexpr double kPi = 3.14159265358979323846;
}

Heat1D::Heat1D(int nx, double x0, double x1, double t_start, InitialGuess guess)
    : t_start_(t_start), guess_(guess) {
  if (nx < 3)
    throw InvalidOption("option nx: " + std::to_string(nx) +
                        " is invalid; accepted: an integer >= 3 (boundary points included)");
  if (!(x1 > x0))
    throw InvalidOption("options x0, x1: [" + number_text(x0) + ", " + number_text(x1) +
                        "] is invalid; accepted: x0 < x1");
  dx_ = (x1 - x0) / (nx - 1);
  for (int i = 1; i < nx - 1; ++i) x_.push_back(x0 + i * dx_);
  scratch_.resize(x_.size());
}

double Heat1D::forcing(double x, double t) const {
  return -std::sin(kPi * x) * (std::sin(t) - kPi * kPi * std::cos(t));
}

Heat1D::State Heat1D::init(double t) const {
  State u(interior());
  if (t == t_start_) {
    for (size_t i = 0; i < u.size(); ++i) u[i] = std::sin(kPi * x_[i]) * std::cos(t);
  } else {
    for (size_t i = 0; i < u.size(); ++i) u[i] = guess_.at(t, i);
  }
  return u;
}

Heat1D::State Heat1D::exact(double t) const {
  State u(interior());
  for (size_t i = 0; i < u.size(); ++i) u[i] = std::sin(kPi * x_[i]) * std::cos(t);
  return u;
}

// (I - h A) out = in + h f(t1), A = tridiag(1, -2, 1) / dx^2 with zero Dirichlet values.
void Heat1D::step(const State& in, State& out, double t0, double t1, const StepInfo&) {
  const double h = t1 - t0;
  const double off = -h / (dx_ * dx_);
  const double diag = 1.0 + 2.0 * h / (dx_ * dx_);
  const size_t n = interior();
  out.resize(n);
  // Forward elimination (Thomas); the matrix is constant along the diagonals.
  double denom = diag;
  scratch_[0] = off / denom;
  out[0] = (in[0] + h * forcing(x_[0], t1)) / denom;
  for (size_t i = 1; i < n; ++i) {
    denom = diag - off * scratch_[i - 1];
    scratch_[i] = off / denom;
    out[i] = (in[i] + h * forcing(x_[i], t1) - off * out[i - 1]) / denom;
  }
  for (size_t i = n - 1; i-- > 0;) out[i] -= scratch_[i] * out[i + 1];
}

}  // namespace weft::mgrit::problems
