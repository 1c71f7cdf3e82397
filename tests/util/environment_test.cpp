// weft::mpi::Environment initialises MPI as the library needs it: with at least
// MPI_THREAD_SERIALIZED (the backward of device tensors runs MPI on an autograd thread), and
// with errors returned as codes. Its own program: the other tests' main initialises MPI itself.
#include <gtest/gtest.h>
#include <mpi.h>

#include "weft/util/mpi.hpp"

TEST(Environment, InitialisesMpiWithTheThreadLevelTheLibraryNeedsAndReturnsErrors) {
  int initialized = 1;
  MPI_Initialized(&initialized);
  ASSERT_EQ(initialized, 0) << "this program must start without MPI";
  {
    weft::mpi::Environment env(nullptr, nullptr);
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    EXPECT_GE(provided, MPI_THREAD_SERIALIZED);
    MPI_Errhandler handler;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &handler);
    EXPECT_EQ(handler, MPI_ERRORS_RETURN);
    MPI_Errhandler_free(&handler);
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  EXPECT_EQ(finalized, 1);
}
