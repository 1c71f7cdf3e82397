// Reading traces back (weft/report/trace_file.hpp).
#include "weft/report/trace_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "weft/util/error.hpp"

namespace weft::report {

namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& path, const std::string& why) {
  throw InvalidOption("input '" + path + "': " + why);
}

trace::Kind kind_of(const std::string& text, const std::string& path, size_t index) {
  if (text == "compute") return trace::Kind::Compute;
  if (text == "send") return trace::Kind::Send;
  if (text == "wait") return trace::Kind::Wait;
  if (text == "reduce") return trace::Kind::Reduce;
  if (text == "phase") return trace::Kind::Phase;
  bad(path, "event " + std::to_string(index) + " has the unknown kind '" + text +
                "'; accepted: compute, send, wait, reduce, phase");
}

}  // namespace

TraceFile read_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, std::string("cannot read it: ") + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  json doc;
  try {
    doc = json::parse(text.str());
  } catch (const json::exception&) {
    bad(path, "not valid JSON (a truncated file?); accepted: a trace of weft train --trace");
  }
  if (!doc.is_object() || !doc.contains("otherData") || !doc["otherData"].is_object() ||
      doc["otherData"].value("format", "") != "weft-trace" || !doc.contains("traceEvents") ||
      !doc["traceEvents"].is_array())
    bad(path, "not a weft trace (no otherData.format \"weft-trace\" or no traceEvents)");
  const json& other = doc["otherData"];
  if (!other.contains("ranks") || !other["ranks"].is_number_integer() ||
      other["ranks"].get<long long>() < 1 || other["ranks"].get<long long>() > 1000000)
    bad(path, "otherData.ranks is not a rank count >= 1");
  TraceFile out;
  out.ranks = static_cast<int>(other["ranks"].get<long long>());
  if (other.contains("model") && other["model"].is_string()) out.model = other["model"];
  const auto n = static_cast<size_t>(out.ranks);
  out.events.resize(n);
  out.categories.resize(n);
  out.levels.resize(n);
  const json& events = doc["traceEvents"];
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    if (!e.is_object() || e.value("ph", "") != "X") continue;  // metadata and other phases
    auto number = [&](const json& j, const char* key) -> double {
      if (!j.contains(key) || !j[key].is_number())
        bad(path, "event " + std::to_string(i) + " has no number \"" + key + "\"");
      return j[key].get<double>();
    };
    auto integer = [&](const json& j, const char* key, long long fallback) -> long long {
      if (!j.contains(key)) return fallback;
      if (!j[key].is_number_integer())
        bad(path, "event " + std::to_string(i) + ": \"" + key + "\" is not an integer");
      return j[key].get<long long>();
    };
    const long long pid = integer(e, "pid", -1);
    if (pid < 0 || pid >= out.ranks)
      bad(path, "event " + std::to_string(i) + " belongs to rank " + std::to_string(pid) +
                    "; the trace has " + std::to_string(out.ranks) + " ranks");
    if (!e.contains("args") || !e["args"].is_object())
      bad(path, "event " + std::to_string(i) + " has no args");
    const json& a = e["args"];
    mgrit::TracedEvent t;
    t.name = e.value("name", "");
    t.kind = kind_of(a.value("kind", ""), path, i);
    t.wall_start = 1e-6 * number(e, "ts");
    t.wall_duration = 1e-6 * number(e, "dur");
    t.cpu_start = 1e-6 * number(a, "cpu_start_us");
    t.cpu_duration = 1e-6 * number(a, "cpu_us");
    if (t.wall_duration < 0 || t.cpu_duration < 0)
      bad(path, "event " + std::to_string(i) + " has a negative duration");
    t.batch = integer(a, "batch", -1);
    t.peer = static_cast<int>(integer(a, "peer", -1));
    t.tag = static_cast<int>(integer(a, "tag", -1));
    t.bytes = integer(a, "bytes", 0);
    if (a.contains("group")) {
      if (!a["group"].is_array())
        bad(path, "event " + std::to_string(i) + ": \"group\" is not a list of ranks");
      for (const json& q : a["group"]) {
        if (!q.is_number_integer())
          bad(path, "event " + std::to_string(i) + ": \"group\" is not a list of ranks");
        t.group.push_back(q.get<int>());
      }
    }
    if (t.kind == trace::Kind::Compute) {
      // What was computed: direction, name and level; the points and final sweep for steps.
      const auto field = [&](const char* key) {
        const long long v = integer(a, key, -1);
        return v < 0 ? std::string("-") : std::to_string(v);
      };
      t.family =
          e.value("cat", "") + "/" + t.name + "/level " + field("level") + "/done " + field("done");
      t.key = t.family + "/" + field("from") + ">" + field("to");
    }
    const auto r = static_cast<size_t>(pid);
    out.categories[r].push_back(e.value("cat", ""));
    out.levels[r].push_back(static_cast<int>(integer(a, "level", -1)));
    out.events[r].push_back(std::move(t));
  }
  return out;
}

}  // namespace weft::report
