// The GPU rank's refusal in a build without CUDA (rank_kernels.hpp).
#include "linalg/rank_kernels.hpp"

#include <string>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::linalg::detail {

#if !HALFSCOPE_WITH_CUDA
std::unique_ptr<RankKernels> make_device_rank_kernels(int device, const RankShare&,
                                                      const std::vector<GemmVariant>&,
                                                      const std::string&, RecordFailure) {
  throw Unsupported("MPI tile Cholesky: a GPU rank (CUDA device " + std::to_string(device) +
                    ") in a build without CUDA");
}
#endif

}  // namespace halfscope::linalg::detail
