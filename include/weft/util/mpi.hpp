#pragma once
// Thin MPI helpers: error checking, rank/size queries and an owning communicator handle.
#include <mpi.h>

#include <cstddef>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "weft/util/error.hpp"

namespace weft::mpi {

/// Throws MpiError naming the call and the MPI error string when `code` is not MPI_SUCCESS.
void check(int code, const char* call);

/// The MPI count of a fixed-size array: the count follows the array when it grows, where a
/// literal would not (a reduction that counted 4 doubles of a 2-double array wrote past it).
template <typename T, std::size_t N>
constexpr int count_of(const T (&)[N]) {
  return static_cast<int>(N);
}

int rank(MPI_Comm comm);
int size(MPI_Comm comm);

/// "rank r/P" prefix for error messages.
std::string where(MPI_Comm comm);

/// Every rank's bytes, in rank order (collective over `comm`; `what` names the exchange in
/// errors).
std::vector<std::string> all_gather_bytes(MPI_Comm comm, const std::string& mine, const char* what);
/// `to[r]` goes to rank r; returns what each rank sent this one, in rank order (collective).
std::vector<std::string> all_to_all_bytes(MPI_Comm comm, const std::vector<std::string>& to,
                                          const char* what);

/// MPI_Wait that polls for a short while, then sleeps between polls: a rank that waits long
/// (a data-parallel replica that finished its backward first) leaves its core to the others
/// instead of spinning on it. Costs at most one sleep (~50 µs) of latency.
void wait_politely(MPI_Request& request, const char* what);

/// Owns a duplicate of a communicator, so a library's messages never match the user's.
class OwnedComm {
 public:
  OwnedComm() = default;
  explicit OwnedComm(MPI_Comm parent);
  ~OwnedComm();
  OwnedComm(const OwnedComm&) = delete;
  OwnedComm& operator=(const OwnedComm&) = delete;
  OwnedComm(OwnedComm&& other) noexcept;
  OwnedComm& operator=(OwnedComm&& other) noexcept;

  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

/// Called by Environment before MPI_Init: keeps Open MPI's single-copy transport for large
/// messages where the system allows it and turns it off where it would fail (containers).
void prepare_shared_memory_transport();

/// The thread support weft needs: the backward of device tensors may run MPI on an autograd
/// thread (one thread at a time).
constexpr int kRequiredThreadLevel = MPI_THREAD_SERIALIZED;

/// Initializes MPI for the lifetime of the object (after prepare_shared_memory_transport) with
/// kRequiredThreadLevel, and finalizes it unless aborted. Throws weft::MpiError when MPI (or
/// whoever initialized it before) provides less thread support.
class Environment {
 public:
  Environment(int* argc, char*** argv);
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;
};

/// A failure the ranks of a collective call agreed on (agree()).
struct AgreedFailure {
  int code = 0;             ///< the speaker's code (never 0)
  std::string message;      ///< the speaker's message, unchanged
  int speaker = 0;          ///< the lowest failing rank
  bool every_rank = false;  ///< every rank failed (then no rank needs naming)
};

/// Collective over `comm`: each rank gives a failure code (0: it succeeded) and a message; when
/// some rank failed, every rank gets the code and message of the failing rank with the lowest
/// `precedence` (>= 0; a cause before its consequences, e.g. a layer's own failure before the
/// NaN it left in other ranks' states), among those the lowest rank. The one rule by which
/// weft's front ends (C++ and Python) pick the error every rank reports.
std::optional<AgreedFailure> agree(MPI_Comm comm, int code, const std::string& message,
                                   int precedence = 0);

/// Collective over `comm`: makes a failure on any rank a failure on every rank. `local_error` is
/// what this rank caught (null when it succeeded). When no rank failed it returns; otherwise
/// every rank throws the same weft::CollectiveError<Kind> (kind and message of the lowest
/// failing rank, the message prefixed with "rank r/P: " unless every rank failed), where Kind is
/// that exception's weft kind (InvalidOption, BadData, MpiError, Divergence; anything else, e.g.
/// std::bad_alloc, becomes weft::Error). Use it after work that may fail on some ranks only,
/// before the next collective call, so that no rank waits for one that has given up.
void agree_or_throw(MPI_Comm comm, std::exception_ptr local_error);

/// Runs `body()` on every rank of `comm` and agrees on the outcome (agree_or_throw).
template <class Body>
void collectively(MPI_Comm comm, Body&& body) {
  std::exception_ptr error;
  try {
    body();
  } catch (...) {
    error = std::current_exception();
  }
  agree_or_throw(comm, error);
}

/// Aborts every rank of MPI_COMM_WORLD with `code` (never returns).
[[noreturn]] void abort_all(int code);

}  // namespace weft::mpi
