// `weft predict`: its flags (those of `weft train` and its own); weft-nn runs it
// (predict_run.cpp).
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli_support.hpp"
#include "predict.hpp"
#include "programs.hpp"
#include "train_command.hpp"
#include "weft/util/mpi.hpp"

namespace weft::cli {

Subcommand add_predict_command(CLI::App& weft) {
  CLI::App* cmd = weft.add_subcommand(
      "predict",
      "Predict the time per training batch (forward, backward, optimizer step) at P = 1, 2, 4, "
      "... ranks for the network and MGRIT flags of `weft train`: measures the model's step "
      "costs here and replays the solvers' schedule on virtual clocks.");
  auto flags = add_network_flags(*cmd);
  auto extra = std::make_shared<std::map<std::string, std::string>>();
  auto opt = [&](const char* name, const char* type, const std::string& help) {
    return cmd->add_option(name, (*extra)[name], help)->type_name(type);
  };
  opt("--json", "PATH", "write the predictions as JSON");
  opt("--ranks", "INT,INT...", "rank counts to predict (default 1, 2, 4, ... up to min(1024, N))");
  opt("--latency-us", "X",
      "message latency in microseconds (default: ping-pong when run on 2 ranks, else 2)");
  opt("--bandwidth-gbs", "X",
      "message bandwidth in GB/s (default: ping-pong when run on 2 ranks, else 5)");
  opt("--weak", "LAYERS_PER_RANK",
      "weak scaling: LAYERS_PER_RANK x P layers at P ranks (--model resnet; costs measured on "
      "--steps layers, extended layer by layer)");
  opt("--contention", "measure|off|X",
      "how much slower a rank computes when P ranks keep P cores busy: measure (default: the "
      "serial batch timed beside P - 1 copies of itself, up to this machine's cores), off (every "
      "rank as fast as one alone), or a factor X >= 1 for every P > 1");
  opt("--repeats", "INT",
      "measuring passes, each timing every figure; a figure is its median over the passes "
      "(default 9; fewer, but at least 3, once 20 s have gone)");
  return Subcommand{
      cmd,
      [flags, extra, cmd](MPI_Comm comm) {
        PredictConfig p;
        p.train = resolve_network_flags(*flags);
        if (p.train.iterations.forward || p.train.iterations.backward)
          invalid_value(p.train.iterations.forward ? "--fwd-iters" : "--bwd-iters", "auto",
                        "an integer >= 1 (weft predict prices a fixed count)");
        auto given = [&](const char* name) { return cmd->count(name) > 0; };
        auto text = [&](const char* name) { return extra->at(name); };
        if (given("--json")) p.json_path = text("--json");
        if (given("--ranks"))
          p.ranks = parse_int_list("--ranks", text("--ranks"), 1, "rank counts >= 1");
        if (given("--latency-us")) {
          p.latency = 1e-6 * parse_number("--latency-us", text("--latency-us"), "a number >= 0");
          if (p.latency < 0) invalid_value("--latency-us", text("--latency-us"), "a number >= 0");
        }
        if (given("--bandwidth-gbs")) {
          p.bandwidth =
              1e9 * parse_number("--bandwidth-gbs", text("--bandwidth-gbs"), "a number > 0");
          if (!(p.bandwidth > 0))
            invalid_value("--bandwidth-gbs", text("--bandwidth-gbs"), "a number > 0");
        }
        if (given("--weak"))
          p.weak = parse_integer("--weak", text("--weak"), 1, "an integer >= 1 (layers per rank)");
        if (given("--contention")) {
          const std::string v = text("--contention");
          const char* accepted = "measure, off or a number >= 1";
          if (v == "off")
            p.contention = 0;
          else if (v != "measure") {
            p.contention = parse_number("--contention", v, accepted);
            if (!(p.contention >= 1) || !std::isfinite(p.contention))
              invalid_value("--contention", v, accepted);
          }
        }
        if (given("--repeats"))
          p.repeats = static_cast<int>(
              parse_integer("--repeats", text("--repeats"), 1, "an integer in [1, 1000]", 1000));
        // Flags of `weft train` that do not change the time per batch predict models.
        std::vector<std::string> ignored;
        for (const char* flag : {"--fwd-tol", "--bwd-tol", "--lr", "--lr-schedule", "--momentum"})
          if (given(flag)) ignored.push_back(flag);
        if (!ignored.empty() && mpi::rank(comm) == 0)
          std::fprintf(stderr,
                       "weft predict: warning: ignoring %s (predictions run the fixed iteration "
                       "counts --fwd-iters/--bwd-iters; the learning rate does not change the "
                       "time per batch)\n",
                       join(ignored).c_str());
        return network_runners().predict(p, comm);
      },
      network_program};
}

}  // namespace weft::cli
