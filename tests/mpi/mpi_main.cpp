// GoogleTest main of the MPI tests: MPI lives around all tests. Every rank runs every test; a
// failure on any rank fails the launcher's exit status. Only rank 0 prints the progress lines,
// the others print failures only.
#include <gtest/gtest.h>

#include <cstdio>

#include "halfscope/mpi/comm.hpp"

namespace {

// Replaces the per-test lines on ranks other than 0: only failures, named by rank.
class QuietRanks : public testing::EmptyTestEventListener {
 public:
  explicit QuietRanks(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "MPI rank %d: %s:%d: failure\n%s\n", rank_,
                   r.file_name() ? r.file_name() : "?", r.line_number(), r.message());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  halfscope::mpi::Environment mpi(argc, argv);
  testing::InitGoogleTest(&argc, argv);
  const auto world = halfscope::mpi::Comm::world();
  if (world.rank() != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new QuietRanks(world.rank()));
  }
  const int failed = RUN_ALL_TESTS();
  // The job fails when any rank failed.
  return world.max(static_cast<std::int64_t>(failed)) != 0 ? 1 : 0;
}
