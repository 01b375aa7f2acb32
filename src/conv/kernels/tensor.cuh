// Device code of the tensor-core convolution (method `tensor`): the warp primitives that
// tensor_block.hpp is written over (ldmatrix, mma.sync m16n8k16 with FP32 accumulation), the
// convolution kernel and the kernel that builds the Toeplitz fragment table. Host side:
// src/conv/tensor_cuda.cu and tensor_cuda.cuh (launch glue, one instantiation file per precision).
//
// Floors of tensor_conv_kernel for a 4096 x 4096 output on an H100 (3.35 TB/s, ~750 TFLOP/s
// dense FP16 tensor rate; docs/conv-tensor.md derives them):
//   bytes: mixed / bf16 read 2 B and write 2 B per pixel -> 67 MB -> 20 us; split 4 + 4 B -> 40 us.
//   flops: the MMAs execute 2 * krows * 16 Q * nchunks flop per output pixel, a redundancy of
//   16 Q nchunks / kcols over the direct method (2.13 at width 15, 1.55 at 31, 1.23 at 65), and
//   split runs 3 MMAs per product: width 15 -> 21 us (mixed) / 64 us (split); 31 -> 67 / 200 us;
//   65 -> 233 / 698 us. Widths >= ~15 are tensor-bound; below, the memory floor and the blocks'
//   load phases dominate. mma.sync reaches ~60-70 % of the dense rate on Hopper.
// tensor_table_kernel reads the kernel once and writes krows * nchunks * Q * 512 B: microseconds.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "tensor_block.hpp"

namespace halfscope::conv::kernels {

/// The Ops of TensorBlock on the GPU.
struct TensorDeviceOps {
  unsigned char* smem;

  __device__ __forceinline__ int thread_index() const { return static_cast<int>(threadIdx.x); }
  __device__ __forceinline__ std::int64_t block_index() const { return blockIdx.x; }
  __device__ __forceinline__ unsigned char* shared() const { return smem; }
  __device__ __forceinline__ void sync_block() const { __syncthreads(); }
  __device__ __forceinline__ bool sync_block_or(bool v) const { return __syncthreads_or(v) != 0; }
  __device__ __forceinline__ void atomic_add(unsigned int* p, unsigned int v) const {
    atomicAdd(p, v);
  }
  __device__ __forceinline__ std::uint32_t warp_max(std::uint32_t v) const {
    return __reduce_max_sync(0xffffffffu, v);
  }
  __device__ __forceinline__ void ldsm_x4(const std::uint16_t* p, std::uint32_t (&r)[4]) const {
    const auto a = static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  }
  __device__ __forceinline__ void ldsm_x2(const std::uint16_t* p, std::uint32_t& r0,
                                          std::uint32_t& r1) const {
    const auto a = static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r0), "=r"(r1)
                 : "r"(a));
  }
  /// D += A * B, m16n8k16, FP16 (or BF16) operands, FP32 accumulation.
  template <bool kBf16>
  __device__ __forceinline__ void mma(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                      std::uint32_t b1) const {
    if constexpr (kBf16) {
      asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
          "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
      asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
          "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
  }
  __device__ __forceinline__ TensorFrag load_frag(const TensorFrag* p) const {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    return TensorFrag{{v.x, v.y, v.z, v.w}};
  }
  __device__ __forceinline__ float load(const float* p) const { return __ldg(p); }
  __device__ __forceinline__ std::uint16_t load(const std::uint16_t* p) const {
    return __ldg(reinterpret_cast<const unsigned short*>(p));
  }
  __device__ __forceinline__ std::uint16_t to_half(float x) const {
    return __half_as_ushort(__float2half_rn(x));
  }
  __device__ __forceinline__ std::uint16_t to_bf16(float x) const {
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
  }
  __device__ __forceinline__ float from_half(std::uint16_t b) const {
    return __half2float(__ushort_as_half(b));
  }
  /// fp16(lo) in the low half, fp16(hi) in the high half: one F2FP for both.
  __device__ __forceinline__ std::uint32_t pack_half2(float lo, float hi) const {
    const __half2 h = __floats2half2_rn(lo, hi);
    return (static_cast<std::uint32_t>(__half_as_ushort(__high2half(h))) << 16) |
           __half_as_ushort(__low2half(h));
  }
  template <class T>
  __device__ __forceinline__ bool aligned4(const T* p) const {
    return reinterpret_cast<std::uintptr_t>(p) % (4 * sizeof(T)) == 0;
  }
  __device__ __forceinline__ void load4(const float* p, float (&v)[4]) const {
    const float4 x = *reinterpret_cast<const float4*>(p);
    v[0] = x.x;
    v[1] = x.y;
    v[2] = x.z;
    v[3] = x.w;
  }
  // Vector stores in PTX: written in C++, nvcc merged them with the scalar fallback into four
  // scalar stores.
  __device__ __forceinline__ void store4(float* p, const float (&v)[4]) const {
    asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(__cvta_generic_to_global(p)),
                 "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3])
                 : "memory");
  }
  __device__ __forceinline__ void store4(std::uint16_t* p, const std::uint16_t (&v)[4]) const {
    const std::uint32_t a = v[0] | (static_cast<std::uint32_t>(v[1]) << 16);
    const std::uint32_t b = v[2] | (static_cast<std::uint32_t>(v[3]) << 16);
    asm volatile("st.global.v2.b32 [%0], {%1, %2};\n" ::"l"(__cvta_generic_to_global(p)), "r"(a),
                 "r"(b)
                 : "memory");
  }
};

/// One output tile per block (TensorBlock); dynamic shared memory TensorTile<P, Q>::kSmemBytes.
template <TensorPrecision P, int Q>
__global__ void __launch_bounds__(kTensorThreads,
                                  tensor_min_blocks_per_sm(P == TensorPrecision::Split))
    tensor_conv_kernel(const TensorParams p) {
  extern __shared__ __align__(16) unsigned char tensor_smem[];
  TensorDeviceOps ops{tensor_smem};
  TensorBlock<P, Q, TensorDeviceOps> block(p, ops);
  block.run();
}

/// Builds the table of A fragments for kernel row u = blockIdx.x: entry (chunk, u, q, lane) holds
/// the lane's 8 Toeplitz values (toeplitz_column) packed as the mma A operand. Mixed and BF16
/// copy the kernel's bits; split scales the kernel by 2^e (split_exponent of its max |k|) and
/// writes hi = fp16(k 2^e) to `hi`, lo = fp16((k 2^e - hi) 2^11) to `lo`, 2^-e to inv_scale[u].
/// Mixed and BF16 set *nonfinite (zeroed before) when a tap is inf or NaN.
template <TensorPrecision P>
__global__ void tensor_table_kernel(const void* kernel, int krows, int kcols, int nchunks, int cw,
                                    int nq, TensorFrag* hi, TensorFrag* lo, float* inv_scale,
                                    unsigned int* nonfinite) {
  const int u = static_cast<int>(blockIdx.x);
  float scale = 1.0f;
  if constexpr (P != TensorPrecision::Split) {
    constexpr unsigned kExp = P == TensorPrecision::Mixed ? 0x7c00u : 0x7f80u;
    const auto* row =
        static_cast<const unsigned short*>(kernel) + static_cast<std::int64_t>(u) * kcols;
    for (int v = static_cast<int>(threadIdx.x); v < kcols; v += static_cast<int>(blockDim.x))
      if ((row[v] & kExp) == kExp) *nonfinite = 1u;
  }
  if constexpr (P == TensorPrecision::Split) {
    __shared__ std::uint32_t warp_max[32];
    // One scale for the whole kernel (every block reduces all of it: a few kB from L2), so the
    // products of different kernel rows can share an accumulator (tensor_block.hpp, chains).
    const auto* all = static_cast<const float*>(kernel);
    const std::int64_t taps = static_cast<std::int64_t>(krows) * kcols;
    std::uint32_t m = 0;
    for (std::int64_t v = threadIdx.x; v < taps; v += blockDim.x)
      m = max(m, finite_abs_bits(__float_as_uint(all[v])));
    m = __reduce_max_sync(0xffffffffu, m);
    if ((threadIdx.x & 31u) == 0) warp_max[threadIdx.x >> 5] = m;
    __syncthreads();
    m = 0;
    for (unsigned w = 0; w < (blockDim.x + 31) / 32; ++w) m = max(m, warp_max[w]);
    const int e = split_exponent(m);
    scale = pow2(e);
    if (threadIdx.x == 0) inv_scale[u] = pow2(-e);
  }
  const int entries = nchunks * nq * 32;
  for (int idx = static_cast<int>(threadIdx.x); idx < entries;
       idx += static_cast<int>(blockDim.x)) {
    const int lane = idx & 31, q = (idx >> 5) % nq, c = (idx >> 5) / nq;
    std::uint32_t h[4] = {0, 0, 0, 0}, l[4] = {0, 0, 0, 0};
    for (int j = 0; j < 8; ++j) {
      const int v = toeplitz_column(lane, j, q, nq, c * cw, cw, kcols);
      std::uint32_t hb = 0, lb = 0;
      if (v >= 0) {
        const std::int64_t at = static_cast<std::int64_t>(u) * kcols + v;
        if constexpr (P == TensorPrecision::Split) {
          const float x = static_cast<const float*>(kernel)[at] * scale;
          const __half xh = __float2half_rn(x);
          hb = __half_as_ushort(xh);
          lb = __half_as_ushort(__float2half_rn((x - __half2float(xh)) * 2048.0f));
        } else {
          hb = static_cast<const unsigned short*>(kernel)[at];
        }
      }
      h[j >> 1] |= hb << (16 * (j & 1));
      l[j >> 1] |= lb << (16 * (j & 1));
    }
    const std::int64_t at = table_index(c, u, q, lane, krows, nq);
    hi[at] = TensorFrag{{h[0], h[1], h[2], h[3]}};
    if constexpr (P == TensorPrecision::Split) lo[at] = TensorFrag{{l[0], l[1], l[2], l[3]}};
  }
}

}  // namespace halfscope::conv::kernels
