#pragma once
// weft's programs (apps/weft/CMakeLists.txt): `weft` parses every subcommand and runs those that
// need neither LibTorch nor PETSc; it hands the others, before MPI starts, to the program beside
// it that links what they need (weft-nn: train, eval, predict; weft-petsc: mgrit's heat2d).
#include <mpi.h>

namespace weft::cli {

struct TrainConfig;
struct EvalConfig;
struct PredictConfig;

/// The rank the MPI launcher gave this process (OMPI_COMM_WORLD_RANK, PMIX_RANK or PMI_RANK),
/// 0 without a launcher: before MPI starts, only that rank 0 prints.
int launcher_rank();

/// Replaces this process by the program `name` in this program's folder, with the same
/// arguments. Returns only when that fails, after printing why: the exit code then.
int run_program(const char* name, char** argv);

/// What train, eval and predict run once their flags are parsed: LibTorch code, set by the
/// weft-nn program (programs_nn.cpp) and empty in the others.
struct NetworkRunners {
  int (*train)(const TrainConfig&, MPI_Comm) = nullptr;
  int (*eval)(const EvalConfig&, MPI_Comm) = nullptr;
  int (*predict)(const PredictConfig&, MPI_Comm) = nullptr;
};
NetworkRunners& network_runners();

/// The program that runs train, eval and predict: nullptr for this one (it has the runners),
/// else "weft-nn".
const char* network_program();

/// The program that runs `weft mgrit --problem heat2d`: "weft-petsc" where this program lacks
/// the PETSc problem and weft was built with it, else nullptr (this one).
const char* heat2d_program();

}  // namespace weft::cli
