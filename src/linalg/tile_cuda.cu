// Device helpers of the GPU tile Cholesky and solves (src/linalg/tile_cuda.hpp): conversions with
// an overflow flag and the per-variant cuBLAS GEMM. The conversions are memory-bound (one read,
// one write per element; an n x nb panel is a few hundred microseconds at worst next to the
// n * nb^2 flops of the GEMMs that read it).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
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
struct Out<Rounding::fp16_split> {  // the high part of the scaled value; the kernel places all four
  using type = __half;
  __device__ static type conv(float x) { return __float2half_rn(x); }
  __device__ static float back(type y) { return __half2float(y); }
};
template <>
struct Out<Rounding::copy> {
  using type = float;
  __device__ static type conv(float x) { return x; }
  __device__ static float back(type y) { return y; }
};

// Columns of one block converted per loop trip: their loads are all issued before the first
// store, so a thread keeps kColumns loads in flight instead of one.
constexpr int kColumns = 4;

template <class T>
__device__ bool is_aligned(const T* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

// Stores four converted values at p (aligned to min(16, 4 * sizeof(T)) bytes) in 8-, 16- or
// two 16-byte stores.
template <class T>
__device__ void store4(T* p, const T (&v)[4]) {
  if constexpr (sizeof(T) == 2) {
    uint2 w;
    w.x = static_cast<unsigned>(*reinterpret_cast<const unsigned short*>(&v[0])) |
          static_cast<unsigned>(*reinterpret_cast<const unsigned short*>(&v[1])) << 16;
    w.y = static_cast<unsigned>(*reinterpret_cast<const unsigned short*>(&v[2])) |
          static_cast<unsigned>(*reinterpret_cast<const unsigned short*>(&v[3])) << 16;
    *reinterpret_cast<uint2*>(p) = w;
  } else if constexpr (sizeof(T) == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    *reinterpret_cast<double2*>(p) = make_double2(v[0], v[1]);
    *reinterpret_cast<double2*>(p + 2) = make_double2(v[2], v[3]);
  }
}

// Where a block's converted values go: the leading dimension and, for the splits, where the
// low part (tf32_split) or the four parts (fp16_split) lie.
struct Placement {
  std::int64_t ld = 0;
  std::int64_t lo_offset = 0;
  std::int64_t part_stride = 0;
};

// One source element (already scaled for fp16_split): its converted value, the split's low part,
// and whether it overflowed.
template <Rounding R>
__device__ typename Out<R>::type convert_one(float x, bool& overflow, typename Out<R>::type& lo) {
  const typename Out<R>::type y = Out<R>::conv(x);
  // Any non-finite value is flagged, as the CPU emulation does: with A checked finite up front,
  // a NaN/Inf here comes from an FP32 overflow upstream, never from the input. Plain copies
  // (re-layouts of FP32 tiles) are left to the factor's final finiteness check.
  overflow |= R != Rounding::copy && !isfinite(Out<R>::back(y));
  if constexpr (R == Rounding::tf32_split) lo = isfinite(y) ? x - y : y;  // exact in FP32
  if constexpr (R == Rounding::fp16_split)  // x - hi is exact in FP32, then rounded to FP16
    lo = isfinite(Out<R>::back(y)) ? __float2half_rn(x - __half2float(y)) : y;
  return y;
}

// Stores one converted element, or four (aligned to min(16, 4 * sizeof(T)) bytes), with the
// split's other parts.
template <Rounding R, class V>
__device__ void place(typename Out<R>::type* p, const V& y, const V& lo, const Placement& at) {
  const auto put = [](typename Out<R>::type* q, const V& v) {
    if constexpr (std::is_same_v<V, typename Out<R>::type>)
      *q = v;
    else
      store4(q, v);
  };
  if constexpr (R == Rounding::fp16_split) {  // [lo, hi, hi, lo]
    put(p, lo);
    put(p + at.part_stride, y);
    put(p + 2 * at.part_stride, y);
    put(p + 3 * at.part_stride, lo);
  } else {
    put(p, y);
    if constexpr (R == Rounding::tf32_split) put(p + at.lo_offset, lo);
  }
}

// Block of `quads` x 4 rows and `cols` columns, every column 16-byte aligned at both ends:
// float4 loads, 4-element stores.
template <Rounding R>
__device__ bool convert_quads(const float* src, std::int64_t src_ld, typename Out<R>::type* out,
                              const Placement& at, std::int64_t quads, std::int64_t cols,
                              float scale) {
  using T = typename Out<R>::type;
  bool overflow = false;
  for (std::int64_t c0 = blockIdx.x * std::int64_t{kColumns}; c0 < cols;
       c0 += std::int64_t{gridDim.x} * kColumns)
    for (std::int64_t q = threadIdx.x; q < quads; q += blockDim.x) {
      float4 x[kColumns];
#pragma unroll
      for (int u = 0; u < kColumns; ++u)
        if (c0 + u < cols) x[u] = *reinterpret_cast<const float4*>(src + (c0 + u) * src_ld + 4 * q);
#pragma unroll
      for (int u = 0; u < kColumns; ++u) {
        if (c0 + u >= cols) break;
        alignas(16) T y[4];
        alignas(16) T lo[4];
        y[0] = convert_one<R>(x[u].x * scale, overflow, lo[0]);
        y[1] = convert_one<R>(x[u].y * scale, overflow, lo[1]);
        y[2] = convert_one<R>(x[u].z * scale, overflow, lo[2]);
        y[3] = convert_one<R>(x[u].w * scale, overflow, lo[3]);
        place<R>(out + (c0 + u) * at.ld + 4 * q, y, lo, at);
      }
    }
  return overflow;
}

// Any other block, element by element (kColumns columns per trip all the same).
template <Rounding R>
__device__ bool convert_scalars(const float* src, std::int64_t src_ld, typename Out<R>::type* out,
                                const Placement& at, std::int64_t rows, std::int64_t cols,
                                float scale) {
  using T = typename Out<R>::type;
  bool overflow = false;
  for (std::int64_t c0 = blockIdx.x * std::int64_t{kColumns}; c0 < cols;
       c0 += std::int64_t{gridDim.x} * kColumns)
    for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
      float x[kColumns];
#pragma unroll
      for (int u = 0; u < kColumns; ++u)
        if (c0 + u < cols) x[u] = src[(c0 + u) * src_ld + r];
#pragma unroll
      for (int u = 0; u < kColumns; ++u) {
        if (c0 + u >= cols) break;
        T lo{};
        const T y = convert_one<R>(x[u] * scale, overflow, lo);
        place<R>(out + (c0 + u) * at.ld + r, y, lo, at);
      }
    }
  return overflow;
}

template <Rounding R>
__global__ void __launch_bounds__(kThreads)
    convert_blocks_kernel(BlockSet set, typename Out<R>::type* dst, FailureCode* flag) {
  using T = typename Out<R>::type;
  for (std::int64_t t = blockIdx.y; t < set.count; t += gridDim.y) {
    const FailureCode tag = set.tags ? set.tags[t] : set.tag_base + t * set.tag_step;
    if (tag == 0) continue;  // no consumer needs this block in this format
    const std::int64_t rows = t == set.count - 1 ? set.last_rows : set.rows;
    const std::int64_t src_ld = set.src_ld ? set.src_ld : rows;
    const Placement at{set.dst_ld ? set.dst_ld : rows, set.lo_offset, set.part_stride};
    const float* src = set.base + (set.offsets ? set.offsets[t] : set.first + t * set.stride);
    T* out = dst + t * set.dst_stride;
    // A power of two: exact, barring FP32 underflow of entries far below the block's scale.
    const float scale = R == Rounding::fp16_split ? ldexpf(1.0f, -set.exponents[t]) : 1.0f;
    // Columns over the grid's x, rows over the threads: coalesced, no 64-bit division per
    // element, and whole 16-byte vectors where every column of the block is aligned (the
    // tiles of L with nb and n multiples of 4).
    const bool quads = rows % 4 == 0 && src_ld % 4 == 0 && at.ld % 4 == 0 &&
                       at.lo_offset % 4 == 0 && at.part_stride % 4 == 0 && is_aligned(src, 16) &&
                       is_aligned(out, sizeof(T) * 4 < 16 ? sizeof(T) * 4 : 16);
    const bool overflow = quads ? convert_quads<R>(src, src_ld, out, at, rows / 4, set.cols, scale)
                                : convert_scalars<R>(src, src_ld, out, at, rows, set.cols, scale);
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

// e_j of diagonal_exponents from the largest diagonal entry `hi` of tile (j, j) and its smallest
// `lo` (0: an entry that is not positive and finite); on the device and on the host alike.
__host__ __device__ int split_exponent(float hi, float lo) {
  if (!(lo > 0.0f) || hi > ldexpf(lo, 20)) return kNoSplitExponent;
  int p = 0;
  (void)frexpf(hi, &p);                               // hi = f 2^p, f in [0.5, 1)
  const int half = p >= 0 ? (p + 1) / 2 : -(-p / 2);  // ceil(p / 2): sqrt(hi) < 2^half
  return half - 14 < -63 ? -63 : (half - 14 > 63 ? 63 : half - 14);
}

// Block j: e_j of diagonal_exponents from the diagonal of tile (j, j).
__global__ void __launch_bounds__(kThreads)
    diagonal_exponents_kernel(const float* base, const std::int64_t* offsets,
                              const std::int64_t* heights, int* out) {
  __shared__ float largest[kThreads], smallest[kThreads];
  const std::int64_t h = heights[blockIdx.x];
  const float* d = base + offsets[blockIdx.x];
  float hi = 0.0f, lo = INFINITY;  // lo = 0 marks an entry that is not positive and finite
  for (std::int64_t a = threadIdx.x; a < h; a += blockDim.x) {
    const float v = d[a * (h + 1)];
    const bool ok = isfinite(v) && v > 0.0f;
    hi = ok ? fmaxf(hi, v) : hi;
    lo = ok ? fminf(lo, v) : 0.0f;
  }
  largest[threadIdx.x] = hi, smallest[threadIdx.x] = lo;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) {
      largest[threadIdx.x] = fmaxf(largest[threadIdx.x], largest[threadIdx.x + s]);
      smallest[threadIdx.x] = fminf(smallest[threadIdx.x], smallest[threadIdx.x + s]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = split_exponent(largest[0], smallest[0]);
}

template <Rounding R>
void launch_convert(const BlockSet& set, void* dst, FailureCode* flag, cudaStream_t stream) {
  if (set.count <= 0 || set.cols <= 0) return;
  // About two waves of blocks in all, each converting kColumns columns per trip: a block per
  // column of one tile (4 KB) spent more time being scheduled than converting.
  const unsigned y = static_cast<unsigned>(std::min<std::int64_t>(set.count, 65535));
  const std::int64_t groups = (set.cols + kColumns - 1) / kColumns;
  int device = 0, sms = 0;
  HS_CUDA_CHECK(cudaGetDevice(&device));
  HS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::int64_t wanted = 2 * std::int64_t{sms} * (2048 / kThreads);
  const int x = static_cast<int>(std::clamp<std::int64_t>((wanted + y - 1) / y, 1, groups));
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

void gemm_rounding_c(cublasHandle_t handle, cudaStream_t stream, GemmVariant v, GemmBatch g,
                     BlockSet cset, FailureCode result_tag, void* scratch, FailureCode* flag) {
  auto* c = static_cast<float*>(g.c);
  if (v == GemmVariant::HP2) {
    convert_blocks(cset, Rounding::fp16_in_fp32, c, flag, stream);
    gemm_batched(handle, v, g);
    cset.tag_base = result_tag;
    convert_blocks(cset, Rounding::fp16_in_fp32, c, flag, stream);
    return;
  }
  // The scratch holds C packed (block t at t rows cols, ld rows), whatever C's own ld.
  const std::int64_t elems = cset.rows * cset.cols, total = cset.count * elems;
  BlockSet packed = cset;
  packed.dst_ld = 0, packed.dst_stride = elems;
  convert_blocks(packed, rounding_for(c_format(v)), scratch, flag, stream);
  g.c = scratch, g.ldc = cset.rows, g.stride_c = elems;
  gemm_batched(handle, v, g);
  convert_back(scratch, v == GemmVariant::HP3, total, elems, cset.src_ld > 0 ? cset.rows : total, c,
               cset.src_ld, result_tag, cset.tag_step, flag, stream);
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
    case Rounding::fp16_split:
      return launch_convert<Rounding::fp16_split>(set, dst, flag, stream);
  }
}

std::vector<int> diagonal_exponents(const float* base, const std::vector<std::int64_t>& offsets,
                                    const std::vector<std::int64_t>& heights, int* dev,
                                    cudaStream_t stream) {
  const auto nt = static_cast<std::int64_t>(offsets.size());
  std::vector<int> host(offsets.size(), 0);
  if (nt == 0) return host;
  cuda::StreamScratch table(2 * nt * static_cast<std::int64_t>(sizeof(std::int64_t)), stream);
  auto* dev_offsets = table.as<std::int64_t>();
  HS_CUDA_CHECK(cudaMemcpyAsync(dev_offsets, offsets.data(), offsets.size() * sizeof(std::int64_t),
                                cudaMemcpyHostToDevice, stream));
  HS_CUDA_CHECK(cudaMemcpyAsync(dev_offsets + nt, heights.data(),
                                heights.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice,
                                stream));
  diagonal_exponents_kernel<<<static_cast<unsigned>(nt), kThreads, 0, stream>>>(
      base, dev_offsets, dev_offsets + nt, dev);
  HS_CHECK_LAUNCH();
  HS_CUDA_CHECK(
      cudaMemcpyAsync(host.data(), dev, host.size() * sizeof(int), cudaMemcpyDeviceToHost, stream));
  HS_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host tables and `host` are then free
  return host;
}

std::vector<int> diagonal_exponents_host(const float* base,
                                         const std::vector<std::int64_t>& offsets,
                                         const std::vector<std::int64_t>& heights) {
  std::vector<int> out(offsets.size(), 0);
  for (std::size_t j = 0; j < offsets.size(); ++j) {
    const std::int64_t h = heights[j];
    const float* d = base + offsets[j];
    float hi = 0.0f, lo = INFINITY;
    for (std::int64_t a = 0; a < h; ++a) {
      const float v = d[a * (h + 1)];
      const bool ok = std::isfinite(v) && v > 0.0f;
      hi = ok ? std::fmax(hi, v) : hi;
      lo = ok ? std::fmin(lo, v) : 0.0f;
    }
    out[j] = split_exponent(hi, lo);
  }
  return out;
}

void copy_2d(float* dst, std::int64_t dst_pitch, const float* src, std::int64_t src_pitch,
             std::int64_t width, std::int64_t height, cudaStream_t stream) {
  const std::size_t bytes = static_cast<std::size_t>(width) * sizeof(float);
  if (height == 1) {
    HS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
    return;
  }
  HS_CUDA_CHECK(cudaMemcpy2DAsync(dst, static_cast<std::size_t>(dst_pitch) * sizeof(float), src,
                                  static_cast<std::size_t>(src_pitch) * sizeof(float), bytes,
                                  static_cast<std::size_t>(height), cudaMemcpyDeviceToDevice,
                                  stream));
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
  const float alpha = -g.scale, one = 1.0f;
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
    HS_CUBLAS_CHECK(cublasGemmBatchedEx(handle, g.op_a, g.op_b, m, n, k, &alpha, g.a_array, t, lda,
                                        g.b_array, t, ldb, &one, g.c_array, CUDA_R_32F, ldc, batch,
                                        compute, CUBLAS_GEMM_DEFAULT));
    return;
  }
  if (variant == GemmVariant::SP) {
    // COMPUTE_32F_PEDANTIC: strict FP32 whatever the handle's math mode or
    // NVIDIA_TF32_OVERRIDE say, so "SP" means the same here as in the grouped batches above.
    HS_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        handle, g.op_a, g.op_b, m, n, k, &alpha, g.a, CUDA_R_32F, lda, g.stride_a, g.b, CUDA_R_32F,
        ldb, g.stride_b, &one, g.c, CUDA_R_32F, ldc, g.stride_c, batch, CUBLAS_COMPUTE_32F_PEDANTIC,
        CUBLAS_GEMM_DEFAULT));
    return;
  }
  if (variant == GemmVariant::DP) {
    const double dm = -static_cast<double>(g.scale), d1 = 1.0;
    HS_CUBLAS_CHECK(cublasDgemmStridedBatched(handle, g.op_a, g.op_b, m, n, k, &dm,
                                              static_cast<const double*>(g.a), lda, g.stride_a,
                                              static_cast<const double*>(g.b), ldb, g.stride_b, &d1,
                                              static_cast<double*>(g.c), ldc, g.stride_c, batch));
    return;
  }
  if (variant == GemmVariant::HP3) {
    const __half hm = __float2half(-g.scale), h1 = __float2half(1.0f);
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
      handle, g.op_a, g.op_b, m, n, k, &alpha, g.a, ab, lda, g.stride_a, g.b, ab, ldb, g.stride_b,
      &one, g.c, CUDA_R_32F, ldc, g.stride_c, batch, compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace halfscope::linalg::detail
