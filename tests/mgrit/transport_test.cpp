// weft::mpi::prepare_shared_memory_transport: the user's choice wins; otherwise Open MPI's
// single-copy mechanism is turned off exactly when cross-memory attach is refused.
#include <gtest/gtest.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "weft/util/mpi.hpp"

namespace {

constexpr const char* kVariable = "OMPI_MCA_btl_vader_single_copy_mechanism";

bool cross_memory_attach_works() {
  char source[4] = "abc", target[4] = {};
  iovec local{target, sizeof target}, remote{source, sizeof source};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) ==
         static_cast<ssize_t>(sizeof source);
}

TEST(SharedMemoryTransport, TheUsersChoiceIsKept) {
  setenv(kVariable, "emulated", 1);
  weft::mpi::prepare_shared_memory_transport();
  EXPECT_EQ(std::string(std::getenv(kVariable)), "emulated");
  unsetenv(kVariable);
}

TEST(SharedMemoryTransport, OffExactlyWhenCrossMemoryAttachIsRefused) {
  unsetenv(kVariable);
  weft::mpi::prepare_shared_memory_transport();
  const char* chosen = std::getenv(kVariable);
  if (cross_memory_attach_works()) {
    EXPECT_EQ(chosen, nullptr);
  } else {
    EXPECT_EQ(std::string(chosen ? chosen : ""), "none");
  }
  unsetenv(kVariable);
}

}  // namespace
