// GoogleTest main for weft: runs every test on every rank of MPI_COMM_WORLD. Rank 0 prints the
// usual report; other ranks print only their failures (prefixed with the rank). After each test
// the ranks' verdicts are gathered, so a failure on any rank is visible on rank 0 and the
// process exit code is non-zero on every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.summary());
  }

 private:
  int rank_;
};

class GatherVerdicts : public ::testing::EmptyTestEventListener {
 public:
  GatherVerdicts(int rank, int size) : rank_(rank), size_(size) {}
  void OnTestEnd(const ::testing::TestInfo& info) override {
    int failed = info.result()->Failed() ? 1 : 0;
    std::vector<int> all(static_cast<size_t>(size_));
    MPI_Gather(&failed, 1, MPI_INT, all.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank_ != 0) return;
    std::string ranks;
    for (int r = 0; r < size_; ++r)
      if (all[static_cast<size_t>(r)]) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
    if (!ranks.empty())
      std::fprintf(stderr, "[mpi] %s.%s failed on rank(s) %s of %d\n", info.test_suite_name(),
                   info.name(), ranks.c_str(), size_);
  }

 private:
  int rank_, size_;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ::testing::InitGoogleTest(&argc, argv);
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  listeners.Append(new GatherVerdicts(rank, size));
  const int local = RUN_ALL_TESTS();
  int global = 0;
  MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return global;
}
