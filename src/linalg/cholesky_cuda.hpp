// GPU tile Cholesky behind cholesky_tiles for device tile matrices (internal header, CUDA builds
// only).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/tiles.hpp"
#include "linalg/cholesky_cpu.hpp"

namespace halfscope::linalg::detail {

/// Factors the lower float32 device tile matrix in place, the GEMMs updating tile (i, j) in
/// variants[i * NT + j]: cuSOLVER spotrf on the diagonal tiles, cuBLAS strsm / ssyrk, and one
/// strided-batched GEMM per tile column and run of equal variants, on a panel stream (POTRF,
/// TRSM, operand conversions, then the next column's update: look-ahead) and an update stream
/// (the rest of the trailing matrix), ordered by events only. Pivots and overflow flags stay on
/// the device and are read once at the end. Throws like cholesky_cpu (the same messages) after
/// storing the failing tile in `*failed`; after a throw `a` holds partial results. Returns the
/// device scratch it used, in bytes (besides the matrix itself).
std::int64_t cholesky_cuda(TileMatrix& a, const std::vector<GemmVariant>& variants,
                           const std::string& policy_name, FailedTile* failed);

/// cholesky_cuda over the CUDA devices `devices` of this host (cholesky_devices_cuda.cu): tile
/// columns dealt round-robin, each panel copied peer to peer to every device, each device
/// updating its own columns. `a` in host memory or on any device (its device, when listed,
/// factors in place; otherwise the factor is copied back at the end). The same failures and
/// messages; returns the devices' scratch in bytes, their copies of the layout included.
std::int64_t cholesky_cuda_devices(TileMatrix& a, const std::vector<GemmVariant>& variants,
                                   const std::string& policy_name, FailedTile* failed,
                                   const std::vector<int>& devices);

}  // namespace halfscope::linalg::detail
