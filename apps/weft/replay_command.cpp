#include "replay_command.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "weft/mgrit/replay.hpp"
#include "weft/report/trace_file.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace weft::cli {
namespace {

using json = nlohmann::json;

struct ReplayArgs {
  std::string input;
  std::string latency_us, bandwidth_gbs;
  std::string json_path;
  std::vector<std::string> costs_from;
};

std::string report(const mgrit::Replay& r, const mgrit::ReplayLink& link,
                   const std::vector<std::string>& costs_from) {
  std::string s = fmt::format(
      "weft replay: {} rank(s), {} traced batch(es); one core per rank, messages {:.3g} us + "
      "bytes / {:.3g} GB/s\n",
      r.ranks, r.batches.size(), link.latency * 1e6, link.bandwidth / 1e9);
  s += fmt::format("  {:>6} {:>12} {:>12} {:>12} {:>12} {:>12}\n", "batch", "replayed ms",
                   "forward", "backward", "optimizer", "measured ms");
  for (const auto& b : r.batches)
    s += fmt::format("  {:>6} {:>12.2f} {:>12.2f} {:>12.2f} {:>12.2f} {:>12.2f}\n", b.index,
                     1e3 * b.batch, 1e3 * b.forward, 1e3 * b.backward, 1e3 * b.optimizer,
                     1e3 * b.measured);
  s += fmt::format("  {:>6} {:>12.2f} {:>12.2f} {:>12.2f} {:>12.2f} {:>12.2f}\n", "median",
                   1e3 * r.median_batch, 1e3 * r.median_forward, 1e3 * r.median_backward,
                   1e3 * r.median_optimizer, 1e3 * r.measured_median_batch);
  s += fmt::format("  replayed / measured: {:.3f}\n",
                   r.measured_median_batch > 0 ? r.median_batch / r.measured_median_batch : 0.0);
  if (!costs_from.empty())
    s += fmt::format(
        "  costs from {}: {:.1f} % of the traced compute time priced by its own step, {:.1f} % "
        "by a step of its family; the traced steps took {:.3f}x their reference cost "
        "(contention), and the time the reference does not price is divided by that\n",
        fmt::join(costs_from, ", "), 100 * r.priced_by_key, 100 * r.priced_by_family, r.contention);
  return s;
}

json to_json(const mgrit::Replay& r, const mgrit::ReplayLink& link,
             const std::vector<std::string>& costs_from) {
  json batches = json::array();
  for (const auto& b : r.batches)
    batches.push_back({{"index", b.index},
                       {"batch_ms", 1e3 * b.batch},
                       {"forward_ms", 1e3 * b.forward},
                       {"backward_ms", 1e3 * b.backward},
                       {"optimizer_ms", 1e3 * b.optimizer},
                       {"measured_batch_ms", 1e3 * b.measured}});
  json busy = json::array();
  for (double b : r.busy) busy.push_back(1e3 * b);
  json out = {{"ranks", r.ranks},
              {"latency_us", link.latency * 1e6},
              {"bandwidth_gbs", link.bandwidth / 1e9},
              {"batches", batches},
              {"median_batch_ms", 1e3 * r.median_batch},
              {"median_forward_ms", 1e3 * r.median_forward},
              {"median_backward_ms", 1e3 * r.median_backward},
              {"median_optimizer_ms", 1e3 * r.median_optimizer},
              {"measured_median_batch_ms", 1e3 * r.measured_median_batch},
              {"busy_ms_per_rank", busy}};
  if (!costs_from.empty()) {
    out["costs_from"] = costs_from;
    out["contention"] = r.contention;
    out["priced_by_key"] = r.priced_by_key;
    out["priced_by_family"] = r.priced_by_family;
  }
  return out;
}

std::string run(const ReplayArgs& a) {
  mgrit::ReplayLink link;
  if (!a.latency_us.empty()) {
    link.latency = 1e-6 * parse_number("--latency-us", a.latency_us, "a number >= 0");
    if (link.latency < 0) invalid_value("--latency-us", a.latency_us, "a number >= 0");
  }
  if (!a.bandwidth_gbs.empty()) {
    link.bandwidth = 1e9 * parse_number("--bandwidth-gbs", a.bandwidth_gbs, "a number > 0");
    if (!(link.bandwidth > 0)) invalid_value("--bandwidth-gbs", a.bandwidth_gbs, "a number > 0");
  }
  const report::TraceFile trace = report::read_trace(a.input);
  // The references' ranks, all of them, priced together: medians over every run given.
  std::unique_ptr<mgrit::ReferenceCosts> reference;
  if (!a.costs_from.empty()) {
    std::vector<std::vector<mgrit::TracedEvent>> ranks;
    for (const std::string& path : a.costs_from) {
      report::TraceFile costs = report::read_trace(path);
      if (costs.model != trace.model)
        invalid_value("--costs-from", path,
                      "a trace of the same network (this one traced --model '" + costs.model +
                          "', the replayed run '" + trace.model + "')");
      for (auto& events : costs.events) ranks.push_back(std::move(events));
    }
    reference = std::make_unique<mgrit::ReferenceCosts>(ranks);
  }
  mgrit::Replay r;
  try {
    r = mgrit::replay(trace.events, link, reference.get());
  } catch (const BadData& e) {
    throw InvalidOption("input '" + a.input + "': " + e.what());
  }
  if (!a.json_path.empty()) {
    std::ofstream out(a.json_path);
    out << to_json(r, link, a.costs_from).dump(2) << "\n";
    out.flush();
    if (!out)
      throw InvalidOption("option --json: '" + a.json_path +
                          "' is invalid (cannot write it); accepted: a writable path");
  }
  return report(r, link, a.costs_from);
}

// Rank 0 replays; every rank learns the verdict.
int run_replay(const ReplayArgs& a, MPI_Comm comm) {
  const std::string report_text = run_on_rank_zero(comm, [&] { return run(a); });
  if (mpi::rank(comm) == 0) {
    std::fputs(report_text.c_str(), stdout);
    std::fflush(stdout);
  }
  return kExitOk;
}

}  // namespace

Subcommand add_replay_command(CLI::App& weft) {
  CLI::App* cmd = weft.add_subcommand(
      "replay",
      "Replay a trace of `weft train --trace` on virtual clocks: the time per batch with one "
      "core per rank (each event costs its own CPU time; waits follow the messages).");
  auto a = std::make_shared<ReplayArgs>();
  cmd->add_option("trace", a->input, "the trace file (weft train --trace FILE)")
      ->required()
      ->type_name("FILE");
  cmd->add_option("--latency-us", a->latency_us, "message latency in microseconds (default 2)")
      ->type_name("X");
  cmd->add_option("--bandwidth-gbs", a->bandwidth_gbs, "message bandwidth in GB/s (default 5)")
      ->type_name("X");
  cmd->add_option("--json", a->json_path, "write the replay as JSON")->type_name("PATH");
  cmd->add_option("--costs-from", a->costs_from,
                  "price each computation at its CPU time in this trace instead (the same "
                  "network traced at one rank; repeat the flag for several runs: their "
                  "medians): the replay without the contention of a run with more ranks than "
                  "cores")
      ->type_name("FILE")
      ->allow_extra_args(false);
  return Subcommand{cmd, [a](MPI_Comm comm) { return run_replay(*a, comm); }, nullptr};
}

}  // namespace weft::cli
