#include "weft/util/mpi.hpp"

#include <cstdlib>
#include <utility>

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

Environment::Environment(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) check(MPI_Init(argc, argv), "MPI_Init");
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
