// Mixed-precision tile Cholesky (issue 6, study 002 Algorithm 1): A = L L^T in place on a lower
// tiled FP32 matrix, the trailing-update GEMMs of each tile in the precision a Policy chooses.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/tiles.hpp"

namespace halfscope::linalg {

/// How to factor.
struct CholeskyOptions {
  /// Chooses the GEMM variant of every off-diagonal tile (default uniform:SP).
  Policy policy;
  /// On a failure (a non-positive pivot, an FP16 overflow) refactor from a copy of the input with
  /// the failing region promoted one precision up (HP3 -> HP2 -> HP1 -> SP, TF32 and BF16 -> SP),
  /// until the factorization finishes or the region is all SP / DP.
  bool recover = false;
  /// Factor 4^-k A when FP16 variants meet a matrix far from 1 (see cholesky_tiles). False runs the
  /// variants on A as given, as study 002 did (FP16 overflows and underflows included).
  bool scale = true;
  /// CUDA devices of this host to factor on (empty: where `a` lives: the CPU for host memory,
  /// its device for device memory). Tile columns are dealt round-robin over the listed devices;
  /// each panel goes to every device peer to peer; each device updates its own columns. `a` may
  /// be in host memory or on any device; its device, when listed, factors in place, and the
  /// result is the factor of one device (the same arithmetic per tile; cuBLAS may pick other
  /// kernels for other batch sizes, so agreement is within the GEMM variants' rounding). Every
  /// listed device holds a copy of the whole layout (n^2 / 2 floats) besides its scratch.
  std::vector<int> devices{};
  /// Device memory, in bytes, the factorization may use on each listed device (0, or more than
  /// the device has free: what it has free now, less 5 %); it bounds halfscope's own allocations
  /// (the CUDA libraries' handles add their workspaces, about 150 MB). Ignored for `a` already in
  /// device memory. With `a` in host memory and one listed device, a matrix
  /// whose layout and scratch do not fit is factored out of core (cholesky_ooc_cuda.cu): tile
  /// columns grouped into slabs that fit half the budget, two slabs resident at a time; each slab
  /// is updated by the factored columns to its left streamed from the host (double-buffered),
  /// factored in place, and written back column by column as soon as each column is final, the
  /// copies overlapping the GEMMs. Registering pageable host storage with CUDA (pinning) is part
  /// of the call; a TileMatrix allocated in Memory::pinned skips it. The input checks (every
  /// tile's norm) read the whole host matrix: with a policy that does not read the norms
  /// (Policy::reads_norms) they run beside the first slab, whose columns go back only after they
  /// passed. With several devices the whole layout must fit on each (else Unsupported, naming
  /// the need). A budget below two slabs of one tile column plus the scratch is InvalidInput,
  /// naming both; a negative one too.
  std::int64_t device_memory = 0;
};

/// What a factorization did.
struct CholeskyReport {
  /// The policy's name.
  std::string policy;
  /// Off-diagonal tiles (i > j) per variant, indexed by GemmVariant, as finally factored.
  std::array<std::int64_t, 7> tiles{};
  /// Factorizations run (1 without a recovery).
  std::int64_t attempts = 1;
  /// One line per recovery: what failed and which tiles were promoted.
  std::vector<std::string> recoveries;
  /// Scratch memory the factorization used besides the matrix, in bytes: on the GPU the
  /// low-precision panel copies (2 x (n - nb) x nb elements per operand format in use), the FP16 /
  /// FP64 C scratch of HP3 / DP and cuSOLVER's workspace; plus, with `recover`, the copy of the
  /// input kept for a retry (on the CPU only that copy). Peak usage is the matrix plus this.
  std::int64_t workspace_bytes = 0;
  /// Slabs of an out-of-core factorization (0: the matrix was factored in core).
  std::int64_t out_of_core_slabs = 0;
  /// Bytes copied host -> device and device -> host by the factorization that finished (the
  /// input's and the factor's copies when `a` lives on the host, and out of core the factored
  /// columns streamed in again; 0 for a factorization in place on one device), and device ->
  /// device between listed devices.
  std::int64_t host_to_device_bytes = 0;
  std::int64_t device_to_host_bytes = 0;
  std::int64_t device_to_device_bytes = 0;
  /// k when the matrix was factored as 4^-k A (the factor scaled back by 2^k, both exact) to keep
  /// the FP16 variants' data in FP16's range; 0 when it was not scaled (see cholesky_tiles).
  std::int64_t scaling_exponent = 0;

  /// Tiles of one variant.
  [[nodiscard]] std::int64_t count(GemmVariant v) const noexcept {
    return tiles[static_cast<std::size_t>(v)];
  }

  /// Calls f(name, value) for each count above (attempts, scratch, slabs, bytes moved), under
  /// the names the CLI's --report, the Python report and the benchmarks' params give them.
  template <class F>
  void for_each_count(F&& f) const {
    f("attempts", attempts);
    f("workspace_bytes", workspace_bytes);
    f("out_of_core_slabs", out_of_core_slabs);
    f("host_to_device_bytes", host_to_device_bytes);
    f("device_to_host_bytes", device_to_host_bytes);
    f("device_to_device_bytes", device_to_device_bytes);
    f("scaling_exponent", scaling_exponent);
  }
};

/// Factors the symmetric positive definite matrix held in `a` (a lower, float32 TileMatrix, in
/// host or device memory) in place: on return its lower triangle holds L with A = L L^T (the strict
/// upper half of the diagonal tiles is left as it was on the CPU; the GPU paths may use it as
/// scratch). POTRF of the diagonal tiles, TRSM and SYRK run in
/// FP32; each GEMM that updates tile (i, j) runs in the variant options.policy chooses for (i, j)
/// from the input's tile and matrix Frobenius norms. On the host it runs as OpenMP tasks over tiles
/// (right-looking, no barrier per step); on a device with cuSOLVER / cuBLAS on two streams ordered
/// by events (src/linalg/cholesky_cuda.cu), synchronised before returning. Throws InvalidInput for
/// another layout or dtype, Unsupported for device memory in a build without CUDA;
/// NotPositiveDefinite naming the tile, the pivot and the policy; NumericalError on an FP16
/// overflow; with options.recover these two are retried as described there, and `a` is restored to
/// the input before each retry.
///
/// When options.scale is set, a tile's variant rounds data to FP16 (HP1, HP2, HP3) and the largest
/// diagonal entry d of A lies outside [2^-6, 2^12], FP16's range would cut the factor's accuracy (entries of L are at
/// most sqrt(d), the C entries of HP2 / HP3 at most d; FP16 holds normal numbers from 2^-14 to
/// 65504): the factorization runs on 4^-k A with d moved into [1, 4) and returns 2^k times its
/// factor, both scalings exact (report.scaling_exponent = k; one read and write of the lower
/// triangle each way, on the host for a host matrix). The policy sees the norms of A as given.
/// An error's message then says so, and after it `a` holds partial results of 4^-k A.
CholeskyReport cholesky_tiles(TileMatrix& a, const CholeskyOptions& options);

}  // namespace halfscope::linalg
