#pragma once
// Checks of a solver's stored fine points against a known solution, over all ranks.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace weft::test {

/// The largest |u_i - exact[i]| over every fine point that some rank of MPI_COMM_WORLD stores
/// (C-point storage keeps only C-points), for a solver with a scalar (double) state.
template <class Solver>
double max_stored_error(const Solver& solver, const std::vector<double>& exact) {
  double worst = 0;
  for (auto i = solver.local_begin(); i < solver.local_end(); ++i)
    if (const double* u = solver.state(i))
      worst = std::max(worst, std::abs(*u - exact[static_cast<std::size_t>(i)]));
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

}  // namespace weft::test
