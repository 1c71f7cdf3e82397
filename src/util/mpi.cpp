#include "weft/util/mpi.hpp"

#include <cstdlib>
#include <utility>

#ifdef __linux__
#include <sys/uio.h>
#include <unistd.h>
#endif

namespace weft::mpi {

void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw MpiError(std::string(call) + " failed: " + std::string(text, static_cast<size_t>(len)));
}

int rank(MPI_Comm comm) {
  int r = 0;
  check(MPI_Comm_rank(comm, &r), "MPI_Comm_rank");
  return r;
}

int size(MPI_Comm comm) {
  int s = 0;
  check(MPI_Comm_size(comm, &s), "MPI_Comm_size");
  return s;
}

std::string where(MPI_Comm comm) {
  return "rank " + std::to_string(rank(comm)) + "/" + std::to_string(size(comm));
}

OwnedComm::OwnedComm(MPI_Comm parent) {
  check(MPI_Comm_dup(parent, &comm_), "MPI_Comm_dup");
}

OwnedComm::~OwnedComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
}

OwnedComm::OwnedComm(OwnedComm&& other) noexcept
    : comm_(std::exchange(other.comm_, MPI_COMM_NULL)) {}

OwnedComm& OwnedComm::operator=(OwnedComm&& other) noexcept {
  if (this != &other) {
    OwnedComm dying(std::move(*this));
    comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
  }
  return *this;
}

void prepare_shared_memory_transport() {
#ifdef __linux__
  // Open MPI moves a large message between ranks of one machine fastest by one copy through
  // cross-memory attach (process_vm_readv), which also needs no help from the sending rank
  // while it computes. Containers that forbid the call make such transfers fail, so there the
  // copy goes through shared-memory fragments instead, unless the user chose a mechanism.
  const char* name = "OMPI_MCA_btl_vader_single_copy_mechanism";
  if (std::getenv(name)) return;
  char source[8] = "weft", target[8] = {};
  iovec local{target, sizeof target}, remote{source, sizeof source};
  if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != static_cast<ssize_t>(sizeof source))
    setenv(name, "none", 0);
#endif
}

Environment::Environment(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    prepare_shared_memory_transport();
    check(MPI_Init(argc, argv), "MPI_Init");
  }
  // Errors come back as codes so that check() can turn them into exceptions.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

Environment::~Environment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void abort_all(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace weft::mpi
