#include "weft/util/collective.hpp"

#include <cstdint>

#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace weft::mpi {

namespace {
enum Kind : int { kNone = 0, kInvalidOption, kBadData, kMpiError, kDivergence, kOther };

[[noreturn]] void throw_kind(int kind, const std::string& message) {
  switch (kind) {
    case kInvalidOption:
      throw InvalidOption(message);
    case kBadData:
      throw BadData(message);
    case kMpiError:
      throw MpiError(message);
    case kDivergence:
      throw Divergence(message);
    default:
      throw Error(message);
  }
}
}  // namespace

Failure failure_of(std::exception_ptr error) {
  Failure f;
  try {
    std::rethrow_exception(error);
  } catch (const InvalidOption& e) {
    f = {kInvalidOption, e.what()};
  } catch (const BadData& e) {
    f = {kBadData, e.what()};
  } catch (const MpiError& e) {
    f = {kMpiError, e.what()};
  } catch (const Divergence& e) {
    f = {kDivergence, e.what()};
  } catch (const std::exception& e) {
    f = {kOther, e.what()};
  } catch (...) {
    f = {kOther, "unknown exception"};
  }
  return f;
}

std::string broadcast_string(MPI_Comm comm, const std::string& text, int root) {
  std::int64_t length = static_cast<std::int64_t>(text.size());
  check(MPI_Bcast(&length, 1, MPI_INT64_T, root, comm), "MPI_Bcast (string length)");
  std::string out = rank(comm) == root ? text : std::string(static_cast<size_t>(length), ' ');
  check(MPI_Bcast(out.data(), static_cast<int>(length), MPI_CHAR, root, comm),
        "MPI_Bcast (string)");
  return out;
}

void throw_if_any(MPI_Comm comm, const Failure& local) {
  const int ranks = size(comm);
  const int me = rank(comm);
  int first = local.failed() ? me : ranks;
  int lowest = ranks;
  check(MPI_Allreduce(&first, &lowest, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce (agree)");
  if (lowest == ranks) return;
  int kind = local.kind;
  check(MPI_Bcast(&kind, 1, MPI_INT, lowest, comm), "MPI_Bcast (error kind)");
  std::string message = broadcast_string(comm, local.message, lowest);
  const std::string tag = "rank " + std::to_string(lowest) + "/";
  if (message.find(tag) == std::string::npos)
    message = "on rank " + std::to_string(lowest) + ": " + message;
  throw_kind(kind, message);
}

}  // namespace weft::mpi
