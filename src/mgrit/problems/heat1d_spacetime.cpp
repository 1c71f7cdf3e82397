#include "weft/mgrit/problems/heat1d_spacetime.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "weft/util/error.hpp"

namespace weft::mgrit::problems {

namespace {
constexpr double kPi = 3.14159265358979323846;
const char* const kNxAccepted =
    "integers >= 3 (grid points incl. the boundary), one per level (the last repeats), each "
    "keeping the grid above (same nx) or halving its intervals (nx_below - 1 = (nx - 1)/2)";

std::string list_text(const std::vector<int>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

void check_nx(const std::vector<int>& nx) {
  const std::string text = list_text(nx);
  for (std::size_t l = 0; l < nx.size(); ++l) {
    if (nx[l] < 3)
      invalid_value("Heat1DSpaceTime", "nx", text, kNxAccepted,
                    "level " + std::to_string(l) + " has " + std::to_string(nx[l]) + " points");
    if (l == 0 || nx[l] == nx[l - 1]) continue;
    if ((nx[l - 1] - 1) % 2 != 0 || nx[l] - 1 != (nx[l - 1] - 1) / 2) {
      const std::string halved = (nx[l - 1] - 1) % 2 == 0
                                     ? " or " + std::to_string((nx[l - 1] - 1) / 2 + 1)
                                     : " (its " + std::to_string(nx[l - 1] - 1) +
                                           " intervals are odd: it cannot be halved)";
      invalid_value("Heat1DSpaceTime", "nx", text, kNxAccepted,
                    "level " + std::to_string(l) + " has " + std::to_string(nx[l]) +
                        " points, but below " + std::to_string(nx[l - 1]) + " points only " +
                        std::to_string(nx[l - 1]) + halved + " can follow");
    }
  }
}
}  // namespace

Heat1DSpaceTime::Heat1DSpaceTime(LevelList<int> nx, double x0, double x1, double kappa,
                                 LevelList<Method> methods, double t_start, InitialGuess guess)
    : nx_(std::move(nx)),
      x0_(x0),
      x1_(x1),
      kappa_(kappa),
      methods_(std::move(methods)),
      t_start_(t_start),
      guess_(guess) {
  check_nx(nx_.items());
  if (!(x1 > x0))
    throw InvalidOption("Heat1DSpaceTime", "x1",
                        "'" + number_text(x1) + "' is invalid: not above x0 (" + number_text(x0) +
                            "); accepted: x0 < x1");
  if (!(kappa > 0.0) || !std::isfinite(kappa))
    throw InvalidOption("Heat1DSpaceTime", "kappa",
                        "'" + number_text(kappa) + "' is invalid; accepted: a finite number > 0");
}

Heat1DSpaceTime::Method Heat1DSpaceTime::parse_method(const std::string& name) {
  if (name == "be") return Method::BackwardEuler;
  if (name == "cn") return Method::CrankNicolson;
  throw InvalidOption("Heat1DSpaceTime", "integrator",
                      "'" + name + "' is unknown; accepted: be, cn");
}

LevelList<Heat1DSpaceTime::Method> Heat1DSpaceTime::parse_methods(const std::string& text) {
  return parse_level_list<Method>("Heat1DSpaceTime", "integrator", text, "be, cn", parse_method);
}

LevelList<int> Heat1DSpaceTime::parse_nx(const std::string& text) {
  std::vector<int> nx;
  for (const std::string& item : split_list("Heat1DSpaceTime", "nx", text, kNxAccepted)) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (*end != '\0' || errno != 0 || v < 3 || v > (1L << 30))
      invalid_value("Heat1DSpaceTime", "nx", text, kNxAccepted,
                    "'" + item + "' is not an integer >= 3");
    nx.push_back(static_cast<int>(v));
  }
  check_nx(nx);
  return LevelList<int>(std::move(nx));
}

void Heat1DSpaceTime::check_levels(int levels) const {
  check_list_length("Heat1DSpaceTime", "nx", nx_.size(), levels);
  check_list_length("Heat1DSpaceTime", "integrator", methods_.size(), levels);
}

std::vector<double> Heat1DSpaceTime::x(int level) const {
  std::vector<double> out(interior(level));
  const double h = dx(level);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = x0_ + static_cast<double>(i + 1) * h;
  return out;
}

double Heat1DSpaceTime::forcing(double x, double t) const {
  return -std::sin(kPi * x) * (std::sin(t) - kPi * kPi * std::cos(t));
}

Heat1DSpaceTime::State Heat1DSpaceTime::init(double t) const {
  const std::vector<double> xs = x(0);
  State u(xs.size());
  for (std::size_t i = 0; i < u.size(); ++i)
    u[i] = t == t_start_ ? std::sin(kPi * xs[i]) * std::cos(t) : guess_.at(t, i);
  return u;
}

Heat1DSpaceTime::State Heat1DSpaceTime::init(double t, int level) const {
  const std::vector<double> xs = x(level);
  State u(xs.size());
  for (std::size_t i = 0; i < u.size(); ++i) u[i] = std::sin(kPi * xs[i]) * std::cos(t);
  return u;
}

Heat1DSpaceTime::State Heat1DSpaceTime::exact(double t) const {
  const std::vector<double> xs = x(0);
  State u(xs.size());
  for (std::size_t i = 0; i < u.size(); ++i) u[i] = std::sin(kPi * xs[i]) * std::cos(t);
  return u;
}

void Heat1DSpaceTime::apply_laplacian(int level, const State& u, State& y) const {
  const std::size_t n = interior(level);
  const double s = 1.0 / (dx(level) * dx(level));
  y.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double left = i > 0 ? u[i - 1] : 0.0, right = i + 1 < n ? u[i + 1] : 0.0;
    y[i] = s * (left - 2.0 * u[i] + right);
  }
}

// Thomas algorithm for tridiag(off, diag, off) with off = -theta_h kappa/dx^2 (as Heat1D).
void Heat1DSpaceTime::solve(int level, double theta_h, std::vector<double>& x) {
  const std::size_t n = interior(level);
  const double h = theta_h * kappa_, d2 = dx(level) * dx(level);
  const double off = -h / d2, diag = 1.0 + 2.0 * h / d2;
  scratch_.resize(n);
  double denom = diag;
  scratch_[0] = off / denom;
  x[0] = x[0] / denom;
  for (std::size_t i = 1; i < n; ++i) {
    denom = diag - off * scratch_[i - 1];
    scratch_[i] = off / denom;
    x[i] = (x[i] - off * x[i - 1]) / denom;
  }
  for (std::size_t i = n - 1; i-- > 0;) x[i] -= scratch_[i] * x[i + 1];
}

void Heat1DSpaceTime::step(const State& in, State& out, double t0, double t1,
                           const StepInfo& info) {
  const int l = info.level;
  const double h = t1 - t0;
  const std::vector<double> xs = x(l);
  const std::size_t n = xs.size();
  WEFT_CHECK(in.size() == n, BadData,
             "Heat1DSpaceTime::step: a state of " + std::to_string(in.size()) +
                 " unknowns on level " + std::to_string(l) + ", whose grid has " +
                 std::to_string(n));
  out.resize(n);
  if (methods_.at(l) == Method::BackwardEuler) {
    for (std::size_t i = 0; i < n; ++i) out[i] = in[i] + h * forcing(xs[i], t1);
    solve(l, h, out);
    return;
  }
  apply_laplacian(l, in, lap_);
  for (std::size_t i = 0; i < n; ++i)
    out[i] =
        in[i] + 0.5 * h * kappa_ * lap_[i] + 0.5 * h * (forcing(xs[i], t0) + forcing(xs[i], t1));
  solve(l, 0.5 * h, out);
}

// BE: u1 = M^{-1}(u + h f), M = I - h kappa A symmetric: J^T = M^{-1}.
// CN: u1 = M^{-1}(N u + ...), M = I - h/2 kappa A, N = I + h/2 kappa A: J^T = N M^{-1}.
void Heat1DSpaceTime::step_adjoint(const State& adj_in, State& adj_out, const State&, double t0,
                                   double t1, const StepInfo& info) {
  const int l = info.level;
  const double h = t1 - t0;
  adj_out = adj_in;
  if (methods_.at(l) == Method::BackwardEuler) {
    solve(l, h, adj_out);
    return;
  }
  solve(l, 0.5 * h, adj_out);
  apply_laplacian(l, adj_out, lap_);
  for (std::size_t i = 0; i < adj_out.size(); ++i) adj_out[i] += 0.5 * h * kappa_ * lap_[i];
}

// d u1/d kappa: BE M u1' = h A u1; CN M u1' = h/2 A (u + u1). Returns adj . u1'.
double Heat1DSpaceTime::step_parameter(const State& adj, const State& u, double t0, double t1,
                                       const StepInfo& info) {
  const int l = info.level;
  const double h = t1 - t0;
  step(u, tmp_, t0, t1, info);  // u1
  const bool be = methods_.at(l) == Method::BackwardEuler;
  if (!be)
    for (std::size_t i = 0; i < tmp_.size(); ++i) tmp_[i] += u[i];
  apply_laplacian(l, tmp_, tmp2_);
  State w = adj;
  solve(l, be ? h : 0.5 * h, w);
  double s = 0;
  for (std::size_t i = 0; i < w.size(); ++i) s += w[i] * tmp2_[i];
  return (be ? h : 0.5 * h) * s;
}

void Heat1DSpaceTime::coarsen(const State& fine, State& coarse, int fine_level) const {
  const std::size_t nc = interior(fine_level + 1);
  if (nc == fine.size()) {
    coarse = fine;
    return;
  }
  coarse.resize(nc);
  for (std::size_t i = 0; i < nc; ++i)
    coarse[i] = 0.25 * fine[2 * i] + 0.5 * fine[2 * i + 1] + 0.25 * fine[2 * i + 2];
}

void Heat1DSpaceTime::refine(const State& coarse, State& fine, int coarse_level) const {
  const std::size_t nf = interior(coarse_level - 1);
  if (nf == coarse.size()) {
    fine = coarse;
    return;
  }
  const std::size_t nc = coarse.size();
  fine.resize(nf);
  for (std::size_t i = 0; i <= nc; ++i) {
    const double left = i > 0 ? coarse[i - 1] : 0.0, right = i < nc ? coarse[i] : 0.0;
    fine[2 * i] = 0.5 * (left + right);
    if (i < nc) fine[2 * i + 1] = coarse[i];
  }
}

}  // namespace weft::mgrit::problems
