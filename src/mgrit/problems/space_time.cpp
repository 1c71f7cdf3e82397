#include "weft/mgrit/problems/space_time.hpp"

#include "weft/util/error.hpp"

namespace weft::mgrit::problems {

namespace {
std::string divisors(int n) {
  std::string s;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return s;
}
}  // namespace

SpaceTimeComms split_space_time(MPI_Comm world, int space_ranks) {
  const int ranks = mpi::size(world), rank = mpi::rank(world);
  if (space_ranks < 1 || ranks % space_ranks != 0)
    throw InvalidOption(
        "SpaceTime", "space_ranks",
        "'" + std::to_string(space_ranks) + "' is invalid: it does not divide the " +
            std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks") +
            "; accepted: a divisor of the rank " + "count (" + divisors(ranks) + ")");
  SpaceTimeComms out;
  out.space_ranks = space_ranks;
  out.time_ranks = ranks / space_ranks;
  out.space_rank = rank % space_ranks;
  out.time_rank = rank / space_ranks;
  MPI_Comm space = MPI_COMM_NULL, time = MPI_COMM_NULL;
  mpi::check(MPI_Comm_split(world, out.time_rank, out.space_rank, &space),
             "MPI_Comm_split (space)");
  mpi::check(MPI_Comm_split(world, out.space_rank, out.time_rank, &time), "MPI_Comm_split (time)");
  out.space = mpi::OwnedComm(space);
  out.time = mpi::OwnedComm(time);
  MPI_Comm_free(&space);
  MPI_Comm_free(&time);
  return out;
}

bool petsc_available() {
#ifdef WEFT_HAVE_PETSC
  return true;
#else
  return false;
#endif
}

void require_petsc(const std::string& owner, const std::string& option, const std::string& value) {
  if (petsc_available()) return;
  throw InvalidOption(owner, option,
                      "'" + value +
                          "' is invalid: it needs PETSc, and this weft was built without it; "
                          "accepted: values that need no PETSc (one space rank), or rebuild "
                          "with PETSc (apt-get install petsc-dev, then re-run cmake)");
}

}  // namespace weft::mgrit::problems
