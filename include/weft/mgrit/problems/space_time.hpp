#pragma once
// Space-time parallelism: the ranks of a communicator split into P/S time groups of S ranks.
// Rank r has space index r mod S and time index r / S; the *space communicator* is its time
// group (the S ranks that share every time step's spatial solve), the *time communicator* holds
// the P/S ranks with the same space index (the MGRIT solver runs on it). Every member of a time
// group owns the same time points.
#include <mpi.h>

#include <string>

#include "weft/util/mpi.hpp"

namespace weft::mgrit::problems {

struct SpaceTimeComms {
  mpi::OwnedComm space;  ///< the S ranks of this rank's time group
  mpi::OwnedComm time;   ///< the P/S ranks with this rank's space index
  int space_ranks = 1;   ///< S
  int time_ranks = 1;    ///< P/S
  int space_rank = 0;    ///< this rank's space index, r mod S
  int time_rank = 0;     ///< this rank's time index, r / S
};

/// Splits `world` (collective). Throws weft::InvalidOption ("SpaceTime: space_ranks ...") unless
/// 1 <= space_ranks and space_ranks divides the size of `world`.
SpaceTimeComms split_space_time(MPI_Comm world, int space_ranks);

/// Whether this build of weft has the PETSc problems (library weft_petsc_problems).
bool petsc_available();

/// Throws weft::InvalidOption ("<owner>: <option> '<value>' ...") when PETSc is absent from this
/// build.
void require_petsc(const std::string& owner, const std::string& option, const std::string& value);

}  // namespace weft::mgrit::problems
