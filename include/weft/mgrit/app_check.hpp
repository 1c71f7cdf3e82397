#pragma once
// test_app: the properties a user's App must have for MGRIT to be right, checked one by one and
// reported in plain words (XBraid's braid_TestAll plays this part there). Run it before the first
// solve: a shallow copy, a step that accumulates into `out`, or a pack that writes past its
// buffer gives a wrong answer, not a crash.
//
// Checks, on states from init(t0) and one step of it:
//   init      the states are finite
//   norm      norm(0) = 0, norm(-2u) = 2 norm(u), the triangle inequality
//   copy      the copy equals its source and does not share storage with it
//   sum       y <- a x + b y, undone by the opposite sums; x unchanged
//   buffer    unpack(pack(u)) = u; pack writes no byte past buffer_size(u)
//   step      finite; leaves `in` unchanged; the same result whatever `out` held before and
//             whatever was stepped in between; with `linear`, Phi(a u + b v) = a Phi(u) + b Phi(v)
//   delta     (Apps with Delta correction's members, delta.hpp; XBraid's braid_TestDelta) the
//             inner product is symmetric, bilinear and positive on u; the first two basis
//             vectors are finite and independent; step_tangent matches a central difference of
//             step along the first basis vector (to 1e-5 relative: a difference quotient)
//   space     (Apps with coarsen/refine) every level's coarsen and refine are linear, give states
//             of the right size on the next level, and the coarse step runs on them
//   solve     two-level MGRIT on `comm` reaches the sequential solution (this exercises messages
//             between ranks when comm has several)
// Every rank must call it (the solve check is collective); each rank gets the same report.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "weft/mgrit/app.hpp"
#include "weft/mgrit/delta.hpp"
#include "weft/mgrit/solver.hpp"

namespace weft::mgrit {

struct AppCheckOptions {
  double t0 = 0.0, t1 = 1.0;  ///< the interval of the step and solve checks
  index_t intervals = 16;     ///< fine steps of the solve check (at least the ranks of comm)
  bool linear = false;        ///< the App claims a linear step: checked
  int spatial_levels = 1;     ///< levels below the fine one whose coarsen/refine are checked
  double tolerance = 1e-10;   ///< relative tolerance of every comparison
  bool solve = true;          ///< run the solve check
};

struct AppCheck {
  std::string name;
  bool passed = true;
  std::string detail;  ///< why it failed, or what was measured
};

struct AppCheckReport {
  std::vector<AppCheck> checks;
  bool passed() const {
    return std::all_of(checks.begin(), checks.end(), [](const AppCheck& c) { return c.passed; });
  }
  /// One line per check: "ok   name: detail" or "FAIL name: detail".
  std::string text() const {
    std::ostringstream out;
    for (const auto& c : checks)
      out << (c.passed ? "ok   " : "FAIL ") << c.name << ": " << c.detail << "\n";
    return out.str();
  }
};

namespace detail {

template <class App>
class AppChecker {
 public:
  using Ops = AppOps<App>;
  using State = typename App::State;

  AppChecker(App& app, const AppCheckOptions& o) : app_(app), o_(o) {}

  // ||a - b|| / max(||b||, tiny): 0 when equal.
  double difference(const State& a, const State& b) {
    State d = clone(a);
    Ops::sum(app_, -1.0, b, 1.0, d);
    return Ops::norm(app_, d) / std::max(Ops::norm(app_, b), 1e-300);
  }
  State clone(const State& u) {
    State c{};
    Ops::copy(app_, u, c);
    return c;
  }
  State stepped(const State& in, int level = 0, double dt_scale = 1.0) {
    State out{};
    step_into(in, out, level, dt_scale);
    return out;
  }
  void step_into(const State& in, State& out, int level = 0, double dt_scale = 1.0) {
    StepInfo info;
    info.level = level;
    info.from = 0;
    info.to = 1;
    app_.step(in, out, o_.t0, o_.t0 + dt() * dt_scale, info);
  }
  double dt() const { return (o_.t1 - o_.t0) / static_cast<double>(o_.intervals); }
  bool close(double relative) const { return std::isfinite(relative) && relative <= o_.tolerance; }
  static std::string num(double x) {
    std::ostringstream s;
    s.precision(3);
    s << x;
    return s.str();
  }

  AppCheckReport run(MPI_Comm comm) {
    u_ = app_.init(o_.t0);
    v_ = stepped(u_);
    add(check_init());
    add(check_norm());
    add(check_copy());
    add(check_sum());
    add(check_buffer());
    add(check_step());
    if constexpr (has_delta_members<App>::value) add(check_delta());
    if constexpr (Ops::spatial) add(check_space());
    if (o_.solve) add(check_solve(comm));
    return report_;
  }

 private:
  void add(AppCheck c) { report_.checks.push_back(std::move(c)); }

  AppCheck check_init() {
    AppCheck c{"init", true, ""};
    const double nu = Ops::norm(app_, u_), nv = Ops::norm(app_, v_);
    if (!std::isfinite(nu) || !std::isfinite(nv)) {
      c.passed = false;
      c.detail = "norm(init(t0)) = " + num(nu) + ", norm(one step of it) = " + num(nv) +
                 ": states must be finite";
    } else {
      c.detail = "norm(init(t0)) = " + num(nu) + ", after one step " + num(nv) +
                 (nu == 0 && nv == 0 ? " (both zero: the checks below prove little)" : "");
    }
    return c;
  }

  AppCheck check_norm() {
    AppCheck c{"norm", true, "norm(0) = 0, homogeneous, triangle inequality"};
    State zero = clone(u_);
    Ops::sum(app_, 0.0, u_, 0.0, zero);
    const double n0 = Ops::norm(app_, zero), nu = Ops::norm(app_, u_), nv = Ops::norm(app_, v_);
    State scaled = clone(u_);
    Ops::sum(app_, 0.0, u_, -2.0, scaled);
    const double ns = Ops::norm(app_, scaled);
    State both = clone(v_);
    Ops::sum(app_, 1.0, u_, 1.0, both);
    const double nb = Ops::norm(app_, both);
    if (n0 != 0.0) {
      c.passed = false;
      c.detail = "norm of 0*u + 0*u is " + num(n0) + ", not 0";
    } else if (nu < 0 || std::abs(ns - 2 * nu) > o_.tolerance * std::max(2 * nu, 1e-300)) {
      c.passed = false;
      c.detail = "norm(-2u) = " + num(ns) + " but 2 norm(u) = " + num(2 * nu) +
                 ": a norm must be homogeneous and non-negative";
    } else if (nb > (nu + nv) * (1 + o_.tolerance)) {
      c.passed = false;
      c.detail = "norm(u + v) = " + num(nb) + " > norm(u) + norm(v) = " + num(nu + nv);
    }
    return c;
  }

  AppCheck check_copy() {
    AppCheck c{"copy", true, "equal to its source, storage of its own"};
    // The source's norm is the witness: a snapshot made by copy() would share its storage too.
    const double before = Ops::norm(app_, u_);
    State w{};
    Ops::copy(app_, u_, w);
    const double d = difference(w, u_);
    Ops::sum(app_, 1.0, v_, 3.0, w);  // change the copy only
    const double after = Ops::norm(app_, u_);
    if (!close(d)) {
      c.passed = false;
      c.detail = "the copy differs from its source by " + num(d) + " (relative)";
    } else if (after != before) {
      c.passed = false;
      c.detail = "changing the copy changed its source (its norm went from " + num(before) +
                 " to " + num(after) + "): copy() must not share storage with its source";
      u_ = app_.init(o_.t0);  // fresh states for the checks that follow
      v_ = stepped(u_);
    }
    return c;
  }

  AppCheck check_sum() {
    AppCheck c{"sum", true, "y <- a x + b y, undone by the opposite sums, x unchanged"};
    const State x_before = clone(u_);
    State y = clone(v_);
    Ops::sum(app_, 2.5, u_, -0.5, y);  // y = 2.5 u - 0.5 v
    Ops::sum(app_, -2.5, u_, 1.0, y);  // y = -0.5 v
    Ops::sum(app_, 0.5, v_, 1.0, y);   // y = 0
    const double scale = 2.5 * Ops::norm(app_, u_) + 0.5 * Ops::norm(app_, v_);
    const double left = Ops::norm(app_, y) / std::max(scale, 1e-300);
    const double x_moved = difference(u_, x_before);
    if (!close(left)) {
      c.passed = false;
      c.detail = "2.5u - 0.5v - 2.5u + 0.5v leaves " + num(left) +
                 " (relative to the terms): sum(a, x, b, y) must set y to a*x + b*y";
    } else if (!close(x_moved) || (Ops::norm(app_, u_) != 0 && x_moved != 0)) {
      c.passed = false;
      c.detail = "sum changed its input x (by " + num(x_moved) + " relative)";
    }
    return c;
  }

  AppCheck check_buffer() {
    AppCheck c{"buffer", true, ""};
    const std::size_t bytes = Ops::buffer_size(app_, v_);
    constexpr std::size_t guard = 64;
    constexpr unsigned char mark = 0xA5;
    if (bytes > (std::size_t{1} << 40)) {  // also tells the compiler that bytes + guard fits
      c.passed = false;
      c.detail = "buffer_size is " + std::to_string(bytes) + " bytes for one state";
      return c;
    }
    std::vector<unsigned char> buffer(bytes + guard, mark);
    Ops::pack(app_, v_, buffer.data());
    const auto past = std::find_if(buffer.begin() + static_cast<long>(bytes), buffer.end(),
                                   [](unsigned char b) { return b != mark; });
    State w = clone(u_);  // a state of the same level, holding other values
    Ops::unpack(app_, buffer.data(), w);
    const double d = difference(w, v_);
    if (bytes == 0 && Ops::norm(app_, v_) != 0) {
      c.passed = false;
      c.detail = "buffer_size is 0 for a non-zero state";
    } else if (past != buffer.end()) {
      c.passed = false;
      c.detail = "pack wrote past buffer_size (" + std::to_string(bytes) + " bytes): byte " +
                 std::to_string(past - buffer.begin()) + " changed";
    } else if (!close(d)) {
      c.passed = false;
      c.detail = "unpack(pack(u)) differs from u by " + num(d) + " (relative)";
    } else {
      c.detail = "round trip exact to " + num(d) + ", " + std::to_string(bytes) + " bytes";
    }
    return c;
  }

  AppCheck check_step() {
    AppCheck c{"step", true, ""};
    const State in_before = clone(u_);
    const State a = stepped(u_);
    const double in_moved = difference(u_, in_before);
    stepped(v_);  // something else stepped in between
    const State again = stepped(u_);
    State reused = clone(v_);
    Ops::sum(app_, 7.0, u_, 3.0, reused);  // `out` holding an old, unrelated value
    step_into(u_, reused);
    const double d_out = difference(reused, a), d_again = difference(again, a);
    const double na = Ops::norm(app_, a);
    if (!std::isfinite(na)) {
      c.passed = false;
      c.detail = "one step of init(t0) has norm " + num(na);
    } else if (!close(in_moved) || (Ops::norm(app_, u_) != 0 && in_moved != 0)) {
      c.passed = false;
      c.detail = "step changed its input `in` (by " + num(in_moved) + " relative)";
    } else if (!close(d_again)) {
      c.passed = false;
      c.detail = "the same step twice gave results " + num(d_again) +
                 " apart: step must depend only on in, t0, t1 (no state kept between calls)";
    } else if (!close(d_out)) {
      c.passed = false;
      c.detail = "the step's result depends on what `out` held before (differs by " + num(d_out) +
                 "): step must overwrite out, not add to it";
    } else if (o_.linear) {
      State mix = clone(v_);
      Ops::sum(app_, 2.0, u_, -3.0, mix);  // 2u - 3v
      State lhs = stepped(mix);
      const State pv = stepped(v_);
      State rhs = clone(pv);
      Ops::sum(app_, 2.0, a, -3.0, rhs);
      const double d = difference(lhs, rhs);
      if (!close(d)) {
        c.passed = false;
        c.detail = "claimed linear, but Phi(2u - 3v) and 2 Phi(u) - 3 Phi(v) differ by " + num(d) +
                   " (relative)";
      } else {
        c.detail = "deterministic, overwrites out, leaves in; linear to " + num(d);
      }
    }
    if (c.passed && c.detail.empty()) c.detail = "deterministic, overwrites out, leaves in";
    return c;
  }

  template <class A = App>
  AppCheck check_delta() {
    AppCheck c{"delta", true, ""};
    A& app = app_;
    const State e0 = app.basis_vector(o_.t0, 0), e1 = app.basis_vector(o_.t0, 1);
    const double uv = app.inner_product(u_, v_), vu = app.inner_product(v_, u_);
    const double uu = app.inner_product(u_, u_);
    State mix = clone(u_);
    Ops::sum(app_, 2.0, v_, 1.0, mix);  // u + 2v
    const double bilinear = app.inner_product(mix, u_), expected = uu + 2.0 * vu;
    const double scale = std::max({std::abs(uu), std::abs(uv), 1e-300});
    // Independence of the first two basis vectors: Gram determinant > 0.
    const double g00 = app.inner_product(e0, e0), g11 = app.inner_product(e1, e1);
    const double g01 = app.inner_product(e0, e1);
    const double gram = g00 * g11 - g01 * g01;
    if (!close(std::abs(uv - vu) / scale)) {
      c.passed = false;
      c.detail = "inner_product is not symmetric: <u, v> = " + num(uv) + ", <v, u> = " + num(vu);
    } else if (!close(std::abs(bilinear - expected) / std::max(std::abs(expected), scale))) {
      c.passed = false;
      c.detail = "inner_product is not linear: <u + 2v, u> = " + num(bilinear) +
                 " but <u, u> + 2 <v, u> = " + num(expected);
    } else if (Ops::norm(app_, u_) > 0 && !(uu > 0)) {
      c.passed = false;
      c.detail = "inner_product is not positive: <u, u> = " + num(uu) + " for u = init(t0) != 0";
    } else if (!std::isfinite(gram) || !(gram > 1e-12 * std::max(g00 * g11, 1e-300))) {
      c.passed = false;
      c.detail =
          "basis_vector(t0, 0) and basis_vector(t0, 1) are not independent (Gram "
          "determinant " +
          num(gram) + ")";
    } else {
      // Central difference of the step along e0, against step_tangent at u.
      const double eps =
          1e-6 * std::max(1.0, Ops::norm(app_, u_)) / std::max(Ops::norm(app_, e0), 1e-300);
      State plus = clone(u_), minus = clone(u_);
      Ops::sum(app_, eps, e0, 1.0, plus);
      Ops::sum(app_, -eps, e0, 1.0, minus);
      State quotient = stepped(plus);
      Ops::sum(app_, -1.0 / (2 * eps), stepped(minus), 1.0 / (2 * eps), quotient);
      State tangent = clone(e0);
      StepInfo info;
      info.to = 1;
      app.step_tangent(u_, v_, tangent, o_.t0, o_.t0 + dt(), info);
      const double d = difference(tangent, quotient);
      if (!(std::isfinite(d) && d <= 1e-5)) {
        c.passed = false;
        c.detail =
            "step_tangent along basis_vector(t0, 0) differs from a central difference "
            "of step by " +
            num(d) + " (relative): it must apply the step's Jacobian at its start point";
      } else {
        c.detail =
            "inner product symmetric, bilinear, positive; basis independent; "
            "step_tangent matches a central difference to " +
            num(d);
      }
    }
    return c;
  }

  AppCheck check_space() {
    AppCheck c{"space", true, ""};
    State fine = clone(v_);
    std::ostringstream seen;
    for (int level = 0; level < o_.spatial_levels && c.passed; ++level) {
      const std::string at = "level " + std::to_string(level) + " -> " + std::to_string(level + 1);
      State coarse{}, coarse2{}, doubled = clone(fine);
      Ops::coarsen(app_, fine, coarse, level);
      Ops::sum(app_, 0.0, fine, 2.0, doubled);
      Ops::coarsen(app_, doubled, coarse2, level);
      Ops::sum(app_, -2.0, coarse, 1.0, coarse2);
      const double lin = Ops::norm(app_, coarse2) / std::max(2 * Ops::norm(app_, coarse), 1e-300);
      State back = clone(fine);
      Ops::refine(app_, coarse, back, level + 1);
      const std::size_t fine_bytes = Ops::buffer_size(app_, fine);
      const std::size_t back_bytes = Ops::buffer_size(app_, back);
      const State coarse_step = stepped(coarse, level + 1, 2.0);
      const double nstep = Ops::norm(app_, coarse_step);
      if (!close(lin)) {
        c.passed = false;
        c.detail = at + ": coarsen(2u) differs from 2 coarsen(u) by " + num(lin) +
                   ": restriction must be linear";
      } else if (back_bytes != fine_bytes) {
        c.passed = false;
        c.detail = at + ": refine(coarsen(u)) packs to " + std::to_string(back_bytes) +
                   " bytes, a state of level " + std::to_string(level) + " to " +
                   std::to_string(fine_bytes) + ": refine must give a state of the finer level";
      } else if (!std::isfinite(nstep)) {
        c.passed = false;
        c.detail = at + ": a step on the coarsened state has norm " + num(nstep);
      } else {
        seen << (level ? "; " : "") << at << ": refine(coarsen(u)) is "
             << num(difference(back, fine)) << " from u";
      }
      fine = coarse;
    }
    if (c.passed) c.detail = "linear restriction, sizes match; " + seen.str();
    return c;
  }

  AppCheck check_solve(MPI_Comm comm) {
    AppCheck c{"solve", true, ""};
    const TimeGrid grid = TimeGrid::uniform(o_.t0, o_.t1, o_.intervals);
    Options sequential;
    sequential.max_levels(1).storage(Storage::All);
    Options mgrit;
    mgrit.max_levels(2).cfactor(2).min_coarse(1).storage(Storage::All);
    mgrit.max_iterations(static_cast<int>(o_.intervals)).abs_tol(0.0).rel_tol(0.0);
    Solver<App> a(app_, comm, grid, sequential);
    a.solve();
    Solver<App> b(app_, comm, grid, mgrit);
    const Result r = b.solve();
    double worst = 0;
    for (index_t i = a.local_begin(); i < a.local_end(); ++i) {
      const State* x = a.state(i);
      const State* y = b.state(i);
      if (!x || !y) continue;
      const double d = difference(*y, *x);
      worst = std::isfinite(d) ? std::max(worst, d) : std::numeric_limits<double>::infinity();
    }
    MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, comm);
    const double tol = std::max(o_.tolerance, 1e-8);
    c.detail = "two-level MGRIT on " + std::to_string(mpi_size(comm)) + " rank(s), " +
               std::to_string(r.iterations) + " iterations: largest difference from the " +
               "sequential solve " + num(worst) + " (relative)";
    if (!(worst <= tol)) {
      c.passed = false;
      c.detail += ": MGRIT must reach the sequential solution (after N/cf iterations it is exact)";
    }
    return c;
  }
  static int mpi_size(MPI_Comm comm) {
    int n = 1;
    MPI_Comm_size(comm, &n);
    return n;
  }

  App& app_;
  AppCheckOptions o_;
  State u_{}, v_{};
  AppCheckReport report_;
};

}  // namespace detail

/// Checks a user's App; see the top of this file. Collective over `comm` when options.solve.
template <class App>
AppCheckReport test_app(App& app, MPI_Comm comm, const AppCheckOptions& options = {}) {
  return detail::AppChecker<App>(app, options).run(comm);
}

}  // namespace weft::mgrit
