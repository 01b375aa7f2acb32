// What rank_kernels.hpp declares outside CUDA: the pivot failure's text, and the GPU rank's
// refusal in a build without CUDA.
#include "linalg/rank_kernels.hpp"

#include <string>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::linalg::detail {

std::exception_ptr pivot_failure(const std::string& policy, std::int64_t k, std::int64_t nb,
                                 std::int64_t info) {
  return std::make_exception_ptr(NotPositiveDefinite(
      "Cholesky with policy " + policy + ": tile (" + std::to_string(k) + ", " + std::to_string(k) +
      ") is not positive definite: leading minor of order " + std::to_string(k * nb + info) +
      " (global pivot index " + std::to_string(k * nb + info - 1) + ", 0-based)"));
}

#if !HALFSCOPE_WITH_CUDA
std::unique_ptr<RankKernels> make_device_rank_kernels(int device, const RankShare&,
                                                      const std::vector<GemmVariant>&,
                                                      const std::string&, RecordFailure) {
  throw Unsupported("MPI tile Cholesky: a GPU rank (CUDA device " + std::to_string(device) +
                    ") in a build without CUDA");
}
#endif

}  // namespace halfscope::linalg::detail
