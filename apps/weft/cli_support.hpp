#pragma once
// What every `weft` subcommand shares: exit codes, the subcommand registry entry, strict parsing
// of option values (numbers, choices, comma lists) with one-line error messages, and the
// wrapper that turns exceptions into exit codes without leaving any rank hanging.
#include <mpi.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace weft::cli {

/// Process exit codes of the `weft` tool (the same on every rank).
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,  ///< the computation failed (weft::Divergence, weft::BadData, ...)
  kExitUsage = 2,    ///< invalid command line or option value (weft::InvalidOption)
};

/// One subcommand: its CLI11 node (options registered) and what runs it after parsing.
struct Subcommand {
  CLI::App* app = nullptr;
  /// Runs on every rank of `comm`; returns the exit code or throws (see run_guarded).
  std::function<int(MPI_Comm comm)> run;
  /// After parsing: the program that runs it when not this one (programs.hpp), or nullptr.
  std::function<const char*()> program;
};

/// Registers a subcommand (its name, help and options) on the `weft` parser.
using SubcommandFactory = Subcommand (*)(CLI::App& weft);

/// Throws weft::InvalidOption "option --NAME: 'TEXT' is invalid[ (DETAIL)]; accepted: ACCEPTED".
[[noreturn]] void invalid_value(const std::string& option, const std::string& text,
                                const std::string& accepted, const std::string& detail = "");

/// Strict conversions (weft::TextValues): the whole text must be the number, in range and
/// finite.
long long parse_integer(const std::string& option, const std::string& text, long long min,
                        const std::string& accepted,
                        long long max = std::numeric_limits<int>::max());
double parse_number(const std::string& option, const std::string& text,
                    const std::string& accepted);
/// 0 or 1.
bool parse_switch(const std::string& option, const std::string& text);
/// One of `choices` (exact match); returns its position.
std::size_t parse_choice(const std::string& option, const std::string& text,
                         const std::vector<std::string>& choices);

/// A comma list of integers >= min ("1,,2" and "1," are errors).
std::vector<int> parse_int_list(const std::string& option, const std::string& text, int min,
                                const std::string& accepted);

/// Joins `items` with ", ".
std::string join(const std::vector<std::string>& items);

/// Checks, before any work, that a file named by `option` can be written: not a folder, in an
/// existing folder, writable (an existing file is not changed). Throws weft::InvalidOption
/// "option --NAME: 'PATH' cannot be used: REASON". Local: wrap it in weft::mpi::collectively
/// when only some ranks check.
void check_output_file(const std::string& option, const std::string& path);
/// The same for a folder that every rank writes into: created when missing (with its parents),
/// not a file, writable (probed with a file named after `rank`, then removed).
void check_output_folder(const std::string& option, const std::string& path, int rank);

/// Runs `body` on every rank of `comm` and maps what it throws to an exit code:
///   weft::InvalidOption -> rank 0 prints "PREFIX: <what>", every rank returns kExitUsage;
///   weft::Divergence    -> rank 0 prints "PREFIX: <what>", every rank returns kExitFailure;
///   a weft::Collective error (every rank threw it, see weft::mpi::agree_or_throw), or any
///   error on a one-rank job -> rank 0 prints "PREFIX: <what>", kExitFailure.
/// The first two are collective (every rank parses the same arguments; the residual is reduced
/// over all ranks), so returning is safe. Anything else (an error on one rank only) prints
/// "weft: rank R: <what>" on the rank that caught it and aborts MPI_COMM_WORLD with exit code
/// 1, so that no rank waits forever.
int run_guarded(const std::string& prefix, MPI_Comm comm, const std::function<int()>& body);

/// For commands that read and write files only (plot, replay): runs `work` on rank 0 of `comm`
/// alone; every rank then returns rank 0's result text, or throws what rank 0 caught, with its
/// message: weft::InvalidOption (exit 2), anything else as a collective failure (exit 1).
std::string run_on_rank_zero(MPI_Comm comm, const std::function<std::string()>& work);

/// Prints one line (newlines in `message` become spaces) to stderr on rank 0 of `comm`; with
/// MPI_COMM_NULL (before MPI starts) on the launcher's rank 0 (programs.hpp, launcher_rank).
void report_error(const std::string& prefix, const std::string& message, MPI_Comm comm);

}  // namespace weft::cli
