#pragma once
// The App: everything the user writes. The solver owns grids, storage and messages.
//
// Required members of an App type `A`:
//   using State = ...;   default-constructible value type (double, std::vector<double>, a tensor)
//   State init(double t);
//       u(t_0) at the first time point of the solve, the initial guess at every other point
//   void step(const State& in, State& out, double t0, double t1, const StepInfo& info);
//       out = Phi(in): one time step from t0 to t1 (t1 < t0 in reverse solves); `in` and `out`
//       are always distinct objects, `out` may hold an old value or be default-constructed.
//
// Optional members (defaults exist for arithmetic State types, and for copy/pack/unpack also
// for trivially copyable ones):
//   void sum(double a, const State& x, double b, State& y);   y <- a*x + b*y
//   double norm(const State& u);                              spatial norm
//   void copy(const State& src, State& dst);                  deep copy into dst
//   std::size_t buffer_size(const State& like);               bytes to pack a state like `like`
//   void pack(const State& u, void* buffer);
//   void unpack(const void* buffer, State& u);                u holds a state of the same level
//   void coarsen(const State& fine, State& coarse, int fine_level);   spatial restriction
//   void refine(const State& coarse, State& fine, int coarse_level);  spatial interpolation
//       (without them every level uses the same spatial grid: plain copies)
//   void observe(const State& u, double t, index_t index);    final fine-grid values
//   int refine_factor(const State& u, double t0, double t1, const StepInfo& info);
//       with Options::refinement: after each fine-grid step of an iteration's cycle, the factor
//       (>= 1) by which to split the step's interval [t0, t1]; u is the step's value
//   State init(double t, int level);
//       u(t_0) on `level`'s own spatial grid: in the PyMGRIT convention the nested phase starts
//       each coarse level from it (without it, from the restricted fine value)
#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

#include "weft/mgrit/types.hpp"

namespace weft::mgrit {

namespace detail {
template <class A, class = void>
struct has_sum : std::false_type {};
template <class A>
struct has_sum<
    A, std::void_t<decltype(std::declval<A&>().sum(1.0, std::declval<const typename A::State&>(),
                                                   1.0, std::declval<typename A::State&>()))>>
    : std::true_type {};

template <class A, class = void>
struct has_norm : std::false_type {};
template <class A>
struct has_norm<
    A, std::void_t<decltype(std::declval<A&>().norm(std::declval<const typename A::State&>()))>>
    : std::true_type {};

template <class A, class = void>
struct has_copy : std::false_type {};
template <class A>
struct has_copy<A,
                std::void_t<decltype(std::declval<A&>().copy(
                    std::declval<const typename A::State&>(), std::declval<typename A::State&>()))>>
    : std::true_type {};

template <class A, class = void>
struct has_buffer : std::false_type {};
template <class A>
struct has_buffer<
    A,
    std::void_t<decltype(std::declval<A&>().buffer_size(std::declval<const typename A::State&>())),
                decltype(std::declval<A&>().pack(std::declval<const typename A::State&>(),
                                                 std::declval<void*>())),
                decltype(std::declval<A&>().unpack(std::declval<const void*>(),
                                                   std::declval<typename A::State&>()))>>
    : std::true_type {};

template <class A, class = void>
struct has_spatial : std::false_type {};
template <class A>
struct has_spatial<
    A, std::void_t<decltype(std::declval<A&>().coarsen(std::declval<const typename A::State&>(),
                                                       std::declval<typename A::State&>(), 0)),
                   decltype(std::declval<A&>().refine(std::declval<const typename A::State&>(),
                                                      std::declval<typename A::State&>(), 0))>>
    : std::true_type {};

template <class A, class = void>
struct has_level_init : std::false_type {};
template <class A>
struct has_level_init<A, std::void_t<decltype(std::declval<A&>().init(0.0, 0))>> : std::true_type {
};

template <class A, class = void>
struct has_refine_factor : std::false_type {};
template <class A>
struct has_refine_factor<
    A, std::void_t<decltype(std::declval<A&>().refine_factor(
           std::declval<const typename A::State&>(), 0.0, 0.0, std::declval<const StepInfo&>()))>>
    : std::true_type {};

template <class A, class = void>
struct has_observe : std::false_type {};
template <class A>
struct has_observe<A, std::void_t<decltype(std::declval<A&>().observe(
                          std::declval<const typename A::State&>(), 0.0, index_t{0}))>>
    : std::true_type {};
}  // namespace detail

/// Calls the App's operation where it has one, the default otherwise.
template <class App>
struct AppOps {
  using State = typename App::State;
  static constexpr bool arithmetic = std::is_arithmetic_v<State>;
  static constexpr bool trivial = std::is_trivially_copyable_v<State>;
  static constexpr bool spatial = detail::has_spatial<App>::value;

  static_assert(detail::has_sum<App>::value || arithmetic,
                "App must provide sum(a, x, b, y) unless State is arithmetic");
  static_assert(detail::has_norm<App>::value || arithmetic,
                "App must provide norm(u) unless State is arithmetic");
  static_assert(detail::has_copy<App>::value || trivial,
                "App must provide copy(src, dst) unless State is trivially copyable");
  static_assert(detail::has_buffer<App>::value || trivial,
                "App must provide buffer_size/pack/unpack unless State is trivially copyable");

  static void sum(App& app, double a, const State& x, double b, State& y) {
    if constexpr (detail::has_sum<App>::value) {
      app.sum(a, x, b, y);
    } else {
      y = static_cast<State>(a * x + b * y);
    }
  }
  static double norm(App& app, const State& u) {
    if constexpr (detail::has_norm<App>::value) {
      return app.norm(u);
    } else {
      return std::abs(static_cast<double>(u));
    }
  }
  static void copy(App& app, const State& src, State& dst) {
    if constexpr (detail::has_copy<App>::value) {
      app.copy(src, dst);
    } else {
      dst = src;
    }
  }
  static std::size_t buffer_size(App& app, const State& like) {
    if constexpr (detail::has_buffer<App>::value) {
      return app.buffer_size(like);
    } else {
      return sizeof(State);
    }
  }
  static void pack(App& app, const State& u, void* buffer) {
    if constexpr (detail::has_buffer<App>::value) {
      app.pack(u, buffer);
    } else {
      std::memcpy(buffer, &u, sizeof(State));
    }
  }
  static void unpack(App& app, const void* buffer, State& u) {
    if constexpr (detail::has_buffer<App>::value) {
      app.unpack(buffer, u);
    } else {
      std::memcpy(&u, buffer, sizeof(State));
    }
  }
  /// Restriction in space between `fine_level` and `fine_level + 1` (copy without one).
  static void coarsen(App& app, const State& fine, State& coarse, int fine_level) {
    if constexpr (spatial) {
      app.coarsen(fine, coarse, fine_level);
    } else {
      copy(app, fine, coarse);
    }
  }
  /// Interpolation in space from `coarse_level` to `coarse_level - 1` (copy without one).
  static void refine(App& app, const State& coarse, State& fine, int coarse_level) {
    if constexpr (spatial) {
      app.refine(coarse, fine, coarse_level);
    } else {
      copy(app, coarse, fine);
    }
  }
  static void observe(App& app, const State& u, double t, index_t index) {
    if constexpr (detail::has_observe<App>::value) app.observe(u, t, index);
  }
};

}  // namespace weft::mgrit
