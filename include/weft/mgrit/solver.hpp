#pragma once
// The MGRIT solver: FAS multigrid-reduction-in-time over MPI for any App (see app.hpp).
//
//   MyApp app;
//   weft::mgrit::Solver<MyApp> solver(app, MPI_COMM_WORLD, TimeGrid::uniform(0, 5, 100),
//                                     Options().max_levels(3).abs_tol(1e-10));
//   Result result = solver.solve();
//
// Why one long header: the solver is a class template over the App (so the App's step and
// vector operations inline into the sweeps, the reason the bookkeeping costs < 1 ns per step);
// its parts (sweeps, transfers, cycles, phases) are one algorithm sharing the level storage, and
// splitting them into several headers would only scatter it.
//
// Algorithm and conventions: docs/mgrit.md. In short, every operation on
// a level is a *sweep*: one left-to-right pass in which a point's new value depends only on its
// predecessor. F-points are stepped from their predecessor (a chain inside each interval),
// C-points are relaxed or give a residual from their predecessor. A sweep walks the local
// intervals from the last to the first, so that the value the right neighbour waits for is sent
// first, and the value from the left neighbour is needed last.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "weft/mgrit/app.hpp"
#include "weft/mgrit/delta.hpp"
#include "weft/mgrit/hierarchy.hpp"
#include "weft/mgrit/options.hpp"
#include "weft/mgrit/result.hpp"
#include "weft/mgrit/transport.hpp"
#include "weft/util/clock.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"
#include "weft/util/trace.hpp"

namespace weft::mgrit {

template <class App, class Transport = MpiTransport>
class Solver {
 public:
  using State = typename App::State;
  using Ops = AppOps<App>;

  /// A hierarchy of uniform coarsening (Options::cfactor per level).
  Solver(App& app, MPI_Comm comm, const TimeGrid& grid, Options options)
      : Solver(app, Transport(comm), grid, nullptr, std::move(options)) {}

  /// Explicit coarse levels: `coarse_levels[l]` lists the fine indices (the user's numbering)
  /// of the points of level l+1; each list is a subset of the one above.
  Solver(App& app, MPI_Comm comm, const TimeGrid& grid,
         const std::vector<std::vector<index_t>>& coarse_levels, Options options)
      : Solver(app, Transport(comm), grid, &coarse_levels, std::move(options)) {}
  /// Over another transport (transport.hpp), e.g. one rank of a recorded schedule.
  Solver(App& app, Transport transport, const TimeGrid& grid, Options options)
      : Solver(app, std::move(transport), grid, nullptr, std::move(options)) {}

  /// Runs the iterations; every rank of the communicator must call it.
  Result solve();

  const Options& options() const { return options_; }
  const Hierarchy& hierarchy() const { return hierarchy_; }
  const Statistics& statistics() const { return stats_; }
  MPI_Comm comm() const { return transport_.comm(); }

  /// The fine grid in the user's order; after temporal refinements (Options::refinement) the
  /// refined one, whose numbering state() and owner() then use.
  TimeGrid fine_grid() const { return direction_ == Direction::Forward ? grid_ : grid_.reversed(); }

  /// This rank's fine points in the user's numbering: [local_begin(), local_end()).
  index_t local_begin() const {
    return direction_ == Direction::Forward ? fine().lo : last_ - fine().hi + 1;
  }
  index_t local_end() const {
    return direction_ == Direction::Forward ? fine().hi : last_ - fine().lo + 1;
  }
  /// The rank that owns fine point `index` (user numbering).
  int owner(index_t index) const;
  /// The final value at fine point `index` (user numbering), or nullptr when this rank does not
  /// own it or does not store it (C-point storage keeps F-points only during sweeps).
  const State* state(index_t index) const;
  State* state(index_t index) {
    return const_cast<State*>(static_cast<const Solver*>(this)->state(index));
  }
  /// With Options::error_estimates: the local error estimate at fine point `index` (user
  /// numbering) from the last restriction; nothing when this rank does not own the point or no
  /// estimate exists (point 0 of an ordinary grid, before the first restriction, one level).
  std::optional<double> error_estimate(index_t index) const;

 private:
  enum class CAction { None, Relax, Residual };
  struct Sweep {
    bool recompute_f = true;  ///< F-points get Phi(predecessor) (+ g); else keep stored values
    CAction c = CAction::None;
    double weight = 1.0;      ///< C-relaxation weight
    bool sequential = false;  ///< every point > 0 is stepped in one chain (a sequential solve)
    bool done = false;        ///< StepInfo::done
  };

  struct Level {
    const LevelGrid* grid = nullptr;
    index_t lo = 0, hi = 0;          ///< local points [lo, hi) on this level
    int left = -1, right = -1;       ///< ranks of the nearest non-empty neighbours
    index_t c_begin = 0, c_end = 0;  ///< local C-points: grid->cpoints[c_begin, c_end)
    bool store_all = true;
    bool g_active = false;       ///< FAS right-hand side present (coarse levels)
    std::vector<State> u, v, g;  ///< one slot per local point (v, g on coarse levels)
    State tmp[2]{}, res{}, recv_state{};
    std::vector<char> send_buf, recv_buf;
    typename Transport::Request send_req = Transport::null_request(),
                                recv_req = Transport::null_request();
    // Richardson (fine level): the left neighbour's last C-point before a C-relaxation, and the
    // one step over a C-interval.
    State rich_left{}, rich_step{};
    State v_left{};  ///< Delta correction: the left neighbour's last restricted value
    std::vector<char> rich_send_buf, rich_recv_buf;
    typename Transport::Request rich_send_req = Transport::null_request(),
                                rich_recv_req = Transport::null_request();
    index_t steps = 0;
    double sweep_seconds = 0;  ///< inside this level's sweeps, as sweep_time_
    bool empty() const { return lo == hi; }
  };

  Solver(App& app, Transport transport, const TimeGrid& grid,
         const std::vector<std::vector<index_t>>* coarse_levels, Options options);

  const Level& fine() const { return levels_.front(); }
  /// The fine points' blocks; a periodic grid distributes N points (its point N is point 0).
  Distribution distribution() const {
    return Distribution(periodic_ ? grid_.intervals() : grid_.points(), ranks_, direction_,
                        options_.rank_blocks());
  }
  int coarsest() const { return static_cast<int>(levels_.size()) - 1; }
  bool xbraid() const { return options_.convention() == Convention::XBraid; }
  bool solved_sequentially(int l) const {
    return l == coarsest() && options_.coarsest_solved_sequentially(coarsest() + 1);
  }
  index_t user_index(const Level& L, index_t i) const {
    const index_t f = L.grid->fine[static_cast<size_t>(i)];
    return direction_ == Direction::Forward ? f : last_ - f;
  }
  /// The category of this solve's trace events.
  const char* trace_category() const {
    return direction_ == Direction::Forward ? "forward" : "reverse";
  }
  /// Seconds on a steady clock, or 0 when timings are off (the clocks then cost nothing).
  double now() const { return options_.collect_timings() ? clock::now() : 0.0; }

  // --- building blocks -------------------------------------------------------------------
  /// The step into point i starts at point i - 1; on a periodic grid the step into point 0
  /// starts at point n - 1 and ends at point n, point 0's image at the end of the period.
  index_t step_start(const Level& L, index_t i) const {
    return periodic_ && i == 0 ? L.grid->intervals() - 1 : i - 1;
  }
  void step(Level& L, int l, const State& in, State& out, index_t i, bool done, bool add_g) {
    const index_t from = step_start(L, i), to = periodic_ && i == 0 ? L.grid->intervals() : i;
    StepInfo info;
    info.level = l;
    info.from = user_index(L, from);
    info.to = user_index(L, to);
    info.done = done;
    info.direction = direction_;
    info.iteration = iteration_;
    if (l == 0 && estimating()) {
      info.error_estimate = fine_estimates_[static_cast<size_t>(i - L.lo)];
      info.largest_error_estimate = largest_estimate_;
    }
    trace::Span span("step", trace_category());
    span.step(l, info.from, info.to, done);
    if constexpr (detail::is_delta_app<App>::value) {
      delta_step(L, l, in, out, i, info, add_g);
    } else {
      app_.step(in, out, L.grid->times[static_cast<size_t>(from)],
                L.grid->times[static_cast<size_t>(to)], info);
      if (add_g && L.g_active) Ops::sum(app_, 1.0, L.g[static_cast<size_t>(i - L.lo)], 1.0, out);
    }
    ++L.steps;
    if constexpr (detail::has_refine_factor<App>::value) {
      if (l == 0 && collecting_factors_) {
        // The largest factor asked for; an invalid one sticks, and refine_grid() reports it
        // on every rank.
        const int m = app_.refine_factor(out, L.grid->times[static_cast<size_t>(from)],
                                         L.grid->times[static_cast<size_t>(to)], info);
        int& f = factors_[static_cast<size_t>(i - L.lo)];
        if (f >= 1) f = m < 1 ? m : std::max(f, m);
      }
    }
    progress(L);
  }
  /// Lets MPI move the level's pending messages. Without a single-copy transport, a large
  /// message advances only while its sender is inside an MPI call; a sender that steps for
  /// milliseconds between calls would leave its neighbour waiting.
  void progress(Level& L) { transport_.progress(L.send_req, L.recv_req); }
  /// Delta correction (delta.hpp): what the step does depends on the phase it belongs to, as in
  /// XBraid. The basis is propagated during restriction and the coarse right-hand side's steps;
  /// with Lyapunov estimation on the coarsest level and in interpolation; with `relax` in the
  /// other levels' relaxation and interpolation; and in the final sweep when exponents are
  /// recorded. It is orthonormalized after propagation at C-points, on the coarsest level and in
  /// interpolation, but not in a residual's step.
  void delta_step(Level& L, int l, const State& in, State& out, index_t i, const StepInfo& info,
                  bool add_g) {
    const DeltaOptions& o = app_.options();
    const bool cpoint = L.grid->is_cpoint(i);
    const bool residual = phase_ == Phase::Residual || (phase_ == Phase::Restrict && cpoint);
    const bool interpolate = phase_ == Phase::Interpolate;
    const bool propagate = phase_ == Phase::Restrict || phase_ == Phase::Residual ||
                           (o.lyapunov && (l == coarsest() || interpolate)) ||
                           (o.relax && l < coarsest() && (phase_ == Phase::Relax || interpolate)) ||
                           (o.exponents() && phase_ == Phase::Final);
    const State* rhs = nullptr;
    const State* previous = nullptr;
    if (add_g && L.g_active) {
      const auto s = static_cast<size_t>(i - L.lo);
      rhs = &L.g[s];
      previous = i > L.lo ? &L.v[s - 1] : &L.v_left;
    }
    // A step that does not propagate leaves a C-point its own basis and gives a coarse
    // F-point its restricted value's (XBraid's ustop); fine F-points' bases are never read.
    const State* basis_from = l > 0 && !cpoint ? &L.v[static_cast<size_t>(i - L.lo)] : nullptr;
    app_.advance(in, out, L.grid->times[static_cast<size_t>(i - 1)],
                 L.grid->times[static_cast<size_t>(i)], info, propagate, rhs, previous,
                 residual_of_, basis_from);
    if (propagate && !residual && (cpoint || l == coarsest() || interpolate))
      app_.orthonormalize(out, phase_ == Phase::Final && l == 0 && cpoint);
  }
  State& u_at(Level& L, index_t i) { return L.u[static_cast<size_t>(i - L.lo)]; }

  bool needs_predecessor(const Level& L, const Sweep& sw, index_t i) const {
    if (periodic_ && i == L.grid->intervals()) i = 0;  // point 0's image
    if (periodic_ && i == 0) return sw.c != CAction::None;
    if (i <= 0) return false;
    if (sw.sequential) return true;
    if (L.grid->is_cpoint(i)) return sw.c != CAction::None;
    return sw.recompute_f;
  }
  bool known_at_start(const Level& L, const Sweep& sw, index_t i) const {
    if (i == 0) return true;
    if (sw.sequential) return false;
    return L.grid->is_cpoint(i) || !sw.recompute_f;
  }

  void post_recv(Level& L, int l);
  void wait_recv(Level& L);
  /// Completes a posted receive of one state into `out` (counted in the statistics and the
  /// communication time; a size other than the buffer's is an MpiError).
  void receive_state(typename Transport::Request& request, const std::vector<char>& buffer,
                     State& out);
  void send(Level& L, int l, const State& s);
  void finish_send(Level& L);

  template <class Visit>
  const State* walk(Level& L, int l, const State* s, index_t a, index_t b, const Sweep& sw,
                    Visit& visit);
  template <class Visit, class OnResidual>
  void sweep(int l, Sweep sw, Visit&& visit, OnResidual&& on_residual);
  template <class Visit>
  void sweep(int l, Sweep sw, Visit&& visit) {
    sweep(l, sw, std::forward<Visit>(visit), [](index_t, index_t, const State&) {});
  }
  void sweep(int l, Sweep sw) {
    sweep(l, sw, [](index_t, const State&) {});
  }

  void f_relax(int l) {
    phase_ = Phase::Relax;
    sweep(l, Sweep{});
  }
  void c_relax(int l, double weight) {
    phase_ = Phase::Relax;
    Sweep sw;
    sw.recompute_f = false;
    sw.c = CAction::Relax;
    sw.weight = weight;
    sweep(l, sw);
  }
  void inject(int l);
  void fas_rhs(int l, bool measure_richardson = false);
  /// Richardson extrapolation is on: an order given and a coarse level to extrapolate from.
  bool richardson() const { return options_.richardson_order() > 0 && levels_.size() > 1; }
  /// The extrapolation weight a of fine C-point number j (j >= 1): u_c = a F_c + (1 - a) G_c.
  double richardson_weight(index_t j) const;
  /// Over the fine C-interval ending at C-point number j (on a periodic grid j = 0 ends at N):
  /// dtk, the sum of its steps' (t_i - t_{i-1})^p, and DTK = (t_c - t_c')^p.
  std::pair<double, double> interval_powers(index_t j, int p) const;
  bool estimating() const { return options_.error_estimate_order() > 0 && levels_.size() > 1; }
  /// The error estimates of level 1's points from its FAS right-hand side, shared by all ranks,
  /// then given to the fine points of each C-interval.
  void update_estimates();
  void richardson_extrapolate(Level& L, index_t j, State& uc);
  void restrict_to(int l, Sweep sw, bool measure);
  void interpolate(int coarse_level, bool relax_first);
  void assign_from_coarse(int coarse_level);
  void coarse_solve();
  void cycle_xbraid(int l, Cycle type);
  void cycle_pymgrit(int l, Cycle type, bool first_f, int iteration);
  void skip_phase();
  void nested_phase();
  void final_sweep();
  /// Everything that follows from grid_: hierarchy, distribution, levels and their storage.
  void build(const std::vector<std::vector<index_t>>* coarse_levels);
  /// Shapes the states each level receives from its left neighbour (see initialize()).
  void prepare_receives();
  void initialize();
  /// Temporal refinement after a cycle: true when the grid was refined (collective).
  bool refine_grid();
  /// The F-relaxed value of every local fine point, sent to its new owner on a grid whose
  /// point image[i] is old point i; returns the values received for the new local block.
  std::vector<State> redistribute(const std::vector<index_t>& image, const Distribution& next);
  /// Fills the new fine level from the received old values: each C-point is stepped from the
  /// nearest old point at or before it (XBraid's FRefine).
  void fill_refined(const std::vector<index_t>& image, std::vector<State>& received);
  double reduce_residual();
  void accumulate_residual(double norm);

  App& app_;
  Transport transport_;
  int rank_ = 0;
  int ranks_ = 1;
  Options options_;
  Direction direction_;
  TimeGrid grid_;  ///< internal order: always marching from point 0
  Hierarchy hierarchy_;
  index_t last_ = 0;       ///< N, the last fine index
  bool periodic_ = false;  ///< points 0..N-1 are unknowns; N is point 0 (Options::periodic)
  std::vector<Level> levels_;
  std::vector<int> owner_by_position_;
  Statistics stats_;
  bool solved_once_ = false;
  int iteration_ = -1;  ///< the current MGRIT iteration (Richardson skips iteration 0's C-relax)
  double residual_acc_ = 0;
  std::vector<double> fine_estimates_;               ///< per local fine point; -1: none
  std::vector<double> coarse_estimates_;             ///< per level-1 point, all ranks'
  std::vector<int> coarse_counts_, coarse_offsets_;  ///< level-1 points per rank
  double largest_estimate_ = -1;                     ///< over all fine points; -1: none
  // Temporal refinement (Options::refinement)
  std::vector<int> factors_;  ///< per local fine point i: the App's factor for (i-1, i]
  /// The part of the cycle the sweeps belong to (Delta correction's steps depend on it).
  enum class Phase { Relax, Restrict, Residual, Interpolate, Final };
  Phase phase_ = Phase::Relax;
  const State* residual_of_ = nullptr;  ///< Delta correction: the C-point a residual step is of
  bool collecting_factors_ = false;
  int refinements_done_ = 0;
  bool refinement_stopped_ = false;
  std::vector<index_t> carried_steps_;   ///< steps per level on grids refined away
  std::vector<double> carried_seconds_;  ///< and their sweep time
  double comm_time_ = 0;
  double sweep_time_ = 0;
};

// ------------------------------------------------------------------------------------------
// Construction

template <class App, class Transport>
Solver<App, Transport>::Solver(App& app, Transport transport, const TimeGrid& grid,
                               const std::vector<std::vector<index_t>>* coarse_levels,
                               Options options)
    : app_(app),
      transport_(std::move(transport)),
      options_(std::move(options)),
      direction_(options_.direction()),
      grid_(direction_ == Direction::Forward ? grid : grid.reversed()) {
  const double t_setup = now();
  options_.validate();
  rank_ = transport_.rank();
  ranks_ = transport_.size();
  periodic_ = options_.periodic();
  if constexpr (detail::is_delta_app<App>::value) {
    // What XBraid's Delta correction was checked with here (docs/mgrit.md, §3).
    const auto refuse = [](const std::string& what) {
      throw InvalidOption("option delta correction: not with " + what +
                          " (it is implemented for forward solves in the XBraid convention)");
    };
    if (!xbraid()) refuse("the PyMGRIT convention");
    if (periodic_) refuse("a periodic problem");
    if (direction_ == Direction::Reverse) refuse("a reverse-time solve");
    if (options_.richardson_order() > 0) refuse("Richardson extrapolation");
    if (options_.error_estimate_order() > 0) refuse("error estimates");
    if (options_.refinement()) refuse("temporal refinement");
    if constexpr (Ops::spatial) refuse("spatial coarsening");
  }
  if (options_.refinement()) {
    if (coarse_levels)
      throw InvalidOption(
          "option refinement: not with explicit coarse levels (each refined grid gets a "
          "uniform hierarchy)");
    if constexpr (!std::is_same_v<Transport, MpiTransport>)
      throw InvalidOption("option refinement: needs the MPI transport");
    if constexpr (!detail::has_refine_factor<App>::value)
      throw InvalidOption("option refinement: the App has no refine_factor(u, t0, t1, info)");
  }
  build(coarse_levels);
  stats_.setup_seconds = now() - t_setup;
}

template <class App, class Transport>
void Solver<App, Transport>::build(const std::vector<std::vector<index_t>>* coarse_levels) {
  last_ = grid_.intervals();
  if (coarse_levels) {
    std::vector<std::vector<index_t>> internal = *coarse_levels;
    if (direction_ == Direction::Reverse)
      for (auto& list : internal) {
        for (auto& i : list) i = last_ - i;
        std::reverse(list.begin(), list.end());
      }
    if (static_cast<int>(internal.size()) + 1 > options_.max_levels())
      throw InvalidOption("explicit levels: " + std::to_string(internal.size() + 1) +
                          " levels given but max_levels is " +
                          std::to_string(options_.max_levels()));
    hierarchy_ = Hierarchy::from_levels(grid_, internal, options_);
  } else {
    hierarchy_ = Hierarchy::uniform(grid_, options_);
  }

  const Distribution dist = distribution();
  const int position = dist.position_of_rank(rank_);
  levels_.clear();
  levels_.resize(static_cast<size_t>(hierarchy_.levels()));
  for (int l = 0; l < hierarchy_.levels(); ++l) {
    Level& L = levels_[static_cast<size_t>(l)];
    L.grid = &hierarchy_.level(l);
    const auto& fine_idx = L.grid->fine;
    auto range = [&](int q) {
      const auto lo = std::lower_bound(fine_idx.begin(), fine_idx.end(), dist.begin(q));
      const auto hi = std::lower_bound(fine_idx.begin(), fine_idx.end(), dist.end(q));
      return std::pair<index_t, index_t>(lo - fine_idx.begin(), hi - fine_idx.begin());
    };
    std::tie(L.lo, L.hi) = range(position);
    for (int q = position - 1; q >= 0 && L.left < 0; --q) {
      const auto r = range(q);
      if (r.first < r.second) L.left = dist.rank_at_position(q);
    }
    for (int q = position + 1; q < ranks_ && L.right < 0; ++q) {
      const auto r = range(q);
      if (r.first < r.second) L.right = dist.rank_at_position(q);
    }
    if (periodic_ && !L.empty()) {
      // A ring: the first rank's left neighbour is the last one (possibly itself), which owns
      // point n - 1, the predecessor of point 0.
      for (int q = ranks_ - 1; q >= position && L.left < 0; --q) {
        const auto r = range(q);
        if (r.first < r.second) L.left = dist.rank_at_position(q);
      }
      for (int q = 0; q <= position && L.right < 0; ++q) {
        const auto r = range(q);
        if (r.first < r.second) L.right = dist.rank_at_position(q);
      }
    }
    const auto& cp = L.grid->cpoints;
    L.c_begin = std::lower_bound(cp.begin(), cp.end(), L.lo) - cp.begin();
    L.c_end = std::lower_bound(cp.begin(), cp.end(), L.hi) - cp.begin();
    L.store_all = l == coarsest() || options_.storage_at(l) == Storage::All;
    const auto n = static_cast<size_t>(L.hi - L.lo);
    L.u.resize(n);
    if (l > 0) {
      L.v.resize(n);
      L.g.resize(n);
    }
  }
  if (richardson()) {
    // The extrapolation at a rank's first C-point steps from the previous C-point, which must
    // then be the left neighbour's last one.
    const auto& cp = hierarchy_.level(0).cpoints;
    for (int q = 0; q < ranks_; ++q) {
      const auto first = std::lower_bound(cp.begin(), cp.end(), dist.begin(q));
      if (first == cp.end() || *first >= dist.end(q))
        throw InvalidOption(
            "option richardson: needs a C-point of the fine grid on every rank; "
            "rank " +
            std::to_string(dist.rank_at_position(q)) +
            " has none (fewer ranks, or a smaller coarsening factor)");
    }
  }
  if (estimating()) {
    if constexpr (!std::is_same_v<Transport, MpiTransport>)
      throw InvalidOption("option error_estimates: needs the MPI transport");
    const auto& coarse = hierarchy_.level(1).fine;
    coarse_offsets_.clear();
    coarse_counts_.clear();
    for (int q = 0; q < ranks_; ++q) {  // forward: position q is rank q
      const auto lo = std::lower_bound(coarse.begin(), coarse.end(), dist.begin(q));
      const auto hi = std::lower_bound(coarse.begin(), coarse.end(), dist.end(q));
      coarse_offsets_.push_back(static_cast<int>(lo - coarse.begin()));
      coarse_counts_.push_back(static_cast<int>(hi - lo));
    }
    coarse_estimates_.assign(coarse.size(), -1.0);
    fine_estimates_.assign(static_cast<size_t>(fine().hi - fine().lo), -1.0);
    largest_estimate_ = -1;
  }
  if (options_.refinement()) factors_.assign(static_cast<size_t>(fine().hi - fine().lo), 1);
  owner_by_position_.resize(static_cast<size_t>(ranks_));
  for (int q = 0; q < ranks_; ++q)
    owner_by_position_[static_cast<size_t>(q)] = dist.rank_at_position(q);
  stats_.intervals_per_level = hierarchy_.intervals_per_level();
  stats_.steps_per_level.assign(levels_.size(), 0);
  stats_.step_seconds_per_level.assign(levels_.size(), 0.0);
}

template <class App, class Transport>
int Solver<App, Transport>::owner(index_t index) const {
  const index_t internal = direction_ == Direction::Forward ? index : last_ - index;
  const Distribution dist = distribution();
  for (int q = 0; q < ranks_; ++q)
    if (internal >= dist.begin(q) && internal < dist.end(q)) return dist.rank_at_position(q);
  throw InvalidOption("point index " + std::to_string(index) + " is outside the grid [0, " +
                      std::to_string(last_) + "]");
}

template <class App, class Transport>
auto Solver<App, Transport>::state(index_t index) const -> const State* {
  const index_t internal = direction_ == Direction::Forward ? index : last_ - index;
  const Level& L = fine();
  if (internal < L.lo || internal >= L.hi) return nullptr;
  if (!L.store_all && !L.grid->is_cpoint(internal)) return nullptr;
  return &L.u[static_cast<size_t>(internal - L.lo)];
}

template <class App, class Transport>
std::optional<double> Solver<App, Transport>::error_estimate(index_t index) const {
  if (!estimating()) return std::nullopt;
  const Level& L = fine();
  if (index < L.lo || index >= L.hi) return std::nullopt;  // forward: user numbering
  const double e = fine_estimates_[static_cast<size_t>(index - L.lo)];
  return e >= 0 ? std::optional<double>(e) : std::nullopt;
}

// ------------------------------------------------------------------------------------------
// Messages: one state per rank boundary per sweep, left to right in chain order.

template <class App, class Transport>
void Solver<App, Transport>::post_recv(Level& L, int l) {
  const std::size_t bytes = Ops::buffer_size(app_, L.recv_state);
  L.recv_buf.resize(bytes);
  transport_.irecv(L.recv_buf.data(), bytes, L.left, 100 + l, L.recv_req);
}

template <class App, class Transport>
void Solver<App, Transport>::wait_recv(Level& L) {
  receive_state(L.recv_req, L.recv_buf, L.recv_state);
}

template <class App, class Transport>
void Solver<App, Transport>::receive_state(typename Transport::Request& request,
                                           const std::vector<char>& buffer, State& out) {
  const double t = now();
  const std::size_t count = transport_.wait_recv(request);
  comm_time_ += now() - t;
  ++stats_.messages_received;
  if (count != buffer.size())
    throw MpiError(transport_.where() + ": received a state of " + std::to_string(count) +
                   " bytes, expected " + std::to_string(buffer.size()) +
                   " (App::buffer_size differs between ranks?)");
  Ops::unpack(app_, buffer.data(), out);
}

template <class App, class Transport>
void Solver<App, Transport>::send(Level& L, int l, const State& s) {
  const std::size_t bytes = Ops::buffer_size(app_, s);
  L.send_buf.resize(bytes);
  Ops::pack(app_, s, L.send_buf.data());
  transport_.isend(L.send_buf.data(), bytes, L.right, 100 + l, L.send_req);
  ++stats_.messages_sent;
}

template <class App, class Transport>
void Solver<App, Transport>::finish_send(Level& L) {
  if (!Transport::active(L.send_req)) return;
  const double t = now();
  transport_.wait_send(L.send_req);
  comm_time_ += now() - t;
}

// ------------------------------------------------------------------------------------------
// Sweeps

// Values of points a+1 .. b-1 (F-points, or every point in a sequential sweep) from s = s_a.
// Returns s_{b-1}.
template <class App, class Transport>
template <class Visit>
auto Solver<App, Transport>::walk(Level& L, int l, const State* s, index_t a, index_t b,
                                  const Sweep& sw, Visit& visit) -> const State* {
  if (!sw.recompute_f && !sw.sequential) {
    for (index_t i = a + 1; i < b; ++i) {
      s = &u_at(L, i);
      visit(i, *s);
    }
    return s;
  }
  int ping = 0;
  for (index_t i = a + 1; i < b; ++i) {
    State* out = L.store_all ? &u_at(L, i) : &L.tmp[ping ^= 1];
    step(L, l, *s, *out, i, sw.done, true);
    visit(i, *out);
    s = out;
  }
  return s;
}

template <class App, class Transport>
template <class Visit, class OnResidual>
void Solver<App, Transport>::sweep(int l, Sweep sw, Visit&& visit, OnResidual&& on_residual) {
  Level& L = levels_[static_cast<size_t>(l)];
  if (L.empty()) return;
  const double t_start = now();
  const double comm_before = comm_time_;
  if (!L.store_all) sw.recompute_f = true;  // F-points exist only while a sweep walks them
  const auto& cp = L.grid->cpoints;
  const bool need_left = L.left >= 0 && needs_predecessor(L, sw, L.lo);
  const bool need_right = L.right >= 0 && needs_predecessor(L, sw, L.hi);
  // The PyMGRIT convention relaxes C-points left to right: where two are adjacent (explicit
  // levels), the second steps from the freshly relaxed first, also across a rank boundary, so
  // such a last C-point is sent only once relaxed. XBraid's relaxation walks its intervals from
  // the right, so there the second steps from the first one's old value (as below otherwise).
  const bool chain_c = !xbraid() && sw.c == CAction::Relax;
  const bool late_send =
      chain_c && need_right && L.grid->is_cpoint(L.hi - 1) && L.grid->is_cpoint(L.hi);
  if (need_left) post_recv(L, l);
  bool sent = false;
  if (need_right && !late_send && known_at_start(L, sw, L.hi - 1)) {
    send(L, l, u_at(L, L.hi - 1));
    sent = true;
  }
  auto from_left = [&]() -> const State* {
    if (!need_left) return nullptr;
    wait_recv(L);
    return &L.recv_state;
  };
  // Richardson: each rank's first C-point also needs the left neighbour's last C-point as it
  // was before this sweep (XBraid's relaxation reads it there too), sent on its own tag.
  const bool extrapolate = l == 0 && sw.c == CAction::Relax && richardson() && iteration_ > 0;
  if (extrapolate) {
    if (L.right >= 0) {
      const State& last_c = u_at(L, cp[static_cast<size_t>(L.c_end - 1)]);
      const std::size_t bytes = Ops::buffer_size(app_, last_c);
      L.rich_send_buf.resize(bytes);
      Ops::pack(app_, last_c, L.rich_send_buf.data());
      transport_.isend(L.rich_send_buf.data(), bytes, L.right, 300, L.rich_send_req);
      ++stats_.messages_sent;
    }
    if (L.left >= 0) {
      Ops::copy(app_, u_at(L, L.lo), L.rich_left);  // a state of this level, for its size
      L.rich_recv_buf.resize(Ops::buffer_size(app_, L.rich_left));
      transport_.irecv(L.rich_recv_buf.data(), L.rich_recv_buf.size(), L.left, 300,
                       L.rich_recv_req);
    }
  }

  auto c_action = [&](index_t j, index_t c, const State& prev) {
    State& uc = u_at(L, c);
    if (sw.c == CAction::Relax) {
      if (sw.weight == 1.0) {
        step(L, l, prev, uc, c, sw.done, true);
        if (extrapolate) richardson_extrapolate(L, j, uc);
      } else {
        // Delta correction: the relaxed value keeps the C-point's basis (see advance()).
        if constexpr (detail::is_delta_app<App>::value) Ops::copy(app_, uc, L.res);
        step(L, l, prev, L.res, c, sw.done, true);
        Ops::sum(app_, sw.weight, L.res, 1.0 - sw.weight, uc);
      }
    } else {
      if constexpr (detail::is_delta_app<App>::value) {
        residual_of_ = &uc;  // the step gives the residual; the basis keeps its propagation
        step(L, l, prev, L.res, c, sw.done, true);
        residual_of_ = nullptr;
      } else {
        step(L, l, prev, L.res, c, sw.done, true);
        Ops::sum(app_, -1.0, uc, 1.0, L.res);
      }
      on_residual(j, c, L.res);
    }
  };

  if (sw.sequential || L.c_begin == L.c_end) {
    // One chain through the whole block: from point 0, or from the left neighbour's last point.
    const State* s;
    index_t a;
    if (L.lo == 0) {
      s = &u_at(L, 0);
      a = 0;
      visit(0, *s);
    } else {
      s = from_left();
      a = L.lo - 1;
    }
    const State* last = walk(L, l, s, a, L.hi, sw, visit);
    if (need_right && !sent) send(L, l, *last);
  } else {
    // The tail interval first: its last value is what the right neighbour waits for.
    const index_t jl = L.c_end - 1;
    const State* last = walk(L, l, &u_at(L, cp[static_cast<size_t>(jl)]),
                             cp[static_cast<size_t>(jl)], L.hi, sw, visit);
    if (need_right && !sent && !late_send) send(L, l, *last);
    // Then, interval by interval toward the left: the interval ending at C-point c gives the
    // predecessor for c's action; c's own interval has already been walked from its old value.
    // With chain_c, a run of adjacent C-points ending at c is acted on as a whole, left to right.
    for (index_t j = jl; j >= L.c_begin; --j) {
      index_t first = j;
      while (chain_c && first > L.c_begin &&
             cp[static_cast<size_t>(first - 1)] == cp[static_cast<size_t>(first)] - 1)
        --first;
      const index_t c_first = cp[static_cast<size_t>(first)];
      const State* prev = nullptr;
      if (first > L.c_begin) {
        const index_t c_prev = cp[static_cast<size_t>(first - 1)];
        prev = walk(L, l, &u_at(L, c_prev), c_prev, c_first, sw, visit);
      } else if (c_first > L.lo || need_left) {
        prev = walk(L, l, from_left(), L.lo - 1, c_first, sw, visit);
      }
      for (index_t k = first; k <= j; ++k) {
        const index_t c = cp[static_cast<size_t>(k)];
        if (k > first) prev = &u_at(L, c - 1);
        if ((c > 0 || periodic_) && sw.c != CAction::None) c_action(k, c, *prev);
        visit(c, u_at(L, c));
        if (late_send && c == L.hi - 1) send(L, l, u_at(L, c));
      }
      j = first;
    }
  }
  finish_send(L);
  if (extrapolate && Transport::active(L.rich_send_req)) {
    const double t = now();
    transport_.wait_send(L.rich_send_req);
    comm_time_ += now() - t;
  }
  {
    const double inside = (now() - t_start) - (comm_time_ - comm_before);
    sweep_time_ += inside;
    L.sweep_seconds += inside;
  }
}

// ------------------------------------------------------------------------------------------
// Richardson extrapolation (fine level only). With p the local order, over the C-interval
// (c_prev, c]: dtk = sum of (t_i - t_{i-1})^p over its fine steps, DTK = (t_c - t_prev)^p, and
// a = DTK / (DTK - dtk): with m uniform steps a = m^(p-1) / (m^(p-1) - 1), so a F + (1 - a) G
// cancels the leading local error of the m fine steps F against that of one step G.

template <class App, class Transport>
std::pair<double, double> Solver<App, Transport>::interval_powers(index_t j, int p) const {
  const LevelGrid& g = hierarchy_.level(0);
  const auto& cp = g.cpoints;
  const bool wrap = periodic_ && j == 0;  // cp ends with N, point 0's image
  const index_t c = wrap ? cp.back() : cp[static_cast<size_t>(j)];
  const index_t c_prev = cp[static_cast<size_t>(wrap ? cp.size() - 2 : j - 1)];
  const auto t = [&](index_t i) { return g.times[static_cast<size_t>(i)]; };
  double dtk = 0;
  for (index_t i = c_prev + 1; i <= c; ++i) dtk += std::pow(t(i) - t(i - 1), p);
  return {dtk, std::pow(t(c) - t(c_prev), p)};
}

template <class App, class Transport>
double Solver<App, Transport>::richardson_weight(index_t j) const {
  const auto [dtk, big] = interval_powers(j, options_.richardson_order());
  return big / (big - dtk);
}

// XBraid's estimate: |F - G| over a C-interval, scaled by dtk / (DTK - dtk) = 1 / (m^(p-1) - 1)
// for m uniform steps, the part of it that is the fine steps' error (with extrapolation the
// fine value is itself corrected, and the scale is dtk / DTK).
template <class App, class Transport>
void Solver<App, Transport>::update_estimates() {
  Level& C = levels_[1];
  const int p = options_.error_estimate_order();
  std::vector<double> local;
  for (index_t k = C.lo; k < C.hi; ++k) {
    double e = -1;
    if (k > 0 || periodic_) {
      const auto [dtk, big] = interval_powers(k, p);
      e = Ops::norm(app_, C.g[static_cast<size_t>(k - C.lo)]) * dtk /
          (richardson() ? big : big - dtk);
    }
    local.push_back(e);
  }
  if constexpr (std::is_same_v<Transport, MpiTransport>) {
    const double t = now();
    mpi::check(MPI_Allgatherv(local.data(), static_cast<int>(local.size()), MPI_DOUBLE,
                              coarse_estimates_.data(), coarse_counts_.data(),
                              coarse_offsets_.data(), MPI_DOUBLE, transport_.comm()),
               "MPI_Allgatherv (error estimates)");
    comm_time_ += now() - t;
  }
  largest_estimate_ = -1;
  for (double e : coarse_estimates_) largest_estimate_ = std::max(largest_estimate_, e);
  // Fine point i takes the estimate of the first C-point >= i (past the last: the last one's).
  const Level& F = fine();
  const auto& cp = F.grid->cpoints;
  // A periodic level 1 ends with point 0's image N, which has no estimate of its own.
  const auto count = static_cast<index_t>(coarse_estimates_.size()) - (periodic_ ? 1 : 0);
  for (index_t i = F.lo; i < F.hi; ++i) {
    index_t j = std::lower_bound(cp.begin(), cp.end(), i) - cp.begin();
    if (j >= count) j = periodic_ ? 0 : count - 1;
    fine_estimates_[static_cast<size_t>(i - F.lo)] = coarse_estimates_[static_cast<size_t>(j)];
  }
}

// uc holds F_c (the fine steps from the previous C-point); it becomes a F_c + (1 - a) G_c, with
// G_c one step of the fine integrator from the previous C-point's value before this sweep.
template <class App, class Transport>
void Solver<App, Transport>::richardson_extrapolate(Level& L, index_t j, State& uc) {
  const auto& cp = L.grid->cpoints;
  const index_t c = cp[static_cast<size_t>(j)];
  const index_t c_prev = cp[static_cast<size_t>(j - 1)];
  const State* left = nullptr;
  if (j > L.c_begin) {
    left = &u_at(L, c_prev);
  } else {
    receive_state(L.rich_recv_req, L.rich_recv_buf, L.rich_left);
    left = &L.rich_left;
  }
  Ops::copy(app_, uc, L.rich_step);  // the fine value is the step's initial guess (implicit Apps)
  StepInfo info;
  info.level = 0;
  info.from = user_index(L, c_prev);
  info.to = user_index(L, c);
  info.direction = direction_;
  {
    trace::Span span("step", trace_category());
    span.step(0, info.from, info.to, false);
    app_.step(*left, L.rich_step, L.grid->times[static_cast<size_t>(c_prev)],
              L.grid->times[static_cast<size_t>(c)], info);
  }
  ++L.steps;
  const double a = richardson_weight(j);
  Ops::sum(app_, 1.0 - a, L.rich_step, a, uc);
}

// ------------------------------------------------------------------------------------------
// Transfers between levels

// Level l's C-points become level l+1's points: v = R(u), and u = v at level l+1's C-points,
// no FAS right-hand side. Level l+1's F-points need no copy: every path steps them from their
// C-point before reading them (relaxation, a sequential solve, or the F-relaxation that
// precedes a correction).
template <class App, class Transport>
void Solver<App, Transport>::inject(int l) {
  Level& F = levels_[static_cast<size_t>(l)];
  Level& C = levels_[static_cast<size_t>(l + 1)];
  for (index_t j = F.c_begin; j < F.c_end; ++j) {
    const auto k = static_cast<size_t>(j - C.lo);
    trace::Span span("restrict", trace_category());
    span.level(l + 1);
    Ops::coarsen(app_, u_at(F, F.grid->cpoints[static_cast<size_t>(j)]), C.v[k], l);
    if (C.grid->is_cpoint(j)) Ops::copy(app_, C.v[k], C.u[k]);
  }
  C.g_active = false;
}

// g_k += v_k - Phi_c(v_{k-1}) on coarse level l (g_k already holds the restricted residual).
template <class App, class Transport>
void Solver<App, Transport>::fas_rhs(int l, bool measure_richardson) {
  Level& L = levels_[static_cast<size_t>(l)];
  if (L.empty()) return;
  const double t_start = now();
  const double comm_before = comm_time_;
  const bool need_left = L.left >= 0;
  if (need_left) post_recv(L, l);
  if (L.right >= 0) send(L, l, L.v.back());
  phase_ = Phase::Residual;
  auto update = [&](index_t k, const State& v_prev) {
    const auto s = static_cast<size_t>(k - L.lo);
    step(L, l, v_prev, L.res, k, false, false);
    if constexpr (detail::is_delta_app<App>::value) {
      app_.coarse_rhs(L.v[s], v_prev, L.res, L.g[s]);
      return;
    }
    if (l == 1 && richardson()) {
      // g = a (r + v - G v); the residual of the extrapolated system is g - (v - G v).
      State& e = L.tmp[0];
      Ops::copy(app_, L.v[s], e);
      Ops::sum(app_, -1.0, L.res, 1.0, e);
      const double a = richardson_weight(k);
      Ops::sum(app_, a, e, a, L.g[s]);
      if (measure_richardson) {
        State& d = L.tmp[1];
        Ops::copy(app_, L.g[s], d);
        Ops::sum(app_, -1.0, e, 1.0, d);
        accumulate_residual(Ops::norm(app_, d));
      }
      return;
    }
    Ops::sum(app_, 1.0, L.v[s], 1.0, L.g[s]);
    Ops::sum(app_, -1.0, L.res, 1.0, L.g[s]);
  };
  for (index_t k = L.hi - 1; k > L.lo; --k) update(k, L.v[static_cast<size_t>(k - 1 - L.lo)]);
  if (need_left) {
    wait_recv(L);
    update(L.lo, L.recv_state);
    if constexpr (detail::is_delta_app<App>::value) Ops::copy(app_, L.recv_state, L.v_left);
  }
  finish_send(L);
  L.g_active = true;
  if (l == 1 && estimating()) update_estimates();
  {
    const double inside = (now() - t_start) - (comm_time_ - comm_before);
    sweep_time_ += inside;
    L.sweep_seconds += inside;
  }
}

// FAS restriction from level l: a sweep that ends with the residual at every C-point > 0,
// then injection, then the coarse right-hand side.
template <class App, class Transport>
void Solver<App, Transport>::restrict_to(int l, Sweep sw, bool measure) {
  Level& C = levels_[static_cast<size_t>(l + 1)];
  sw.c = CAction::Residual;
  phase_ = Phase::Restrict;
  // With Richardson the fine residual is that of the extrapolated system, measured by fas_rhs.
  const bool extrapolated = l == 0 && richardson();
  sweep(
      l, sw, [](index_t, const State&) {},
      [&](index_t j, index_t, const State& r) {
        if (measure && !extrapolated) accumulate_residual(Ops::norm(app_, r));
        trace::Span span("restrict", trace_category());
        span.level(l + 1);
        Ops::coarsen(app_, r, C.g[static_cast<size_t>(j - C.lo)], l);
      });
  inject(l);
  fas_rhs(l + 1, measure && extrapolated);
  C.g_active = true;
}

// Coarse-grid correction of level coarse_level-1's C-points by (u - v) of the coarse level.
template <class App, class Transport>
void Solver<App, Transport>::interpolate(int coarse_level, bool relax_first) {
  Level& C = levels_[static_cast<size_t>(coarse_level)];
  Level& F = levels_[static_cast<size_t>(coarse_level - 1)];
  auto correct = [&](index_t k, const State& u) {
    if (k == 0 && !periodic_) return;  // the initial value never changes
    trace::Span span("interpolate", trace_category());
    span.level(coarse_level);
    State& e = C.res;
    Ops::copy(app_, u, e);
    Ops::sum(app_, -1.0, C.v[static_cast<size_t>(k - C.lo)], 1.0, e);
    State& target = u_at(F, F.grid->cpoints[static_cast<size_t>(k)]);
    if constexpr (Ops::spatial) {
      Ops::refine(app_, e, F.res, coarse_level);
      Ops::sum(app_, 1.0, F.res, 1.0, target);
    } else {
      Ops::sum(app_, 1.0, e, 1.0, target);
    }
  };
  Sweep sw;
  sw.recompute_f = relax_first;
  phase_ = Phase::Interpolate;
  sweep(coarse_level, sw, correct);
}

// Nested iteration: level coarse_level-1's C-points take the coarse values.
template <class App, class Transport>
void Solver<App, Transport>::assign_from_coarse(int coarse_level) {
  Level& F = levels_[static_cast<size_t>(coarse_level - 1)];
  Sweep sw;
  sw.recompute_f = false;
  sweep(coarse_level, sw, [&](index_t k, const State& u) {
    if (k == 0 && !periodic_) return;
    trace::Span span("interpolate", trace_category());
    span.level(coarse_level);
    Ops::refine(app_, u, u_at(F, F.grid->cpoints[static_cast<size_t>(k)]), coarse_level);
  });
}

// ------------------------------------------------------------------------------------------
// Cycles

template <class App, class Transport>
void Solver<App, Transport>::coarse_solve() {
  const int l = coarsest();
  if (solved_sequentially(l)) {
    Sweep sw;
    sw.sequential = true;
    phase_ = Phase::Relax;
    sweep(l, sw);
    return;
  }
  const int n = options_.coarsest_sweeps(l);
  if (xbraid()) {
    for (int i = 0; i < n; ++i) {
      f_relax(l);
      c_relax(l, 1.0);
    }
  } else {
    f_relax(l);
    for (int i = 0; i < n; ++i) {
      c_relax(l, 1.0);
      f_relax(l);
    }
  }
}

template <class App, class Transport>
void Solver<App, Transport>::cycle_xbraid(int l, Cycle type) {
  if (l == coarsest()) {
    coarse_solve();
    return;
  }
  for (int i = 0; i < options_.nrelax_at(l); ++i) {
    f_relax(l);
    c_relax(l, options_.cweight_at(l));
  }
  restrict_to(l, Sweep{}, l == 0 && options_.compute_residual());
  cycle_xbraid(l + 1, type);
  interpolate(l + 1, !solved_sequentially(l + 1));
  if (type == Cycle::F && l > 0) cycle_xbraid(l, Cycle::V);
}

template <class App, class Transport>
void Solver<App, Transport>::cycle_pymgrit(int l, Cycle type, bool first_f, int iteration) {
  if (l == coarsest()) {
    coarse_solve();
    return;
  }
  Level& L = levels_[static_cast<size_t>(l)];
  if (first_f && (l > 0 || iteration == 0)) f_relax(l);
  for (int i = 0; i < options_.nrelax_at(l); ++i) {
    c_relax(l, options_.cweight_at(l));
    f_relax(l);
  }
  Sweep sw;
  sw.recompute_f = !L.store_all;  // F-points were just relaxed
  restrict_to(l, sw, false);
  cycle_pymgrit(l + 1, type, true, iteration);
  interpolate(l + 1, !levels_[static_cast<size_t>(l + 1)].store_all);
  f_relax(l);
  if (type == Cycle::F && l > 0) cycle_pymgrit(l, Cycle::V, false, iteration);
}

template <class App, class Transport>
void Solver<App, Transport>::skip_phase() {
  for (int l = 0; l < coarsest(); ++l) inject(l);
  coarse_solve();
  for (int l = coarsest(); l > 0; --l) {
    if (xbraid()) {
      interpolate(l, !solved_sequentially(l));
    } else {
      interpolate(l, !levels_[static_cast<size_t>(l)].store_all);
      f_relax(l - 1);
    }
  }
}

template <class App, class Transport>
void Solver<App, Transport>::nested_phase() {
  for (int l = 0; l < coarsest(); ++l) inject(l);
  // PyMGRIT starts each coarse level from the App's initial value on that level's own grid
  // (App::init(t, level)); XBraid, and Apps without it, keep the restricted fine value.
  if constexpr (detail::has_level_init<App>::value) {
    if (!xbraid() && !periodic_)  // a periodic point 0 is an unknown, not an initial value
      for (int l = 1; l <= coarsest(); ++l) {
        Level& L = levels_[static_cast<size_t>(l)];
        if (!L.empty() && L.lo == 0) u_at(L, 0) = app_.init(L.grid->times[0], l);
      }
  }
  coarse_solve();
  for (int l = coarsest() - 1; l >= 0; --l) {
    assign_from_coarse(l + 1);
    if (l == 0) break;
    if (xbraid())
      cycle_xbraid(l, Cycle::V);
    else
      cycle_pymgrit(l, Cycle::V, true, 0);
  }
}

template <class App, class Transport>
void Solver<App, Transport>::final_sweep() {
  auto observe = [&](index_t i, const State& u) {
    Ops::observe(app_, u, grid_.times()[static_cast<size_t>(i)], user_index(fine(), i));
  };
  Sweep f;
  f.done = true;
  phase_ = Phase::Final;
  FinalSweep final_sweep = options_.effective_final_sweep();
  // Lyapunov estimation ends with a propagation over every C-interval (the exponents).
  if constexpr (detail::is_delta_app<App>::value)
    if (app_.options().exponents()) final_sweep = FinalSweep::CF;
  switch (final_sweep) {
    case FinalSweep::CF: {
      Sweep c;
      c.recompute_f = false;
      c.c = CAction::Relax;
      c.done = true;
      // F-points from the (corrected) C-points, then C-points from the fresh F-points. With
      // C-point storage the C-sweep walks the F-points itself, so the F-sweep would step every
      // F-interval a second time.
      if (fine().store_all) sweep(0, f);
      sweep(0, c, observe);
      break;
    }
    case FinalSweep::F:
      sweep(0, f, observe);
      break;
    default:
      if constexpr (detail::has_observe<App>::value) {
        Sweep keep;
        keep.recompute_f = false;
        sweep(0, keep, observe);  // no steps where all points are stored
      }
      break;
  }
}

// ------------------------------------------------------------------------------------------
// Temporal refinement (XBraid's FRefine): the App's factors split the fine intervals uniformly;
// the F-relaxed fine values move to their new owners (block distribution of the new grid), a
// uniform hierarchy is built over the new grid, and every new C-point is stepped from the
// nearest old point at or before it. Estimates start over (-1) on the new grid.

template <class App, class Transport>
bool Solver<App, Transport>::refine_grid() {
  if constexpr (!std::is_same_v<Transport, MpiTransport>) {
    return false;  // refused at construction
  } else {
    // Every rank learns every interval's factor: the new grid follows from them alone.
    std::vector<int> factors(static_cast<size_t>(last_ + 1), 1);
    {
      const Distribution dist = distribution();
      std::vector<int> counts(static_cast<size_t>(ranks_)), offsets(static_cast<size_t>(ranks_));
      for (int q = 0; q < ranks_; ++q) {
        counts[static_cast<size_t>(q)] = static_cast<int>(dist.end(q) - dist.begin(q));
        offsets[static_cast<size_t>(q)] = static_cast<int>(dist.begin(q));
      }
      const double t = now();
      mpi::check(
          MPI_Allgatherv(factors_.data(), static_cast<int>(factors_.size()), MPI_INT,
                         factors.data(), counts.data(), offsets.data(), MPI_INT, transport_.comm()),
          "MPI_Allgatherv (refinement factors)");
      comm_time_ += now() - t;
    }
    for (index_t i = 1; i <= last_; ++i)
      if (factors[static_cast<size_t>(i)] < 1)
        throw CollectiveError<InvalidOption>("refinement: the App's refine_factor gave " +
                                             std::to_string(factors[static_cast<size_t>(i)]) +
                                             " for the interval (" + std::to_string(i - 1) + ", " +
                                             std::to_string(i) + "]; accepted: an integer >= 1");
    const auto& t = grid_.times();
    std::vector<double> times{t[0]};
    std::vector<index_t> image(static_cast<size_t>(last_ + 1), 0);
    for (index_t i = 1; i <= last_; ++i) {
      const int m = factors[static_cast<size_t>(i)];
      const double dt = t[static_cast<size_t>(i)] - t[static_cast<size_t>(i - 1)];
      for (int j = 1; j < m; ++j)
        times.push_back(t[static_cast<size_t>(i - 1)] + (static_cast<double>(j) / m) * dt);
      times.push_back(t[static_cast<size_t>(i)]);
      image[static_cast<size_t>(i)] = static_cast<index_t>(times.size()) - 1;
    }
    if (image.back() == last_) return false;

    const Distribution next(static_cast<index_t>(times.size()), ranks_, Direction::Forward);
    std::vector<State> received = redistribute(image, next);

    for (size_t l = 0; l < levels_.size(); ++l) {
      if (carried_steps_.size() <= l) {
        carried_steps_.resize(l + 1, 0);
        carried_seconds_.resize(l + 1, 0.0);
      }
      carried_steps_[l] += levels_[l].steps;
      carried_seconds_[l] += levels_[l].sweep_seconds;
    }
    grid_ = TimeGrid::from_points(std::move(times));
    build(nullptr);
    ++refinements_done_;
    prepare_receives();
    fill_refined(image, received);
    return true;
  }
}

template <class App, class Transport>
auto Solver<App, Transport>::redistribute(const std::vector<index_t>& image,
                                          const Distribution& next) -> std::vector<State> {
  // The old values as an F-relaxation leaves them (C-point storage keeps F-points only during
  // a sweep, so they are copied out as it walks).
  Level& L0 = levels_.front();
  std::vector<State> old(static_cast<size_t>(L0.hi - L0.lo));
  sweep(0, Sweep{}, [&](index_t i, const State& u) {
    Ops::copy(app_, u, old[static_cast<size_t>(i - L0.lo)]);
  });

  // Each state travels as [its byte count][its packed bytes], grouped by new owner.
  std::vector<std::vector<char>> outgoing(static_cast<size_t>(ranks_));
  int owner = 0;  // forward: position q is rank q
  for (index_t i = L0.lo; i < L0.hi; ++i) {
    const State& u = old[static_cast<size_t>(i - L0.lo)];
    const index_t to = image[static_cast<size_t>(i)];
    while (to >= next.end(owner)) ++owner;
    auto& out = outgoing[static_cast<size_t>(owner)];
    const std::uint64_t bytes = Ops::buffer_size(app_, u);
    const size_t at = out.size();
    out.resize(at + sizeof bytes + bytes);
    std::memcpy(out.data() + at, &bytes, sizeof bytes);
    Ops::pack(app_, u, out.data() + at + sizeof bytes);
  }
  std::vector<int> send_counts(static_cast<size_t>(ranks_)), send_offsets(send_counts),
      recv_counts(send_counts), recv_offsets(send_counts);
  std::vector<char> send_buf;
  for (int q = 0; q < ranks_; ++q) {
    const auto& out = outgoing[static_cast<size_t>(q)];
    if (send_buf.size() + out.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
      throw MpiError("refinement: more than 2 GiB of states to redistribute from rank " +
                     std::to_string(rank_));
    send_offsets[static_cast<size_t>(q)] = static_cast<int>(send_buf.size());
    send_counts[static_cast<size_t>(q)] = static_cast<int>(out.size());
    send_buf.insert(send_buf.end(), out.begin(), out.end());
  }
  const double t0 = now();
  mpi::check(MPI_Alltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT,
                          transport_.comm()),
             "MPI_Alltoall (refinement sizes)");
  size_t total = 0;
  for (int q = 0; q < ranks_; ++q) {
    recv_offsets[static_cast<size_t>(q)] = static_cast<int>(total);
    total += static_cast<size_t>(recv_counts[static_cast<size_t>(q)]);
  }
  std::vector<char> recv_buf(total);
  mpi::check(MPI_Alltoallv(send_buf.data(), send_counts.data(), send_offsets.data(), MPI_CHAR,
                           recv_buf.data(), recv_counts.data(), recv_offsets.data(), MPI_CHAR,
                           transport_.comm()),
             "MPI_Alltoallv (refinement states)");
  comm_time_ += now() - t0;

  // Senders are in rank order, which is the order of the old points, so the states arrive in
  // the order of their new indices.
  const int position = next.position_of_rank(rank_);
  const auto first = std::lower_bound(image.begin(), image.end(), next.begin(position));
  const auto last = std::lower_bound(image.begin(), image.end(), next.end(position));
  std::vector<State> received;
  size_t at = 0;
  for (auto it = first; it != last; ++it) {
    std::uint64_t bytes = 0;
    if (at + sizeof bytes > recv_buf.size())
      throw MpiError("refinement: rank " + std::to_string(rank_) + " received too few states");
    std::memcpy(&bytes, recv_buf.data() + at, sizeof bytes);
    at += sizeof bytes;
    State u = app_.init(grid_.times()[static_cast<size_t>(it - image.begin())]);
    Ops::unpack(app_, recv_buf.data() + at, u);
    at += bytes;
    received.push_back(std::move(u));
  }
  if (at != recv_buf.size())
    throw MpiError("refinement: rank " + std::to_string(rank_) + " received " +
                   std::to_string(recv_buf.size()) + " bytes, expected " + std::to_string(at));
  return received;
}

template <class App, class Transport>
void Solver<App, Transport>::fill_refined(const std::vector<index_t>& image,
                                          std::vector<State>& received) {
  Level& L = levels_.front();
  if (L.empty()) return;
  const auto& cp = L.grid->cpoints;
  const auto is_image = [&](index_t p) {
    return std::binary_search(image.begin(), image.end(), p);
  };
  // The last C-point before the first old point after p: the chain from the old point at or
  // before p reaches that far (later F-points wait for the next F-relaxation).
  const auto reach = [&](index_t p) {
    const index_t n = *std::upper_bound(image.begin(), image.end(), p);
    return *(std::upper_bound(cp.begin(), cp.end(), n - 1) - 1);
  };
  // A block [b, ...) starting between old points needs its left neighbour's last value when
  // the chain from the old point before it reaches into the block.
  const auto needs_left = [&](index_t b) { return b > 0 && !is_image(b) && reach(b - 1) >= b; };
  const MPI_Comm comm = transport_.comm();
  const int tag = 400;

  State from_left{};
  const State* cur = nullptr;
  if (L.left >= 0 && needs_left(L.lo)) {
    MPI_Status status;
    const double t0 = now();
    mpi::check(MPI_Probe(L.left, tag, comm, &status), "MPI_Probe (refinement)");
    int bytes = 0;
    mpi::check(MPI_Get_count(&status, MPI_CHAR, &bytes), "MPI_Get_count (refinement)");
    std::vector<char> buf(static_cast<size_t>(bytes));
    mpi::check(MPI_Recv(buf.data(), bytes, MPI_CHAR, L.left, tag, comm, MPI_STATUS_IGNORE),
               "MPI_Recv (refinement)");
    comm_time_ += now() - t0;
    from_left = app_.init(grid_.times()[static_cast<size_t>(L.lo - 1)]);
    Ops::unpack(app_, buf.data(), from_left);
    cur = &from_left;
  }
  size_t next_received = 0;
  int ping = 0;
  // Unstored points (C-point storage) alternate between the two scratch states, so a step's
  // input (the last value written) and output never alias.
  auto slot = [&](index_t p) -> State& {
    return L.store_all || L.grid->is_cpoint(p) ? u_at(L, p) : L.tmp[ping ^= 1];
  };
  for (index_t p = L.lo; p < L.hi; ++p) {
    if (is_image(p)) {
      State& dst = slot(p);
      dst = std::move(received[next_received++]);
      cur = &dst;
    } else if (cur && p <= reach(p - 1)) {
      State& dst = slot(p);
      step(L, 0, *cur, dst, p, false, false);
      cur = &dst;
    } else if (L.store_all) {
      u_at(L, p) = app_.init(grid_.times()[static_cast<size_t>(p)]);  // relaxed first thing
    }
  }
  if (L.right >= 0 && needs_left(L.hi)) {
    if (!cur)
      throw MpiError("refinement: rank " + std::to_string(rank_) +
                     " has no value to send to its right neighbour");
    std::vector<char> buf(Ops::buffer_size(app_, *cur));
    Ops::pack(app_, *cur, buf.data());
    const double t0 = now();
    mpi::check(MPI_Send(buf.data(), static_cast<int>(buf.size()), MPI_CHAR, L.right, tag, comm),
               "MPI_Send (refinement)");
    comm_time_ += now() - t0;
  }
}

// ------------------------------------------------------------------------------------------
// The solve

template <class App, class Transport>
void Solver<App, Transport>::accumulate_residual(double norm) {
  switch (options_.temporal_norm()) {
    case TemporalNorm::One:
      residual_acc_ += norm;
      break;
    case TemporalNorm::Two:
      residual_acc_ += norm * norm;
      break;
    case TemporalNorm::Inf:
      residual_acc_ = std::isnan(norm) ? norm : std::max(residual_acc_, norm);
      break;
  }
}

template <class App, class Transport>
double Solver<App, Transport>::reduce_residual() {
  const double t = now();
  const bool inf = options_.temporal_norm() == TemporalNorm::Inf;
  const double global = transport_.allreduce(residual_acc_, inf, "MPI_Allreduce (residual)");
  comm_time_ += now() - t;
  ++stats_.reductions;
  residual_acc_ = 0;
  return options_.temporal_norm() == TemporalNorm::Two ? std::sqrt(global) : global;
}

template <class App, class Transport>
void Solver<App, Transport>::initialize() {
  Level& L0 = levels_.front();
  const auto& times = L0.grid->times;
  const bool warm = options_.warm_start() && solved_once_;
  for (index_t i = L0.lo; i < L0.hi; ++i)
    if (((i == 0 && !periodic_) || !warm) && (L0.store_all || L0.grid->is_cpoint(i)))
      u_at(L0, i) = app_.init(times[static_cast<size_t>(i)]);
  for (int l = 1; l <= coarsest(); ++l) levels_[static_cast<size_t>(l)].g_active = false;
  prepare_receives();
  for (Level& L : levels_) {
    L.steps = 0;
    L.sweep_seconds = 0;
  }
  carried_steps_.clear();
  carried_seconds_.clear();
  refinements_done_ = 0;
  refinement_stopped_ = false;
  iteration_ = -1;
  comm_time_ = sweep_time_ = residual_acc_ = 0;
  std::fill(fine_estimates_.begin(), fine_estimates_.end(), -1.0);
  largest_estimate_ = -1;
  stats_.messages_sent = stats_.messages_received = stats_.reductions = 0;
}

template <class App, class Transport>
void Solver<App, Transport>::prepare_receives() {
  const auto& times = levels_.front().grid->times;
  // Received states are unpacked into a state like the one the left neighbour sends (its last
  // point, the predecessor of this rank's first point on the level), so unpack() can take the
  // shape from it: states may differ in shape from point to point (a network's stages). A level
  // without points here, or starting at point 0, receives nothing.
  for (int l = 0; l <= coarsest(); ++l) {
    Level& L = levels_[static_cast<size_t>(l)];
    if (L.empty() || (L.lo == 0 && !periodic_)) continue;
    const index_t before = L.grid->fine[static_cast<size_t>(step_start(L, L.lo))];
    State like = app_.init(times[static_cast<size_t>(before)]);
    if constexpr (Ops::spatial) {
      for (int m = 0; m < l; ++m) {
        State coarse = like;
        app_.coarsen(like, coarse, m);
        std::swap(like, coarse);
      }
    }
    Ops::copy(app_, like, L.recv_state);
  }
}

template <class App, class Transport>
Result Solver<App, Transport>::solve() {
  const double t_solve = now();
  initialize();
  Result result;
  if (coarsest() == 0) {
    // One level: the sequential solve is exact; it is also the final sweep.
    Sweep seq;
    seq.sequential = true;
    seq.done = true;
    sweep(0, seq, [&](index_t i, const State& u) {
      Ops::observe(app_, u, grid_.times()[static_cast<size_t>(i)], user_index(fine(), i));
    });
    result.iterations = 1;
    result.converged = true;
    result.residuals.push_back(std::nullopt);
    result.factors.push_back(std::nullopt);
  } else {
    iteration_ = 0;
    if (options_.initial_guess() == InitialGuess::Sequential) {
      Level& L0 = levels_.front();
      Sweep seq;
      seq.sequential = true;
      sweep(0, seq, [&](index_t i, const State& u) {
        if (!L0.store_all && L0.grid->is_cpoint(i)) Ops::copy(app_, u, u_at(L0, i));
      });
    }
    // A sequential guess is already the solution: a skip or nested phase would replace it by
    // coarse-grid values.
    const InitialPhase phase = options_.initial_guess() == InitialGuess::Sequential
                                   ? InitialPhase::None
                                   : options_.effective_initial_phase();
    if (phase == InitialPhase::Nested) nested_phase();
    std::optional<double> first, previous;
    for (int k = 0; k < options_.max_iterations(); ++k) {
      trace::set_iteration(k);
      iteration_ = k;
      bool measured = false;
      collecting_factors_ = options_.refinement() && !refinement_stopped_;
      if (collecting_factors_) std::fill(factors_.begin(), factors_.end(), 1);
      if (k == 0 && phase == InitialPhase::Skip && result.refinements.empty()) {
        skip_phase();
      } else if (xbraid()) {
        cycle_xbraid(0, options_.cycle());
        measured = options_.compute_residual();
      } else {
        cycle_pymgrit(0, options_.cycle(), true, k);
        if (options_.compute_residual()) {
          Sweep res;
          res.recompute_f = false;
          res.c = CAction::Residual;
          sweep(
              0, res, [](index_t, const State&) {},
              [&](index_t, index_t, const State& r) { accumulate_residual(Ops::norm(app_, r)); });
          measured = true;
        }
      }
      std::optional<double> r;
      if (measured) r = reduce_residual();
      if (collecting_factors_) {
        // XBraid's FRefine: before the convergence check; a refined cycle runs again.
        collecting_factors_ = false;
        if (r && !std::isfinite(*r))
          throw Divergence("MGRIT diverged at iteration " + std::to_string(k) + ": residual " +
                           number_text(*r));
        const index_t before = last_;
        if (refinements_done_ >= options_.max_refinements() ||
            last_ >= options_.refinement_cutoff()) {
          refinement_stopped_ = true;
          result.refinement_stopped = k;
        } else if (refine_grid()) {
          result.refinements.push_back(Refinement{k, before, last_, r});
          if (!first) first = r;
          --k;
          continue;
        }
      }
      result.iterations = k + 1;
      result.residuals.push_back(r);
      result.factors.push_back(
          r && previous && *previous != 0 ? std::optional<double>(*r / *previous) : std::nullopt);
      if (!r) continue;
      if (!std::isfinite(*r) || *r > options_.divergence_limit())
        throw Divergence("MGRIT diverged at iteration " + std::to_string(k) + ": residual " +
                         number_text(*r) + " (limit " + number_text(options_.divergence_limit()) +
                         ")");
      if (!first) first = r;
      previous = r;
      if ((options_.abs_tol() > 0 && *r < options_.abs_tol()) ||
          (options_.rel_tol() > 0 && k > 0 && *r < options_.rel_tol() * *first)) {
        result.converged = true;
        break;
      }
    }
    final_sweep();
  }
  trace::set_iteration(-1);
  solved_once_ = true;
  result.intervals = last_;
  const size_t counted = std::max(levels_.size(), carried_steps_.size());
  carried_steps_.resize(counted, 0);
  carried_seconds_.resize(counted, 0.0);
  stats_.steps_per_level.assign(counted, 0);
  stats_.step_seconds_per_level.assign(counted, 0.0);
  for (size_t l = 0; l < counted; ++l) {
    stats_.steps_per_level[l] = carried_steps_[l] + (l < levels_.size() ? levels_[l].steps : 0);
    stats_.step_seconds_per_level[l] =
        carried_seconds_[l] + (l < levels_.size() ? levels_[l].sweep_seconds : 0.0);
  }
  stats_.solve_seconds = now() - t_solve;
  stats_.comm_seconds = comm_time_;
  stats_.step_seconds = sweep_time_;
  return result;
}

}  // namespace weft::mgrit
