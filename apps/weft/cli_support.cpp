#include "cli_support.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>

#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace weft::cli {

void invalid_value(const std::string& option, const std::string& text, const std::string& accepted,
                   const std::string& detail) {
  throw InvalidOption("option " + option + ": '" + text + "' is invalid" +
                      (detail.empty() ? std::string() : " (" + detail + ")") +
                      "; accepted: " + accepted);
}

long long parse_integer(const std::string& option, const std::string& text, long long min,
                        const std::string& accepted, long long max) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(begin, &end, 10);
  if (text.empty() || end == begin || *end != '\0' || errno == ERANGE || value < min || value > max)
    invalid_value(option, text, accepted);
  return value;
}

double parse_number(const std::string& option, const std::string& text,
                    const std::string& accepted) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(begin, &end);
  if (text.empty() || end == begin || *end != '\0' || errno == ERANGE || !std::isfinite(value))
    invalid_value(option, text, accepted);
  return value;
}

bool parse_switch(const std::string& option, const std::string& text) {
  return parse_choice(option, text, {"0", "1"}) == 1;
}

std::size_t parse_choice(const std::string& option, const std::string& text,
                         const std::vector<std::string>& choices) {
  for (std::size_t i = 0; i < choices.size(); ++i)
    if (text == choices[i]) return i;
  invalid_value(option, text, join(choices));
}

std::vector<std::string> split_list(const std::string& option, const std::string& text,
                                    const std::string& accepted) {
  std::vector<std::string> items;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) invalid_value(option, text, accepted, "empty list item");
    items.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

std::vector<int> parse_int_list(const std::string& option, const std::string& text, int min,
                                const std::string& accepted) {
  std::vector<int> values;
  for (const std::string& item : split_list(option, text, accepted)) {
    try {
      values.push_back(static_cast<int>(parse_integer(option, item, min, accepted)));
    } catch (const InvalidOption&) {
      if (item == text) throw;
      invalid_value(option, text, accepted, "item '" + item + "'");
    }
  }
  return values;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

void report_error(const std::string& prefix, const std::string& message, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank != 0) return;
  std::string line = prefix + ": " + message;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

int run_guarded(const std::string& prefix, MPI_Comm comm, const std::function<int()>& body) {
  std::string what;
  try {
    return body();
  } catch (const InvalidOption& e) {
    report_error(prefix, e.what(), comm);
    return kExitUsage;
  } catch (const Divergence& e) {
    report_error(prefix, e.what(), comm);
    return kExitFailure;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "unknown exception";
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "weft: rank %d: %s\n", rank, what.c_str());
  std::fflush(stderr);
  mpi::abort_all(kExitFailure);
}

}  // namespace weft::cli
