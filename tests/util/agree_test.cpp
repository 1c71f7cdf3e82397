// weft::mpi::agree_or_throw / collectively at every rank count: nothing thrown when every rank
// succeeds; when some ranks fail, every rank throws the same CollectiveError, with the kind and
// message of the lowest failing rank (named unless every rank failed).
#include <gtest/gtest.h>
#include <mpi.h>

#include <new>
#include <string>

#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace weft::mpi {
namespace {

// What this rank caught from collectively(body): "" when nothing was thrown.
template <class Kind, class Body>
std::string caught(Body body) {
  try {
    collectively(MPI_COMM_WORLD, body);
  } catch (const Kind& e) {
    EXPECT_NE(dynamic_cast<const Collective*>(&e), nullptr) << "not marked collective";
    return e.what();
  }
  return "";
}

TEST(AgreeOrThrow, ReturnsWhenEveryRankSucceeded) {
  EXPECT_EQ(caught<Error>([] {}), "");
  EXPECT_NO_THROW(agree_or_throw(MPI_COMM_WORLD, nullptr));
}

TEST(AgreeOrThrow, EveryRankThrowsTheLowestFailingRanksErrorAndKind) {
  const int me = rank(MPI_COMM_WORLD), ranks = size(MPI_COMM_WORLD);
  const int failing = ranks - 1;  // the last rank, and every rank from it on
  const std::string what = caught<BadData>([&] {
    if (me >= failing) throw BadData("bad file " + std::to_string(me));
  });
  const std::string expected = "bad file " + std::to_string(failing);
  if (ranks == 1)
    EXPECT_EQ(what, expected);  // every rank failed: no rank named
  else
    EXPECT_EQ(what,
              "rank " + std::to_string(failing) + "/" + std::to_string(ranks) + ": " + expected);
}

TEST(AgreeOrThrow, KeepsTheKindAndNamesNoRankWhenAllFailed) {
  EXPECT_EQ(caught<InvalidOption>([] { throw InvalidOption("option --x: bad"); }),
            "option --x: bad");
  EXPECT_EQ(caught<Error>([] { throw std::bad_alloc(); }), "out of memory (std::bad_alloc)");
}

}  // namespace
}  // namespace weft::mpi
