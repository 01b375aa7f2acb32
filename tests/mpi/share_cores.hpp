// Included by the one source file of an MPI test program: its ranks share the host's cores, as
// the library's MPI phases do (src/mpi/reconstructor_threads.hpp), the one-process references
// too, or 4 ranks with all the cores' OpenMP threads each spin against one another for seconds.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>

#include "halfscope/mpi/comm.hpp"

namespace halfscope::mpi::test {

class ShareCores : public testing::Environment {
 public:
  void SetUp() override {
    omp_set_num_threads(std::max(1, omp_get_num_procs() / Comm::world().size()));
  }
};

[[maybe_unused]] inline testing::Environment* const share_cores =
    testing::AddGlobalTestEnvironment(new ShareCores);

}  // namespace halfscope::mpi::test
