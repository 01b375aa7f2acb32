// The shared state and per-column updates of the GPU tile Cholesky (internal, CUDA builds
// only): used by one device (cholesky_cuda.cu) and by several (cholesky_devices_cuda.cu, where
// each device updates only the tile columns it owns).
#pragma once

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "halfscope/core/cublas.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/tiles.hpp"
#include "linalg/cholesky_cpu.hpp"
#include "linalg/tile_cuda.hpp"

namespace halfscope::linalg::detail {

constexpr int kFormats = 5;  // OperandFormat values

// Waits for both streams when the factorization leaves, normally or by an exception, so that no
// queued kernel outlives the scratch it uses (declared after the scratch: destroyed first).
struct DrainStreams {
  cudaStream_t a, b;
  ~DrainStreams() {
    if (cudaStreamSynchronize(a) != cudaSuccess || cudaStreamSynchronize(b) != cudaSuccess)
      (void)cudaGetLastError();
  }
};

// Everything the steps share.
struct Factor {
  TileMatrix& a;
  const std::vector<GemmVariant>& variants;
  std::int64_t nt = 0, nb = 0;
  float* base = nullptr;
  void* panel[kFormats][2] = {};      // converted panel copies, by format and step parity
  void* c_scratch[kFormats][2] = {};  // FP16 / FP64 C of HP3 / DP, one per stream
  FailureCode* flag = nullptr;
  /// The diagonal tiles' updates on FP16 tensor cores in FP32-grade arithmetic (split16), set by
  /// a driver before make_scratch where the policy has tiles below FP32 (their errors, 2^-11 and
  /// up, dwarf split16's few units of FP32 rounding); uniform:SP and DP stay strict FP32. Panel
  /// tile (i, k) is split by fp16_split at 2^-exponents[i] (diagonal_exponents: |L(a, b)| <=
  /// sqrt(A(a, a)) keeps every part within FP16's range) into [lo, hi, hi, lo] at split_parts(i,
  /// k), written on the update stream just before the step's diagonal groups read them; each
  /// group of equal exponents is then one FP16 GEMM with K = 3 nb, scale 2^(2e).
  bool fast_fp32 = false;
  void* split = nullptr;
  void* panel_split = nullptr;     // panel_trsm's split16 parts (PanelSplit), with fast_fp32
  int* exponents = nullptr;        // device, per tile row
  std::vector<int> exponent_of{};  // the same on the host
  /// Tile columns this device updates (empty: all of them).
  std::vector<char> owned{};
  /// Element offset of the layout at `base` (out of core: the first tile of the resident slab;
  /// only the slab's tiles are then addressable).
  std::int64_t origin = 0;
  /// Out of core: the resident slab's tile columns are [first_resident, resident_end) (0: NT),
  /// the only ones the steps update. Panels k < first_resident are streamed from the host, their
  /// FP32 tiles from tile row streamed_row0 down packed at streamed[k % 2] (the host layout's own
  /// order), their converted copies at panel[f][k % 2] from the same row.
  std::int64_t first_resident = 0;
  std::int64_t resident_end = 0;
  std::int64_t streamed_row0 = 0;
  const float* streamed[2] = {};

  [[nodiscard]] std::int64_t column_end() const { return resident_end > 0 ? resident_end : nt; }
  [[nodiscard]] bool owns(std::int64_t j) const {
    return j >= first_resident && j < column_end() &&
           (owned.empty() || owned[static_cast<std::size_t>(j)] != 0);
  }

  [[nodiscard]] GemmVariant variant(std::int64_t i, std::int64_t j) const {
    return variants[static_cast<std::size_t>(i * nt + j)];
  }
  [[nodiscard]] std::int64_t offset(std::int64_t i, std::int64_t j) const {
    return a.layout.tile_offset(i, j) - origin;
  }
  [[nodiscard]] float* tile(std::int64_t i, std::int64_t j) const { return base + offset(i, j); }
  [[nodiscard]] std::int64_t height(std::int64_t i) const { return a.layout.tile_height(i); }

  // The four FP16 parts of panel tile (i, k), i > k, nb^2 apart: by rows from k + 1 (from
  // streamed_row0 for a panel from outside the slab).
  [[nodiscard]] __half* split_parts(std::int64_t i, std::int64_t k) const {
    const std::int64_t row0 = k < first_resident ? streamed_row0 : k + 1;
    return static_cast<__half*>(split) + (i - row0) * 4 * nb * nb;
  }

  // Operand pointer of panel tile (i, k) in format f (the FP32 tile itself for fp32).
  [[nodiscard]] const void* operand(OperandFormat f, std::int64_t i, std::int64_t k) const {
    const bool far = k < first_resident;
    if (f == OperandFormat::fp32)
      return far ? streamed[k % 2] + (i - streamed_row0) * nb * nb : tile(i, k);
    const auto* p = static_cast<const char*>(panel[static_cast<int>(f)][k % 2]);
    return p + (i - (far ? streamed_row0 : k + 1)) * nb * nb * format_bytes(f);
  }

  // Step k's panel on the handles' stream: spotrf of (k, k) (its info into infos[k]), then one
  // solve of the tiles below it where they lie (panel_trsm, strict FP32 or, with panel_split,
  // split16 between halves; `leaf` its scratch):
  // one solve of the whole panel keeps the GPU busy where a strsm per tile (measured: the panel
  // stream's critical path) did not.
  void factor_panel(cusolverDnHandle_t solver, cublasHandle_t blas, float* work, int lwork,
                    int* infos, float* leaf, std::int64_t k) const;

  // The low-precision copies of panel k (its tiles below the diagonal, or from streamed_row0
  // for a streamed panel) into panel[f][k % 2] for every format in use; tags[f]: the device
  // consumer-tag tables (consumer_tags). The caller orders it after the buffers' last readers.
  void convert_panel(cudaStream_t stream, FailureCode* const* tags, std::int64_t k) const;

  // C -= A B^T for the `count` tiles (i0 .. i0 + count - 1, j) with panel k, all of height m.
  void gemm_run(cublasHandle_t handle, cudaStream_t stream, int side, std::int64_t k,
                std::int64_t j, std::int64_t i0, std::int64_t count, std::int64_t m) const {
    const GemmVariant v = variant(i0, j);
    const OperandFormat f = operand_format(v);
    float* c = tile(i0, j);
    const std::int64_t stride = nb * nb;
    GemmBatch g;
    g.m = m, g.n = nb, g.k = nb;
    g.a = operand(f, i0, k), g.lda = m, g.stride_a = stride;
    g.b = operand(f, j, k), g.ldb = nb, g.stride_b = 0;
    g.c = c, g.ldc = m, g.stride_c = stride, g.batch = count;
    const FailureCode step_tile = 1ULL << 20;  // adds 1 to the tile row of a code
    BlockSet cset;
    cset.base = c, cset.stride = stride, cset.count = count, cset.rows = m, cset.last_rows = m;
    cset.cols = nb, cset.dst_stride = stride;
    cset.tag_base = failure_code(k, FailureKind::c_entry, false, i0, j), cset.tag_step = step_tile;
    if (rounds_c(v))
      gemm_rounding_c(handle, stream, v, g, cset,
                      failure_code(k, FailureKind::result, false, i0, j),
                      c_scratch[static_cast<int>(c_format(v))][side], flag);
    else
      gemm_batched(handle, v, g);
  }

  // Column j's update with panel k: SYRK of (j, j), then the GEMMs of (i, j), i > j, batched
  // over runs of full tiles with one variant; a short last tile row alone. With `rounding_only`
  // only the HP2 / HP3 / DP runs (the others then go into the step's pointer-array groups), and
  // the SYRK only for a short last tile (full diagonal tiles go into a group too).
  void update_column(cublasHandle_t handle, cudaStream_t stream, int side, std::int64_t k,
                     std::int64_t j, bool rounding_only = false) const {
    const std::int64_t hj = height(j);
    const float minus_one = -1.0f, one = 1.0f;
    if (!rounding_only || hj != nb) {
      const PedanticMath strict(handle);  // SYRK in strict FP32, as the CPU's
      HS_CUBLAS_CHECK(cublasSsyrk(handle, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, static_cast<int>(hj),
                                  static_cast<int>(nb), &minus_one,
                                  static_cast<const float*>(operand(OperandFormat::fp32, j, k)),
                                  static_cast<int>(hj), &one, tile(j, j), static_cast<int>(hj)));
    }
    std::int64_t i = j + 1;
    while (i < nt) {
      std::int64_t end = i + 1;
      if (height(i) == nb)
        while (end < nt && height(end) == nb && variant(end, j) == variant(i, j)) ++end;
      if (!rounding_only || rounds_c(variant(i, j)))
        gemm_run(handle, stream, side, k, j, i, end - i, height(i));
      i = end;
    }
  }

  // One pointer-array batch of step k: `count` tiles of height m in one variant, starting at
  // `first` in the device pointer arrays; a split16 group (`split`, K = 3 nb) has one exponent e
  // and scale 2^(2e).
  struct Group {
    GemmVariant v;
    std::int64_t m, first, count;
    bool split = false;
    float scale = 1.0f;
  };
  std::vector<std::vector<Group>> groups{};  // per step
  const void** a_ptrs = nullptr;
  const void** b_ptrs = nullptr;
  void** c_ptrs = nullptr;

  // Host pointer arrays for the columns k + 3 .. NT - 1 this factor owns of every step (column
  // k + 2 goes alone, first, so that the panel stream's look-ahead can start on it; out of core
  // every panel k < resident_end, streamed or resident, and the slab's columns from k + 3 on,
  // appended to the arrays, whose indices the groups keep): one group per variant and
  // tile height, and the full diagonal tiles, updated as GEMMs of the whole tile (strict FP32, or
  // split16 with fast_fp32, one group per exponent; C -= A A^T: twice a SYRK's work, but batched:
  // 47 us a tile in a batch of 96 on an H100, one SYRK 58 us on an H200; 4753 one-tile SYRKs were
  // 27 % of the E-ELT band factorization's kernel time; the strict upper half of a diagonal tile
  // is never read). Uploaded once by the caller.
  void plan_groups(std::vector<const void*>& a_host, std::vector<const void*>& b_host,
                   std::vector<void*>& c_host) {
    groups.assign(static_cast<std::size_t>(nt), {});
    const std::int64_t end = column_end();
    for (std::int64_t k = 0; k < end; ++k) {
      const bool split_step = fast_fp32 && split != nullptr;
      std::vector<std::int64_t> strict, splits;
      for (std::int64_t j = std::max(k + 3, first_resident); j < end; ++j)
        if (owns(j) && height(j) == nb)
          (split_step && exponent_of[static_cast<std::size_t>(j)] != kNoSplitExponent ? splits
                                                                                      : strict)
              .push_back(j);
      auto& step = groups[static_cast<std::size_t>(k)];
      const auto add = [&](const std::vector<std::int64_t>& tiles, bool split16, int e) {
        Group g{split16 ? GemmVariant::HP1 : GemmVariant::SP,
                nb,
                static_cast<std::int64_t>(a_host.size()),
                0,
                split16,
                std::ldexp(1.0f, 2 * e)};
        for (const std::int64_t j : tiles) {
          if (split16 && exponent_of[static_cast<std::size_t>(j)] != e) continue;
          const __half* parts = split16 ? split_parts(j, k) : nullptr;
          a_host.push_back(split16 ? static_cast<const void*>(parts)
                                   : operand(OperandFormat::fp32, j, k));
          b_host.push_back(split16 ? static_cast<const void*>(parts + nb * nb)
                                   : operand(OperandFormat::fp32, j, k));
          c_host.push_back(tile(j, j));
          ++g.count;
        }
        if (g.count > 0) step.push_back(g);
      };
      add(strict, false, 0);
      std::vector<int> done;  // one split16 group per exponent
      for (const std::int64_t j : splits) {
        const int e = exponent_of[static_cast<std::size_t>(j)];
        if (std::find(done.begin(), done.end(), e) != done.end()) continue;
        done.push_back(e);
        add(splits, true, e);
      }
    }
    for (std::int64_t k = 0; k < end; ++k)
      for (const GemmVariant v :
           {GemmVariant::SP, GemmVariant::TF32, GemmVariant::HP1, GemmVariant::BF16})
        for (const bool full : {true, false}) {
          Group g{v, full ? nb : height(nt - 1), static_cast<std::int64_t>(a_host.size()), 0};
          if (!full && height(nt - 1) == nb) continue;
          const OperandFormat f = operand_format(v);
          for (std::int64_t j = std::max(k + 3, first_resident); j < end; ++j)
            for (std::int64_t i = j + 1; i < nt && owns(j); ++i) {
              if (variant(i, j) != v || (height(i) == nb) != full) continue;
              a_host.push_back(operand(f, i, k));
              b_host.push_back(operand(f, j, k));
              c_host.push_back(tile(i, j));
              ++g.count;
            }
          if (g.count > 0) groups[static_cast<std::size_t>(k)].push_back(g);
        }
  }

  // The FP16 parts of panel k's full tiles in the rows of the owned columns from k + 3 on (those
  // whose diagonal tiles the step's split16 groups update), on the stream of the step's updates,
  // which alone reads and writes this factor's split.
  void split_panel(cudaStream_t stream, std::int64_t k) const {
    const bool far = k < first_resident;
    const std::int64_t row0 = std::max(k + 3, first_resident), end = column_end();
    const std::int64_t count = end - row0 - (end == nt && height(nt - 1) != nb ? 1 : 0);
    if (count <= 0) return;
    BlockSet set;
    set.base = far ? streamed[k % 2] : base;
    set.first = far ? (row0 - streamed_row0) * nb * nb : offset(row0, k);
    set.stride = nb * nb, set.count = count;
    set.rows = nb, set.last_rows = nb, set.cols = nb, set.dst_stride = 4 * nb * nb;
    set.exponents = exponents + row0, set.part_stride = nb * nb;
    // Never flags, as the strict path would not: a part past FP16's range needs |L(a, b)| above
    // 4 sqrt(A(a, a)), so A is not positive definite, and the Inf / NaN it leaves in C(i, i) fails
    // that tile's spotrf, which reports it as the strict path does.
    set.tag_base = kNoFailure;
    convert_blocks(set, Rounding::fp16_split, split_parts(row0, k), flag, stream);
  }

  // Columns k + 3 .. NT - 1 with panel k: a short last diagonal tile's SYRK and the C-rounding
  // runs column by column, the rest in the step's pointer-array groups (disjoint tiles, so their
  // order does not matter).
  void update_rest(cublasHandle_t handle, cudaStream_t stream, std::int64_t k) const {
    for (std::int64_t j = std::max(k + 3, first_resident); j < column_end(); ++j)
      if (owns(j)) update_column(handle, stream, 1, k, j, true);
    bool split_done = false;
    for (const Group& grp : groups[static_cast<std::size_t>(k)]) {
      if (grp.split && !split_done) split_panel(stream, k), split_done = true;
      GemmBatch g;  // split16: [lo hi hi] [hi hi lo]^T, both nb x 3 nb
      g.m = grp.m, g.n = nb, g.k = grp.split ? 3 * nb : nb, g.lda = grp.m, g.ldb = nb,
      g.ldc = grp.m, g.batch = grp.count, g.scale = grp.scale;
      g.a_array = a_ptrs + grp.first, g.b_array = b_ptrs + grp.first,
      g.c_array = c_ptrs + grp.first;
      gemm_batched(handle, grp.v, g);
    }
  }
};

/// Whether a policy's variants have tiles below FP32, which calls for Factor::fast_fp32 (the
/// diagonal and upper entries are SP).
inline bool wants_fast_fp32(const std::vector<GemmVariant>& variants) {
  return std::any_of(variants.begin(), variants.end(),
                     [](GemmVariant v) { return v != GemmVariant::SP && v != GemmVariant::DP; });
}

/// Elements of tile column j from its diagonal tile down (contiguous in the layout).
inline std::int64_t column_elements(const TileLayout& l, std::int64_t j) {
  const std::int64_t end = j + 1 < l.tile_cols() ? l.tile_offset(j + 1, j + 1) : l.element_count();
  return end - l.tile_offset(j, j);
}

/// Device scratch of a GPU factorization besides the matrix, shared by the one-device, the
/// several-device and the out-of-core drivers (make_scratch). Blocks are freed in the order of
/// the stream they were allocated on, which must outlive this.
struct PanelScratch {
  std::vector<std::unique_ptr<cuda::StreamScratch>> blocks;
  std::int64_t bytes = 0;
  FailureCode* tags[kFormats] = {};  // consumer-tag tables per operand format in use
  int* infos = nullptr;              // POTRF info per step
  float* work = nullptr;             // cuSOLVER's workspace
  int lwork = 0;
  float* leaf = nullptr;  // panel_trsm's scratch

  void* take(std::int64_t size, cudaStream_t stream) {
    blocks.push_back(std::make_unique<cuda::StreamScratch>(size, stream));
    bytes += size;
    return blocks.back()->get();
  }
};

/// Allocates on `stream` the buffers one factor's steps write (two factors that work at once need
/// their own), replacing fc's: fc.panel (two copies per operand format in use, (n - nb) x nb each)
/// and fc.c_scratch of HP3 / DP.
void take_step_buffers(Factor& fc, cudaStream_t stream, PanelScratch& s);

/// Allocates on `stream` what every factorization step needs: take_step_buffers', the
/// consumer-tag tables, fc.flag (set to kNoFailure), the pivots (zeroed), cuSOLVER's workspace
/// and panel_trsm's scratch; with fc.fast_fp32 also fc.panel_split, fc.exponents (uploaded from
/// fc.exponent_of when set, else from A's diagonal, which must then be ready on `stream`) and,
/// with `split_parts`, the split16 parts of whole panels (fc.split). Synchronises `stream` (the
/// host tables it uploads are then free).
void make_scratch(Factor& fc, cusolverDnHandle_t solver, cudaStream_t stream, PanelScratch& s,
                  bool split_parts = true);

/// Bytes take_step_buffers takes for this layout and these variants.
std::int64_t step_buffer_bytes(const TileLayout& layout, const std::vector<GemmVariant>& variants);

/// Bytes make_scratch takes for this layout and these variants without fast_fp32's buffers,
/// cuSOLVER's workspace (a few MB at most) and the allocator's rounding included as 1 % + 4 MiB.
std::int64_t scratch_bytes(const TileLayout& layout, const std::vector<GemmVariant>& variants);

/// Host tables of the first consumer of each panel tile per format (0: none), as failure codes:
/// tags[f][k * NT + (i - k - 1)] for tile (i, k).
std::vector<std::vector<FailureCode>> consumer_tags(const Factor& fc);

/// The formats the off-diagonal tiles' variants use (indexed i * NT + j): their operands', and C's
/// where it is rounded through scratch (HP3, DP).
struct FormatsInUse {
  bool operand[kFormats] = {};
  bool c[kFormats] = {};
};
FormatsInUse formats_in_use(std::int64_t nt, const std::vector<GemmVariant>& variants);

/// Throws the NumericalError of an overflow `code` in a GEMM of variant v, after storing its tile
/// in `*failed`.
[[noreturn]] void throw_overflow(GemmVariant v, FailureCode code, const std::string& policy,
                                 FailedTile* failed);

/// Throws the NumericalError of an overflow `code`, after storing its tile in `*failed`.
[[noreturn]] void throw_failure(const Factor& fc, FailureCode code, const std::string& policy,
                                FailedTile* failed);

/// Throws for the earliest failure among the pivots `infos` (info of tile (k, k) at k) and the
/// overflow `code` (kNoFailure: none): NotPositiveDefinite naming the tile and the pivot,
/// CudaError for an argument cuSOLVER rejected, or throw_failure's NumericalError.
void throw_first_failure(const Factor& fc, const std::vector<int>& infos, FailureCode code,
                         const std::string& policy, FailedTile* failed);

}  // namespace halfscope::linalg::detail
