#pragma once
// Collective error agreement: one rank detects a problem, every rank throws it.
//
//   weft::mpi::agree_or_throw(comm, [&] { check_my_part(); });   // collective
//
// Runs the check on this rank, then the ranks agree: when it threw on any rank, every rank
// throws the error of the lowest failing rank, of the same kind (InvalidOption, BadData,
// MpiError, Divergence; anything else becomes weft::Error) with its message and that rank named.
// No rank is left waiting in a later collective call.
#include <mpi.h>

#include <exception>
#include <string>

namespace weft::mpi {

/// The kind and message of an error, as the ranks exchange it.
struct Failure {
  int kind = 0;  ///< 0: none; see collective.cpp for the codes
  std::string message;
  bool failed() const { return kind != 0; }
};

/// The Failure describing an exception (kind from its weft type).
Failure failure_of(std::exception_ptr error);

/// Collective: throws on every rank when `local` failed on any rank (the lowest such rank's
/// error, "on rank r: " prefixed unless the message names its rank already).
void throw_if_any(MPI_Comm comm, const Failure& local);

template <class Check>
void agree_or_throw(MPI_Comm comm, Check&& check) {
  Failure local;
  try {
    check();
  } catch (...) {
    local = failure_of(std::current_exception());
  }
  throw_if_any(comm, local);
}

/// Collective: `text` of rank `root` on every rank.
std::string broadcast_string(MPI_Comm comm, const std::string& text, int root);

}  // namespace weft::mpi
