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

TEST(Agree, TheLowestPrecedenceSpeaksThenTheLowestRank) {
  const int me = rank(MPI_COMM_WORLD), ranks = size(MPI_COMM_WORLD);
  EXPECT_FALSE(agree(MPI_COMM_WORLD, 0, "").has_value());
  // Every rank fails; the last one with precedence 0, the others 1: the last rank speaks.
  const auto last =
      agree(MPI_COMM_WORLD, 10 + me, "from " + std::to_string(me), me == ranks - 1 ? 0 : 1);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->speaker, ranks - 1);
  EXPECT_EQ(last->code, 10 + ranks - 1);
  EXPECT_EQ(last->message, "from " + std::to_string(ranks - 1));
  EXPECT_TRUE(last->every_rank);
  // Ranks from 1 on fail with equal precedence: rank 1 speaks, and not every rank failed.
  if (ranks > 2) {
    const auto first = agree(MPI_COMM_WORLD, me >= 1 ? 3 : 0, "rank " + std::to_string(me), 2);
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(first->speaker, 1);
    EXPECT_EQ(first->message, "rank 1");
    EXPECT_FALSE(first->every_rank);
  }
}

}  // namespace
}  // namespace weft::mpi
