// The tensor-core convolution of one output tile, written once over an `Ops` policy: on the GPU
// (tensor.cuh) Ops are ldmatrix / mma.sync / __syncthreads; in the CPU test
// (tests/conv/test_tensor_emulated.cpp) they are an emulated warp, so every index below is
// checked on machines without a GPU. Design, floors and error analysis: docs/conv-tensor.md.
//
// Formulation. out(i, j) = sum_u sum_v k(u, v) in(i + row0 - u, j + col0 - v). For one kernel
// row u, 16 output columns J0 + j0 + m (m < 16) of 8 output rows are an MMA m16n8k16 chain
//   D(m, n) += sum_q sum_kk A_q(m, kk) * B_q(kk, n),
// B_q(kk, n) = input row (i + row0 - u), column xbase + j0 + 16 q + kk (an 8 x 16 slice of the
// shared-memory tile, read with ldmatrix), and A_q the banded Toeplitz block
//   A_q(m, kk) = k(u, v0 + W - 1 + m - kk - 16 q)  (zero outside the chunk's columns),
// W = 16 Q - 15, xbase = J0 + col0 - v0 - W + 1. A_q does not depend on j0, so Q fragments per
// kernel row serve every column of the tile: they are precomputed per (chunk, u, q, lane) in
// MMA register order (the "table", tensor.cuh) and loaded with one 16-byte load each.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "tensor_params.hpp"

namespace halfscope::conv::kernels {

/// Shared-memory layout of one block for precision P and Q band chunks.
template <TensorPrecision P, int Q>
struct TensorTile {
  static constexpr bool kSplit = P == TensorPrecision::Split;
  static constexpr int kWarpRows = kSplit ? kWarpRowFragsSplit : kWarpRowFrags;  // 8-row frags
  static constexpr int kBlockRows = tensor_block_rows(kSplit);
  static constexpr int kRingRows = tensor_ring_rows(kSplit);
  static constexpr int kWidth = kBlockCols + 16 * (Q - 1);  // input columns per tile row
  // Row pitch an odd number of 16-byte units: the 8 rows of an ldmatrix hit distinct banks.
  static constexpr int kPitch = kWidth + 8;
  // Each lane stages column pairs (2 lane + 64 i, + 1), so a pair is one 32-bit shared store.
  static constexpr int kPairsPerLane = (kWidth + 63) / 64;
  static_assert(kWidth % 2 == 0 && kPitch % 2 == 0, "pairs stay inside rows and aligned");
  static constexpr int kRowsPerWarp = kRowGroup / kTensorWarps;
  static constexpr int kPlaneBytes = kRingRows * kPitch * 2;
  static constexpr int kRowScaleOffset = (kSplit ? 2 : 1) * kPlaneBytes;
  static constexpr int kRowExpOffset = kRowScaleOffset + (kSplit ? kRingRows * 4 : 0);
  static constexpr int kColumnOffset = kRowExpOffset + (kSplit ? kRingRows * 4 : 0);
  static constexpr int kRingBytes = kColumnOffset + kWidth * 4;  // + source column per tile column
  // Floats; conflict-free fragment stores, and rows stay 16-byte aligned for the vector reads.
  static constexpr int kEpiloguePitch = kBlockCols + 4;
  static_assert(kEpiloguePitch % 4 == 0);
  static constexpr int kEpilogueBytes = kBlockRows * kEpiloguePitch * 4;
  static constexpr int kSmemBytes = kRingBytes > kEpilogueBytes ? kRingBytes : kEpilogueBytes;
  using Elem = std::conditional_t<kSplit, float, std::uint16_t>;
  static_assert((kPitch / 8) % 2 == 1, "pitch must be an odd number of 16-byte units");
};

/// One block: a kBlockRows x kBlockCols output tile, 2 x 2 warps of (8 WR) x 64 outputs each.
template <TensorPrecision P, int Q, class Ops>
class TensorBlock {
 public:
  using Tile = TensorTile<P, Q>;
  using Elem = typename Tile::Elem;
  static constexpr bool kSplit = Tile::kSplit;
  static constexpr int WC = kWarpColFrags, WR = Tile::kWarpRows;
  static constexpr int kBlockRows = Tile::kBlockRows, kRingRows = Tile::kRingRows;
  static constexpr int kSteps = WC + Q - 1;  // 16-column input slices one warp reads per 8 rows
  // Mixed / BF16 load the next rows into registers before the MMAs (latency hidden by them); the
  // split, short of registers, loads them after its (3x longer) MMAs.
  static constexpr bool kPrefetchRows = !kSplit;
  // Split row exponents in row_exp(): e + kExpBias (e in [-126, 126]) or kAnyExp.
  static constexpr int kExpBias = 1024;
  static constexpr std::uint32_t kAnyExp = 0;
  // Exponent field of the storage type: all ones means inf or NaN.
  static constexpr std::uint32_t kExpMask =
      P == TensorPrecision::Mixed ? 0x7c00u : (P == TensorPrecision::BF16 ? 0x7f80u : 0x7f800000u);

  HS_TC_DEV TensorBlock(const TensorParams& params, Ops& ops) : p_(params), ops_(ops) {
    const int tid = ops.thread_index();
    lane_ = tid & 31;
    warp_ = tid >> 5;
    wcol0_ = (warp_ % kWarpGridCols) * WC * 16;
    wrow0_ = (warp_ / kWarpGridCols) * WR * 8;
    const std::int64_t bid = ops.block_index();
    col_tile0_ = (bid % p_.tiles_x) * kBlockCols;
    row_tile0_ = (bid / p_.tiles_x) * kBlockRows;
    ybase_ = row_tile0_ + p_.row0 - (p_.krows - 1);
    HS_TC_UNROLL
    for (int cf = 0; cf < WC; ++cf) {
      HS_TC_UNROLL
      for (int rf = 0; rf < WR; ++rf) {
        HS_TC_UNROLL
        for (int e = 0; e < 4; ++e) acc_[cf][rf][e] = 0.0f;
      }
    }
  }

  HS_TC_DEV void run() {
    Elem staged[Tile::kRowsPerWarp][2 * Tile::kPairsPerLane];
    for (int c = 0; c < p_.nchunks; ++c) {
      const int v0 = c * p_.chunk_width;
      xbase_ = col_tile0_ + p_.col0 - v0 - (16 * Q - 15) + 1;
      // A tile inside the image reads its rows at consecutive addresses; the others look each
      // column's source (zero, or wrapped for circular) up in a table built once per chunk.
      interior_ = xbase_ >= 0 && xbase_ + Tile::kWidth <= p_.cols;
      if (!interior_)
        for (int s = ops_.thread_index(); s < Tile::kWidth; s += kTensorThreads)
          columns()[s] = static_cast<int>(source(xbase_ + s, p_.cols));
      ops_.sync_block();
      // Tile row r holds input row ybase + r; kernel row u reads rows r = i + krows - 1 - u.
      const int first = p_.krows - tc_min(kRowGroup, p_.krows), end = p_.krows - 1 + kBlockRows;
      for (int r = first; r < end; r += kRowGroup) {
        load_rows(r, tc_min(kRowGroup, end - r), staged);
        store_rows(r, tc_min(kRowGroup, end - r), staged);
      }
      ops_.sync_block();
      // Group [ua, ub) of kernel rows; the next group's new rows are loaded before and stored
      // after the MMAs (their ring slots are not read by this group), then one barrier.
      for (int ua = 0; ua < p_.krows; ua += kRowGroup) {
        const int ub = tc_min(ua + kRowGroup, p_.krows);
        const int nub = tc_min(ub + kRowGroup, p_.krows);
        if (kPrefetchRows && nub > ub) load_rows(p_.krows - nub, nub - ub, staged);
        compute_group(c, ua, ub);
        if (!kPrefetchRows && nub > ub) load_rows(p_.krows - nub, nub - ub, staged);
        if (nub > ub) store_rows(p_.krows - nub, nub - ub, staged);
        ops_.sync_block();
      }
    }
    epilogue();
  }

 private:
  HS_TC_DEV std::uint16_t* plane(int k) const {
    return reinterpret_cast<std::uint16_t*>(ops_.shared() + k * Tile::kPlaneBytes);
  }
  HS_TC_DEV float* row_scale() const {
    return reinterpret_cast<float*>(ops_.shared() + Tile::kRowScaleOffset);
  }
  /// Split: the exponent e of each ring row's scale 2^-e, biased by kExpBias, or kAnyExp for a
  /// row without a finite nonzero value (any scale represents it).
  HS_TC_DEV std::uint32_t* row_exp() const {
    return reinterpret_cast<std::uint32_t*>(ops_.shared() + Tile::kRowExpOffset);
  }
  /// Image column of each tile column for the current chunk (-1: zero), computed once per chunk.
  HS_TC_DEV int* columns() const {
    return reinterpret_cast<int*>(ops_.shared() + Tile::kColumnOffset);
  }

  /// Index of input coordinate x in [0, n) under the boundary, or -1 for a zero.
  HS_TC_DEV std::int64_t source(std::int64_t x, std::int64_t n) const {
    if (x >= 0 && x < n) return x;
    if (!p_.circular) return -1;
    const std::int64_t m = x % n;
    return m < 0 ? m + n : m;
  }

  /// Reads tile rows [r0, r0 + n) (n <= kRowGroup) into registers: warp w takes rows w, w + 4, ..
  /// whole, so the split's per-row maximum is one warp reduction; lane l takes the column pairs
  /// (2 l + 64 i, 2 l + 64 i + 1), stored as one 32-bit word each.
  HS_TC_DEV void load_rows(int r0, int n,
                           Elem (&st)[Tile::kRowsPerWarp][2 * Tile::kPairsPerLane]) const {
    const Elem* image = static_cast<const Elem*>(p_.image);
    HS_TC_UNROLL
    for (int k = 0; k < Tile::kRowsPerWarp; ++k) {
      const int local = warp_ + kTensorWarps * k;
      if (local >= n) continue;  // warp-uniform
      const std::int64_t y = source(ybase_ + r0 + local, p_.rows);
      const Elem* row = image + (y >= 0 ? y * p_.cols : 0);
      if (interior_) {
        const Elem* at = row + xbase_ + 2 * lane_;
        HS_TC_UNROLL
        for (int i = 0; i < 2 * Tile::kPairsPerLane; ++i) {
          const int s = 2 * lane_ + 64 * (i >> 1);  // the pair's first column
          const int off = 64 * (i >> 1) + (i & 1);
          st[k][i] = (y >= 0 && s < Tile::kWidth) ? ops_.load(at + off) : Elem(0);
        }
      } else {
        const int* cols = columns();
        HS_TC_UNROLL
        for (int i = 0; i < 2 * Tile::kPairsPerLane; ++i) {
          const int s = 2 * lane_ + 64 * (i >> 1) + (i & 1);
          const int x = s < Tile::kWidth ? cols[s] : -1;
          st[k][i] = (y >= 0 && x >= 0) ? ops_.load(row + x) : Elem(0);
        }
      }
    }
  }

  /// Writes staged rows into their ring slots; the split scales each row by a power of two and
  /// stores hi = fp16(x), lo = fp16((x - hi) * 2^11) in two planes.
  HS_TC_DEV void store_rows(int r0, int n,
                            const Elem (&st)[Tile::kRowsPerWarp][2 * Tile::kPairsPerLane]) {
    HS_TC_UNROLL
    for (int k = 0; k < Tile::kRowsPerWarp; ++k) {
      const int local = warp_ + kTensorWarps * k;
      if (local >= n) continue;  // warp-uniform
      const int slot = (r0 + local) & (kRingRows - 1);
      auto* hi = reinterpret_cast<std::uint32_t*>(plane(0) + slot * Tile::kPitch);
      if constexpr (kSplit) {
        std::uint32_t m = 0;
        HS_TC_UNROLL
        for (int i = 0; i < 2 * Tile::kPairsPerLane; ++i) {
          const std::uint32_t b = finite_abs_bits(std::bit_cast<std::uint32_t>(st[k][i]));
          m = b > m ? b : m;
        }
        const std::uint32_t row_max = ops_.warp_max(m);
        const int e = split_exponent(row_max);
        const float scale = pow2(e);
        auto* lo = reinterpret_cast<std::uint32_t*>(plane(1) + slot * Tile::kPitch);
        HS_TC_UNROLL
        for (int i = 0; i < Tile::kPairsPerLane; ++i) {
          const int pair = lane_ + 32 * i;
          if (2 * pair >= Tile::kWidth) continue;
          const float x0 = st[k][2 * i] * scale, x1 = st[k][2 * i + 1] * scale;
          const std::uint32_t h = ops_.pack_half2(x0, x1);
          // x - hi is exact in FP32; its FP16 rounding is the split's only error.
          const float d0 = x0 - ops_.from_half(static_cast<std::uint16_t>(h & 0xffffu));
          const float d1 = x1 - ops_.from_half(static_cast<std::uint16_t>(h >> 16));
          hi[pair] = h;
          lo[pair] = ops_.pack_half2(d0 * 2048.0f, d1 * 2048.0f);
        }
        if (lane_ == 0) {
          row_scale()[slot] = pow2(-e);
          row_exp()[slot] = row_max == 0 ? kAnyExp : static_cast<std::uint32_t>(e + kExpBias);
        }
      } else {
        HS_TC_UNROLL
        for (int i = 0; i < Tile::kPairsPerLane; ++i) {
          const int pair = lane_ + 32 * i;
          if (2 * pair >= Tile::kWidth) continue;
          const std::uint32_t a = st[k][2 * i], b = st[k][2 * i + 1];
          hi[pair] = a | (b << 16);
          input_nonfinite_ |= (a & kExpMask) == kExpMask;
          input_nonfinite_ |= (b & kExpMask) == kExpMask;
        }
      }
    }
  }

  /// Kernel rows [ua, ub): chained where the split's scales allow it, else flushed row by row.
  HS_TC_DEV void compute_group(int c, int ua, int ub) {
    if constexpr (kSplit) {
      float s = 0.0f;
      if (chain_scale(ua, ub, s)) {
        compute_rows_chained(c, ua, ub, s);
        return;
      }
    }
    for (int u = ua; u < ub; ++u) compute_row<false>(c, u, 0.0f);
  }

  /// Split: whether this warp's rows for kernel rows [ua, ub) all share one scale 2^-e_x (rows
  /// without a finite nonzero value fit any), and then s = 2^-(e_x + e_k) with the kernel's
  /// 2^-e_k, when s and s 2^-11 are normal floats. Then the group's hi*hi sums are flushed with
  /// one FMA each and the correction sums chain over the whole group (compute_rows_chained).
  HS_TC_DEV bool chain_scale(int ua, int ub, float& s) const {
    // Rows wrow0 + i + krows - 1 - u for i < 8 WR, ua <= u < ub: at most 31, one per lane.
    static_assert(8 * WR + kRowGroup - 1 <= 32);
    const int first = wrow0_ + p_.krows - ub, count = 8 * WR + (ub - ua) - 1;
    const std::uint32_t code =
        lane_ < count ? row_exp()[(first + lane_) & (kRingRows - 1)] : kAnyExp;
    const std::uint32_t common = ops_.warp_max(code);
    if (ops_.warp_max(code != kAnyExp && code != common ? 1u : 0u) != 0) return false;
    const int ex = common == kAnyExp ? 0 : static_cast<int>(common) - kExpBias;
    const int ek = 127 - static_cast<int>(std::bit_cast<std::uint32_t>(*p_.kernel_inv_scale) >> 23);
    const int t = ex + ek;
    if (t < -127 || t > 126 - 11) return false;
    s = pow2(-t);
    return true;
  }

  /// Kernel rows [ua, ub) with one scale s (chain_scale): each row's hi*hi sums are flushed with
  /// one FMA; the correction sums, 2^-11 of them, keep accumulating in the tensor cores over the
  /// group (their truncation, <= 16 Q 2 ulp of a value 2^-11 of the result, stays below 2^-29).
  HS_TC_DEV void compute_rows_chained(int c, int ua, int ub, float s) {
    HS_TC_UNROLL
    for (int rf = 0; rf < WR; ++rf) {
      HS_TC_UNROLL
      for (int cf = 0; cf < WC; ++cf) {
        HS_TC_UNROLL
        for (int e = 0; e < 4; ++e) tc_[rf][cf][e] = 0.0f;
      }
    }
    for (int u = ua; u < ub; ++u) compute_row<true>(c, u, s);
    const float sc = s * 0x1p-11f;
    HS_TC_UNROLL
    for (int rf = 0; rf < WR; ++rf) {
      HS_TC_UNROLL
      for (int cf = 0; cf < WC; ++cf) {
        HS_TC_UNROLL
        for (int e = 0; e < 4; ++e) acc_[cf][rf][e] = fmaf(tc_[rf][cf][e], sc, acc_[cf][rf][e]);
      }
    }
  }

  /// All MMAs of kernel row u (of column chunk c) for this warp's 4 x 4 fragments; kChain (split)
  /// adds the correction products to tc_ and flushes hi*hi with the common scale s.
  template <bool kChain>
  HS_TC_DEV void compute_row(int c, int u, [[maybe_unused]] float s) {
    TensorFrag ah[Q];
    [[maybe_unused]] TensorFrag al[Q];
    [[maybe_unused]] float inv_k = 1.0f;
    HS_TC_UNROLL
    for (int q = 0; q < Q; ++q) {
      const std::int64_t at = table_index(c, u, q, lane_, p_.krows, Q);
      ah[q] = ops_.load_frag(p_.table_hi + at);
      if constexpr (kSplit) al[q] = ops_.load_frag(p_.table_lo + at);
    }
    if constexpr (kSplit) inv_k = ops_.load(p_.kernel_inv_scale + u);
    [[maybe_unused]] const int t = lane_ & 3;
    HS_TC_UNROLL
    for (int rf = 0; rf < WR; ++rf) {
      const int rbase = wrow0_ + rf * 8 + p_.krows - 1 - u;
      const int offset =
          ((rbase + (lane_ & 7)) & (kRingRows - 1)) * Tile::kPitch + wcol0_ + 8 * (lane_ >> 3);
      const std::uint16_t* bh_row = plane(0) + offset;
      [[maybe_unused]] const std::uint16_t* bl_row = plane(kSplit ? 1 : 0) + offset;
      // Split: hi*hi and the scaled correction sums (the latter chained in tc_ with kChain).
      [[maybe_unused]] float th[WC][4], tc_row[WC][4];
      [[maybe_unused]] float(&tc)[WC][4] = kChain ? tc_[rf] : tc_row;
      if constexpr (kSplit) {
        HS_TC_UNROLL
        for (int cf = 0; cf < WC; ++cf) {
          HS_TC_UNROLL
          for (int e = 0; e < 4; ++e) {
            th[cf][e] = 0.0f;
            if constexpr (!kChain) tc_row[cf][e] = 0.0f;
          }
        }
      }
      HS_TC_UNROLL
      for (int sp = 0; sp < kSteps; sp += 2) {
        std::uint32_t bh[4] = {0, 0, 0, 0};
        [[maybe_unused]] std::uint32_t bl[4] = {0, 0, 0, 0};
        if (sp + 1 < kSteps) {
          ops_.ldsm_x4(bh_row + 16 * sp, bh);
          if constexpr (kSplit) ops_.ldsm_x4(bl_row + 16 * sp, bl);
        } else {
          ops_.ldsm_x2(bh_row + 16 * sp, bh[0], bh[1]);
          if constexpr (kSplit) ops_.ldsm_x2(bl_row + 16 * sp, bl[0], bl[1]);
        }
        HS_TC_UNROLL
        for (int h = 0; h < 2; ++h) {
          const int step = sp + h;  // input columns [16 step, 16 step + 16) of the warp
          if (step >= kSteps) continue;
          HS_TC_UNROLL
          for (int q = 0; q < Q; ++q) {
            const int cf = step - q;
            if (cf < 0 || cf >= WC) continue;
            if constexpr (kSplit) {
              ops_.template mma<false>(th[cf], ah[q].r, bh[2 * h], bh[2 * h + 1]);
              ops_.template mma<false>(tc[cf], ah[q].r, bl[2 * h], bl[2 * h + 1]);
              ops_.template mma<false>(tc[cf], al[q].r, bh[2 * h], bh[2 * h + 1]);
            } else {
              ops_.template mma<P == TensorPrecision::BF16>(acc_[cf][rf], ah[q].r, bh[2 * h],
                                                            bh[2 * h + 1]);
            }
          }
        }
      }
      if constexpr (kChain) {
        // hi*hi in FP32 with round-to-nearest after Q MMAs, as below, with one scale.
        HS_TC_UNROLL
        for (int cf = 0; cf < WC; ++cf) {
          HS_TC_UNROLL
          for (int e = 0; e < 4; ++e) acc_[cf][rf][e] = fmaf(th[cf][e], s, acc_[cf][rf][e]);
        }
      } else if constexpr (kSplit) {
        // Undo the scales in FP32 with round-to-nearest: the tensor cores' chain is at most
        // 3 Q MMAs long, so their truncating accumulation never builds up over kernel rows.
        const float ix[2] = {row_scale()[(rbase + 2 * t) & (kRingRows - 1)],
                             row_scale()[(rbase + 2 * t + 1) & (kRingRows - 1)]};
        HS_TC_UNROLL
        for (int cf = 0; cf < WC; ++cf) {
          HS_TC_UNROLL
          for (int e = 0; e < 4; ++e) {
            const float v = fmaf(tc[cf][e], 0x1p-11f, th[cf][e]) * inv_k;
            acc_[cf][rf][e] = fmaf(v, ix[e & 1], acc_[cf][rf][e]);
          }
        }
      }
    }
  }

  /// Accumulators -> shared memory (fragment order) -> coalesced, bounds-checked global stores,
  /// four outputs per thread and store where the row allows it.
  HS_TC_DEV void epilogue() {
    float* ep = reinterpret_cast<float*>(ops_.shared());
    const int g = lane_ >> 2, t = lane_ & 3;
    HS_TC_UNROLL
    for (int cf = 0; cf < WC; ++cf) {
      HS_TC_UNROLL
      for (int rf = 0; rf < WR; ++rf) {
        HS_TC_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int row = wrow0_ + rf * 8 + 2 * t + (e & 1);    // D column = output row
          const int col = wcol0_ + cf * 16 + g + 8 * (e >> 1);  // D row = output column
          ep[row * Tile::kEpiloguePitch + col] = acc_[cf][rf][e];
        }
      }
    }
    ops_.sync_block();
    Elem* out = static_cast<Elem*>(p_.out);
    // Vector stores need every output row to start on a 4-element boundary.
    const bool vec = p_.out_cols % 4 == 0 && ops_.aligned4(out);
    [[maybe_unused]] unsigned int nonfinite = 0;
    constexpr int kQuads = kBlockCols / 4;
    static_assert(kBlockRows * kQuads % kTensorThreads == 0);
    HS_TC_UNROLL
    for (int it = 0; it < kBlockRows * kQuads / kTensorThreads; ++it) {
      const int i = ops_.thread_index() + kTensorThreads * it;
      const int row = i / kQuads, col = 4 * (i % kQuads);
      const std::int64_t oi = row_tile0_ + row, oj = col_tile0_ + col;
      if (oi >= p_.out_rows || oj >= p_.out_cols) continue;
      float v[4];
      ops_.load4(ep + row * Tile::kEpiloguePitch + col, v);
      Elem o[4];
      HS_TC_UNROLL
      for (int j = 0; j < 4; ++j) {
        if constexpr (kSplit) {
          o[j] = v[j];
        } else {
          o[j] = P == TensorPrecision::BF16 ? ops_.to_bf16(v[j]) : ops_.to_half(v[j]);
          if (oj + j < p_.out_cols && (o[j] & kExpMask) == kExpMask) ++nonfinite;
        }
      }
      Elem* dst = out + oi * p_.out_cols + oj;
      if (vec && oj + 4 <= p_.out_cols) {
        ops_.store4(dst, o);
      } else {
        HS_TC_UNROLL
        for (int j = 0; j < 4; ++j)
          if (oj + j < p_.out_cols) dst[j] = o[j];
      }
    }
    if constexpr (!kSplit) {
      // An inf or NaN output is an overflow only when everything the block read is finite (a
      // non-finite input is passed on, as SciPy does; through the band's zeros it may reach
      // outputs up to 16 Q columns away, which then also pass NaN on).
      const bool inputs_nonfinite = ops_.sync_block_or(input_nonfinite_);
      if (nonfinite != 0 && !inputs_nonfinite && *p_.kernel_nonfinite == 0)
        ops_.atomic_add(p_.overflow, nonfinite);
    }
  }

  const TensorParams& p_;
  Ops& ops_;
  int lane_ = 0, warp_ = 0, wcol0_ = 0, wrow0_ = 0;
  std::int64_t row_tile0_ = 0, col_tile0_ = 0, ybase_ = 0;
  std::int64_t xbase_ = 0;        // image column of the tile's column 0 in the current chunk
  bool interior_ = false;         // the chunk's tile columns all lie inside the image
  bool input_nonfinite_ = false;  // a loaded image value was inf or NaN (mixed / bf16)
  float acc_[WC][WR][4];
  [[maybe_unused]] float tc_[WR][WC][4];  // split, chained groups: correction sums
};

}  // namespace halfscope::conv::kernels
