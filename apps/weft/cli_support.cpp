#include "cli_support.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <system_error>

#include "programs.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"
#include "weft/util/text_values.hpp"

namespace weft::cli {

void invalid_value(const std::string& option, const std::string& text, const std::string& accepted,
                   const std::string& detail) {
  throw InvalidOption("option " + option + ": '" + text + "' is invalid" +
                      (detail.empty() ? std::string() : " (" + detail + ")") +
                      "; accepted: " + accepted);
}

namespace {
// One flag's value checked by weft::TextValues; its errors in the CLI's form "option --X: ...".
template <class Body>
auto as_flag(const std::string& option, const std::string& text, Body body) {
  try {
    return body(TextValues("weft", {{option, text}}, {{option, ""}}));
  } catch (const InvalidOption& e) {
    throw InvalidOption("option " + option + ": " + e.detail());
  }
}
}  // namespace

long long parse_integer(const std::string& option, const std::string& text, long long min,
                        const std::string& accepted, long long max) {
  return as_flag(option, text,
                 [&](const TextValues& v) { return v.integer(option, min, accepted, max); });
}

double parse_number(const std::string& option, const std::string& text,
                    const std::string& accepted) {
  return as_flag(option, text, [&](const TextValues& v) { return v.number(option, accepted); });
}

bool parse_switch(const std::string& option, const std::string& text) {
  return parse_choice(option, text, {"0", "1"}) == 1;
}

std::size_t parse_choice(const std::string& option, const std::string& text,
                         const std::vector<std::string>& choices) {
  return as_flag(option, text, [&](const TextValues& v) { return v.choice(option, choices); });
}

std::vector<int> parse_int_list(const std::string& option, const std::string& text, int min,
                                const std::string& accepted) {
  return as_flag(option, text,
                 [&](const TextValues& v) { return v.int_list(option, min, accepted); });
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

namespace {
namespace fs = std::filesystem;

[[noreturn]] void unusable(const std::string& option, const std::string& path,
                           const std::string& why) {
  throw InvalidOption("option " + option + ": '" + path + "' cannot be used: " + why);
}
}  // namespace

void check_output_file(const std::string& option, const std::string& path) {
  std::error_code ec;
  if (path.empty()) unusable(option, path, "empty path");
  if (fs::is_directory(path, ec)) unusable(option, path, "it is a folder, not a file");
  const fs::path parent =
      fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  if (!fs::is_directory(parent, ec))
    unusable(option, path, "its folder " + parent.string() + " does not exist");
  const bool existed = fs::exists(path, ec);
  std::ofstream probe(path, std::ios::app);  // appending leaves an existing file as it was
  const bool ok = static_cast<bool>(probe);
  probe.close();
  if (!existed) fs::remove(path, ec);
  if (!ok)
    unusable(option, path, "it cannot be written (" + std::string(std::strerror(errno)) + ")");
}

void check_output_folder(const std::string& option, const std::string& path, int rank) {
  std::error_code ec;
  if (path.empty()) unusable(option, path, "empty path");
  if (fs::exists(path, ec) && !fs::is_directory(path, ec))
    unusable(option, path, "it is a file, not a folder");
  fs::create_directories(path, ec);
  if (ec) unusable(option, path, "the folder cannot be created (" + ec.message() + ")");
  const fs::path probe_path = fs::path(path) / (".weft-write-test-" + std::to_string(rank));
  std::ofstream probe(probe_path);
  const bool ok = static_cast<bool>(probe << "weft\n" << std::flush);
  probe.close();
  fs::remove(probe_path, ec);
  if (!ok) unusable(option, path, "the folder is not writable");
}

void report_error(const std::string& prefix, const std::string& message, MPI_Comm comm) {
  int rank = 0;
  if (comm == MPI_COMM_NULL)
    rank = launcher_rank();
  else
    MPI_Comm_rank(comm, &rank);
  if (rank != 0) return;
  std::string line = prefix + ": " + message;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

std::string run_on_rank_zero(MPI_Comm comm, const std::function<std::string()>& work) {
  int verdict = 0;  // 0 ok, 2 InvalidOption, 1 anything else
  std::string message;
  if (mpi::rank(comm) == 0) {
    try {
      message = work();
    } catch (const InvalidOption& e) {
      verdict = 2, message = e.what();
    } catch (const std::exception& e) {
      verdict = 1, message = e.what();
    }
  }
  mpi::check(MPI_Bcast(&verdict, 1, MPI_INT, 0, comm), "MPI_Bcast (verdict)");
  int length = static_cast<int>(message.size());
  mpi::check(MPI_Bcast(&length, 1, MPI_INT, 0, comm), "MPI_Bcast (verdict length)");
  message.resize(static_cast<std::size_t>(length));
  mpi::check(MPI_Bcast(message.data(), length, MPI_CHAR, 0, comm), "MPI_Bcast (verdict text)");
  if (verdict == 2) throw InvalidOption(message);
  if (verdict == 1) throw Divergence(message);  // collective failure: exit code 1, one line
  return message;
}

int run_guarded(const std::string& prefix, MPI_Comm comm, const std::function<int()>& body) {
  std::string what;
  bool collective = false;
  try {
    return body();
  } catch (const InvalidOption& e) {
    // Every rank parses the same arguments: a usage error is always collective.
    report_error(prefix, e.what(), comm);
    return kExitUsage;
  } catch (const Divergence& e) {
    report_error(prefix, e.what(), comm);
    return kExitFailure;
  } catch (const std::exception& e) {
    what = e.what();
    collective = dynamic_cast<const Collective*>(&e) != nullptr;
  } catch (...) {
    what = "unknown exception";
  }
  // On one rank every error is collective: no other rank can be left waiting.
  if (collective || mpi::size(MPI_COMM_WORLD) == 1) {
    report_error(prefix, what, comm);
    return kExitFailure;
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "weft: rank %d: %s\n", rank, what.c_str());
  std::fflush(stderr);
  mpi::abort_all(kExitFailure);
}

}  // namespace weft::cli
