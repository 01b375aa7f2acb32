// Device helpers shared by the GPU tile Cholesky and the GPU triangular solves (internal header,
// CUDA builds only): FP32 -> FP16 / BF16 / TF32 / FP64 conversions of sets of tiles with an
// overflow flag, the way back for the C operands of HP3 and DP, and the cuBLAS call of each
// GemmVariant.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "halfscope/linalg/policy.hpp"
#include "linalg/cholesky_cpu.hpp"  // tile_text

namespace halfscope::linalg::detail {

/// The memory format a variant's A and B operands are read in. `fp32` reads the FP32 tiles as
/// they are (SP); the others need converted copies.
enum class OperandFormat : std::uint8_t { fp32, fp16, bf16, tf32, fp64 };

/// The operand format of a variant (HP1, HP2, HP3 share FP16).
OperandFormat operand_format(GemmVariant v) noexcept;

/// Bytes per element of a format.
std::int64_t format_bytes(OperandFormat f) noexcept;

/// How each conversion rounds: RNE into the operand format, or FP32 -> FP16 -> FP32 in place
/// (the C of HP2, kept in the FP32 tile exactly as the CPU emulation keeps it).
/// `copy` moves FP32 values unchanged (re-laying out tiles, never overflows); `tf32_split` writes
/// the 3xTF32 parts of x: hi = RNE_tf32(x) at the block's place and lo = x - hi (exact in FP32)
/// at the same place plus BlockSet::lo_offset elements. `fp16_split` writes the FP16 parts of
/// y = x 2^-e (e = BlockSet::exponents[t], so that y stays within FP16's range): hi = RNE_fp16(y),
/// lo = RNE_fp16(y - hi), as four parts [lo, hi, hi, lo] BlockSet::part_stride elements apart, so
/// that one GEMM with K = 3 cols reads [lo hi hi] against [hi hi lo]: lo hi^T + hi hi^T + hi lo^T,
/// the small terms first (2.2e-6 against 3.5e-6 with them last, at K = 3 x 256 on an H200).
enum class Rounding : std::uint8_t {
  to_fp16,
  to_bf16,
  to_tf32,
  to_fp64,
  fp16_in_fp32,
  copy,
  tf32_split,
  fp16_split
};

/// The rounding that produces an operand format (fp32 has none; passing it is a logic error).
Rounding rounding_for(OperandFormat f) noexcept;

/// Failure code written by the device with atomicMin: smaller is earlier. Bits, high to low:
/// step (20), kind (2), operand flag (1), tile row (20), tile column (20). Zero means "skip" in a
/// tag table, so every real code has kind >= 1.
using FailureCode = unsigned long long;
/// No failure (the flag's initial value).
inline constexpr FailureCode kNoFailure = ~0ULL;

/// What overflowed.
enum class FailureKind : unsigned {
  operand = 1,  // an A / B operand (a tile of L, or a solved block) did not fit the format
  c_entry = 2,  // C did not fit FP16 before an HP2 / HP3 update
  result = 3,   // the result of an HP2 / HP3 update did not fit FP16
};

/// Packs a failure code; `second` marks the B operand (or a solved right-hand-side block).
FailureCode failure_code(std::int64_t step, FailureKind kind, bool second, std::int64_t ti,
                         std::int64_t tj) noexcept;

/// The fields of a failure code.
struct DecodedFailure {
  std::int64_t step = 0;
  FailureKind kind = FailureKind::operand;
  bool second = false;
  std::int64_t ti = 0;
  std::int64_t tj = 0;
};
DecodedFailure decode_failure(FailureCode code) noexcept;

/// A set of `count` column-major FP32 blocks read from `base` and written packed (or in place) in
/// a converted format. Block t starts at base + offsets[t] (or first + t * stride when offsets is
/// null), has `rows` rows (`last_rows` for the last block) and `cols` columns, leading dimension
/// src_ld (0: its row count). Its converted copy starts at dst + t * dst_stride with leading
/// dimension dst_ld (0: its row count). Tag of block t: tags[t] (device table, 0 = skip the
/// block), or tag_base + t * tag_step. Sizes are 64-bit; rows * cols fits a block's 2^31 range.
struct BlockSet {
  const float* base = nullptr;
  const std::int64_t* offsets = nullptr;
  std::int64_t first = 0;
  std::int64_t stride = 0;
  std::int64_t count = 0;
  std::int64_t rows = 0;
  std::int64_t last_rows = 0;
  std::int64_t cols = 0;
  std::int64_t src_ld = 0;
  std::int64_t dst_stride = 0;
  std::int64_t dst_ld = 0;
  const FailureCode* tags = nullptr;
  FailureCode tag_base = 0;
  FailureCode tag_step = 0;
  std::int64_t lo_offset = 0;      // tf32_split only
  const int* exponents = nullptr;  // fp16_split only: block t scaled by 2^-exponents[t]
  std::int64_t part_stride = 0;    // fp16_split only
};

/// Converts the blocks into `dst` (element type of `rounding`; float for to_tf32, tf32_split,
/// copy and fp16_in_fp32, where dst may equal the source for an in-place rounding). A finite entry
/// that rounds to a non-finite value stores min(flag, tag of its block) in *flag. Asynchronous.
void convert_blocks(const BlockSet& set, Rounding rounding, void* dst, FailureCode* flag,
                    cudaStream_t stream);

/// The fp16_split exponents of a lower tile matrix's tile rows: e_j, clamped to [-63, 63], with
/// sqrt(m) < 2^(e_j + 14) <= 2 sqrt(m), m = max_a A(a, a) over the diagonal of tile (j, j) (at base
/// + offsets[j], column-major, heights[j] rows). Every entry of row a of a Cholesky factor is at
/// most sqrt(A(a, a)), so its fp16_split parts at 2^-e_j stay below 2^14, a quarter of FP16's
/// largest value, and an entry's error (2^-22 relative, 2^-25 2^e_j absolute where a part is
/// subnormal) stays within 2^-22 sqrt(A(a, a)) as long as the diagonal spans at most 2^20:
/// kNoSplitExponent where it spans more (or has an entry that is not positive and finite), and
/// that tile row's diagonal updates stay strict FP32. Written to `dev` (nt ints) and returned;
/// synchronises `stream`.
inline constexpr int kNoSplitExponent = 1000;
std::vector<int> diagonal_exponents(const float* base, const std::vector<std::int64_t>& offsets,
                                    const std::vector<std::int64_t>& heights, int* dev,
                                    cudaStream_t stream);
/// The same on the host from host tiles (the out-of-core factorization's matrix), equal entry for
/// entry to what the kernel computes.
std::vector<int> diagonal_exponents_host(const float* base,
                                         const std::vector<std::int64_t>& offsets,
                                         const std::vector<std::int64_t>& heights);

/// Device-to-device copy of `height` runs of `width` floats, `src_pitch` / `dst_pitch` floats
/// apart (one plain copy when height is 1). Asynchronous on `stream`.
void copy_2d(float* dst, std::int64_t dst_pitch, const float* src, std::int64_t src_pitch,
             std::int64_t width, std::int64_t height, cudaStream_t stream);

/// dst[e] = float(src[e]) for a packed span of `count` FP16 (from_half) or FP64 values, in
/// blocks of `block_elems`; a non-finite FP16 value stores min(flag, tag_base + (e / block_elems)
/// * tag_step) (an FP16 product or sum overflowed). dst is column-major with rows = block_rows
/// and leading dimension dst_ld (0: packed), the span read as consecutive columns.
void convert_back(const void* src, bool from_half, std::int64_t count, std::int64_t block_elems,
                  std::int64_t block_rows, float* dst, std::int64_t dst_ld, FailureCode tag_base,
                  FailureCode tag_step, FailureCode* flag, cudaStream_t stream);

/// One strided-batched GEMM C_b -= scale op(A_b) op(B_b), b < batch, in a variant's types: A and B
/// in operand_format(variant), C FP32, except HP3 (C FP16, FP16 compute) and DP (C FP64). The
/// caller prepares the converted operands and C; this only picks types, compute mode and scalars
/// (SP: FP32 pedantic; TF32: FAST_TF32 on already RNE-rounded inputs; HP1/HP2/BF16: COMPUTE_32F).
struct GemmBatch {
  cublasOperation_t op_a = CUBLAS_OP_N;
  cublasOperation_t op_b = CUBLAS_OP_T;
  std::int64_t m = 0, n = 0, k = 0;
  float scale = 1.0f;  // 2^(2e) for the FP16 split parts of fp16_split, else 1
  const void* a = nullptr;
  std::int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;
  std::int64_t ldb = 0, stride_b = 0;
  void* c = nullptr;
  std::int64_t ldc = 0, stride_c = 0;
  std::int64_t batch = 1;
  /// Pointer-array form (cublasGemmBatchedEx): when set, device arrays of `batch` operand
  /// pointers replace a, b, c and the strides (for tiles that are not evenly spaced).
  const void* const* a_array = nullptr;
  const void* const* b_array = nullptr;
  void* const* c_array = nullptr;
};
void gemm_batched(cublasHandle_t handle, GemmVariant variant, const GemmBatch& g);

/// The C format a variant updates (fp32, or fp16 for HP3, fp64 for DP).
OperandFormat c_format(GemmVariant v) noexcept;

/// Whether a variant rounds or widens C (HP2, HP3, DP): its updates run one tile at a time
/// through gemm_rounding_c.
inline bool rounds_c(GemmVariant v) noexcept {
  return v == GemmVariant::HP2 || v == GemmVariant::HP3 || v == GemmVariant::DP;
}

/// The update of `g` in a variant that rounds C (HP2, HP3, DP) for the FP32 C blocks of `cset`
/// (cset.base = g.c, with cset's c_entry tags: `count` packed tiles of rows x cols one after
/// another, or one block of leading dimension src_ld = dst_ld = g.ldc): HP2 rounds C to FP16 in
/// place before and after the GEMM; HP3 / DP convert C into `scratch` (FP16 / FP64, the whole
/// batch packed), update it there and convert it back. Results that do not fit are flagged with
/// result_tag + t * cset.tag_step. Asynchronous on `stream`.
void gemm_rounding_c(cublasHandle_t handle, cudaStream_t stream, GemmVariant v, GemmBatch g,
                     BlockSet cset, FailureCode result_tag, void* scratch, FailureCode* flag);

/// Makes `stream` wait for everything queued so far on the legacy default stream (an event
/// recorded there), without blocking the host: a caller's async writes to A or b on stream 0 land
/// before the library's non-blocking streams read them.
void after_legacy_stream(cudaStream_t stream);

/// Sets CUBLAS_PEDANTIC_MATH on a handle for the calls made while it lives (ssyrk, strsm: strict
/// FP32 whatever NVIDIA_TF32_OVERRIDE says) and restores the handle's previous mode after.
class PedanticMath {
 public:
  explicit PedanticMath(cublasHandle_t handle);
  ~PedanticMath();
  PedanticMath(const PedanticMath&) = delete;
  PedanticMath& operator=(const PedanticMath&) = delete;

 private:
  cublasHandle_t handle_;
  cublasMath_t previous_ = CUBLAS_DEFAULT_MATH;
};

/// Frobenius norms (FP64 sums) of `count` column-major FP32 tiles at base + offsets[t], each of
/// elems[t] elements, into host `out` (synchronises `stream`).
void tile_norms_cuda(const float* base, const std::int64_t* offsets_host,
                     const std::int64_t* elems_host, std::int64_t count, double* out,
                     cudaStream_t stream);

}  // namespace halfscope::linalg::detail
