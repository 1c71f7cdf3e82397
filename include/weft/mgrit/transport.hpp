#pragma once
// How the solver talks to its neighbours: MpiTransport (the default) over a duplicated
// communicator. A Solver's second template argument may replace it, e.g. by the schedule
// recorder (schedule.hpp) that runs one rank of a larger virtual communicator in this process,
// so that a cost model replays the solver's own sequence of steps and messages.
//
// A transport provides: Request (with null_request() and active()), rank(), size(), where(),
// irecv/isend of bytes with a tag, wait_recv (returns the bytes received), wait_send, progress,
// and allreduce of one double (sum or max).
#include <mpi.h>

#include <cstddef>
#include <string>

#include "weft/util/mpi.hpp"
#include "weft/util/trace.hpp"

namespace weft::mgrit {

class MpiTransport {
 public:
  using Request = MPI_Request;

  explicit MpiTransport(MPI_Comm parent) : comm_(parent) {}

  static Request null_request() { return MPI_REQUEST_NULL; }
  static bool active(const Request& r) { return r != MPI_REQUEST_NULL; }

  MPI_Comm comm() const { return comm_.get(); }
  int rank() const { return mpi::rank(comm_.get()); }
  int size() const { return mpi::size(comm_.get()); }
  std::string where() const { return mpi::where(comm_.get()); }

  void irecv(void* buffer, std::size_t bytes, int source, int tag, Request& r) {
    mpi::check(MPI_Irecv(buffer, static_cast<int>(bytes), MPI_BYTE, source, tag, comm_.get(), &r),
               "MPI_Irecv");
  }
  void isend(const void* buffer, std::size_t bytes, int dest, int tag, Request& r) {
    trace::sent(comm_.get(), dest, tag, bytes);
    mpi::check(MPI_Isend(buffer, static_cast<int>(bytes), MPI_BYTE, dest, tag, comm_.get(), &r),
               "MPI_Isend");
  }
  std::size_t wait_recv(Request& r) {
    trace::Span span("wait", "mpi", trace::Kind::Wait);
    MPI_Status status;
    mpi::check(MPI_Wait(&r, &status), "MPI_Wait (receive)");
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    span.message(comm_.get(), status.MPI_SOURCE, status.MPI_TAG, static_cast<std::size_t>(count));
    return static_cast<std::size_t>(count);
  }
  void wait_send(Request& r) { mpi::check(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait (send)"); }
  /// Lets MPI move pending messages (see Solver::progress).
  void progress(Request& send, Request& recv) {
    int flag = 0;
    if (send != MPI_REQUEST_NULL) MPI_Test(&send, &flag, MPI_STATUS_IGNORE);
    if (recv != MPI_REQUEST_NULL) {
      MPI_Status status;
      MPI_Request_get_status(recv, &flag, &status);
    }
  }
  double allreduce(double value, bool max, const char* what) {
    trace::Span span("allreduce", "mpi", trace::Kind::Reduce);
    span.reduction(comm_.get(), sizeof(double));
    double global = 0;
    mpi::check(MPI_Allreduce(&value, &global, 1, MPI_DOUBLE, max ? MPI_MAX : MPI_SUM, comm_.get()),
               what);
    return global;
  }

 private:
  mpi::OwnedComm comm_;
};

}  // namespace weft::mgrit
