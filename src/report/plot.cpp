// Pictures of weft's outputs (weft/report/plot.hpp): each kind reads its inputs into data
// files and a gnuplot script in a scratch folder, then runs gnuplot.
#include "weft/report/plot.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "weft/report/trace_file.hpp"
#include "weft/util/error.hpp"

namespace weft::report {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Bad input files: one line, exit code 2 (weft::InvalidOption).
[[noreturn]] void bad_input(const std::string& path, const std::string& why) {
  throw InvalidOption("input '" + path + "': " + why);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad_input(path, std::string("cannot read it: ") + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

json parse_json(const std::string& path, const std::string& text, const std::string& what,
                const std::string& where = "") {
  try {
    return json::parse(text);
  } catch (const json::exception&) {
    bad_input(path, (where.empty() ? "" : where + ": ") + "not valid JSON; accepted: " + what);
  }
}

// A number field of `j`, or the reason it is not one.
double number_field(const json& j, const char* key, const std::string& path,
                    const std::string& where) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number())
    bad_input(path, where + ": no number \"" + key + "\"");
  return j[key].get<double>();
}

// Text safe inside a gnuplot single-quoted string ('' is a quote there).
std::string gp_string(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string label_of(const std::string& path) {
  return fs::path(path).filename().string();
}

// A scratch directory for the data and the script, removed afterwards.
class Scratch {
 public:
  Scratch() {
    std::string pattern = (fs::temp_directory_path() / "weft-plot-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw Error("plot: cannot create a temporary directory");
    dir_ = pattern;
  }
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  std::string write(const std::string& name, const std::string& content) const {
    const fs::path p = dir_ / name;
    std::ofstream out(p);
    out << content;
    if (!out) throw Error("plot: cannot write " + p.string());
    return p.string();
  }
  fs::path dir() const { return dir_; }

 private:
  fs::path dir_;
};

// The terminal line for the output's extension (2 panels side by side are wider).
std::string terminal(const std::string& output, int panels) {
  const std::string ext = fs::path(output).extension().string();
  const int width = panels > 1 ? 420 * panels : 640, height = 400;
  if (ext == ".png")
    return fmt::format("set terminal pngcairo size {},{} font 'sans,10' noenhanced", width, height);
  if (ext == ".svg")
    return fmt::format("set terminal svg size {},{} font 'sans,10' noenhanced", width, height);
  throw InvalidOption("plot", "output",
                      "'" + output + "' is invalid; accepted: a path ending in .png or .svg");
}

void run_gnuplot(const Scratch& scratch, const std::string& script, const std::string& output) {
  const std::string path = scratch.write("plot.gp", script);
  const std::string err = (scratch.dir() / "gnuplot.err").string();
  const std::string command = "gnuplot " + path + " 2> " + err;
  const int status = std::system(command.c_str());
  if (status != 0) {
    std::ifstream in(err);
    std::string first, line;
    while (std::getline(in, line))
      if (!line.empty() && line.find_first_not_of(" ^") != std::string::npos) first = line;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
      throw Error("gnuplot not found: install it (apt-get install gnuplot-nox)");
    throw Error("gnuplot failed" + (first.empty() ? std::string() : ": " + first));
  }
  std::error_code ec;
  if (!fs::exists(output, ec) || fs::file_size(output, ec) == 0)
    throw Error("gnuplot wrote no picture to '" + output + "'");
}

std::string header(const PlotRequest& a, int panels) {
  return terminal(a.output, panels) + "\nset output " + gp_string(a.output) +
         "\nset grid\nset key top right\n";
}

std::string multiplot(const PlotRequest& a, int panels, const std::string& fallback) {
  return fmt::format("set multiplot layout 1,{} title {}\n", panels,
                     gp_string(a.title.empty() ? fallback : a.title));
}

// --- training: loss and accuracy per epoch ------------------------------------------------------

void plot_training(const PlotRequest& a, const Scratch& scratch) {
  const std::string fields =
      "JSON lines with epoch, train_loss, train_accuracy, test_loss, "
      "test_accuracy (weft train --metrics)";
  const bool time = a.x_axis == "time";
  if (!time && a.x_axis != "epoch")
    throw InvalidOption("plot", "x_axis", "'" + a.x_axis + "' is invalid; accepted: epoch, time");
  std::vector<std::string> data;
  for (const std::string& path : a.inputs) {
    std::istringstream lines(read_file(path));
    std::string line, rows;
    int n = 0;
    double elapsed = 0;  // the run's wall time at the end of the epoch [s]
    while (std::getline(lines, line)) {
      ++n;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string where = "line " + std::to_string(n);
      const json j = parse_json(path, line, fields, where);
      if (time) elapsed += number_field(j, "epoch_seconds", path, where);
      rows += fmt::format("{} {:.9g} {:.9g} {:.9g} {:.9g}\n",
                          time ? elapsed : number_field(j, "epoch", path, where),
                          number_field(j, "train_loss", path, where),
                          number_field(j, "train_accuracy", path, where),
                          number_field(j, "test_loss", path, where),
                          number_field(j, "test_accuracy", path, where));
    }
    if (rows.empty()) bad_input(path, "no epochs in it; accepted: " + fields);
    data.push_back(scratch.write("training" + std::to_string(data.size()) + ".dat", rows));
  }
  std::string s = header(a, 2);
  s += multiplot(a, 2, "weft train");
  s += time ? "set xlabel 'wall time [s]'\nset style data linespoints\n"
            : "set xlabel 'epoch'\nset xtics 1\nset style data linespoints\n";
  auto panel = [&](const char* title, int train_column, int test_column) {
    s += fmt::format("set title '{}'\nplot ", title);
    for (std::size_t i = 0; i < data.size(); ++i) {
      const std::string name = label_of(a.inputs[i]);
      s += fmt::format(
          "{}{} using 1:{} lc {} dt 2 pt 6 title {}, {} using 1:{} lc {} pt 7 title {}",
          i ? ", " : "", gp_string(data[i]), train_column, i + 1, gp_string(name + " train"),
          gp_string(data[i]), test_column, i + 1, gp_string(name + " test"));
    }
    s += "\n";
  };
  s += "set ylabel 'loss'\n";
  panel("loss", 2, 4);
  s += "set ylabel 'accuracy'\nset key bottom right\n";
  panel("accuracy", 3, 5);
  s += "unset multiplot\n";
  run_gnuplot(scratch, s, a.output);
}

// --- convergence: residual per iteration --------------------------------------------------------

void plot_convergence(const PlotRequest& a, const Scratch& scratch) {
  const std::string fields = "the JSON summary of weft mgrit --json (\"residuals\": [...])";
  std::vector<std::pair<std::string, std::string>> series;  // data file, title
  for (const std::string& path : a.inputs) {
    const json j = parse_json(path, read_file(path), fields);
    if (!j.is_object() || !j.contains("residuals") || !j["residuals"].is_array())
      bad_input(path, "no \"residuals\" array; accepted: " + fields);
    auto add = [&](const json& residuals, const std::string& title) {
      std::string rows;
      for (std::size_t k = 0; k < residuals.size(); ++k)
        if (residuals[k].is_number() && residuals[k].get<double>() > 0)
          rows += fmt::format("{} {:.9g}\n", k, residuals[k].get<double>());
      if (rows.empty()) return false;
      series.emplace_back(scratch.write("residual" + std::to_string(series.size()) + ".dat", rows),
                          title);
      return true;
    };
    const std::string problem = j.value("problem", std::string());
    const std::string name = label_of(path) + (problem.empty() ? "" : " (" + problem + ")");
    if (!add(j["residuals"], name))
      bad_input(path, "no positive residuals (a --no-residual run?); accepted: " + fields);
    if (j.contains("adjoint") && j["adjoint"].is_object() && j["adjoint"].contains("residuals") &&
        j["adjoint"]["residuals"].is_array())
      add(j["adjoint"]["residuals"], name + " adjoint");
  }
  std::string s = header(a, 1);
  s += "set title " + gp_string(a.title.empty() ? "weft mgrit: convergence" : a.title) + "\n";
  s += "set logscale y\nset format y '%.0e'\nset xlabel 'iteration'\n"
       "set ylabel 'residual'\nset style data linespoints\n";
  s += "plot ";
  for (std::size_t i = 0; i < series.size(); ++i)
    s += fmt::format("{}{} using 1:2 lc {} pt 7 title {}", i ? ", " : "",
                     gp_string(series[i].first), i + 1, gp_string(series[i].second));
  s += "\n";
  run_gnuplot(scratch, s, a.output);
}

// --- timing: per rank, steps / waiting / bookkeeping / outside the solver ----------------------

void plot_timing(const PlotRequest& a, const Scratch& scratch) {
  const std::string fields =
      "JSON lines of weft train --metrics from a layer-parallel run (\"per_rank\": [{\"rank\", "
      "\"steps_ms\", \"waiting_ms\", \"bookkeeping_ms\", \"outside_ms\"}, ...])";
  std::vector<std::pair<std::string, std::string>> panels;  // data file, title
  for (const std::string& path : a.inputs) {
    std::istringstream lines(read_file(path));
    std::string line, last;
    int n = 0, last_n = 0;
    while (std::getline(lines, line)) {
      ++n;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const json j = parse_json(path, line, fields, "line " + std::to_string(n));
      if (j.is_object() && j.contains("per_rank")) last = line, last_n = n;
    }
    if (last.empty())
      bad_input(path, "no \"per_rank\" timing (a --serial run?); accepted: " + fields);
    const json j = json::parse(last);
    const std::string where = "line " + std::to_string(last_n) + " per_rank";
    if (!j["per_rank"].is_array() || j["per_rank"].empty())
      bad_input(path, where + " is not a non-empty array; accepted: " + fields);
    std::string rows;
    for (const json& r : j["per_rank"])
      rows += fmt::format("{} {:.6g} {:.6g} {:.6g} {:.6g}\n", number_field(r, "rank", path, where),
                          number_field(r, "steps_ms", path, where),
                          number_field(r, "waiting_ms", path, where),
                          number_field(r, "bookkeeping_ms", path, where),
                          number_field(r, "outside_ms", path, where));
    const std::string epoch = j.contains("epoch") ? " epoch " + j["epoch"].dump() : "";
    panels.emplace_back(scratch.write("timing" + std::to_string(panels.size()) + ".dat", rows),
                        label_of(path) + epoch);
  }
  const int count = static_cast<int>(panels.size());
  std::string s = header(a, count);
  s += multiplot(a, count, "weft train: time per batch (forward + backward) per rank");
  s += "set style data histograms\nset style histogram rowstacked\n"
       "set style fill solid 0.8 border -1\nset boxwidth 0.6\nset xlabel 'rank'\n"
       "set ylabel 'ms per batch'\nset yrange [0:*]\nset key below horizontal\n";
  for (const auto& [file, title] : panels)
    s += fmt::format(
        "set title {}\nplot {} using 2:xtic(1) title 'steps' lc rgb '#1f77b4', "
        "'' using 3 title 'waiting' lc rgb '#ff7f0e', '' using 4 title "
        "'bookkeeping' lc rgb '#2ca02c', '' using 5 title 'outside the solver' "
        "lc rgb '#999999'\n",
        gp_string(title), gp_string(file));
  s += "unset multiplot\n";
  run_gnuplot(scratch, s, a.output);
}

// --- scaling: batch time and speedup (strong) or weak efficiency (weak) against ranks ---------

void plot_scaling(const PlotRequest& a, const Scratch& scratch) {
  const std::string fields =
      "weft predict --json: {\"predictions\": [{\"ranks\": P, \"batch_ms\": ..., "
      "\"speedup_vs_serial\": ...}, ...], \"serial_batch_ms\": ...}, or all files of weft "
      "predict --weak --json: {\"weak_layers_per_rank\": L, \"predictions\": [{\"ranks\": P, "
      "\"batch_ms\": ..., \"weak_efficiency\": ...}, ...]}";
  // Per file: data rows (ranks, batch ms, speedup or weak efficiency), title, serial ms (strong).
  std::vector<std::tuple<std::string, std::string, double>> series;
  int weak_files = 0;
  for (const std::string& path : a.inputs) {
    const json j = parse_json(path, read_file(path), fields);
    if (!j.is_object() || !j.contains("predictions") || !j["predictions"].is_array() ||
        j["predictions"].empty())
      bad_input(path, "no non-empty \"predictions\" array; accepted: " + fields);
    const bool weak = j.contains("weak_layers_per_rank");
    weak_files += weak ? 1 : 0;
    const double serial = weak ? 0.0 : number_field(j, "serial_batch_ms", path, "the top level");
    std::string rows;
    for (std::size_t i = 0; i < j["predictions"].size(); ++i) {
      const json& p = j["predictions"][i];
      const std::string where = "predictions[" + std::to_string(i) + "]";
      rows +=
          fmt::format("{} {:.6g} {:.6g}\n", number_field(p, "ranks", path, where),
                      number_field(p, "batch_ms", path, where),
                      number_field(p, weak ? "weak_efficiency" : "speedup_vs_serial", path, where));
    }
    series.emplace_back(scratch.write("scaling" + std::to_string(series.size()) + ".dat", rows),
                        label_of(path), serial);
  }
  const bool weak = weak_files > 0;
  if (weak && weak_files != static_cast<int>(a.inputs.size()))
    bad_input(a.inputs.front(),
              "strong and weak scaling files mixed in one picture; accepted: " + fields);
  std::string s = header(a, 2);
  s += multiplot(a, 2, weak ? "weak scaling" : "weft predict: scaling");
  s += "set xlabel 'ranks'\nset style data linespoints\nset logscale x 2\n";
  s += fmt::format(
      "set title '{}'\nset ylabel 'ms per batch'\nset yrange [0:*]\n"
      "set key bottom left\nplot ",
      weak ? "batch time, layers growing with the ranks" : "batch time");
  for (std::size_t i = 0; i < series.size(); ++i) {
    const auto& [file, title, serial] = series[i];
    s += fmt::format("{}{} using 1:2 lc {} pt 7 title {}", i ? ", " : "", gp_string(file), i + 1,
                     gp_string(title));
    if (!weak)
      s += fmt::format(", {:.6g} lc {} dt 2 title {}", serial, i + 1, gp_string(title + " serial"));
  }
  s += weak ? "\nset title 'weak efficiency (batch at 1 rank / batch at P)'\nset ylabel "
              "'efficiency'\nset yrange [0:1.1]\nset key bottom left\nplot "
            : "\nset title 'speedup over serial'\nset ylabel 'speedup'\nset key top left\nplot ";
  for (std::size_t i = 0; i < series.size(); ++i) {
    const auto& file = std::get<0>(series[i]);
    s += fmt::format("{}{} using 1:3 lc {} pt 7 title {}", i ? ", " : "", gp_string(file), i + 1,
                     gp_string(std::get<1>(series[i])));
  }
  s += weak ? ", 1 lc rgb '#999999' dt 3 title 'ideal'\nunset multiplot\n"
            : ", 1 lc rgb '#999999' dt 3 title 'break-even'\nunset multiplot\n";
  run_gnuplot(scratch, s, a.output);
}

// --- timeline: every event of a trace, ranks as rows -----------------------------------------

// Colours: forward steps in blues and adjoint (reverse) steps in reds, darker on finer levels;
// transfers green, open/close/loss/load purple, reductions and broadcasts black, waits light
// grey (so waiting shows as grey between the coloured work).
int timeline_colour(const mgrit::TracedEvent& e, const std::string& category, int level) {
  static const int blues[] = {0x08306b, 0x2171b5, 0x6baed6, 0xc6dbef};
  static const int reds[] = {0x67000d, 0xcb181d, 0xfb6a4a, 0xfcbba1};
  const int l = std::min(std::max(level, 0), 3);
  if (e.name == "step") return category == "forward" ? blues[l] : reds[l];
  if (e.name == "restrict" || e.name == "interpolate") return 0x41ab5d;
  if (e.kind == trace::Kind::Wait) return 0xd9d9d9;
  if (e.kind == trace::Kind::Reduce || e.name == "broadcast") return 0x000000;
  return 0x807dba;
}

void plot_timeline(const PlotRequest& a, const Scratch& scratch) {
  if (a.inputs.size() != 1)
    throw InvalidOption("a timeline draws one trace; got " + std::to_string(a.inputs.size()) +
                        " inputs");
  const TraceFile t = read_trace(a.inputs.front());
  double start = std::numeric_limits<double>::infinity();
  for (const auto& events : t.events)
    for (const auto& e : events)
      if (e.batch >= 0) start = std::min(start, e.wall_start);
  if (!std::isfinite(start)) bad_input(a.inputs.front(), "the trace holds no batches");
  std::string rows, phases;
  for (int r = 0; r < t.ranks; ++r) {
    const auto& events = t.events[static_cast<size_t>(r)];
    for (size_t i = 0; i < events.size(); ++i) {
      const auto& e = events[i];
      if (e.batch < 0) continue;
      const double x0 = 1e3 * (e.wall_start - start), width = 1e3 * e.wall_duration;
      if (e.kind == trace::Kind::Phase) {
        if (e.name == "batch")
          phases += fmt::format(
              "set arrow from {:.6f},{} to {:.6f},{} nohead lc rgb '#444444' "
              "dt 2\n",
              x0, r - 0.48, x0, r + 0.48);
        continue;
      }
      if (e.kind == trace::Kind::Send) continue;  // instants: the waits show the messages
      const int colour = timeline_colour(e, t.categories[static_cast<size_t>(r)][i],
                                         t.levels[static_cast<size_t>(r)][i]);
      const double half = e.kind == trace::Kind::Wait ? 0.2 : 0.4;
      rows += fmt::format("{:.6f} {} {:.6f} {} {}\n", x0 + width / 2, r, width / 2, half, colour);
    }
  }
  const std::string file = scratch.write("timeline.dat", rows);
  std::string s = terminal(a.output, 2) + "\nset output " + gp_string(a.output) + "\n";
  s += fmt::format("set title {}\n", gp_string(a.title.empty() ? "weft train: timeline of " +
                                                                     label_of(a.inputs.front())
                                                               : a.title));
  s += fmt::format(
      "set xlabel 'ms from the first traced batch'\nset ylabel 'rank'\n"
      "set yrange [{}:-0.6]\nset ytics 1\nset grid xtics\n"
      "set style fill solid 1.0 noborder\nset key below horizontal\n",
      t.ranks - 0.4);
  s += phases;
  s += "plot " + gp_string(file) + " using 1:2:3:4:5 with boxxyerror lc rgb variable notitle";
  const std::pair<const char*, const char*> legend[] = {
      {"#08306b", "forward, fine level"},  {"#6baed6", "forward, coarse levels"},
      {"#67000d", "adjoint, fine level"},  {"#fb6a4a", "adjoint, coarse levels"},
      {"#41ab5d", "level transfer"},       {"#807dba", "open, close, loss, load"},
      {"#000000", "reduction, broadcast"}, {"#d9d9d9", "waiting for a message"}};
  for (const auto& [colour, title] : legend)
    s += fmt::format(", NaN with boxes fs solid lc rgb '{}' title {}", colour, gp_string(title));
  s += "\n";
  run_gnuplot(scratch, s, a.output);
}

}  // namespace

const std::vector<PlotKindInfo>& plot_kinds() {
  static const std::vector<PlotKindInfo> kinds{
      {PlotKind::Training, "training", "loss and accuracy per epoch, several runs side by side",
       "weft train --metrics files (JSON lines)"},
      {PlotKind::Convergence, "convergence", "residual per iteration, several runs in one picture",
       "weft mgrit --json files"},
      {PlotKind::Timing, "timing",
       "time per batch per rank: steps / waiting / bookkeeping / outside the solver",
       "weft train --metrics files of layer-parallel runs (the last epoch is drawn)"},
      {PlotKind::Scaling, "scaling",
       "batch time and speedup (or weak efficiency) against the rank count",
       "weft predict --json files (all --weak, or none)"},
      {PlotKind::Timeline, "timeline",
       "every event of a traced run, ranks as rows: steps by level and direction, transfers, "
       "messages, waiting",
       "one trace of weft train --trace"},
  };
  return kinds;
}

void plot(const PlotRequest& a) {
  terminal(a.output, 1);  // checks the extension before reading anything
  const fs::path folder = fs::absolute(a.output).parent_path();
  if (access(folder.c_str(), W_OK) != 0)
    throw InvalidOption("plot", "output",
                        "'" + a.output + "' is invalid (cannot write to " + folder.string() + ": " +
                            std::strerror(errno) + "); accepted: a path in a writable folder");
  Scratch scratch;
  switch (a.kind) {
    case PlotKind::Training:
      return plot_training(a, scratch);
    case PlotKind::Convergence:
      return plot_convergence(a, scratch);
    case PlotKind::Timing:
      return plot_timing(a, scratch);
    case PlotKind::Timeline:
      return plot_timeline(a, scratch);
    case PlotKind::Scaling:
      return plot_scaling(a, scratch);
  }
}

}  // namespace weft::report
