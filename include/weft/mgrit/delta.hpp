#pragma once
// Delta correction (XBraid's braid_SetDeltaCorrection and SetLyapunovEstimation; the method of
// arXiv:2208.12629): for problems whose perturbations grow (chaotic ones), the coarse propagator
// Phi_c is corrected by a low-rank approximation of Delta = Phi_f' - Phi_c', the difference of
// the fine and coarse propagators' Jacobians over a coarse step. Every state carries r basis
// vectors psi_1..psi_r; during restriction they are propagated through the fine steps by the
// App's step Jacobian, so the coarse right-hand side holds D = (Phi_f' - Phi_c') Psi at each
// coarse point, and the coarse step becomes
//     u_i = Phi_c(u_{i-1}) + g_i + D_i Psi_{i-1}^T u_{i-1}
// (Psi_{i-1}: the restricted basis at the previous point, orthonormal). With Lyapunov
// estimation the basis is also propagated, and orthonormalized by Gram-Schmidt, on the coarsest
// level and in the interpolation's F-relaxation: it converges to the backward Lyapunov vectors,
// the directions of fastest growth, which is where a rank r < dimension correction pays. The
// final sweep then propagates it over every fine C-interval and records the local Lyapunov
// exponents (the logarithms of the Gram-Schmidt norms) at the C-points.
//
//   weft::mgrit::DeltaCorrected<MyApp> app(my_app, {/*rank=*/2});
//   weft::mgrit::Solver<weft::mgrit::DeltaCorrected<MyApp>> solver(app, comm, grid, options);
//
// The wrapped App needs, beyond an App's members:
//   void step_tangent(const State& u0, const State& u1, State& v, double t0, double t1,
//                     const StepInfo& info);
//       v <- (dPhi/du)(u0) v, the step's Jacobian at u0 applied to v (u1 = Phi(u0), for
//       implicit steps whose Jacobian is taken at the end point)
//   double inner_product(const State& a, const State& b);   induces the spatial norm
//   State basis_vector(double t, int index);
//       the initial guess of basis vector `index` at t (linearly independent over index)
// Basis vectors are States shaped like the solution (same buffer size). The core applies the
// correction on every coarse level from the first iteration (XBraid's defaults for
// SetDeferDelta); the solver refuses what it has not been checked with (docs/mgrit.md §3).
#include <cmath>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "weft/mgrit/app.hpp"
#include "weft/mgrit/types.hpp"
#include "weft/util/error.hpp"

namespace weft::mgrit {

/// A state of the corrected App: the solution and its basis.
template <class S>
struct DeltaState {
  S u{};
  std::vector<S> basis;  ///< psi_1 .. psi_r
  /// Local Lyapunov exponents (log of each Gram-Schmidt norm) over the fine C-interval ending
  /// here; set at fine C-points by the final sweep when DeltaOptions::exponents(), else empty.
  std::vector<double> exponents;
};

struct DeltaOptions {
  /// r: the number of basis vectors (XBraid's "rank" of the correction), 1 .. dimension.
  int rank = 1;
  /// Lyapunov estimation: propagate and orthonormalize the basis on the coarsest level and in
  /// interpolation. Off (with `relax` off too): the basis changes only where restriction needs
  /// it (a static basis: ex-07's -noLyap).
  bool lyapunov = true;
  /// Also propagate the basis in the relaxations of the other levels (ex-07's -fcfLyap).
  bool relax = false;
  /// The final sweep records local Lyapunov exponents when the basis is estimated at all.
  bool exponents() const { return lyapunov || relax; }
};

namespace detail {
template <class A, class = void>
struct has_delta_members : std::false_type {};
template <class A>
struct has_delta_members<
    A, std::void_t<
           decltype(std::declval<A&>().step_tangent(
               std::declval<const typename A::State&>(), std::declval<const typename A::State&>(),
               std::declval<typename A::State&>(), 0.0, 0.0, std::declval<const StepInfo&>())),
           decltype(std::declval<A&>().inner_product(std::declval<const typename A::State&>(),
                                                     std::declval<const typename A::State&>())),
           decltype(std::declval<A&>().basis_vector(0.0, 0))>> : std::true_type {};

/// Apps whose states carry a Delta-correction basis (DeltaCorrected).
template <class A, class = void>
struct is_delta_app : std::false_type {};
template <class A>
struct is_delta_app<A, std::void_t<decltype(A::delta_correction)>>
    : std::bool_constant<A::delta_correction> {};

template <class A, class = void>
struct has_check_levels : std::false_type {};
template <class A>
struct has_check_levels<A, std::void_t<decltype(std::declval<const A&>().check_levels(0))>>
    : std::true_type {};
}  // namespace detail

/// The App with Delta correction: the solver recognises it (detail::is_delta_app) and calls
/// advance() with what the correction needs.
template <class App>
class DeltaCorrected {
  using Inner = AppOps<App>;
  static_assert(detail::has_delta_members<App>::value,
                "Delta correction needs step_tangent(u0, u1, v, t0, t1, info), "
                "inner_product(a, b) and basis_vector(t, index) in the App");

 public:
  using InnerState = typename App::State;
  using State = DeltaState<InnerState>;
  static constexpr bool delta_correction = true;

  DeltaCorrected(App& app, DeltaOptions options) : app_(app), options_(options) {
    if (options_.rank < 1)
      throw InvalidOption("Delta correction", "rank",
                          "must be at least 1 (is " + std::to_string(options_.rank) + ")");
  }

  const DeltaOptions& options() const { return options_; }
  App& app() { return app_; }

  State init(double t) {
    State s;
    s.u = app_.init(t);
    for (int i = 0; i < options_.rank; ++i) s.basis.push_back(app_.basis_vector(t, i));
    orthonormalize(s, false);
    return s;
  }

  /// The plain step (no correction, the basis carried along unchanged).
  void step(const State& in, State& out, double t0, double t1, const StepInfo& info) {
    advance(in, out, t0, t1, info, false, nullptr, nullptr);
  }

  /// out.u = Phi(in.u), and with a coarse right-hand side `rhs` (whose basis holds D) and the
  /// restricted previous point `previous` (whose basis is Psi):
  /// out.u += rhs.u + D Psi^T in.u. With `propagate`, each basis vector is stepped by the
  /// Jacobian (and corrected by D Psi^T likewise); otherwise `out` takes the basis of
  /// `basis_from` where given, else keeps its own, as XBraid's steps keep the basis of the
  /// point's stored or restricted value (a state without one takes `in`'s).
  /// With `residual_of` (a C-point's value u), out.u becomes the FAS residual of u instead:
  /// (rhs.u + D Psi^T in.u) - (u - Phi(in.u)), in XBraid's order of operations.
  void advance(const State& in, State& out, double t0, double t1, const StepInfo& info,
               bool propagate, const State* rhs, const State* previous,
               const State* residual_of = nullptr, const State* basis_from = nullptr) {
    const bool correct = rhs && previous;
    if (correct) {
      apply_delta(in.u, *rhs, *previous, delta_u_);
      if (propagate) {
        delta_basis_.resize(in.basis.size());
        for (std::size_t j = 0; j < in.basis.size(); ++j)
          apply_delta(in.basis[j], *rhs, *previous, delta_basis_[j]);
      }
    }
    app_.step(in.u, out.u, t0, t1, info);
    if (!propagate && basis_from) {
      copy_basis(basis_from->basis, out.basis);
    } else if (propagate || out.basis.size() != in.basis.size()) {
      out.basis.resize(in.basis.size());
      for (std::size_t j = 0; j < in.basis.size(); ++j) {
        Inner::copy(app_, in.basis[j], out.basis[j]);
        if (propagate) app_.step_tangent(in.u, out.u, out.basis[j], t0, t1, info);
      }
    }
    out.exponents.clear();
    if (residual_of) {
      Inner::sum(app_, 1.0, residual_of->u, -1.0, out.u);  // u - Phi(in)
      if (rhs) {
        if (correct) {
          Inner::sum(app_, 1.0, rhs->u, 1.0, delta_u_);
        } else {
          Inner::copy(app_, rhs->u, delta_u_);
        }
        Inner::sum(app_, 1.0, delta_u_, -1.0, out.u);
      } else {
        Inner::sum(app_, 0.0, out.u, -1.0, out.u);
      }
      if (correct && propagate)
        for (std::size_t j = 0; j < out.basis.size(); ++j)
          Inner::sum(app_, 1.0, delta_basis_[j], 1.0, out.basis[j]);
      return;
    }
    if (rhs) Inner::sum(app_, 1.0, rhs->u, 1.0, out.u);
    if (correct) {
      Inner::sum(app_, 1.0, delta_u_, 1.0, out.u);
      if (propagate)
        for (std::size_t j = 0; j < out.basis.size(); ++j)
          Inner::sum(app_, 1.0, delta_basis_[j], 1.0, out.basis[j]);
    }
  }

  /// The coarse right-hand side at a point from its restricted residual: on entry g.u is the
  /// fine residual and g.basis the fine propagation of the previous point's basis; `phi` is
  /// the coarse step of `previous` with its basis propagated. Afterwards g.basis holds
  /// D = (Phi_f' - Phi_c') Psi and g.u = r + v - Phi_c(v_prev) - D Psi^T v_prev.
  /// `phi` is overwritten (XBraid's order of operations: (v - Phi_c(v_prev)) + r).
  void coarse_rhs(const State& v, const State& previous, State& phi, State& g) {
    Inner::sum(app_, 1.0, v.u, -1.0, phi.u);
    Inner::sum(app_, 1.0, phi.u, 1.0, g.u);
    for (std::size_t j = 0; j < g.basis.size(); ++j)
      Inner::sum(app_, -1.0, phi.basis[j], 1.0, g.basis[j]);
    apply_delta(previous.u, g, previous, delta_u_);
    Inner::sum(app_, -1.0, delta_u_, 1.0, g.u);
  }

  /// Gram-Schmidt on s.basis in the App's inner product; with `exponents`, s.exponents gets
  /// log of each vector's norm before normalization.
  void orthonormalize(State& s, bool exponents) {
    s.exponents.clear();
    auto& b = s.basis;
    for (std::size_t i = 0; i < b.size(); ++i) {
      for (std::size_t j = 0; j < i; ++j) {
        const double prod = app_.inner_product(b[i], b[j]);
        Inner::sum(app_, -prod, b[j], 1.0, b[i]);
      }
      const double prod = app_.inner_product(b[i], b[i]);
      if (!(prod > 0) || !std::isfinite(prod))
        throw Divergence("Delta correction: basis vector " + std::to_string(i) +
                         " is linearly dependent on the others or not finite (squared norm " +
                         number_text(prod) + " after Gram-Schmidt)");
      Inner::sum(app_, 0.0, b[i], 1.0 / std::sqrt(prod), b[i]);
      if (exponents) s.exponents.push_back(std::log(std::fabs(prod)) / 2);
    }
  }

  // The App's operations on both parts; the norm is the solution's alone.
  void sum(double a, const State& x, double b, State& y) {
    Inner::sum(app_, a, x.u, b, y.u);
    if (x.basis.size() == y.basis.size())
      for (std::size_t j = 0; j < y.basis.size(); ++j)
        Inner::sum(app_, a, x.basis[j], b, y.basis[j]);
  }
  double norm(const State& s) { return Inner::norm(app_, s.u); }
  void copy(const State& src, State& dst) {
    Inner::copy(app_, src.u, dst.u);
    copy_basis(src.basis, dst.basis);
    dst.exponents = src.exponents;
  }
  /// [u][psi_1]..[psi_r]; every basis vector packs like the solution.
  std::size_t buffer_size(const State& like) {
    return Inner::buffer_size(app_, like.u) * static_cast<std::size_t>(1 + options_.rank);
  }
  void pack(const State& s, void* buffer) {
    if (static_cast<int>(s.basis.size()) != options_.rank)
      throw Error("Delta correction: a state without its " + std::to_string(options_.rank) +
                  " basis vectors was sent (has " + std::to_string(s.basis.size()) + ")");
    const std::size_t one = Inner::buffer_size(app_, s.u);
    auto* out = static_cast<char*>(buffer);
    Inner::pack(app_, s.u, out);
    for (std::size_t j = 0; j < s.basis.size(); ++j)
      Inner::pack(app_, s.basis[j], out + one * (j + 1));
  }
  void unpack(const void* buffer, State& s) {
    const auto* in = static_cast<const char*>(buffer);
    Inner::unpack(app_, in, s.u);
    const std::size_t one = Inner::buffer_size(app_, s.u);
    if (static_cast<int>(s.basis.size()) != options_.rank)
      s.basis.assign(static_cast<std::size_t>(options_.rank), s.u);
    for (std::size_t j = 0; j < s.basis.size(); ++j)
      Inner::unpack(app_, in + one * (j + 1), s.basis[j]);
    s.exponents.clear();
  }
  void observe(const State& s, double t, index_t index) {
    Inner::observe(app_, s.u, t, index);
    if (s.exponents.empty()) return;
    exponent_sums_.resize(s.exponents.size(), 0.0);
    for (std::size_t i = 0; i < s.exponents.size(); ++i) exponent_sums_[i] += s.exponents[i];
  }
  template <class A = App, std::enable_if_t<detail::has_check_levels<A>::value, int> = 0>
  void check_levels(int levels) const {
    app_.check_levels(levels);
  }

  /// The sum of the local Lyapunov exponents this rank observed in the final sweep (its fine
  /// C-points); summed over the ranks and divided by the time span, the average exponents.
  const std::vector<double>& local_exponent_sums() const { return exponent_sums_; }

 private:
  /// out = D Psi^T x, with D the basis of `rhs` and Psi that of `previous` (XBraid's order of
  /// operations: coefficients first, then out = c_1 D_1, out += c_i D_i).
  void apply_delta(const InnerState& x, const State& rhs, const State& previous, InnerState& out) {
    const std::size_t r = rhs.basis.size();
    coords_.resize(r);
    for (std::size_t i = 0; i < r; ++i) coords_[i] = app_.inner_product(previous.basis[i], x);
    Inner::copy(app_, rhs.basis[0], out);
    Inner::sum(app_, coords_[0], rhs.basis[0], 0.0, out);
    for (std::size_t i = 1; i < r; ++i) Inner::sum(app_, coords_[i], rhs.basis[i], 1.0, out);
  }

  void copy_basis(const std::vector<InnerState>& src, std::vector<InnerState>& dst) {
    dst.resize(src.size());
    for (std::size_t j = 0; j < src.size(); ++j) Inner::copy(app_, src[j], dst[j]);
  }

  App& app_;
  DeltaOptions options_;
  InnerState delta_u_{};
  std::vector<InnerState> delta_basis_;
  std::vector<double> coords_;
  std::vector<double> exponent_sums_;
};

}  // namespace weft::mgrit
