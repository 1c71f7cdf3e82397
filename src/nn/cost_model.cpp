// The cost model of a training batch (weft/nn/cost_model.hpp): one batch at P ranks as every
// rank's events (the solvers' recorded schedules plus the work around them, as LayerParallel
// does it), priced on virtual clocks.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <string>
#include <utility>

#include "placement.hpp"
#include "weft/mgrit/hierarchy.hpp"
#include "weft/nn/cost_model.hpp"
#include "weft/util/clock.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace weft::nn {
namespace {

using mgrit::Event;
using mgrit::index_t;

Event compute(double seconds) {
  return Event::compute(seconds);
}
Event message(Event::Kind kind, int peer, std::size_t bytes) {
  return Event::message(kind, peer, kOutsideTag, bytes);
}
Event reduction(std::size_t bytes = 0) {
  return Event::reduce(kOutsideTag, bytes);
}

// The nn layer's placement (nn/placement.hpp): rank r owns points from first[r] and the layers
// of the steps into them.
using FirstPoints = std::vector<index_t>;
FirstPoints first_points(const LayerParallelOptions& c, const MeasuredCosts& m, int ranks) {
  return detail::Placement::first_points(m.layers, ranks, c.layer_costs());
}
index_t layer_begin(const FirstPoints& first, int r) {
  return r == 0 ? 0 : first[static_cast<size_t>(r)] - 1;
}

/// How many times `level`'s states are restricted in space in the solve of `direction`.
int depth_of(const MeasuredCosts& m, mgrit::Direction direction, int level) {
  const auto& d = direction == mgrit::Direction::Forward ? m.forward_depth : m.adjoint_depth;
  if (d.empty() || level <= 0) return 0;
  return d[std::min(static_cast<size_t>(level), d.size() - 1)];
}

/// The bytes of point p's state on `level` of the solve of `direction`.
std::size_t state_bytes(const MeasuredCosts& m, mgrit::Direction direction, index_t p, int level) {
  const int d = depth_of(m, direction, level);
  const auto& bytes = d == 0 ? m.state_bytes : m.spatial[static_cast<size_t>(d - 1)].state_bytes;
  return bytes[static_cast<size_t>(p)];
}

}  // namespace

std::vector<double> layer_costs(const MeasuredCosts& m) {
  std::vector<double> out(static_cast<size_t>(m.layers), 0.0);
  for (size_t k = 0; k < out.size(); ++k)
    out[k] =
        m.forward.at(k) + m.forward_record.at(k) + m.adjoint_reuse.at(k) + m.adjoint_final.at(k);
  return out;
}

double step_seconds(const MeasuredCosts& m, const Event& e, bool cache_graphs, bool isolated) {
  const int d = depth_of(m, e.direction, e.level);
  const SpatialCosts* coarse = d > 0 ? &m.spatial[static_cast<size_t>(d - 1)] : nullptr;
  if (e.kind == Event::Kind::Restrict || e.kind == Event::Kind::Interpolate) {
    // A transfer restricts or interpolates where the coarse level is one deeper in space, and
    // is a copy elsewhere (not priced, as the other vector operations).
    if (!coarse || depth_of(m, e.direction, e.level - 1) == d) return 0.0;
    const auto p = static_cast<size_t>(e.from);
    return e.kind == Event::Kind::Restrict ? coarse->restriction[p] : coarse->interpolation[p];
  }
  const bool forward = e.direction == mgrit::Direction::Forward;
  const index_t a = forward ? e.from : e.to, b = forward ? e.to : e.from;
  const bool fine = b == a + 1;
  // A coarse adjoint step of one segment keeps its graph from its first visit in the batch
  // (BatchSolve, cache_graphs); one across a transition rebuilds it every time.
  bool one_segment = true;
  if (b > a + 1)
    for (index_t n = a; n < b; ++n)
      if (m.transition[static_cast<size_t>(n)]) one_segment = false;
  const bool kept = !forward && !fine && cache_graphs && e.visit > 0 && one_segment;
  auto layer_cost = [&](index_t n) {
    const auto k = static_cast<size_t>(n);
    if (coarse)
      return forward ? coarse->forward[k]
             : kept  ? coarse->adjoint_reuse[k]
                     : coarse->adjoint_build[k];
    if (forward) return e.done && e.level == 0 ? m.forward_record[k] : m.forward[k];
    if (!fine) return kept ? m.adjoint_reuse[k] : m.adjoint_build[k];
    if (e.done && e.level == 0) return m.adjoint_final[k];
    return cache_graphs ? m.adjoint_reuse[k] : m.adjoint_build[k];
  };
  // A step from a to b evaluates the first layer of each run of residual steps once (with step
  // h times the run's length) and every transition inside (nn Chain::segments); a recurrent
  // network's coarse step is one cell evaluation (one run without transitions).
  double s = 0;
  index_t start = a;
  for (index_t n = a; n < b; ++n)
    if (m.transition[static_cast<size_t>(n)]) {
      if (n > start) s += layer_cost(start);
      s += layer_cost(n);
      start = n + 1;
    }
  if (b > start) s += layer_cost(start);
  // Coarse levels add the FAS right-hand side to every step's result.
  const auto q = static_cast<size_t>(forward ? b : a);
  if (e.level > 0) s += coarse ? coarse->axpy[q] : m.axpy[q];
  const auto& in_situ = forward ? m.forward_in_situ : m.adjoint_in_situ;
  if (!isolated && static_cast<size_t>(e.level) < in_situ.size())
    s *= in_situ[static_cast<size_t>(e.level)];
  return s;
}

namespace {

/// The adjoint's steps on levels coarsened in space linearize at the forward state restricted
/// to their depth, computed at its first use in the batch and kept (BatchSolve::forward_state):
/// a compute event before each first use.
void add_forward_state_restrictions(mgrit::Schedule& adjoint, const MeasuredCosts& m) {
  for (auto& events : adjoint) {
    std::set<std::pair<int, index_t>> kept;
    std::vector<Event> out;
    for (const Event& e : events) {
      const int d = e.kind == Event::Kind::Step ? depth_of(m, e.direction, e.level) : 0;
      double seconds = 0;
      for (int k = 1; k <= d; ++k)
        if (kept.insert({k, e.to}).second)
          seconds += m.spatial[static_cast<size_t>(k - 1)].restriction[static_cast<size_t>(e.to)];
      if (seconds > 0) {  // tagged with the step's level and direction (in-situ accounting)
        Event c = compute(seconds);
        c.level = e.level;
        c.direction = e.direction;
        out.push_back(c);
      }
      out.push_back(e);
    }
    events = std::move(out);
  }
}

/// Each rank receives x at its first point's predecessor for the adjoint (exchange_boundary).
void exchange_boundary(mgrit::Schedule& s, const MeasuredCosts& m, const FirstPoints& first) {
  const int ranks = static_cast<int>(first.size()) - 1;
  for (int r = 0; r < ranks; ++r) {
    auto& ev = s[static_cast<size_t>(r)];
    const auto before = [&](int q) {
      return m.state_bytes[static_cast<size_t>(first[static_cast<size_t>(q)] - 1)];
    };
    if (r + 1 < ranks) ev.push_back(message(Event::Kind::Send, r + 1, before(r + 1)));
    if (r > 0) ev.push_back(message(Event::Kind::Recv, r - 1, before(r)));
  }
}

/// The solvers' options as the nn module builds them: the adjoint's rank blocks put each
/// boundary one point left of the forward's (nn/placement.hpp).
std::pair<mgrit::Options, mgrit::Options> solver_options(const LayerParallelOptions& c,
                                                         const MeasuredCosts& m, int ranks) {
  const FirstPoints first = first_points(c, m, ranks);
  mgrit::Options fwd = c.forward_solver_options();
  if (m.has_buffers && fwd.max_levels() > 1) fwd.final_sweep(mgrit::FinalSweep::CF);
  if (!c.layer_costs().empty()) fwd.rank_blocks({first.begin(), first.end() - 1});
  mgrit::Options bwd = c.backward_solver_options();
  std::vector<index_t> blocks;
  for (int r = 0; r < ranks; ++r) blocks.push_back(layer_begin(first, r));
  bwd.rank_blocks(blocks);
  return {fwd, bwd};
}

mgrit::Schedule solve_schedule(const MeasuredCosts& m, const mgrit::Options& options, int ranks) {
  const mgrit::Direction direction = options.direction();
  mgrit::Schedule s = mgrit::record_schedule(m.layers, options, ranks, [&](index_t p, int level) {
    return state_bytes(m, direction, p, level);
  });
  if (direction == mgrit::Direction::Reverse) add_forward_state_restrictions(s, m);
  return s;
}

using PhaseEnds = std::vector<std::array<std::size_t, 2>>;

/// Records every rank's event count as the end of phase `k`.
void mark_phase(const mgrit::Schedule& s, PhaseEnds* ends, size_t k) {
  if (!ends) return;
  ends->resize(s.size());
  for (size_t r = 0; r < s.size(); ++r) (*ends)[r][k] = s[r].size();
}

/// gru/lstm (nn/recurrent_solve.cpp): replicated, the sequence steps spread over the ranks.
mgrit::Schedule recurrent_schedule(const LayerParallelOptions& c, const MeasuredCosts& m, int ranks,
                                   PhaseEnds* ends) {
  const auto [fwd, bwd] = solver_options(c, m, ranks);
  const std::size_t state = m.state_bytes.front();
  mgrit::Schedule s(static_cast<size_t>(ranks));
  for (auto& ev : s) ev.push_back(compute(m.fixed_forward));
  mgrit::append(s, solve_schedule(m, fwd, ranks), 0);
  exchange_boundary(s, m, first_points(c, m, ranks));
  for (auto& ev : s) {
    ev.push_back(reduction(state));  // the final state broadcast from the last rank
  }
  mark_phase(s, ends, 0);
  for (auto& ev : s) {
    ev.push_back(compute(m.fixed_backward));
    ev.push_back(compute(m.close));  // head, loss and backward, every rank
  }
  mgrit::append(s, solve_schedule(m, bwd, ranks), kAdjointTags);
  for (auto& ev : s) {
    ev.push_back(reduction(state));  // the initial state's gradient broadcast from rank 0
    ev.push_back(reduction(static_cast<std::size_t>(m.gradient_bytes)));  // fused all-reduce
  }
  mark_phase(s, ends, 1);
  for (auto& ev : s) ev.push_back(compute(m.fixed_optimizer + m.optimizer));
  return s;
}

}  // namespace

mgrit::Schedule batch_schedule(const LayerParallelOptions& c, const MeasuredCosts& m, int ranks,
                               PhaseEnds* phase_ends) {
  if (m.recurrent) return recurrent_schedule(c, m, ranks, phase_ends);
  const index_t N = m.layers;
  const FirstPoints first = first_points(c, m, ranks);
  const auto [fwd, bwd] = solver_options(c, m, ranks);
  const auto last = static_cast<size_t>(ranks - 1);

  mgrit::Schedule s(static_cast<size_t>(ranks));
  for (auto& ev : s) ev.push_back(compute(m.fixed_forward));
  s[0].push_back(compute(m.open_forward));
  mgrit::append(s, solve_schedule(m, fwd, ranks), 0);
  exchange_boundary(s, m, first);
  mark_phase(s, phase_ends, 0);
  for (auto& ev : s) ev.push_back(compute(m.fixed_backward));
  // Close, loss and its gradient on the output rank; the loss value and λ_N's health shared.
  s[last].push_back(compute(m.close));
  for (auto& ev : s) {
    ev.push_back(reduction());
    ev.push_back(reduction());
  }
  mgrit::append(s, solve_schedule(m, bwd, ranks), kAdjointTags);
  s[0].push_back(compute(m.open_backward));
  mark_phase(s, phase_ends, 1);
  // Each rank steps the optimizer over its own parameters.
  const double total =
      std::accumulate(m.parameters.begin(), m.parameters.end(), m.open_close_parameters);
  for (int r = 0; r < ranks; ++r) {
    const index_t lo = layer_begin(first, r), hi = r + 1 < ranks ? layer_begin(first, r + 1) : N;
    double mine = std::accumulate(m.parameters.begin() + lo, m.parameters.begin() + hi, 0.0);
    if (r == 0) mine += m.open_parameters;
    if (r == ranks - 1) mine += m.open_close_parameters - m.open_parameters;
    s[static_cast<size_t>(r)].push_back(
        compute(m.fixed_optimizer + (total > 0 ? m.optimizer * mine / total : 0.0)));
  }
  return s;
}

Prediction predict_batch(const LayerParallelOptions& c, const MeasuredCosts& m,
                         const LinkCosts& link, int ranks) {
  mgrit::CostModel cost;
  cost.latency = link.latency;
  cost.bandwidth = link.bandwidth;
  // gru/lstm keep no graphs across adjoint iterations (their final sweep's figures say whether
  // it reuses the forward's graph).
  const bool cache = c.cache_graphs() && !m.recurrent;
  cost.step_seconds = [&](const Event& e) { return step_seconds(m, e, cache); };
  PhaseEnds ends;
  const mgrit::Schedule s = batch_schedule(c, m, ranks, &ends);
  const mgrit::Timeline t = mgrit::simulate(s, cost);
  // Each phase's end: the batch's events up to it, on the same clocks.
  auto until = [&](size_t k) {
    mgrit::Schedule prefix(s.size());
    for (size_t r = 0; r < s.size(); ++r)
      prefix[r].assign(s[r].begin(), s[r].begin() + static_cast<std::ptrdiff_t>(ends[r][k]));
    return mgrit::simulate(prefix, cost).makespan;
  };
  Prediction p;
  p.ranks = ranks;
  p.batch_seconds = t.makespan;
  p.busiest_seconds = *std::max_element(t.busy.begin(), t.busy.end());
  // The most layers on one rank (the blocks of nn/placement.hpp) as a share of the model.
  const FirstPoints first = first_points(c, m, ranks);
  index_t most = 0;
  for (int r = 0; r < ranks; ++r) {
    const index_t lo = layer_begin(first, r),
                  hi = r + 1 < ranks ? layer_begin(first, r + 1) : m.layers;
    most = std::max(most, hi - lo);
  }
  p.memory_bytes = m.process_bytes + m.model_bytes * static_cast<double>(most) /
                                         static_cast<double>(std::max<index_t>(1, m.layers));
  const double forward_end = until(0), backward_end = until(1);
  p.forward_seconds = forward_end;
  p.backward_seconds = backward_end - forward_end;
  p.optimizer_seconds = t.makespan - backward_end;
  return p;
}

MeasuredCosts with_layers(const MeasuredCosts& m, std::int64_t layers, double t_final) {
  MeasuredCosts out = m;
  const auto n = static_cast<size_t>(layers);
  const auto last = static_cast<size_t>(m.layers - 1);
  auto per_layer = [&](auto& v, const auto& from) {
    v.resize(n);
    for (size_t k = 0; k < n; ++k) v[k] = from[std::min(k, last)];
  };
  auto per_point = [&](auto& v, const auto& from) {
    v.resize(n + 1);
    for (size_t k = 0; k <= n; ++k) v[k] = from[std::min(k, last + 1)];
  };
  out.layers = layers;
  out.model_bytes = m.model_bytes * static_cast<double>(layers) / static_cast<double>(m.layers);
  per_layer(out.transition, m.transition);
  per_layer(out.forward, m.forward);
  per_layer(out.forward_record, m.forward_record);
  per_layer(out.adjoint_reuse, m.adjoint_reuse);
  per_layer(out.adjoint_final, m.adjoint_final);
  per_layer(out.adjoint_build, m.adjoint_build);
  per_layer(out.parameters, m.parameters);
  per_point(out.axpy, m.axpy);
  per_point(out.state_bytes, m.state_bytes);
  out.step_size.assign(n, t_final / static_cast<double>(layers));
  for (size_t d = 0; d < m.spatial.size(); ++d) {
    per_point(out.spatial[d].state_bytes, m.spatial[d].state_bytes);
    per_layer(out.spatial[d].forward, m.spatial[d].forward);
    per_layer(out.spatial[d].adjoint_build, m.spatial[d].adjoint_build);
    per_layer(out.spatial[d].adjoint_reuse, m.spatial[d].adjoint_reuse);
    per_point(out.spatial[d].axpy, m.spatial[d].axpy);
    per_point(out.spatial[d].restriction, m.spatial[d].restriction);
    per_point(out.spatial[d].interpolation, m.spatial[d].interpolation);
  }
  return out;
}

MeasuredCosts slowed(const MeasuredCosts& m, double factor) {
  if (!(factor > 0) || !std::isfinite(factor))
    throw InvalidOption("slowed", "factor",
                        "is " + std::to_string(factor) + "; accepted: a finite number > 0");
  MeasuredCosts out = m;
  auto scale = [factor](std::vector<double>& v) {
    for (double& x : v) x *= factor;
  };
  for (auto* v : {&out.forward, &out.forward_record, &out.adjoint_reuse, &out.adjoint_final,
                  &out.adjoint_build, &out.axpy})
    scale(*v);
  for (SpatialCosts& d : out.spatial)
    for (auto* v : {&d.forward, &d.adjoint_build, &d.adjoint_reuse, &d.axpy, &d.restriction,
                    &d.interpolation})
      scale(*v);
  for (double* x : {&out.open_forward, &out.open_backward, &out.close, &out.optimizer,
                    &out.fixed_forward, &out.fixed_backward, &out.fixed_optimizer})
    *x *= factor;
  return out;
}

namespace {
/// Half the median round trip of `bytes` between ranks 0 and 1 (others idle), on every rank.
double half_round_trip(MPI_Comm comm, std::size_t bytes, int repeats) {
  const int rank = mpi::rank(comm);
  std::vector<char> buffer(std::max<std::size_t>(bytes, 1));
  std::vector<double> t;
  for (int k = 0; k <= repeats; ++k) {
    const double t0 = clock::now();
    if (rank == 0) {
      mpi::check(MPI_Send(buffer.data(), static_cast<int>(bytes), MPI_BYTE, 1, 7, comm), "ping");
      mpi::check(
          MPI_Recv(buffer.data(), static_cast<int>(bytes), MPI_BYTE, 1, 7, comm, MPI_STATUS_IGNORE),
          "pong");
    } else if (rank == 1) {
      mpi::check(
          MPI_Recv(buffer.data(), static_cast<int>(bytes), MPI_BYTE, 0, 7, comm, MPI_STATUS_IGNORE),
          "ping");
      mpi::check(MPI_Send(buffer.data(), static_cast<int>(bytes), MPI_BYTE, 0, 7, comm), "pong");
    }
    if (k > 0) t.push_back((clock::now() - t0) / 2);
  }
  std::sort(t.begin(), t.end());
  double mid = t[t.size() / 2];
  mpi::check(MPI_Bcast(&mid, 1, MPI_DOUBLE, 0, comm), "MPI_Bcast (ping-pong)");
  return mid;
}
}  // namespace

LinkCosts measure_link(MPI_Comm comm, std::size_t state_bytes) {
  LinkCosts link;
  if (mpi::size(comm) < 2) {
    link.latency = kDefaultLatency;
    link.bandwidth = kDefaultBandwidth;
    link.source = "defaults (run on 2 ranks to measure)";
    return link;
  }
  const double small = half_round_trip(comm, 8, 200);
  const double large = half_round_trip(comm, state_bytes, 20);
  link.latency = small;
  link.bandwidth = large > small ? static_cast<double>(state_bytes) / (large - small) : 1e12;
  link.source = "ping-pong between ranks 0 and 1 (8 B and " + std::to_string(state_bytes) + " B)";
  return link;
}

}  // namespace weft::nn
