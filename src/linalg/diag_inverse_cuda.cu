// Triangular solves by explicit inverses of diagonal blocks (src/linalg/diag_inverse_cuda.hpp).
//
// A triangular solve is a chain of dependent columns; cublasStrsm ran the panel's 128-wide leaves
// at 4-16 TFLOP/s and the substitutions' 1024 x 11152 diagonal blocks at about 11 on an H200
// (profile in docs/cholesky.md), while a GEMM of the same shapes runs several times faster.
// Multiplying by the inverse costs twice the flops of the solve but is one GEMM: FP32 for the
// panel's leaves (the factorization's FP32 pipes), 3xTF32 for the substitutions' diagonal tiles
// (tensor cores, FP32-grade). Inverting is cheap (a 128-wide block per thread block; larger
// tiles by halving with GEMMs), and multiplying by a triangular inverse is forward stable with
// error bounded by cond(L) u (Du Croz and Higham, 1992), which MAGMA's trsm also relies on; the
// diagonal blocks of a Cholesky factor have cond(L_kk) <= sqrt(cond(A)).
#include "linalg/diag_inverse_cuda.hpp"

#include <algorithm>

#include "halfscope/core/cublas.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::linalg::detail {
namespace {

constexpr int kLeaf = static_cast<int>(kInverseLeaf);

// Column j of -L_bb^-1 solves L_bb x = -e_j by forward substitution. Four lanes of one warp
// share a column, each summing every fourth term of a row's dot product, joined by shuffles, so
// the chain of 127 dependent rows is short (one thread per column took 0.15 ms per call). The
// block's lower triangle sits packed by rows in shared memory, x in a column-per-lane array
// padded to avoid bank conflicts when it is written out by rows.
constexpr int kParts = 4;
constexpr int kThreads = kLeaf * kParts;
constexpr int kTri = kLeaf * (kLeaf + 1) / 2;
constexpr int kXs = kLeaf + 1;  // row stride of the x array
constexpr std::size_t kLeafSmem = (kTri + kLeaf * kXs) * sizeof(float);

__global__ void leaf_inverse_kernel(TriangularBlocks in, float* out, std::int64_t ldo,
                                    std::int64_t leaf_stride, std::int64_t block_stride) {
  extern __shared__ float smem[];
  float* tri = smem;
  float* xs = smem + kTri;  // xs[q * kXs + j]: entry q of column j
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * kLeaf;
  const int s = static_cast<int>(std::min<std::int64_t>(kLeaf, in.w - c0));
  const std::int64_t t_block = blockIdx.y;
  const float* l = in.base + (in.offsets ? in.offsets[t_block * in.offset_stride] : 0);
  const float* block = l + c0 * in.ld + c0;
  const int t = static_cast<int>(threadIdx.x);
  {  // row i, every kParts-th column: independent loads, all in flight at once
    const int i = t % kLeaf;
    if (i < s) {
#pragma unroll 8
      for (int q = t / kLeaf; q <= i; q += kParts) tri[i * (i + 1) / 2 + q] = block[q * in.ld + i];
    }
  }
  __syncthreads();
  const int j = t / kParts, part = t % kParts;
  const int first = j / (32 / kParts) * (32 / kParts);  // the warp's first column
  if (first < s) {
    if (j < s && part == 0) xs[j * kXs + j] = -1.0f / tri[j * (j + 1) / 2 + j];
    __syncwarp();
    for (int i = first + 1; i < s; ++i) {  // every lane of the warp, for the shuffles
      const float* row = tri + i * (i + 1) / 2;
      float a0 = 0.0f, a1 = 0.0f;
      if (i > j && j < s) {
        int q = j + part;
        for (; q + kParts < i; q += 2 * kParts) {
          a0 = fmaf(row[q], xs[q * kXs + j], a0);
          a1 = fmaf(row[q + kParts], xs[(q + kParts) * kXs + j], a1);
        }
        if (q < i) a0 = fmaf(row[q], xs[q * kXs + j], a0);
      }
      float sum = a0 + a1;
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      if (i > j && j < s && part == 0) xs[i * kXs + j] = -sum / row[i];
      __syncwarp();
    }
  }
  __syncthreads();
  float* dst = out + t_block * block_stride + blockIdx.x * leaf_stride;
  const int i = t % kLeaf;
  if (i < s)
    for (int c = t / kLeaf; c < s; c += kParts) dst[c * ldo + i] = i < c ? 0.0f : xs[i * kXs + c];
}

cudaStream_t stream_of(cublasHandle_t blas) {
  cudaStream_t s = nullptr;
  HS_CUBLAS_CHECK(cublasGetStream(blas, &s));
  return s;
}

// C = A B (m x n, K = k), strict FP32, all column-major.
void sgemm(cublasHandle_t blas, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
           std::int64_t lda, const float* b, std::int64_t ldb, float* c, std::int64_t ldc) {
  const float one = 1.0f, zero = 0.0f;
  const PedanticMath strict(blas);
  HS_CUBLAS_CHECK(cublasSgemm(
      blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
      &one, a, static_cast<int>(lda), b, static_cast<int>(ldb), &zero, c, static_cast<int>(ldc)));
}

// The blocks of -L^-1 below its leaves for columns [c0, c0 + w), leaves already in place.
void combine(cublasHandle_t blas, const float* l, std::int64_t ldl, float* n, std::int64_t ldn,
             std::int64_t c0, std::int64_t w, float* t) {
  if (w <= kInverseLeaf) return;
  const std::int64_t h1 = std::max(kInverseLeaf, w / 2 / kInverseLeaf * kInverseLeaf), h2 = w - h1;
  combine(blas, l, ldl, n, ldn, c0, h1, t);
  combine(blas, l, ldl, n, ldn, c0 + h1, h2, t);
  const float* l21 = l + c0 * ldl + c0 + h1;
  const float* n11 = n + c0 * ldn + c0;
  const float* n22 = n + (c0 + h1) * ldn + c0 + h1;
  sgemm(blas, h2, h1, h1, l21, ldl, n11, ldn, t, h2);                     // T = L21 N11
  sgemm(blas, h2, h1, h2, n22, ldn, t, h2, n + c0 * ldn + c0 + h1, ldn);  // N21 = N22 T
}

// Splits the w x cols block `src` (ld src_ld) into TF32 high and low parts at dst and
// dst + lo_offset, both with leading dimension dst_ld.
void split(const float* src, std::int64_t src_ld, std::int64_t w, std::int64_t cols, float* dst,
           std::int64_t dst_ld, std::int64_t lo_offset, FailureCode* flag, FailureCode tag,
           cudaStream_t s) {
  BlockSet set;
  set.base = src, set.count = 1, set.rows = w, set.last_rows = w, set.cols = cols;
  set.src_ld = src_ld, set.dst_ld = dst_ld, set.lo_offset = lo_offset, set.tag_base = tag;
  convert_blocks(set, Rounding::tf32_split, dst, flag, s);
}

}  // namespace

void leaf_inverses(const TriangularBlocks& in, float* out, std::int64_t ldo,
                   std::int64_t leaf_stride, std::int64_t block_stride, cudaStream_t stream) {
  if (in.w <= 0 || in.count <= 0) return;
  const auto leaves = static_cast<unsigned>((in.w + kInverseLeaf - 1) / kInverseLeaf);
  // Above the 48 KB default: set per call, since the setting belongs to the current device.
  HS_CUDA_CHECK(cudaFuncSetAttribute(leaf_inverse_kernel,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(kLeafSmem)));
  for (std::int64_t t0 = 0; t0 < in.count; t0 += 65535) {
    TriangularBlocks part = in;
    part.count = std::min<std::int64_t>(in.count - t0, 65535);
    if (in.offsets) part.offsets = in.offsets + t0 * in.offset_stride;
    leaf_inverse_kernel<<<dim3(leaves, static_cast<unsigned>(part.count)), kThreads, kLeafSmem,
                          stream>>>(part, out + t0 * block_stride, ldo, leaf_stride, block_stride);
    HS_CHECK_LAUNCH();
  }
}

void join_inverse(cublasHandle_t blas, const float* l, std::int64_t ldl, std::int64_t w,
                  float* neg_inv, float* scratch) {
  if (w > 0) combine(blas, l, ldl, neg_inv, w, 0, w, scratch);
}

void negated_inverse(cublasHandle_t blas, const float* l, std::int64_t ldl, std::int64_t w,
                     float* neg_inv, float* scratch) {
  if (w <= 0) return;
  const cudaStream_t s = stream_of(blas);
  // Blocks above the leaves stay zero: apply_inverse multiplies by the whole square.
  HS_CUDA_CHECK(cudaMemsetAsync(neg_inv, 0, static_cast<std::size_t>(w * w) * sizeof(float), s));
  TriangularBlocks one;
  one.base = l, one.ld = ldl, one.w = w;
  leaf_inverses(one, neg_inv, w, kInverseLeaf * (w + 1), 0, s);
  join_inverse(blas, l, ldl, w, neg_inv, scratch);
}

std::int64_t apply_inverse_scratch(std::int64_t w, std::int64_t r) noexcept {
  return 3 * w * w + 3 * w * r;
}

void apply_inverse(cublasHandle_t blas, const float* neg_inv, std::int64_t w, bool transpose,
                   float* x, std::int64_t ldx, std::int64_t r, float* scratch, FailureCode* flag,
                   FailureCode tag, FailureCode tag_x) {
  if (w <= 0 || r <= 0) return;
  const cudaStream_t s = stream_of(blas);
  // A = [Nh Nl Nh] (w x 3w) for L^-1, or its transpose stacked by rows (3w x w) for L^-T;
  // B = [Xl; Xh; Xh] (3w x r): the K blocks pair Nh Xl, Nl Xh, Nh Xh.
  float* a = scratch;
  float* b = scratch + 3 * w * w;
  if (transpose) {
    split(neg_inv, w, w, w, a, 3 * w, w, flag, tag, s);
    copy_2d(a + 2 * w, 3 * w, a, 3 * w, w, w, s);
  } else {
    split(neg_inv, w, w, w, a, w, w * w, flag, tag, s);
    HS_CUDA_CHECK(cudaMemcpyAsync(a + 2 * w * w, a, static_cast<std::size_t>(w * w) * sizeof(float),
                                  cudaMemcpyDeviceToDevice, s));
  }
  split(x, ldx, w, r, b + w, 3 * w, -w, flag, tag_x, s);
  copy_2d(b + 2 * w, 3 * w, b + w, 3 * w, w, r, s);
  HS_CUDA_CHECK(cudaMemset2DAsync(x, static_cast<std::size_t>(ldx) * sizeof(float), 0,
                                  static_cast<std::size_t>(w) * sizeof(float),
                                  static_cast<std::size_t>(r), s));
  GemmBatch g;
  g.op_a = transpose ? CUBLAS_OP_T : CUBLAS_OP_N, g.op_b = CUBLAS_OP_N;
  g.m = w, g.n = r, g.k = 3 * w;
  g.a = a, g.lda = transpose ? 3 * w : w, g.b = b, g.ldb = 3 * w, g.c = x, g.ldc = ldx;
  gemm_batched(blas, GemmVariant::TF32, g);
}

}  // namespace halfscope::linalg::detail
