// Device helpers of the GPU tile Cholesky and solves (src/linalg/tile_cuda.hpp): conversions with
// an overflow flag and the per-variant cuBLAS GEMM. The conversions are memory-bound (one read,
// one write per element; an n x nb panel is a few hundred microseconds at worst next to the
// n * nb^2 flops of the GEMMs that read it).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"
#include "linalg/tile_cuda.hpp"

namespace halfscope::linalg::detail {
namespace {

constexpr int kThreads = 256;

// RNE to TF32 (10 stored mantissa bits), as round_to_tf32 in gemm_variants.cpp does on the CPU.
__device__ float tf32_rne(float x) {
  if (!isfinite(x)) return x;
  const unsigned bits = __float_as_uint(x);
  return __uint_as_float((bits + 0xfffu + ((bits >> 13) & 1u)) & ~0x1fffu);
}

template <Rounding R>
struct Out;
template <>
struct Out<Rounding::to_fp16> {
  using type = __half;
  __device__ static type conv(float x) { return __float2half_rn(x); }
  __device__ static float back(type y) { return __half2float(y); }
};
template <>
struct Out<Rounding::to_bf16> {
  using type = __nv_bfloat16;
  __device__ static type conv(float x) { return __float2bfloat16_rn(x); }
  __device__ static float back(type y) { return __bfloat162float(y); }
};
template <>
struct Out<Rounding::to_tf32> {
  using type = float;
  __device__ static type conv(float x) { return tf32_rne(x); }
  __device__ static float back(type y) { return y; }
};
template <>
struct Out<Rounding::to_fp64> {
  using type = double;
  __device__ static type conv(float x) { return static_cast<double>(x); }
  __device__ static float back(type y) { return static_cast<float>(y); }
};
template <>
struct Out<Rounding::fp16_in_fp32> {
  using type = float;
  __device__ static type conv(float x) { return __half2float(__float2half_rn(x)); }
  __device__ static float back(type y) { return y; }
};

template <>
struct Out<Rounding::tf32_split> {  // the high part; the kernel writes the low one beside it
  using type = float;
  __device__ static type conv(float x) { return tf32_rne(x); }
  __device__ static float back(type y) { return y; }
};
template <>
struct Out<Rounding::copy> {
  using type = float;
  __device__ static type conv(float x) { return x; }
  __device__ static float back(type y) { return y; }
};

template <Rounding R>
__global__ void convert_blocks_kernel(BlockSet set, typename Out<R>::type* dst, FailureCode* flag) {
  for (std::int64_t t = blockIdx.y; t < set.count; t += gridDim.y) {
    const FailureCode tag = set.tags ? set.tags[t] : set.tag_base + t * set.tag_step;
    if (tag == 0) continue;  // no consumer needs this block in this format
    const std::int64_t rows = t == set.count - 1 ? set.last_rows : set.rows;
    const std::int64_t src_ld = set.src_ld ? set.src_ld : rows;
    const std::int64_t dst_ld = set.dst_ld ? set.dst_ld : rows;
    const float* src = set.base + (set.offsets ? set.offsets[t] : set.first + t * set.stride);
    typename Out<R>::type* out = dst + t * set.dst_stride;
    bool overflow = false;
    // Columns over the grid, rows over the threads: coalesced, and no 64-bit division per
    // element (which held the element-indexed version well below the copy bandwidth).
    for (std::int64_t c = blockIdx.x; c < set.cols; c += gridDim.x)
      for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
        const float x = src[c * src_ld + r];
        const typename Out<R>::type y = Out<R>::conv(x);
        // Any non-finite value is flagged, as the CPU emulation does: with A checked finite up
        // front, a NaN/Inf here comes from an FP32 overflow upstream, never from the input.
        // Plain copies (re-layouts of FP32 tiles) are left to the factor's final finiteness
        // check.
        overflow |= R != Rounding::copy && !isfinite(Out<R>::back(y));
        out[c * dst_ld + r] = y;
        if constexpr (R == Rounding::tf32_split)
          out[set.lo_offset + c * dst_ld + r] = isfinite(y) ? x - y : y;
      }
    if (overflow) atomicMin(flag, tag);
  }
}

template <class T>
__global__ void convert_back_kernel(const T* src, std::int64_t count, std::int64_t block_elems,
                                    std::int64_t block_rows, float* dst, std::int64_t dst_ld,
                                    FailureCode tag_base, FailureCode tag_step, FailureCode* flag,
                                    bool check) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float y = static_cast<float>(src[e]);
    if (check && !isfinite(y)) atomicMin(flag, tag_base + (e / block_elems) * tag_step);
    const std::int64_t r = e % block_rows, c = e / block_rows;
    dst[dst_ld ? c * dst_ld + r : e] = y;
  }
}

template <Rounding R>
void launch_convert(const BlockSet& set, void* dst, FailureCode* flag, cudaStream_t stream) {
  if (set.count <= 0 || set.cols <= 0) return;
  const std::int64_t per_block = std::max(set.rows, set.last_rows) * set.cols;
  const int x =
      static_cast<int>(std::min<std::int64_t>(set.cols, cuda::grid_blocks(per_block, kThreads, 8)));
  const unsigned y = static_cast<unsigned>(std::min<std::int64_t>(set.count, 65535));
  convert_blocks_kernel<R><<<dim3(static_cast<unsigned>(x), y), kThreads, 0, stream>>>(
      set, static_cast<typename Out<R>::type*>(dst), flag);
  HS_CHECK_LAUNCH();
}

int as_int(std::int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<int>::max())
    throw InvalidInput(std::string("tile GEMM: ") + what + " = " + std::to_string(v) +
                       " exceeds the 32-bit range of cuBLAS");
  return static_cast<int>(v);
}

}  // namespace

void after_legacy_stream(cudaStream_t stream) {
  const cuda::Event queued;
  queued.record(cudaStreamLegacy);
  HS_CUDA_CHECK(cudaStreamWaitEvent(stream, queued.get(), 0));
}

PedanticMath::PedanticMath(cublasHandle_t handle) : handle_(handle) {
  HS_CUBLAS_CHECK(cublasGetMathMode(handle_, &previous_));
  HS_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_PEDANTIC_MATH));
}

PedanticMath::~PedanticMath() {
  (void)cublasSetMathMode(handle_, previous_);
}

OperandFormat operand_format(GemmVariant v) noexcept {
  switch (v) {
    case GemmVariant::DP:
      return OperandFormat::fp64;
    case GemmVariant::SP:
      return OperandFormat::fp32;
    case GemmVariant::TF32:
      return OperandFormat::tf32;
    case GemmVariant::HP1:
    case GemmVariant::HP2:
    case GemmVariant::HP3:
      return OperandFormat::fp16;
    case GemmVariant::BF16:
      return OperandFormat::bf16;
  }
  return OperandFormat::fp32;
}

OperandFormat c_format(GemmVariant v) noexcept {
  if (v == GemmVariant::HP3) return OperandFormat::fp16;
  if (v == GemmVariant::DP) return OperandFormat::fp64;
  return OperandFormat::fp32;
}

std::int64_t format_bytes(OperandFormat f) noexcept {
  switch (f) {
    case OperandFormat::fp16:
    case OperandFormat::bf16:
      return 2;
    case OperandFormat::fp32:
    case OperandFormat::tf32:
      return 4;
    case OperandFormat::fp64:
      return 8;
  }
  return 4;
}

Rounding rounding_for(OperandFormat f) noexcept {
  switch (f) {
    case OperandFormat::fp16:
      return Rounding::to_fp16;
    case OperandFormat::bf16:
      return Rounding::to_bf16;
    case OperandFormat::tf32:
      return Rounding::to_tf32;
    case OperandFormat::fp64:
    case OperandFormat::fp32:
      return Rounding::to_fp64;
  }
  return Rounding::to_fp64;
}

FailureCode failure_code(std::int64_t step, FailureKind kind, bool second, std::int64_t ti,
                         std::int64_t tj) noexcept {
  constexpr FailureCode mask = (1ULL << 20) - 1;
  return (static_cast<FailureCode>(step) & mask) << 43 | static_cast<FailureCode>(kind) << 41 |
         static_cast<FailureCode>(second ? 1 : 0) << 40 |
         (static_cast<FailureCode>(ti) & mask) << 20 | (static_cast<FailureCode>(tj) & mask);
}

DecodedFailure decode_failure(FailureCode code) noexcept {
  constexpr FailureCode mask = (1ULL << 20) - 1;
  return {static_cast<std::int64_t>(code >> 43 & mask), static_cast<FailureKind>(code >> 41 & 3),
          (code >> 40 & 1) != 0, static_cast<std::int64_t>(code >> 20 & mask),
          static_cast<std::int64_t>(code & mask)};
}

void convert_blocks(const BlockSet& set, Rounding rounding, void* dst, FailureCode* flag,
                    cudaStream_t stream) {
  if (set.count <= 0 || set.cols <= 0) return;
  switch (rounding) {
    case Rounding::to_fp16:
      return launch_convert<Rounding::to_fp16>(set, dst, flag, stream);
    case Rounding::to_bf16:
      return launch_convert<Rounding::to_bf16>(set, dst, flag, stream);
    case Rounding::to_tf32:
      return launch_convert<Rounding::to_tf32>(set, dst, flag, stream);
    case Rounding::to_fp64:
      return launch_convert<Rounding::to_fp64>(set, dst, flag, stream);
    case Rounding::fp16_in_fp32:
      return launch_convert<Rounding::fp16_in_fp32>(set, dst, flag, stream);
    case Rounding::copy:
      return launch_convert<Rounding::copy>(set, dst, flag, stream);
    case Rounding::tf32_split:
      return launch_convert<Rounding::tf32_split>(set, dst, flag, stream);
  }
}

void convert_back(const void* src, bool from_half, std::int64_t count, std::int64_t block_elems,
                  std::int64_t block_rows, float* dst, std::int64_t dst_ld, FailureCode tag_base,
                  FailureCode tag_step, FailureCode* flag, cudaStream_t stream) {
  if (count <= 0) return;
  const int blocks = cuda::grid_blocks(count, kThreads, 8);
  if (from_half)
    convert_back_kernel<__half>
        <<<blocks, kThreads, 0, stream>>>(static_cast<const __half*>(src), count, block_elems,
                                          block_rows, dst, dst_ld, tag_base, tag_step, flag, true);
  else
    // DP results are rounded once to FP32 without a check, as the CPU emulation does.
    convert_back_kernel<double>
        <<<blocks, kThreads, 0, stream>>>(static_cast<const double*>(src), count, block_elems,
                                          block_rows, dst, dst_ld, tag_base, tag_step, flag, false);
  HS_CHECK_LAUNCH();
}

void gemm_batched(cublasHandle_t handle, GemmVariant variant, const GemmBatch& g) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.batch <= 0) return;
  const int m = as_int(g.m, "m"), n = as_int(g.n, "n"), k = as_int(g.k, "k");
  const int lda = as_int(g.lda, "lda"), ldb = as_int(g.ldb, "ldb"), ldc = as_int(g.ldc, "ldc");
  const int batch = as_int(g.batch, "batch");
  const float minus_one = -1.0f, one = 1.0f;
  if (g.a_array) {
    if (variant == GemmVariant::HP2 || variant == GemmVariant::HP3 || variant == GemmVariant::DP)
      throw InvalidInput(
          "tile GEMM: pointer-array batches take only SP, TF32, HP1 and BF16, found " +
          std::string(gemm_variant_name(variant)));
    const cudaDataType_t t = variant == GemmVariant::BF16  ? CUDA_R_16BF
                             : variant == GemmVariant::HP1 ? CUDA_R_16F
                                                           : CUDA_R_32F;
    const cublasComputeType_t compute = variant == GemmVariant::TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                        : variant == GemmVariant::SP ? CUBLAS_COMPUTE_32F_PEDANTIC
                                                                     : CUBLAS_COMPUTE_32F;
    HS_CUBLAS_CHECK(cublasGemmBatchedEx(handle, g.op_a, g.op_b, m, n, k, &minus_one, g.a_array, t,
                                        lda, g.b_array, t, ldb, &one, g.c_array, CUDA_R_32F, ldc,
                                        batch, compute, CUBLAS_GEMM_DEFAULT));
    return;
  }
  if (variant == GemmVariant::SP) {
    // COMPUTE_32F_PEDANTIC: strict FP32 whatever the handle's math mode or
    // NVIDIA_TF32_OVERRIDE say, so "SP" means the same here as in the grouped batches above.
    HS_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        handle, g.op_a, g.op_b, m, n, k, &minus_one, g.a, CUDA_R_32F, lda, g.stride_a, g.b,
        CUDA_R_32F, ldb, g.stride_b, &one, g.c, CUDA_R_32F, ldc, g.stride_c, batch,
        CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT));
    return;
  }
  if (variant == GemmVariant::DP) {
    const double dm = -1.0, d1 = 1.0;
    HS_CUBLAS_CHECK(cublasDgemmStridedBatched(handle, g.op_a, g.op_b, m, n, k, &dm,
                                              static_cast<const double*>(g.a), lda, g.stride_a,
                                              static_cast<const double*>(g.b), ldb, g.stride_b, &d1,
                                              static_cast<double*>(g.c), ldc, g.stride_c, batch));
    return;
  }
  if (variant == GemmVariant::HP3) {
    const __half hm = __float2half(-1.0f), h1 = __float2half(1.0f);
    HS_CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, g.op_a, g.op_b, m, n, k, &hm, g.a,
                                               CUDA_R_16F, lda, g.stride_a, g.b, CUDA_R_16F, ldb,
                                               g.stride_b, &h1, g.c, CUDA_R_16F, ldc, g.stride_c,
                                               batch, CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT));
    return;
  }
  const cudaDataType_t ab = variant == GemmVariant::TF32   ? CUDA_R_32F
                            : variant == GemmVariant::BF16 ? CUDA_R_16BF
                                                           : CUDA_R_16F;
  const cublasComputeType_t compute =
      variant == GemmVariant::TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  HS_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle, g.op_a, g.op_b, m, n, k, &minus_one, g.a, ab, lda, g.stride_a, g.b, ab, ldb,
      g.stride_b, &one, g.c, CUDA_R_32F, ldc, g.stride_c, batch, compute, CUBLAS_GEMM_DEFAULT));
}

void gemm_tf32x3(cublasHandle_t handle, const GemmBatch& g, const SplitOperands& lo) {
  GemmBatch part = g;
  part.b = lo.b_lo, part.b_array = lo.b_lo_array;
  gemm_batched(handle, GemmVariant::TF32, part);  // Ah Bl^T
  part.a = lo.a_lo, part.b = g.b, part.a_array = lo.a_lo_array, part.b_array = g.b_array;
  gemm_batched(handle, GemmVariant::TF32, part);  // Al Bh^T
  gemm_batched(handle, GemmVariant::TF32, g);     // Ah Bh^T
}

}  // namespace halfscope::linalg::detail
