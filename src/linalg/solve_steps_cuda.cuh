// The substitution steps of the GPU triangular solves (internal header, CUDA builds only), shared
// by the in-core solve (solve_cuda.cu: the design notes) and the out-of-core one
// (solve_ooc_cuda.cu, which runs the forward steps on slabs of tile columns).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "halfscope/core/cublas.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/tiles.hpp"
#include "linalg/diag_inverse_cuda.hpp"
#include "linalg/tile_cuda.hpp"

namespace halfscope::linalg::detail {

constexpr int kSolveFormats = 5;
constexpr std::int64_t kSolveSpan = 4;  // tile columns per span

struct SolveSteps {
  const TileMatrix& l;
  const std::vector<GemmVariant>& variants;
  cudaStream_t s = nullptr;
  cublasHandle_t h = nullptr;
  std::int64_t nt = 0, nb = 0, n = 0, r = 0;
  const float* base = nullptr;
  // Element offset of `base` in L's layout: 0 in core; out of core the first element of the
  // slab of tile columns on the device (tile (i, j) of the slab at base + tile_offset - origin).
  std::int64_t origin = 0;
  float* b = nullptr;
  void* tiles[kSolveFormats] = {};  // converted tiles of L (a panel, or a gathered tile row)
  void* block[kSolveFormats] = {};  // converted solved block W_k / Z_k (nb x r, packed)
  void* c_scratch[kSolveFormats] = {};
  void* span_tiles[kSolveFormats] =
      {};  // a span's tiles of L, packed per tile row (n x kSolveSpan nb)
  void* span_block[kSolveFormats] = {};  // a span's solved blocks stacked (kSolveSpan nb x r)
  float* inverses = nullptr;  // -L_kk^-1 of every diagonal tile (nb^2 each), when r >= nb
  float* inverse_scratch = nullptr;
  // The inverses are whole (joined by an earlier forward pass over the same factor): the forward
  // steps apply them without joining again (the out-of-core solve's later blocks of rows).
  bool inverses_ready = false;
  FailureCode* flag = nullptr;
  // Skip/overflow tags of every step's panel conversions, built once per solve and uploaded in
  // one copy (Finding 9: a host table, an allocation and a pageable upload per step and format
  // sat on the critical path). Entry [k * kSolveFormats + f] is where step k's table for format f
  // starts in dev_tags (forward and backward separately), -1 where that step converts none.
  const FailureCode* dev_tags = nullptr;
  std::vector<std::int64_t> forward_tags = {}, backward_tags = {};

  [[nodiscard]] GemmVariant variant(std::int64_t i, std::int64_t j) const {
    return variants[static_cast<std::size_t>(i * nt + j)];
  }
  // The one variant of the tiles (i, k0 .. k1 - 1) (forward) or (k0 .. k1 - 1, i) (backward) if
  // it is a non-rounding low-precision one, else SP (the span then runs column by column).
  [[nodiscard]] GemmVariant span_variant(std::int64_t i, std::int64_t k0, std::int64_t k1,
                                         bool forward) const {
    const GemmVariant v = forward ? variant(i, k0) : variant(k0, i);
    if (v != GemmVariant::HP1 && v != GemmVariant::BF16 && v != GemmVariant::TF32)
      return GemmVariant::SP;
    for (std::int64_t k = k0 + 1; k < k1; ++k)
      if ((forward ? variant(i, k) : variant(k, i)) != v) return GemmVariant::SP;
    return v;
  }
  // Whether span [k0, k1) updates B' outside itself with K = (k1 - k0) nb in this pass.
  [[nodiscard]] bool span_fuses(std::int64_t k0, std::int64_t k1, bool forward) const {
    if (forward ? k1 >= nt : k0 == 0) return false;
    for (std::int64_t i = forward ? k1 : 0; i < (forward ? nt : k0); ++i)
      if (span_variant(i, k0, k1, forward) == GemmVariant::SP) return false;
    return true;
  }
  [[nodiscard]] const float* tile(std::int64_t i, std::int64_t j) const {
    return base + l.layout.tile_offset(i, j) - origin;
  }
  [[nodiscard]] std::int64_t height(std::int64_t i) const { return l.layout.tile_height(i); }
  [[nodiscard]] const void* at(int f, std::int64_t elems) const {
    return static_cast<const char*>(tiles[f]) + elems * format_bytes(static_cast<OperandFormat>(f));
  }

  // Fills `host` with every step's tag tables (the order forward / backward read them) and the
  // offsets into it; the caller uploads `host` once and sets dev_tags.
  void build_tags(std::vector<FailureCode>& host) {
    forward_tags.assign(static_cast<std::size_t>(nt * kSolveFormats), -1);
    backward_tags.assign(static_cast<std::size_t>(nt * kSolveFormats), -1);
    for (std::int64_t k = 0; k + 1 < nt; ++k)
      for (int f = 1; f < kSolveFormats; ++f) {
        bool any = false;
        for (std::int64_t i = k + 1; i < nt; ++i)
          any |= static_cast<int>(operand_format(variant(i, k))) == f;
        if (!any) continue;
        forward_tags[static_cast<std::size_t>(k * kSolveFormats + f)] =
            static_cast<std::int64_t>(host.size());
        // Tiles (i, k) whose variant reads format f, converted; the others skipped (tag 0).
        for (std::int64_t i = k + 1; i < nt; ++i)
          host.push_back(static_cast<int>(operand_format(variant(i, k))) == f
                             ? failure_code(k, FailureKind::operand, false, i, k)
                             : 0);
      }
    for (std::int64_t k = 1; k < nt; ++k) {
      const std::int64_t step = 2 * nt - 1 - k;  // after every forward step
      for (int f = 1; f < kSolveFormats; ++f) {
        bool any = false;
        for (std::int64_t i = 0; i < k; ++i)
          any |= static_cast<int>(operand_format(variant(k, i))) == f;
        if (!any) continue;
        backward_tags[static_cast<std::size_t>(k * kSolveFormats + f)] =
            static_cast<std::int64_t>(host.size());
        for (std::int64_t i = 0; i < k; ++i)
          host.push_back(static_cast<int>(operand_format(variant(k, i))) == f
                             ? failure_code(step, FailureKind::operand, false, k, i)
                             : 0);
      }
    }
  }

  // Solved block k (rows of B', of step `step`) converted into format f at `dst` (leading
  // dimension dst_ld, 0: packed).
  void convert_solved(int f, std::int64_t k, std::int64_t step, void* dst,
                      std::int64_t dst_ld) const {
    BlockSet set;
    set.base = b + k * nb, set.count = 1, set.rows = height(k), set.last_rows = height(k);
    set.cols = r, set.src_ld = n, set.dst_ld = dst_ld;
    set.tag_base = failure_code(step, FailureKind::operand, true, k, k);
    convert_blocks(set, rounding_for(static_cast<OperandFormat>(f)), dst, flag, s);
  }

  // Converts solved block k into every format in `formats` (block[f]).
  void convert_block(std::int64_t k, std::int64_t step, const std::vector<bool>& formats) const {
    for (int f = 1; f < kSolveFormats; ++f)
      if (formats[static_cast<std::size_t>(f)]) convert_solved(f, k, step, block[f], 0);
  }

  // C (rows x r, ld n, in B') -= op(A) W for one tile of L in a C-rounding variant (HP2, HP3,
  // DP); `g` has A, B and the sizes filled in.
  void gemm_rounding_c(GemmVariant v, GemmBatch g, std::int64_t step, std::int64_t ti,
                       std::int64_t tj) const {
    BlockSet cset;
    cset.base = static_cast<float*>(g.c), cset.count = 1, cset.rows = g.m, cset.last_rows = g.m;
    cset.cols = r, cset.src_ld = n, cset.dst_ld = n;
    cset.tag_base = failure_code(step, FailureKind::c_entry, false, ti, tj);
    detail::gemm_rounding_c(h, s, v, g, cset,
                            failure_code(step, FailureKind::result, false, ti, tj),
                            c_scratch[static_cast<int>(c_format(v))], flag);
  }

  // Runs a batch, or tile by tile for the C-rounding variants (A advancing by stride_a, C by nb
  // rows; tile rows ti0 + t, column tj, or transposed for the backward pass).
  void run(GemmVariant v, GemmBatch g, std::int64_t step, std::int64_t ti0, std::int64_t tj,
           bool transposed) const {
    if (!rounds_c(v)) return gemm_batched(h, v, g);
    const std::int64_t count = g.batch;
    const auto bytes = format_bytes(operand_format(v));
    for (std::int64_t t = 0; t < count; ++t) {
      GemmBatch one = g;
      one.batch = 1;
      one.a = static_cast<const char*>(g.a) + t * g.stride_a * bytes;
      one.c = static_cast<float*>(g.c) + t * g.stride_c;
      const std::int64_t ti = transposed ? tj : ti0 + t, tj2 = transposed ? ti0 + t : tj;
      gemm_rounding_c(v, one, step, ti, tj2);
    }
  }

  // B'_k = L_kk^-1 B'_k (forward) or L_kk^-T B'_k (backward): by the tile's inverse on tensor
  // cores where there are enough right-hand sides for the inverse to pay (the forward pass forms
  // it, the backward pass reuses it), else by a strict FP32 strsm.
  void solve_diagonal(std::int64_t k, std::int64_t step, bool transpose) const {
    const std::int64_t hk = height(k);
    if (inverses != nullptr) {
      float* inv = inverses + k * nb * nb;
      if (!transpose && !inverses_ready) join_inverse(h, tile(k, k), hk, hk, inv, inverse_scratch);
      apply_inverse(h, inv, hk, transpose, b + k * nb, n, r, inverse_scratch, flag,
                    failure_code(step, FailureKind::operand, false, k, k),
                    failure_code(step, FailureKind::c_entry, false, k, k));
      return;
    }
    const float one = 1.0f;
    const PedanticMath strict(h);
    HS_CUBLAS_CHECK(cublasStrsm(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER,
                                transpose ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT,
                                static_cast<int>(hk), static_cast<int>(r), &one, tile(k, k),
                                static_cast<int>(hk), b + k * nb, static_cast<int>(n)));
  }

  // Step k of the forward pass: block k solved, then B'_i -= L_ik W_k for k < i < row_end.
  void forward(std::int64_t k, std::int64_t row_end) const {
    solve_diagonal(k, k, false);
    if (k + 1 >= row_end) return;
    std::vector<bool> formats(kSolveFormats, false);
    for (std::int64_t i = k + 1; i < row_end; ++i)
      formats[static_cast<std::size_t>(operand_format(variant(i, k)))] = true;
    convert_block(k, k, formats);
    for (int f = 1; f < kSolveFormats; ++f) {
      if (!formats[static_cast<std::size_t>(f)]) continue;
      BlockSet set;
      set.base = base, set.first = l.layout.tile_offset(k + 1, k) - origin, set.stride = nb * nb;
      set.count = row_end - k - 1, set.rows = nb, set.last_rows = height(row_end - 1);
      set.cols = nb, set.dst_stride = nb * nb;
      set.tags = dev_tags + forward_tags[static_cast<std::size_t>(k * kSolveFormats + f)];
      convert_blocks(set, rounding_for(static_cast<OperandFormat>(f)), tiles[f], flag, s);
    }
    for (std::int64_t i = k + 1; i < row_end;) {
      std::int64_t end = i + 1;
      if (height(i) == nb)
        while (end < row_end && height(end) == nb && variant(end, k) == variant(i, k)) ++end;
      const GemmVariant v = variant(i, k);
      const int f = static_cast<int>(operand_format(v));
      GemmBatch g;
      g.op_a = CUBLAS_OP_N, g.op_b = CUBLAS_OP_N, g.m = height(i), g.n = r, g.k = nb;
      g.a = f == 0 ? static_cast<const void*>(tile(i, k)) : at(f, (i - k - 1) * nb * nb);
      g.lda = height(i), g.stride_a = nb * nb;
      g.b = f == 0 ? static_cast<const void*>(b + k * nb) : block[f];
      g.ldb = f == 0 ? n : nb, g.stride_b = 0;
      g.c = b + i * nb, g.ldc = n, g.stride_c = nb, g.batch = end - i;
      run(v, g, k, i, k, false);
      i = end;
    }
  }

  // Solved block k (of step `step`) converted into rows (k - k0) nb of the span's stacked block
  // in format f (leading dimension kk).
  void convert_span_block(int f, std::int64_t k, std::int64_t k0, std::int64_t kk,
                          std::int64_t step) const {
    const auto bytes = format_bytes(static_cast<OperandFormat>(f));
    convert_solved(f, k, step, static_cast<char*>(span_block[f]) + (k - k0) * nb * bytes, kk);
  }

  // Span [k0, k1) of the forward pass, solved within itself: B'_i -= [L_i,k0 .. L_i,k1-1]
  // [W_k0; ..; W_k1-1] for i >= k1, tile row i's span tiles packed side by side (nb x K).
  void forward_span(std::int64_t k0, std::int64_t k1) const {
    const std::int64_t kk = (k1 - k0) * nb, rows = nt - k1, last = height(nt - 1);
    std::vector<bool> formats(kSolveFormats, false);
    for (std::int64_t i = k1; i < nt; ++i)
      formats[static_cast<std::size_t>(operand_format(span_variant(i, k0, k1, true)))] = true;
    for (int f = 1; f < kSolveFormats; ++f) {
      if (!formats[static_cast<std::size_t>(f)]) continue;
      const auto bytes = format_bytes(static_cast<OperandFormat>(f));
      auto* dst = static_cast<char*>(span_tiles[f]);
      for (std::int64_t k = k0; k < k1; ++k) {
        convert_span_block(f, k, k0, kk, k);
        // Full tile rows: tile (i, k) at column (k - k0) nb of row i's nb x K slot; a short last
        // row (height `last`) is converted on its own so that its slot is last x K.
        const bool short_last = last != nb;
        BlockSet set;
        set.base = base, set.first = l.layout.tile_offset(k1, k) - origin, set.stride = nb * nb;
        set.count = rows - (short_last ? 1 : 0), set.rows = nb, set.last_rows = nb;
        set.cols = nb, set.dst_stride = kk * nb;
        set.tags =
            dev_tags + forward_tags[static_cast<std::size_t>(k * kSolveFormats + f)] + (k1 - k - 1);
        const Rounding rounding = rounding_for(static_cast<OperandFormat>(f));
        if (set.count > 0) convert_blocks(set, rounding, dst + (k - k0) * nb * nb * bytes, flag, s);
        if (!short_last) continue;
        set.first = l.layout.tile_offset(nt - 1, k) - origin, set.count = 1;
        set.rows = last, set.last_rows = last, set.tags += rows - 1;
        convert_blocks(set, rounding, dst + ((rows - 1) * kk * nb + (k - k0) * last * nb) * bytes,
                       flag, s);
      }
    }
    for (std::int64_t i = k1; i < nt;) {
      const GemmVariant v = span_variant(i, k0, k1, true);
      std::int64_t end = i + 1;
      if (height(i) == nb)
        while (end < nt && height(end) == nb && span_variant(end, k0, k1, true) == v) ++end;
      const int f = static_cast<int>(operand_format(v));
      GemmBatch g;
      g.op_a = CUBLAS_OP_N, g.op_b = CUBLAS_OP_N, g.m = height(i), g.n = r, g.k = kk;
      g.a = static_cast<const char*>(span_tiles[f]) +
            (i - k1) * kk * nb * format_bytes(static_cast<OperandFormat>(f));
      g.lda = height(i), g.stride_a = kk * nb;
      g.b = span_block[f], g.ldb = kk, g.stride_b = 0;
      g.c = b + i * nb, g.ldc = n, g.stride_c = nb, g.batch = end - i;
      gemm_batched(h, v, g);
      i = end;
    }
  }

  // Step k of the backward pass: solve with L_kk^T, then W_i -= L_ki^T Z_k for row_begin <= i < k.
  void backward(std::int64_t k, std::int64_t row_begin, const std::int64_t* dev_offsets) const {
    const std::int64_t hk = height(k), step = 2 * nt - 1 - k;  // after every forward step
    solve_diagonal(k, step, true);
    if (k <= row_begin) return;
    std::vector<bool> formats(kSolveFormats, false);
    for (std::int64_t i = row_begin; i < k; ++i)
      formats[static_cast<std::size_t>(operand_format(variant(k, i)))] = true;
    convert_block(k, step, formats);
    for (int f = 1; f < kSolveFormats; ++f) {
      if (!formats[static_cast<std::size_t>(f)]) continue;
      BlockSet set;  // the tiles (k, row_begin .. k - 1), packed one after the other
      set.base = base, set.offsets = dev_offsets + k * nt + row_begin, set.count = k - row_begin;
      set.rows = hk, set.last_rows = hk, set.cols = nb, set.dst_stride = hk * nb,
      set.tags =
          dev_tags + backward_tags[static_cast<std::size_t>(k * kSolveFormats + f)] + row_begin;
      convert_blocks(set, rounding_for(static_cast<OperandFormat>(f)), tiles[f], flag, s);
    }
    for (std::int64_t i = row_begin; i < k;) {
      const GemmVariant v = variant(k, i);
      const int f = static_cast<int>(operand_format(v));
      std::int64_t end = i + 1;
      // In-place FP32 tiles of a row are not evenly spaced: one GEMM each.
      if (f != 0)
        while (end < k && variant(k, end) == v) ++end;
      GemmBatch g;
      g.op_a = CUBLAS_OP_T, g.op_b = CUBLAS_OP_N, g.m = nb, g.n = r, g.k = hk;
      g.a = f == 0 ? static_cast<const void*>(tile(k, i)) : at(f, (i - row_begin) * hk * nb);
      g.lda = hk, g.stride_a = hk * nb;
      g.b = f == 0 ? static_cast<const void*>(b + k * nb) : block[f];
      g.ldb = f == 0 ? n : hk, g.stride_b = 0;
      g.c = b + i * nb, g.ldc = n, g.stride_c = nb, g.batch = end - i;
      run(v, g, step, i, k, true);
      i = end;
    }
  }

  // Span [k0, k1) of the backward pass, solved within itself: W_i -= [L_k0,i; ..; L_k1-1,i]^T
  // [Z_k0; ..; Z_k1-1] for i < k0, the span's tiles of tile column i stacked (K x nb, ld K).
  void backward_span(std::int64_t k0, std::int64_t k1, const std::int64_t* dev_offsets) const {
    const std::int64_t kk = std::min(k1 * nb, n) - k0 * nb;
    std::vector<bool> formats(kSolveFormats, false);
    for (std::int64_t i = 0; i < k0; ++i)
      formats[static_cast<std::size_t>(operand_format(span_variant(i, k0, k1, false)))] = true;
    for (int f = 1; f < kSolveFormats; ++f) {
      if (!formats[static_cast<std::size_t>(f)]) continue;
      const auto bytes = format_bytes(static_cast<OperandFormat>(f));
      for (std::int64_t k = k0; k < k1; ++k) {
        convert_span_block(f, k, k0, kk, 2 * nt - 1 - k);
        BlockSet set;  // tiles (k, 0 .. k0 - 1) at rows (k - k0) nb of each column's K x nb slot
        set.base = base, set.offsets = dev_offsets + k * nt, set.count = k0;
        set.rows = height(k), set.last_rows = height(k), set.cols = nb;
        set.dst_stride = kk * nb, set.dst_ld = kk;
        set.tags = dev_tags + backward_tags[static_cast<std::size_t>(k * kSolveFormats + f)];
        convert_blocks(set, rounding_for(static_cast<OperandFormat>(f)),
                       static_cast<char*>(span_tiles[f]) + (k - k0) * nb * bytes, flag, s);
      }
    }
    for (std::int64_t i = 0; i < k0;) {
      const GemmVariant v = span_variant(i, k0, k1, false);
      std::int64_t end = i + 1;
      while (end < k0 && span_variant(end, k0, k1, false) == v) ++end;
      const int f = static_cast<int>(operand_format(v));
      GemmBatch g;
      g.op_a = CUBLAS_OP_T, g.op_b = CUBLAS_OP_N, g.m = nb, g.n = r, g.k = kk;
      g.a = static_cast<const char*>(span_tiles[f]) +
            i * kk * nb * format_bytes(static_cast<OperandFormat>(f));
      g.lda = kk, g.stride_a = kk * nb;
      g.b = span_block[f], g.ldb = kk, g.stride_b = 0;
      g.c = b + i * nb, g.ldc = n, g.stride_c = nb, g.batch = end - i;
      gemm_batched(h, v, g);
      i = end;
    }
  }

  // The leaves of every diagonal tile's inverse, in one launch per tile height (the forward
  // steps join them), the blocks above them zero.
  void prepare_inverses(const std::int64_t* dev_offsets) const {
    HS_CUDA_CHECK(cudaMemsetAsync(inverses, 0, static_cast<std::size_t>(nt * nb * nb) * 4, s));
    const std::int64_t last = height(nt - 1), full = last == nb ? nt : nt - 1;
    TriangularBlocks tiles;
    tiles.base = base, tiles.offsets = dev_offsets, tiles.offset_stride = nt + 1;
    tiles.count = full, tiles.ld = nb, tiles.w = nb;
    leaf_inverses(tiles, inverses, nb, kInverseLeaf * (nb + 1), nb * nb, s);
    if (full == nt) return;
    tiles.offsets = dev_offsets + (nt - 1) * (nt + 1), tiles.count = 1;
    tiles.ld = last, tiles.w = last;
    leaf_inverses(tiles, inverses + (nt - 1) * nb * nb, last, kInverseLeaf * (last + 1), 0, s);
  }

  void solve(const std::int64_t* dev_offsets) const {
    if (inverses != nullptr) prepare_inverses(dev_offsets);
    for (std::int64_t k0 = 0; k0 < nt; k0 += kSolveSpan) {
      const std::int64_t k1 = std::min(k0 + kSolveSpan, nt);
      const bool fused = span_fuses(k0, k1, true);
      for (std::int64_t k = k0; k < k1; ++k) forward(k, fused ? k1 : nt);
      if (fused) forward_span(k0, k1);
    }
    for (std::int64_t k0 = (nt - 1) / kSolveSpan * kSolveSpan; k0 >= 0; k0 -= kSolveSpan) {
      const std::int64_t k1 = std::min(k0 + kSolveSpan, nt);
      const bool fused = span_fuses(k0, k1, false);
      for (std::int64_t k = k1 - 1; k >= k0; --k) backward(k, fused ? k0 : 0, dev_offsets);
      if (fused) backward_span(k0, k1, dev_offsets);
    }
  }
};

// Waits for the solve's stream when solve_right_cuda leaves, normally or by an exception.
using DrainStream = cuda::StreamDrain;

/// Throws the NumericalError of a failure code read from a solve's flag (not kNoFailure).
[[noreturn]] void throw_solve_failure(FailureCode code, const SolveSteps& sv);

}  // namespace halfscope::linalg::detail
