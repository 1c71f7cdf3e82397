#include "weft/util/mpi.hpp"

#include <chrono>
#include <cstdlib>
#include <limits>
#include <new>
#include <thread>
#include <utility>

#ifdef __linux__
#include <sys/uio.h>
#include <unistd.h>
#endif

#include "weft/util/trace.hpp"

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

namespace {
/// Offsets of consecutive blocks of `lengths` bytes, and their total (which must fit an int).
std::vector<int> offsets_of(const std::vector<int>& lengths, const char* what) {
  std::vector<int> offsets(lengths.size());
  long long total = 0;
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    offsets[r] = static_cast<int>(total);
    total += lengths[r];
  }
  if (total > std::numeric_limits<int>::max())
    throw MpiError(std::string(what) + ": " + std::to_string(total) +
                   " bytes in one exchange, more than MPI's int counts address");
  return offsets;
}

std::vector<std::string> split(const std::string& all, const std::vector<int>& lengths,
                               const std::vector<int>& offsets) {
  std::vector<std::string> out;
  for (std::size_t r = 0; r < lengths.size(); ++r)
    out.push_back(
        all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r])));
  return out;
}

int length_of(const std::string& bytes, const char* what) {
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw MpiError(std::string(what) + ": " + std::to_string(bytes.size()) +
                   " bytes for one rank, more than MPI's int counts address");
  return static_cast<int>(bytes.size());
}
}  // namespace

std::vector<std::string> all_gather_bytes(MPI_Comm comm, const std::string& mine,
                                          const char* what) {
  const int length = length_of(mine, what);
  std::vector<int> lengths(static_cast<std::size_t>(size(comm)));
  check(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm), what);
  const std::vector<int> offsets = offsets_of(lengths, what);
  std::string all(static_cast<std::size_t>(offsets.empty() ? 0 : offsets.back() + lengths.back()),
                  '\0');
  check(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                       MPI_CHAR, comm),
        what);
  return split(all, lengths, offsets);
}

std::vector<std::string> all_to_all_bytes(MPI_Comm comm, const std::vector<std::string>& to,
                                          const char* what) {
  const std::size_t ranks = static_cast<std::size_t>(size(comm));
  if (to.size() != ranks)
    throw Error(std::string(what) + ": " + std::to_string(to.size()) + " messages for " +
                std::to_string(ranks) + " ranks");
  std::vector<int> send_lengths(ranks), receive_lengths(ranks);
  std::string sent;
  for (std::size_t r = 0; r < ranks; ++r) {
    send_lengths[r] = length_of(to[r], what);
    sent += to[r];
  }
  const std::vector<int> send_offsets = offsets_of(send_lengths, what);
  check(MPI_Alltoall(send_lengths.data(), 1, MPI_INT, receive_lengths.data(), 1, MPI_INT, comm),
        what);
  const std::vector<int> receive_offsets = offsets_of(receive_lengths, what);
  std::string received(static_cast<std::size_t>(receive_offsets.back() + receive_lengths.back()),
                       '\0');
  check(MPI_Alltoallv(sent.data(), send_lengths.data(), send_offsets.data(), MPI_CHAR,
                      received.data(), receive_lengths.data(), receive_offsets.data(), MPI_CHAR,
                      comm),
        what);
  return split(received, receive_lengths, receive_offsets);
}

std::string where(MPI_Comm comm) {
  return "rank " + std::to_string(rank(comm)) + "/" + std::to_string(size(comm));
}

void wait_politely(MPI_Request& request, const char* what) {
  using clock = std::chrono::steady_clock;
  const auto spin_until = clock::now() + std::chrono::microseconds(100);
  for (int done = 0;;) {
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
    if (done) return;
    if (clock::now() > spin_until) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
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
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    prepare_shared_memory_transport();
    check(MPI_Init_thread(argc, argv, kRequiredThreadLevel, &provided), "MPI_Init_thread");
  } else {
    MPI_Query_thread(&provided);
  }
  // Errors come back as codes so that check() can turn them into exceptions.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (provided < kRequiredThreadLevel) {
    if (!initialized) MPI_Finalize();  // ours to end: the destructor will not run
    throw MpiError("MPI provides thread support level " + std::to_string(provided) +
                   " (MPI_THREAD_SINGLE = " + std::to_string(MPI_THREAD_SINGLE) +
                   "); weft needs MPI_THREAD_SERIALIZED (" + std::to_string(MPI_THREAD_SERIALIZED) +
                   "): the backward of device tensors runs MPI on an autograd thread");
  }
}

Environment::~Environment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

namespace {

// The kinds agree_or_throw carries between ranks, in the order of their codes.
enum class Kind : int { None = 0, Error, InvalidOption, BadData, MpiError, Divergence };

Kind kind_of(const std::exception_ptr& error, std::string& message) {
  try {
    std::rethrow_exception(error);
  } catch (const InvalidOption& e) {
    message = e.what();
    return Kind::InvalidOption;
  } catch (const BadData& e) {
    message = e.what();
    return Kind::BadData;
  } catch (const MpiError& e) {
    message = e.what();
    return Kind::MpiError;
  } catch (const Divergence& e) {
    message = e.what();
    return Kind::Divergence;
  } catch (const std::bad_alloc&) {
    message = "out of memory (std::bad_alloc)";
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
    message = "unknown exception";
  }
  return Kind::Error;
}

[[noreturn]] void throw_kind(Kind kind, const std::string& message) {
  switch (kind) {
    case Kind::InvalidOption:
      throw CollectiveError<InvalidOption>(message);
    case Kind::BadData:
      throw CollectiveError<BadData>(message);
    case Kind::MpiError:
      throw CollectiveError<MpiError>(message);
    case Kind::Divergence:
      throw CollectiveError<Divergence>(message);
    default:
      throw CollectiveError<Error>(message);
  }
}

}  // namespace

std::optional<AgreedFailure> agree(MPI_Comm comm, int code, const std::string& message,
                                   int precedence) {
  const int me = rank(comm), ranks = size(comm);
  // The failing rank with the lowest (precedence, rank) speaks for all: it wins a MIN reduction
  // of precedence * P + rank, and a MIN over "failed" tells whether every rank failed.
  const int none = std::numeric_limits<int>::max();
  const int mine[2] = {code == 0 ? none : precedence * ranks + me, code == 0 ? 0 : 1};
  int agreed[2] = {none, 0};
  {
    trace::Span span("allreduce", "mpi", trace::Kind::Reduce);
    span.reduction(comm, sizeof(mine));
    check(MPI_Allreduce(mine, agreed, count_of(mine), MPI_INT, MPI_MIN, comm),
          "MPI_Allreduce (agree)");
  }
  if (agreed[0] == none) return std::nullopt;
  AgreedFailure f;
  f.speaker = agreed[0] % ranks;
  f.every_rank = agreed[1] == 1;
  int header[2] = {code, static_cast<int>(message.size())};
  check(MPI_Bcast(header, count_of(header), MPI_INT, f.speaker, comm), "MPI_Bcast (agree)");
  f.code = header[0];
  f.message.assign(static_cast<size_t>(header[1]), '\0');
  if (me == f.speaker) f.message = message;
  check(MPI_Bcast(f.message.data(), header[1], MPI_CHAR, f.speaker, comm), "MPI_Bcast (agree)");
  return f;
}

void agree_or_throw(MPI_Comm comm, std::exception_ptr local_error) {
  std::string message;
  const Kind kind = local_error ? kind_of(local_error, message) : Kind::None;
  const std::optional<AgreedFailure> f = agree(comm, static_cast<int>(kind), message);
  if (!f) return;
  const std::string text = f->every_rank ? f->message
                                         : "rank " + std::to_string(f->speaker) + "/" +
                                               std::to_string(size(comm)) + ": " + f->message;
  throw_kind(static_cast<Kind>(f->code), text);
}

void abort_all(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace weft::mpi
