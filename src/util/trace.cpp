#include "weft/util/trace.hpp"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace weft::trace {

namespace {

std::int64_t wall_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::int64_t cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Compute:
      return "compute";
    case Kind::Send:
      return "send";
    case Kind::Wait:
      return "wait";
    case Kind::Reduce:
      return "reduce";
    case Kind::Phase:
      return "phase";
  }
  return "compute";
}

}  // namespace

class Recorder {
 public:
  explicit Recorder(const Settings& s) : settings(s), wall0(wall_now()), cpu0(cpu_now()) {}

  bool keeping() const {
    return batch >= settings.first_batch && batch < settings.first_batch + settings.batches;
  }

  /// World ranks of `comm`'s ranks, cached per handle (handles are stable while traced).
  const std::vector<int>& world_ranks(MPI_Comm comm) {
    auto it = world_of.find(comm);
    if (it != world_of.end()) return it->second;
    MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
    MPI_Comm_group(comm, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int n = 0;
    MPI_Group_size(group, &n);
    std::vector<int> local(static_cast<size_t>(n)), global(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) local[static_cast<size_t>(i)] = i;
    MPI_Group_translate_ranks(group, n, local.data(), world, global.data());
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    return world_of.emplace(comm, std::move(global)).first->second;
  }

  int group_index(MPI_Comm comm) {
    const std::vector<int>& members = world_ranks(comm);
    for (size_t g = 0; g < groups.size(); ++g)
      if (groups[g] == members) return static_cast<int>(g);
    groups.push_back(members);
    return static_cast<int>(groups.size()) - 1;
  }

  Settings settings;
  std::int64_t wall0, cpu0;
  std::int64_t batch = -1;
  int iteration = -1;
  std::vector<Event> events;
  std::vector<std::vector<int>> groups;
  std::map<MPI_Comm, std::vector<int>> world_of;
  std::vector<std::pair<std::int64_t, std::int64_t>> batch_walls;  ///< (index, wall ns)
  std::int64_t batch_start = 0;
};

Recorder* active_recorder = nullptr;

namespace {
std::unique_ptr<Recorder>& owned() {
  static std::unique_ptr<Recorder> r;
  return r;
}
}  // namespace

void start(const Settings& settings) {
  if (settings.first_batch < 0 || settings.batches < 1)
    throw InvalidOption("trace: the first batch must be >= 0 and the number of batches >= 1 (got " +
                        std::to_string(settings.first_batch) + " and " +
                        std::to_string(settings.batches) + ")");
  owned() = std::make_unique<Recorder>(settings);
  active_recorder = owned().get();
}

void stop() {
  active_recorder = nullptr;
  owned().reset();
}

std::vector<Event> recorded() {
  return active_recorder ? active_recorder->events : std::vector<Event>{};
}

bool recording() {
  return active_recorder && active_recorder->keeping();
}

void set_iteration(int iteration) {
  if (active_recorder) active_recorder->iteration = iteration;
}

void batch_begin(std::int64_t index) {
  Recorder* r = active_recorder;
  if (!r) return;
  r->batch = index;
  r->iteration = -1;
  r->batch_start = wall_now();
  if (!r->keeping()) return;
  Event e;
  e.name = "batch";
  e.category = "train";
  e.kind = Kind::Phase;
  e.batch = index;
  e.wall_ns = r->batch_start - r->wall0;
  e.cpu_ns = cpu_now() - r->cpu0;
  r->events.push_back(e);
}

void batch_end(std::int64_t index) {
  Recorder* r = active_recorder;
  if (!r || r->batch != index) return;
  const std::int64_t now = wall_now();
  if (r->keeping()) {
    r->batch_walls.emplace_back(index, now - r->batch_start);
    // Close the batch's phase event (the last "batch" event opened).
    for (auto it = r->events.rbegin(); it != r->events.rend(); ++it)
      if (it->kind == Kind::Phase && it->batch == index && std::string(it->name) == "batch") {
        it->wall_duration_ns = now - r->wall0 - it->wall_ns;
        it->cpu_duration_ns = cpu_now() - r->cpu0 - it->cpu_ns;
        break;
      }
  }
  r->batch = -1;
}

void Span::begin(const char* name, const char* category, Kind kind) {
  Recorder* r = active_recorder;
  if (!r->keeping()) return;
  live_ = true;
  event_.name = name;
  event_.category = category;
  event_.kind = kind;
  event_.batch = r->batch;
  event_.iteration = r->iteration;
  event_.cpu_ns = cpu_now() - r->cpu0;
  event_.wall_ns = wall_now() - r->wall0;
}

void Span::end() {
  Recorder* r = active_recorder;
  live_ = false;
  if (!r) return;  // tracing stopped inside the span
  event_.wall_duration_ns = wall_now() - r->wall0 - event_.wall_ns;
  event_.cpu_duration_ns = cpu_now() - r->cpu0 - event_.cpu_ns;
  r->events.push_back(event_);
}

Span::Span(const char* name, MPI_Comm comm, int root, std::size_t bytes) {
  if (!on()) return;
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  begin(name, "mpi", rank == root ? Kind::Send : Kind::Wait);
  if (!live_) return;
  set_message(comm, root, -1, bytes);
  set_reduction(comm, bytes);
}

void Span::set_message(MPI_Comm comm, int peer, int tag, std::size_t bytes) {
  const auto& world = active_recorder->world_ranks(comm);
  event_.peer =
      peer >= 0 && peer < static_cast<int>(world.size()) ? world[static_cast<size_t>(peer)] : peer;
  event_.tag = tag;
  event_.bytes = static_cast<std::int64_t>(bytes);
}

void Span::set_reduction(MPI_Comm comm, std::size_t bytes) {
  event_.group = active_recorder->group_index(comm);
  event_.bytes = static_cast<std::int64_t>(bytes);
}

namespace {

void put_int(std::ostringstream& o, const char* key, std::int64_t v) {
  if (v >= 0) o << ",\"" << key << "\":" << v;
}

/// This rank's events as trace-event JSON objects, comma-separated (pid = world rank).
std::string events_json(const Recorder& r, int rank, std::int64_t wall_base) {
  std::ostringstream o;
  o.precision(15);
  o << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << rank << ",\"args\":{\"name\":\"rank "
    << rank << "\"}}";
  o << ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" << rank
    << ",\"args\":{\"sort_index\":" << rank << "}}";
  for (const Event& e : r.events) {
    o << ",\n{\"name\":\"" << e.name << "\",\"cat\":\"" << e.category
      << "\",\"ph\":\"X\",\"pid\":" << rank
      << ",\"tid\":0,\"ts\":" << static_cast<double>(e.wall_ns + wall_base) / 1e3
      << ",\"dur\":" << static_cast<double>(e.wall_duration_ns) / 1e3 << ",\"args\":{\"kind\":\""
      << kind_name(e.kind) << "\",\"cpu_start_us\":" << static_cast<double>(e.cpu_ns) / 1e3
      << ",\"cpu_us\":" << static_cast<double>(e.cpu_duration_ns) / 1e3;
    put_int(o, "batch", e.batch);
    put_int(o, "level", e.level);
    put_int(o, "from", e.from);
    put_int(o, "to", e.to);
    put_int(o, "done", e.done);
    put_int(o, "iteration", e.iteration);
    put_int(o, "peer", e.peer);
    put_int(o, "tag", e.tag);
    put_int(o, "bytes", e.bytes);
    if (e.group >= 0) {
      o << ",\"group\":[";
      const auto& g = r.groups[static_cast<size_t>(e.group)];
      for (size_t i = 0; i < g.size(); ++i) o << (i ? "," : "") << g[i];
      o << "]";
    }
    o << "}}";
  }
  return o.str();
}

std::string batches_json(const Recorder& r) {
  std::ostringstream o;
  o.precision(15);
  o << "[";
  for (size_t i = 0; i < r.batch_walls.size(); ++i)
    o << (i ? "," : "") << "[" << r.batch_walls[i].first << ","
      << static_cast<double>(r.batch_walls[i].second) / 1e6 << "]";
  o << "]";
  return o.str();
}

std::vector<std::string> gather_text(const std::string& mine, MPI_Comm comm) {
  const int ranks = mpi::size(comm), rank = mpi::rank(comm);
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<size_t>(ranks)), offsets(static_cast<size_t>(ranks));
  mpi::check(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm),
             "MPI_Gather (trace sizes)");
  std::vector<char> all;
  if (rank == 0) {
    int total = 0;
    for (int q = 0; q < ranks; ++q) {
      offsets[static_cast<size_t>(q)] = total;
      total += lengths[static_cast<size_t>(q)];
    }
    all.resize(static_cast<size_t>(total));
  }
  mpi::check(MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                         MPI_CHAR, 0, comm),
             "MPI_Gatherv (trace)");
  std::vector<std::string> out;
  if (rank == 0)
    for (int q = 0; q < ranks; ++q)
      out.emplace_back(all.data() + offsets[static_cast<size_t>(q)],
                       static_cast<size_t>(lengths[static_cast<size_t>(q)]));
  return out;
}

}  // namespace

void write(const std::string& path, MPI_Comm comm, const std::string& metadata) {
  std::unique_ptr<Recorder> r = std::move(owned());
  active_recorder = nullptr;
  if (!r) r = std::make_unique<Recorder>(Settings{});
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  // Ranks share a steady clock on one machine; the earliest start becomes time 0.
  std::int64_t earliest = 0;
  mpi::check(MPI_Allreduce(&r->wall0, &earliest, 1, MPI_INT64_T, MPI_MIN, comm),
             "MPI_Allreduce (trace clock)");
  const auto events = gather_text(events_json(*r, world_rank, r->wall0 - earliest), comm);
  const auto batches = gather_text(batches_json(*r), comm);
  const auto ranks_of = gather_text(std::to_string(world_rank), comm);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);  // ru_maxrss: KiB on Linux
  const auto rss_of = gather_text(std::to_string(usage.ru_maxrss), comm);
  std::string failure;
  if (mpi::rank(comm) == 0) {
    std::ofstream out(path);
    out << "{\"traceEvents\":[\n";
    for (size_t q = 0; q < events.size(); ++q) out << (q ? ",\n" : "") << events[q];
    out << "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"format\":\"weft-trace\","
        << "\"version\":1,\"ranks\":" << events.size()
        << ",\"first_batch\":" << r->settings.first_batch << ",\"batches\":" << r->settings.batches
        << ",\"batch_wall_ms\":{";
    for (size_t q = 0; q < batches.size(); ++q)
      out << (q ? "," : "") << "\"" << ranks_of[q] << "\":" << batches[q];
    out << "},\"max_rss_kib\":{";
    for (size_t q = 0; q < rss_of.size(); ++q)
      out << (q ? "," : "") << "\"" << ranks_of[q] << "\":" << rss_of[q];
    out << "}" << (metadata.empty() ? "" : ",") << metadata << "}}\n";
    out.flush();
    if (!out) failure = "cannot write the trace file '" + path + "'";
  }
  int failed = failure.empty() ? 0 : 1;
  mpi::check(MPI_Bcast(&failed, 1, MPI_INT, 0, comm), "MPI_Bcast (trace written)");
  if (failed) throw Error(failure.empty() ? "cannot write the trace file '" + path + "'" : failure);
}

}  // namespace weft::trace
