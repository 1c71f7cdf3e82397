#pragma once
// MPI_COMM_WORLD queries for MPI tests (rank, size, reductions of one value).
#include <mpi.h>

namespace weft::test {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int world_size() {
  int p = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}

inline double allreduce(double v, MPI_Op op) {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
  return out;
}

}  // namespace weft::test
