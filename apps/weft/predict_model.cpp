// `weft predict`: one training batch at P ranks as every rank's events (the solvers' recorded
// schedules plus the work around them, as LayerParallel does it), priced on virtual clocks.
#include <algorithm>
#include <numeric>

#include "predict.hpp"
#include "weft/mgrit/hierarchy.hpp"

namespace weft::cli {
namespace {

using mgrit::Event;
using mgrit::index_t;

Event compute(double seconds) {
  Event e;
  e.kind = Event::Kind::Compute;
  e.seconds = seconds;
  return e;
}

Event message(Event::Kind kind, int peer, std::size_t bytes) {
  Event e;
  e.kind = kind;
  e.peer = peer;
  e.tag = 1;
  e.bytes = bytes;
  return e;
}

Event reduction() {
  Event e;
  e.kind = Event::Kind::Reduce;
  return e;
}

// The nn layer's block distribution (nn/placement.hpp): rank r owns points from
// point_begin(r) and the layers of the steps into them.
index_t point_begin(index_t points, int ranks, int r) {
  return mgrit::Distribution::block_begin(points, ranks, r);
}
index_t layer_begin(index_t points, int ranks, int r) {
  return r == 0 ? 0 : point_begin(points, ranks, r) - 1;
}

}  // namespace

double step_seconds(const MeasuredCosts& m, const Event& e, bool cache_graphs) {
  const bool forward = e.direction == mgrit::Direction::Forward;
  const index_t a = forward ? e.from : e.to, b = forward ? e.to : e.from;
  const bool fine = b == a + 1;
  auto layer_cost = [&](index_t n) {
    const auto k = static_cast<size_t>(n);
    if (forward) return e.done && e.level == 0 ? m.forward_record[k] : m.forward[k];
    if (!fine) return m.adjoint_build[k];
    if (e.done && e.level == 0) return m.adjoint_final[k];
    return cache_graphs ? m.adjoint_reuse[k] : m.adjoint_build[k];
  };
  // A step from a to b evaluates the first layer of each run of residual steps once (with step
  // h times the run's length) and every transition inside (nn Chain::segments).
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
  if (e.level > 0) s += m.axpy[static_cast<size_t>(forward ? b : a)];
  return s;
}

mgrit::Schedule batch_schedule(const TrainConfig& c, const MeasuredCosts& m, int ranks) {
  const index_t N = m.layers, points = N + 1;
  mgrit::Options fwd = c.parallel.forward_solver_options();
  if (m.has_buffers && fwd.max_levels() > 1) fwd.final_sweep(mgrit::FinalSweep::CF);
  mgrit::Options bwd = c.parallel.backward_solver_options();
  std::vector<index_t> blocks;
  for (int r = 0; r < ranks; ++r) blocks.push_back(layer_begin(points, ranks, r));
  bwd.rank_blocks(blocks);
  // Every level holds fine-sized states (no spatial coarsening in these networks yet).
  const mgrit::StateBytes bytes = [&](index_t p, int) {
    return m.state_bytes[static_cast<size_t>(p)];
  };
  const auto last = static_cast<size_t>(ranks - 1);

  mgrit::Schedule s(static_cast<size_t>(ranks));
  s[0].push_back(compute(m.open_forward));
  mgrit::append(s, mgrit::record_schedule(N, fwd, ranks, bytes), 0);
  // Each rank receives x at its first point's predecessor for the adjoint (exchange_boundary).
  for (int r = 0; r < ranks; ++r) {
    auto& ev = s[static_cast<size_t>(r)];
    if (r + 1 < ranks)
      ev.push_back(
          message(Event::Kind::Send, r + 1, bytes(point_begin(points, ranks, r + 1) - 1, 0)));
    if (r > 0)
      ev.push_back(message(Event::Kind::Recv, r - 1, bytes(point_begin(points, ranks, r) - 1, 0)));
  }
  // Close, loss and its gradient on the output rank; the loss value and λ_N's health shared.
  s[last].push_back(compute(m.close));
  for (auto& ev : s) {
    ev.push_back(reduction());
    ev.push_back(reduction());
  }
  mgrit::append(s, mgrit::record_schedule(N, bwd, ranks, bytes), 10000);
  s[0].push_back(compute(m.open_backward));
  // Each rank steps the optimizer over its own parameters.
  const double total =
      std::accumulate(m.parameters.begin(), m.parameters.end(), m.open_close_parameters);
  for (int r = 0; r < ranks; ++r) {
    const index_t lo = layer_begin(points, ranks, r),
                  hi = r + 1 < ranks ? layer_begin(points, ranks, r + 1) : N;
    double mine = std::accumulate(m.parameters.begin() + lo, m.parameters.begin() + hi, 0.0);
    if (r == 0) mine += m.open_parameters;
    if (r == ranks - 1) mine += m.open_close_parameters - m.open_parameters;
    s[static_cast<size_t>(r)].push_back(compute(total > 0 ? m.optimizer * mine / total : 0.0));
  }
  return s;
}

Prediction predict_batch(const TrainConfig& c, const MeasuredCosts& m, const LinkCosts& link,
                         int ranks) {
  mgrit::CostModel cost;
  cost.latency = link.latency;
  cost.bandwidth = link.bandwidth;
  const bool cache = c.parallel.cache_graphs();
  cost.step_seconds = [&](const Event& e) { return step_seconds(m, e, cache); };
  const mgrit::Timeline t = mgrit::simulate(batch_schedule(c, m, ranks), cost);
  Prediction p;
  p.ranks = ranks;
  p.batch_seconds = t.makespan;
  p.busiest_seconds = *std::max_element(t.busy.begin(), t.busy.end());
  return p;
}

}  // namespace weft::cli
