// OpenMP threads of the MPI reconstructor's phases (internal header of src/mpi/reconstructor.cpp,
// covariance.cpp and solve.cpp).
#pragma once

#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>

#include "halfscope/mpi/comm.hpp"

namespace halfscope::mpi::detail {

/// OpenMP threads per rank while a phase of the reconstructor runs: the host's cores shared among
/// the ranks on it (as mpi::cholesky shares them), unless OMP_NUM_THREADS says otherwise; restored
/// after. Ranks that each start all the cores' threads oversubscribe the host, and OpenMP's
/// spinning waits then cost far more than the work (tests/mpi/test_reconstructor.cpp on 4 ranks and
/// 2 cores: 19 s with 2 threads per rank, 0.3 s with 1).
class HostThreadShare {
 public:
  explicit HostThreadShare(const Comm& comm) : previous_(omp_get_max_threads()) {
    // The split is collective: every rank makes it, whatever its environment says.
    MPI_Comm host = MPI_COMM_NULL;
    if (MPI_Comm_split_type(comm.raw(), MPI_COMM_TYPE_SHARED, comm.rank(), MPI_INFO_NULL, &host) !=
        MPI_SUCCESS)
      abort_job("MPI_Comm_split_type failed: cannot tell the ranks of this host apart", 1);
    int on_host = 1;
    const int code = MPI_Comm_size(host, &on_host);
    MPI_Comm_free(&host);
    if (std::getenv("OMP_NUM_THREADS") != nullptr) return;
    if (code == MPI_SUCCESS) omp_set_num_threads(std::max(1, omp_get_num_procs() / on_host));
  }
  ~HostThreadShare() { omp_set_num_threads(previous_); }
  HostThreadShare(const HostThreadShare&) = delete;
  HostThreadShare& operator=(const HostThreadShare&) = delete;

 private:
  int previous_;
};

}  // namespace halfscope::mpi::detail
