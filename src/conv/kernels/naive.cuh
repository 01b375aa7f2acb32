// Device code of the study's "naive" convolution: one thread per output pixel, looping over the
// whole kernel, the kernel in __constant__ memory. Host side: src/conv/naive_cuda.cu.
//
// Floors (H100: 3.35 TB/s, ~50 TFLOP/s FP32 FMA = 25 T FMA/s, FP16 scalar __hfma the same rate):
//   bytes  >= (rows*cols + out_rows*out_cols) * sizeof(storage)   (L1/L2 catch the K-fold reuse)
//   flops  =  2 * out_rows*out_cols * krows*kcols
// Each tap costs one load instruction (L1 hit) and one FMA, with no register reuse of inputs, so
// the kernel is issue-bound at about half the FMA rate for K >= 9: ~12 T taps/s, i.e. a 4096^2
// image with a 7x7 kernel in ~70 us (memory floor 20 us in FP16) -- the baseline PRCF beats.
#pragma once

#include "conv/kernels/direct_common.cuh"

namespace halfscope::conv::kernels {

/// 64 KB of constant memory: 16384 FP32 taps (127 x 127), 32768 FP16/BF16 taps (181 x 181), 8192
/// FP64 taps (90 x 90), stored as the caller's raw storage bits. A kernel that does not fit is
/// read from global memory through the read-only cache instead (kConstKernel = false): every
/// thread of a warp reads the same tap, so those loads are broadcasts that hit L1.
inline constexpr int kNaiveConstantBytes = 65536;
static __constant__ uint4 c_naive_kernel[kNaiveConstantBytes / 16];

inline constexpr int kNaiveBlockX = 32;  // one warp along a row: coalesced image reads
inline constexpr int kNaiveBlockY = 8;
inline constexpr int kNaiveMinBlocks = 4;  // <= 64 registers (ptxas otherwise spilled at 32)

template <class Prec, bool kConstKernel>
__global__ void __launch_bounds__(kNaiveBlockX* kNaiveBlockY, kNaiveMinBlocks)
    naive_conv_kernel(const ConvArgs a) {
  using R = typename Prec::R;
  using A = typename Prec::A;
  const R* img = static_cast<const R*>(a.image);
  const R* ker =
      kConstKernel ? reinterpret_cast<const R*>(c_naive_kernel) : static_cast<const R*>(a.kernel);
  R* out = static_cast<R*>(a.out);
  const long long j = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool circular = a.circular != 0;
  unsigned overflow = 0;

  for (long long i = static_cast<long long>(blockIdx.y) * blockDim.y + threadIdx.y; i < a.out_rows;
       i += static_cast<long long>(gridDim.y) * blockDim.y) {
    if (j >= a.out_cols) continue;  // no early return: commit_overflow needs every thread
    // Taps in row-major order of the flipped loop (u, then v, ascending), one rounding per tap:
    // the order of the CPU direct method, so FP16 results differ from it only by fusing.
    A acc = Prec::zero();
    const long long yc = i + a.row0, xc = j + a.col0;  // in(yc - u, xc - v)
    if (!circular) {
      // Zero boundary: taps outside the image add k * 0, which leaves acc unchanged bit for bit
      // (acc is never -0), so they are skipped by clipping the loops.
      const long long kr = a.krows, kc = a.kcols;
      const int u_lo = static_cast<int>(min(kr, max(0LL, yc - a.rows + 1)));
      const int u_hi = static_cast<int>(min(kr, max(0LL, yc + 1)));
      const int v_lo = static_cast<int>(min(kc, max(0LL, xc - a.cols + 1)));
      const int v_hi = static_cast<int>(min(kc, max(0LL, xc + 1)));
      for (int u = u_lo; u < u_hi; ++u) {
        const R* row = img + (yc - u) * a.cols + xc;
        const R* krow = ker + static_cast<long long>(u) * a.kcols;
        for (int v = v_lo; v < v_hi; ++v) {
          const R k = kConstKernel ? krow[v] : __ldg(krow + v);
          acc = Prec::fma(Prec::widen(k), Prec::widen(__ldg(row - v)), acc);
        }
      }
    } else {
      // Circular: wrap once, then step back with a compare instead of a division per tap
      // (32-bit column index: the host rejects rows longer than 2^31 pixels).
      long long y = wrap_index(yc, a.rows);
      const int x_start = static_cast<int>(wrap_index(xc, a.cols));
      const int last = static_cast<int>(a.cols - 1);
      for (int u = 0; u < a.krows; ++u) {
        const R* row = img + y * a.cols;
        const R* krow = ker + static_cast<long long>(u) * a.kcols;
        int x = x_start;
        for (int v = 0; v < a.kcols; ++v) {
          const R k = kConstKernel ? krow[v] : __ldg(krow + v);
          acc = Prec::fma(Prec::widen(k), Prec::widen(__ldg(row + x)), acc);
          x = x == 0 ? last : x - 1;
        }
        y = y == 0 ? a.rows - 1 : y - 1;
      }
    }
    const R r = Prec::narrow(acc);
    out[i * a.out_cols + j] = r;
    if constexpr (Prec::kNarrow) {
      if (is_nonfinite_bits<Prec>(r) && footprint_finite<Prec>(a, i, j)) ++overflow;
    }
  }
  if constexpr (Prec::kNarrow) commit_overflow(overflow, a.overflow);
}

}  // namespace halfscope::conv::kernels
