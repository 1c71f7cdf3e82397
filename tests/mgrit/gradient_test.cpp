// Gradients through time-parallel solves (weft/mgrit/gradient.hpp): J = 1/2 ||u_N||^2 and dJ/dp
// by a forward MGRIT solve and a reverse-time MGRIT solve of the discrete adjoint, compared with
// the exact derivative of the discrete sequential solution — a closed form for Dahlquist, the
// differentiated sequential recursion (an independent dense implementation) for the heat
// equation's diffusion coefficient — to relative 1e-10, at every rank count.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <string>
#include <vector>

#include "breadth_support.hpp"
#include "expect.hpp"
#include "weft/mgrit/gradient.hpp"
#include "weft/mgrit/problems/dahlquist_levels.hpp"
#include "weft/mgrit/problems/heat1d_spacetime.hpp"

namespace weft::mgrit::breadth {
namespace {

using problems::DahlquistLevels;
using problems::Heat1DSpaceTime;
using problems::InitialGuess;
using problems::Integrator;

struct Config {
  const char* name;
  Options options;
};

std::vector<Config> configs(double tol) {
  const Options base = Options().abs_tol(tol).max_iterations(100);
  return {
      {"one_level", Options(base).max_levels(1)},
      {"xbraid_2lev", Options(base).max_levels(2)},
      {"xbraid_3lev_cf4", Options(base).max_levels(3).cfactor(4)},
      {"xbraid_4lev_F_cpoints",
       Options(base).max_levels(4).cycle(Cycle::F).storage(Storage::CPoints)},
      {"pymgrit_3lev", Options(base).convention(Convention::PyMGRIT).max_levels(3)},
  };
}

using weft::test_support::expect_relative;

// ---------------------------------------------------------------------------------------------
// Dahlquist: u_N = a^N with a = 1/(1 - lambda h) (backward Euler), J = a^{2N}/2,
// dJ/dlambda = N a^{2N-1} da/dlambda.

TEST(Gradient, DahlquistBackwardEulerMatchesTheClosedForm) {
  const index_t n = 64;
  const double t_end = 2.0, lambda = -1.3, h = t_end / static_cast<double>(n);
  const double a = 1.0 / (1.0 - lambda * h);
  const double j_exact = 0.5 * std::pow(a, 2.0 * n);
  const double g_exact = static_cast<double>(n) * h * std::pow(1.0 - lambda * h, -2.0 * n - 1.0);
  for (const Config& c : configs(1e-15)) {
    DahlquistLevels app(lambda, Integrator::BackwardEuler, 0.0, InitialGuess::constant(0.3));
    const GradientResult g =
        gradient(app, MPI_COMM_WORLD, TimeGrid::uniform(0.0, t_end, n), c.options);
    EXPECT_TRUE(g.forward.converged) << c.name;
    EXPECT_TRUE(g.adjoint.converged) << c.name;
    expect_relative(g.objective, j_exact, 1e-12, std::string(c.name) + " J");
    expect_relative(g.gradient, g_exact, 1e-10, std::string(c.name) + " dJ/dlambda");
  }
}

// Implicit midpoint on the fine grid, backward Euler below: the gradient is the fine
// (midpoint) discretization's, whatever the coarse levels use.
TEST(Gradient, PerLevelIntegratorsGiveTheFineDiscretizationsGradient) {
  const index_t n = 48;
  const double t_end = 3.0, lambda = -0.8, h = t_end / static_cast<double>(n);
  const double z = lambda * h, a = (1.0 + 0.5 * z) / (1.0 - 0.5 * z);
  const double da = h / ((1.0 - 0.5 * z) * (1.0 - 0.5 * z));
  const double g_exact = static_cast<double>(n) * std::pow(a, 2.0 * n - 1.0) * da;
  for (const Config& c : configs(1e-15)) {
    DahlquistLevels app(lambda, DahlquistLevels::parse_integrators("mr,be"), 0.0,
                        InitialGuess::zero());
    const GradientResult g =
        gradient(app, MPI_COMM_WORLD, TimeGrid::uniform(0.0, t_end, n), c.options);
    expect_relative(g.objective, 0.5 * std::pow(a, 2.0 * n), 1e-12, c.name);
    expect_relative(g.gradient, g_exact, 1e-10, c.name);
  }
}

TEST(Gradient, RejectsReverseOptions) {
  DahlquistLevels app(-1.0, Integrator::BackwardEuler, 0.0, InitialGuess::zero());
  EXPECT_THROW(gradient(app, MPI_COMM_WORLD, TimeGrid::uniform(0.0, 1.0, 8),
                        Options().direction(Direction::Reverse)),
               InvalidOption);
}

// ---------------------------------------------------------------------------------------------
// Heat: d/dkappa of J for u_t = kappa u_xx + f. The reference differentiates the sequential
// recursion itself, written here independently with dense matrices:
//   BE  M u_{n+1} = u_n + h f_{n+1},                    M = I - h kappa A
//       M du_{n+1} = du_n + h A u_{n+1}
//   CN  M u_{n+1} = N u_n + h/2 (f_n + f_{n+1}),        M = I - h/2 kappa A, N = I + h/2 kappa A
//       M du_{n+1} = N du_n + h/2 A (u_n + u_{n+1})
// and dJ/dkappa = u_N . du_N.

using Matrix = std::vector<std::vector<double>>;

std::vector<double> dense_solve(Matrix m, std::vector<double> b) {
  const std::size_t n = b.size();
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t p = k;
    for (std::size_t i = k + 1; i < n; ++i)
      if (std::abs(m[i][k]) > std::abs(m[p][k])) p = i;
    std::swap(m[k], m[p]);
    std::swap(b[k], b[p]);
    for (std::size_t i = k + 1; i < n; ++i) {
      const double f = m[i][k] / m[k][k];
      for (std::size_t j = k; j < n; ++j) m[i][j] -= f * m[k][j];
      b[i] -= f * b[k];
    }
  }
  std::vector<double> x(n);
  for (std::size_t i = n; i-- > 0;) {
    double s = b[i];
    for (std::size_t j = i + 1; j < n; ++j) s -= m[i][j] * x[j];
    x[i] = s / m[i][i];
  }
  return x;
}

std::vector<double> times(const Matrix& m, const std::vector<double>& x) {
  std::vector<double> y(x.size(), 0.0);
  for (std::size_t i = 0; i < x.size(); ++i)
    for (std::size_t j = 0; j < x.size(); ++j) y[i] += m[i][j] * x[j];
  return y;
}

struct Reference {
  double objective, gradient;
};

Reference heat_reference(int nx, double kappa, bool cn, index_t steps, double t_end) {
  const double pi = 3.14159265358979323846, x1 = 2.0;
  const std::size_t n = static_cast<std::size_t>(nx - 2);
  const double dx = x1 / (nx - 1), h = t_end / static_cast<double>(steps);
  Matrix a(n, std::vector<double>(n, 0.0)), m = a, nn = a;
  for (std::size_t i = 0; i < n; ++i) {
    a[i][i] = -2.0 / (dx * dx);
    if (i > 0) a[i][i - 1] = 1.0 / (dx * dx);
    if (i + 1 < n) a[i][i + 1] = 1.0 / (dx * dx);
  }
  const double theta = cn ? 0.5 : 1.0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      m[i][j] = (i == j ? 1.0 : 0.0) - theta * h * kappa * a[i][j];
      nn[i][j] = (i == j ? 1.0 : 0.0) + (1.0 - theta) * h * kappa * a[i][j];
    }
  auto forcing = [&](double t) {
    std::vector<double> f(n);
    for (std::size_t i = 0; i < n; ++i) {
      const double x = static_cast<double>(i + 1) * dx;
      f[i] = -std::sin(pi * x) * (std::sin(t) - pi * pi * std::cos(t));
    }
    return f;
  };
  std::vector<double> u(n), du(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) u[i] = std::sin(pi * static_cast<double>(i + 1) * dx);
  for (index_t k = 0; k < steps; ++k) {
    const double t0 = h * static_cast<double>(k), t1 = h * static_cast<double>(k + 1);
    const std::vector<double> f0 = forcing(t0), f1 = forcing(t1);
    std::vector<double> rhs = times(nn, u);
    for (std::size_t i = 0; i < n; ++i) rhs[i] += cn ? 0.5 * h * (f0[i] + f1[i]) : h * f1[i];
    const std::vector<double> u1 = dense_solve(m, rhs);
    std::vector<double> drive(n);
    for (std::size_t i = 0; i < n; ++i) drive[i] = cn ? u[i] + u1[i] : u1[i];
    const std::vector<double> adrive = times(a, drive);
    std::vector<double> drhs = times(nn, du);
    for (std::size_t i = 0; i < n; ++i) drhs[i] += theta * h * adrive[i];
    du = dense_solve(m, drhs);
    u = u1;
  }
  Reference r{0.0, 0.0};
  for (std::size_t i = 0; i < n; ++i) {
    r.objective += 0.5 * u[i] * u[i];
    r.gradient += u[i] * du[i];
  }
  return r;
}

Heat1DSpaceTime make_heat(const char* nx, const char* methods, double kappa) {
  return Heat1DSpaceTime(Heat1DSpaceTime::parse_nx(nx), 0.0, 2.0, kappa,
                         Heat1DSpaceTime::parse_methods(methods), 0.0, InitialGuess::random(3));
}

TEST(Gradient, HeatDiffusionCoefficientMatchesTheDifferentiatedRecursion) {
  const index_t steps = 32;
  const double t_end = 1.0;
  struct Case {
    const char* nx;
    const char* methods;
    double kappa;
  };
  for (const Case& k : {Case{"17", "be", 1.0}, Case{"17", "cn", 0.7}, Case{"17,9", "be", 0.7},
                        Case{"17,9", "cn,be", 1.3}}) {
    const bool cn = std::string(k.methods).rfind("cn", 0) == 0;
    const Reference ref = heat_reference(17, k.kappa, cn, steps, t_end);
    for (const Config& c : configs(1e-14)) {
      if (std::string(k.nx) != "17" && c.options.nrelax_at(0) == 0) continue;
      Heat1DSpaceTime app = make_heat(k.nx, k.methods, k.kappa);
      const GradientResult g =
          gradient(app, MPI_COMM_WORLD, TimeGrid::uniform(0.0, t_end, steps), c.options);
      const std::string what = std::string(k.nx) + " " + k.methods + " " + c.name;
      EXPECT_TRUE(g.forward.converged) << what;
      EXPECT_TRUE(g.adjoint.converged) << what;
      expect_relative(g.objective, ref.objective, 1e-12, what + " J");
      expect_relative(g.gradient, ref.gradient, 1e-10, what + " dJ/dkappa");
    }
  }
}

// A central difference of J on the App's own sequential solution agrees too (to its own
// truncation error), so the reference above is the derivative of what the App computes.
TEST(Gradient, HeatAgreesWithACentralDifference) {
  const auto grid = TimeGrid::uniform(0.0, 1.0, 32);
  auto objective = [&](double kappa) {
    Heat1DSpaceTime app = make_heat("17", "cn", kappa);
    const GradientResult g = gradient(app, MPI_COMM_SELF, grid, Options().max_levels(1));
    return g.objective;
  };
  const double kappa = 0.7, d = 1e-5;
  const double fd = (objective(kappa + d) - objective(kappa - d)) / (2 * d);
  Heat1DSpaceTime app = make_heat("17", "cn", kappa);
  const GradientResult g =
      gradient(app, MPI_COMM_WORLD, grid, Options().max_levels(3).abs_tol(1e-14));
  expect_relative(g.gradient, fd, 1e-8, "central difference");
}

}  // namespace
}  // namespace weft::mgrit::breadth
