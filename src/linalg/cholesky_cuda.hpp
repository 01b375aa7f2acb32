// GPU tile Cholesky behind cholesky_tiles for device tile matrices (internal header, CUDA builds
// only).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/tiles.hpp"
#include "linalg/cholesky_cpu.hpp"

namespace halfscope::linalg::detail {

/// Factors the lower float32 device tile matrix in place, the GEMMs updating tile (i, j) in
/// variants[i * NT + j]: cuSOLVER spotrf on the diagonal tiles, the panel solve (panel_trsm:
/// halving, FP32 GEMMs, 128-wide leaves by their inverses), cuBLAS ssyrk, and one
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

/// What an out-of-core factorization did.
struct OutOfCore {
  std::int64_t slabs = 0;
  std::int64_t host_to_device = 0;  // bytes
  std::int64_t device_to_host = 0;
  std::int64_t workspace = 0;  // device bytes, slab buffers included
};

/// Device bytes the in-core factorization of `layout` over `parts` devices needs on each of them:
/// the layout, scratch_bytes and its share of the step pointer arrays.
std::int64_t in_core_device_bytes(const TileLayout& layout,
                                  const std::vector<GemmVariant>& variants, std::int64_t parts);

/// The device memory a factorization may use on `device`: the device's free memory less 5 % (the
/// allocator's pools and fragmentation), or `requested` when positive and smaller.
std::int64_t device_budget(int device, std::int64_t requested);

/// Device bytes cholesky_cuda_out_of_core needs besides its two slab buffers (scratch_bytes,
/// two staging columns, the flags).
std::int64_t out_of_core_fixed_bytes(const TileLayout& layout,
                                     const std::vector<GemmVariant>& variants);

/// Factors the lower float32 host (pageable or pinned) tile matrix `a` in place on CUDA device
/// `device`, using at most `budget` bytes of device memory, by slabs of tile columns streamed
/// through it (cholesky_ooc_cuda.cu): the same arithmetic per tile as cholesky_cuda, the same
/// failures and messages (the first failure of the first failing slab). Throws InvalidInput when
/// the budget cannot hold two slabs of one tile column and the scratch, naming both.
/// `check_input`, when set, checks the input's tile columns from the one it is given on (throwing
/// for a non-finite entry); it runs on a host thread beside the first slab's work for the columns
/// of slab 2 on, the first two slabs being scanned on the device as they arrive (and checked by
/// check_input(0), which then names the entry, where that scan finds one); no result reaches `a`
/// before both passed, and what the checks throw is rethrown with `a` as it was.
OutOfCore cholesky_cuda_out_of_core(TileMatrix& a, const std::vector<GemmVariant>& variants,
                                    const std::string& policy_name, FailedTile* failed, int device,
                                    std::int64_t budget,
                                    const std::function<void(std::int64_t)>& check_input);

}  // namespace halfscope::linalg::detail
