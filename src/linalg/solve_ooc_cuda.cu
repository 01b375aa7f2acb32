// Triangular solves with a factor in host memory on one GPU (issue 9; solve_cuda.hpp): X A = B,
// A = L L^T, L streamed through the device by slabs of tile columns, so a factor larger than the
// device memory (the out-of-core Cholesky's) is solved where it was factored.
//
// Both substitutions read L by tile columns, each column (its diagonal tile down) one contiguous
// range of the host layout, so a slab of columns is one copy:
//  - forward (Y L^T = B), slabs in ascending order: the in-core steps (solve_steps_cuda.cuh) on
//    the slab's columns, right-looking: column k updates every block of B' below it, and spans
//    of kSolveSpan columns (aligned as in core, so the forward pass is the in-core one) update it
//    once with K = 4 nb;
//  - backward (X L = Y), slabs in descending order, left-looking: block k of B' takes
//    W_k -= sum_{i > k} L_ik^T Z_i from column k alone (its tiles stacked K x nb in each operand
//    format, the solved blocks Z_i kept converted in the formats their tiles use; one GEMM per run
//    of equal variants, K up to n), then its diagonal solve. The right-looking in-core pass reads
//    tile rows, which lie across every slab.
// Each tile meets the same rounded operands as in core (its variant's format, the solved block in
// the same format); only the order of each block's sum differs in the backward pass.
// Two slab buffers alternate: the next slab is uploaded (its own stream) while the current one
// computes, and a slab still on the device is not sent again (the last forward slab is the first
// backward one). B lives on the device, or in host memory and solved by blocks of rows, each
// block streaming L twice; the budget goes first to B's rows, with slabs of at least one span. A
// caller's hook (RowBlockHook) works on each solved block before it goes back.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "halfscope/core/cublas.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"
#include "linalg/out_of_core_cuda.hpp"
#include "linalg/solve_cuda.hpp"
#include "linalg/solve_internal.hpp"
#include "linalg/solve_steps_cuda.cuh"
#include "linalg/solve_support_cuda.hpp"

namespace halfscope::linalg::detail {
namespace {

constexpr int kF = kSolveFormats;

// What the solve allocates on the device, as a function of the rows solved at a time.
struct Sizes {
  std::int64_t n = 0, nb = 0, nt = 0;
  std::array<bool, kF> used{};       // operand formats of the off-diagonal tiles (0: SP)
  std::array<bool, kF> span_used{};  // the formats a fused span may read (HP1, BF16, TF32)
  bool hp3 = false, dp = false;      // C scratch in FP16 / FP64
  bool own_b = true;                 // B's rows copied in (B in host memory)
  bool inverses = false;
  std::int64_t tags = 0;  // entries of the tag tables

  [[nodiscard]] std::int64_t bytes(int f) const {
    return format_bytes(static_cast<OperandFormat>(f));
  }
  [[nodiscard]] std::int64_t span() const { return std::min(kSolveSpan * nb, n); }
  [[nodiscard]] std::int64_t fixed() const {
    std::int64_t total = used[0] ? n * nb * 4 : 0;  // the backward pass's FP32 stack
    for (int f = 1; f < kF; ++f) {
      if (used[f]) total += n * nb * bytes(f);  // forward panels, backward stacks
      if (span_used[f]) total += n * span() * bytes(f);
    }
    if (inverses) total += nt * nb * nb * 4;
    return total + tags * 8 + nt * 8 + 4096;
  }
  [[nodiscard]] std::int64_t rows(std::int64_t r) const {
    std::int64_t total = own_b ? r * n * 4 : 0;
    for (int f = 1; f < kF; ++f) {
      if (used[f]) total += r * (n + nb) * bytes(f);  // converted Z, converted W_k
      if (span_used[f]) total += span() * r * bytes(f);
    }
    if (hp3) total += nb * r * 2;
    if (dp) total += nb * r * 8;
    if (inverses) total += apply_inverse_scratch(nb, r) * 4;
    return total;
  }
  // The most rows in [1, r] that fit `room`, or 0.
  [[nodiscard]] std::int64_t rows_fitting(std::int64_t r, std::int64_t room) const {
    std::int64_t lo = 0, hi = r;
    while (lo < hi) {
      const std::int64_t mid = (lo + hi + 1) / 2;
      if (rows(mid) <= room)
        lo = mid;
      else
        hi = mid - 1;
    }
    return lo;
  }
};

// The solve's allocations for the factor's layout and variants (variants[i * nt + j]).
Sizes sizes_of(const TileLayout& layout, const std::vector<GemmVariant>& variants, bool own_b) {
  Sizes z;
  z.n = layout.rows(), z.nb = layout.tile_size(), z.nt = layout.tile_rows(), z.own_b = own_b;
  const std::int64_t nt = z.nt;
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j + 1; i < nt; ++i) {
      const GemmVariant v = variants[static_cast<std::size_t>(i * nt + j)];
      z.used[static_cast<std::size_t>(operand_format(v))] = true;
      z.hp3 |= v == GemmVariant::HP3;
      z.dp |= v == GemmVariant::DP;
    }
  for (const OperandFormat f : {OperandFormat::fp16, OperandFormat::bf16, OperandFormat::tf32})
    z.span_used[static_cast<std::size_t>(f)] = z.used[static_cast<std::size_t>(f)];
  // Tag tables: the in-core ones (built below: per step and format in use, a tile column or
  // row, both passes) and the backward stacks' (per column and format, the tiles below): at most
  // 4 + 4 + 5 entries per tile pair, halved.
  z.tags = 7 * nt * nt;
  return z;
}

// First column of every slab, then NT: runs of columns of at most `cap` bytes, cut at a multiple
// of kSolveSpan where the run holds one.
std::vector<std::int64_t> plan_slabs(const TileLayout& l, std::int64_t cap) {
  const std::int64_t nt = l.tile_cols();
  std::vector<std::int64_t> starts{0};
  for (std::int64_t c = 1; c < nt; ++c) {
    if (column_elements(l, starts.back(), c + 1) * 4 <= cap) continue;
    const std::int64_t aligned = c / kSolveSpan * kSolveSpan;
    starts.push_back(aligned > starts.back() ? aligned : c);
  }
  starts.push_back(nt);
  return starts;
}

// The streamed solve: one SolveSteps over the slab on the device, and the left-looking backward
// columns.
struct Streamed {
  SolveSteps& sv;
  void* stack[kF] = {};  // column k's tiles below its diagonal, stacked (K x nb, ld K)
  void* z[kF] = {};      // the solved blocks Z_i converted (n x rows, ld n)
  const std::int64_t* diagonal = nullptr;  // tile (k, k)'s offset in its slab (device)
  std::vector<std::int64_t> column_tags;   // [k * kF + f]: start of column k's table for f

  // The leaves of the inverses of slab [c0, c1)'s diagonal tiles (the forward steps join them).
  void leaves(std::int64_t c0, std::int64_t c1) const {
    const std::int64_t nb = sv.nb, nt = sv.nt, last = sv.height(nt - 1);
    const bool short_last = c1 == nt && last != nb;
    TriangularBlocks t;
    t.base = sv.base, t.offsets = diagonal + c0, t.offset_stride = 1;
    t.count = c1 - c0 - (short_last ? 1 : 0), t.ld = nb, t.w = nb;
    if (t.count > 0)
      leaf_inverses(t, sv.inverses + c0 * nb * nb, nb, kInverseLeaf * (nb + 1), nb * nb, sv.s);
    if (!short_last) return;
    t.offsets = diagonal + nt - 1, t.count = 1, t.ld = last, t.w = last;
    leaf_inverses(t, sv.inverses + (nt - 1) * nb * nb, last, kInverseLeaf * (last + 1), 0, sv.s);
  }

  void forward(std::int64_t c0, std::int64_t c1) const {
    if (sv.inverses != nullptr && !sv.inverses_ready) leaves(c0, c1);
    for (std::int64_t k0 = c0; k0 < c1;) {
      const std::int64_t k1 = std::min((k0 / kSolveSpan + 1) * kSolveSpan, c1);
      const bool fused = sv.span_fuses(k0, k1, true);
      for (std::int64_t k = k0; k < k1; ++k) sv.forward(k, fused ? k1 : sv.nt);
      if (fused) sv.forward_span(k0, k1);
      k0 = k1;
    }
  }

  // Block k of the backward pass: W_k -= sum_{i > k} L_ik^T Z_i, then Z_k = L_kk^-T W_k, then Z_k
  // converted into the formats of the tiles (k, j), j < k, that will read it.
  void backward(std::int64_t k) const {
    const std::int64_t nt = sv.nt, nb = sv.nb, n = sv.n, step = 2 * nt - 1 - k;
    if (k + 1 < nt) {
      const std::int64_t depth = n - (k + 1) * nb;
      std::array<bool, kF> formats{};
      for (std::int64_t i = k + 1; i < nt; ++i)
        formats[static_cast<std::size_t>(operand_format(sv.variant(i, k)))] = true;
      for (int f = 0; f < kF; ++f) {
        if (!formats[static_cast<std::size_t>(f)]) continue;
        BlockSet set;
        set.base = sv.base, set.first = sv.l.layout.tile_offset(k + 1, k) - sv.origin;
        set.stride = nb * nb, set.count = nt - k - 1, set.rows = nb;
        set.last_rows = sv.height(nt - 1), set.cols = nb, set.dst_stride = nb, set.dst_ld = depth;
        set.tags = sv.dev_tags + column_tags[static_cast<std::size_t>(k * kF + f)];
        convert_blocks(set, f == 0 ? Rounding::copy : rounding_for(static_cast<OperandFormat>(f)),
                       stack[f], sv.flag, sv.s);
      }
      for (std::int64_t i = k + 1; i < nt;) {
        const GemmVariant v = sv.variant(i, k);
        const int f = static_cast<int>(operand_format(v));
        const auto bytes = format_bytes(static_cast<OperandFormat>(f));
        std::int64_t end = i + 1;
        if (!rounds_c(v))
          while (end < nt && sv.variant(end, k) == v) ++end;
        GemmBatch g;
        g.op_a = CUBLAS_OP_T, g.op_b = CUBLAS_OP_N, g.m = nb, g.n = sv.r;
        g.k = std::min(end * nb, n) - i * nb;
        g.a = static_cast<const char*>(stack[f]) + (i - k - 1) * nb * bytes, g.lda = depth;
        g.b = f == 0 ? static_cast<const void*>(sv.b + i * nb)
                     : static_cast<const char*>(z[f]) + i * nb * bytes;
        g.ldb = n, g.c = sv.b + k * nb, g.ldc = n;
        if (rounds_c(v))
          sv.gemm_rounding_c(v, g, step, i, k);
        else
          gemm_batched(sv.h, v, g);
        i = end;
      }
    }
    sv.solve_diagonal(k, step, true);
    std::array<bool, kF> formats{};
    for (std::int64_t j = 0; j < k; ++j)
      formats[static_cast<std::size_t>(operand_format(sv.variant(k, j)))] = true;
    for (int f = 1; f < kF; ++f)
      if (formats[static_cast<std::size_t>(f)])
        sv.convert_solved(
            f, k, step,
            static_cast<char*>(z[f]) + k * nb * format_bytes(static_cast<OperandFormat>(f)), n);
  }

  // Host table of every column's stacking tags, appended to `host` (the solve's tag tables).
  void build_column_tags(std::vector<FailureCode>& host) {
    const std::int64_t nt = sv.nt;
    column_tags.assign(static_cast<std::size_t>(nt * kF), -1);
    for (std::int64_t k = 0; k + 1 < nt; ++k)
      for (int f = 0; f < kF; ++f) {
        bool any = false;
        for (std::int64_t i = k + 1; i < nt; ++i)
          any |= static_cast<int>(operand_format(sv.variant(i, k))) == f;
        if (!any) continue;
        column_tags[static_cast<std::size_t>(k * kF + f)] = static_cast<std::int64_t>(host.size());
        for (std::int64_t i = k + 1; i < nt; ++i)
          host.push_back(static_cast<int>(operand_format(sv.variant(i, k))) == f
                             ? failure_code(2 * nt - 1 - k, FailureKind::operand, false, i, k)
                             : 0);
      }
  }
};

}  // namespace

std::int64_t streamed_solve_need(const TileLayout& layout, const std::vector<GemmVariant>& variants,
                                 std::int64_t rows) {
  Sizes z = sizes_of(layout, variants, false);
  z.inverses = rows >= z.nb;
  const std::int64_t span = column_elements(layout, 0, std::min(kSolveSpan, z.nt)) * 4;
  return z.fixed() + z.rows(rows) + 2 * span;
}

StreamedSolve solve_right_streamed(const TileMatrix& l, Array& b,
                                   const std::vector<GemmVariant>& variants, int device,
                                   std::int64_t budget, const RowBlockHook& hook) {
  const TileLayout& layout = l.layout;
  const cuda::DeviceGuard restore;
  HS_CUDA_CHECK(cudaSetDevice(device));
  if (b.on_device() && cuda::device_of(b.data()) != device)
    throw InvalidInput("solve_right: b: expected host memory or CUDA device " +
                       std::to_string(device) + " (the solve's device), found device " +
                       std::to_string(cuda::device_of(b.data())));
  cuda::Stream stream, upload;
  cuda::CublasHandle handle;
  HS_CUBLAS_CHECK(cublasSetStream(handle.get(), stream.get()));
  const cudaStream_t s = stream.get(), up = upload.get();
  SolveSteps sv{l, variants, s, handle.get()};
  sv.nt = layout.tile_rows(), sv.nb = layout.tile_size(), sv.n = layout.rows();
  const std::int64_t nt = sv.nt, nb = sv.nb, n = sv.n, r = b.size() / n;

  Sizes z = sizes_of(layout, variants, !b.on_device());
  const std::int64_t one_column = column_elements(layout, 0, 1) * 4;
  const std::int64_t one_span = column_elements(layout, 0, std::min(kSolveSpan, nt)) * 4;
  // The rows solved at a time: all of b's, else as many as fit beside slabs of a span, else of
  // one column; the tiles' inverses only where at least nb rows fit with them (b on the device:
  // all of its rows, or nothing).
  std::int64_t rows = 0;
  for (const bool inverses : {true, false}) {
    z.inverses = inverses && r >= nb;
    for (const std::int64_t slab : {one_span, one_column}) {
      const std::int64_t room = budget - z.fixed() - 2 * slab;
      rows = room > 0 ? z.rows_fitting(r, room) : 0;
      if (!z.own_b && rows < r) rows = 0;
      if (rows > 0) break;
    }
    if (rows >= nb || (rows > 0 && !z.inverses)) break;
  }
  if (rows == 0) {
    const std::int64_t need = z.fixed() + z.rows(z.own_b ? 1 : r) + 2 * one_column;
    throw InvalidInput("solve_right: device_memory: " + gb(budget) +
                       " is too small to solve with " + "n = " + std::to_string(n) +
                       " in tiles of " + std::to_string(nb) +
                       " streamed from host memory: it needs at least " + gb(need) +
                       (z.own_b ? " (two slabs of one tile column and one row of b)"
                                : " (two slabs of one tile column and b's " + std::to_string(r) +
                                      " rows on the device; b in host memory is solved by blocks "
                                      "of rows)"));
  }
  const std::vector<std::int64_t> starts =
      plan_slabs(layout, (budget - z.fixed() - z.rows(rows)) / 2);
  const auto slabs = static_cast<std::int64_t>(starts.size()) - 1;

  const HostPin pin_l(const_cast<void*>(l.storage.data()), l.storage.nbytes(), l.storage.memory());
  const HostPin pin_b(b.data(), z.own_b ? b.nbytes() : 0, b.memory());
  if (!z.own_b) after_legacy_stream(s);
  // Host tables, declared before the drain guards so they outlive every queued copy from them.
  std::vector<FailureCode> tags;
  std::vector<std::int64_t> diagonal(static_cast<std::size_t>(nt));
  for (std::int64_t x = 0; x < slabs; ++x)
    for (std::int64_t k = starts[static_cast<std::size_t>(x)];
         k < starts[static_cast<std::size_t>(x + 1)]; ++k)
      diagonal[static_cast<std::size_t>(k)] =
          layout.tile_offset(k, k) - layout.tile_offset(starts[static_cast<std::size_t>(x)],
                                                        starts[static_cast<std::size_t>(x)]);
  std::vector<std::unique_ptr<cuda::StreamScratch>> scratch;
  StreamedSolve report;
  auto take = [&](std::int64_t bytes) {
    scratch.push_back(std::make_unique<cuda::StreamScratch>(bytes, s));
    report.workspace += bytes;
    return scratch.back()->get();
  };
  // Two slab buffers of the widest slab (one when a single slab holds L: it stays).
  std::int64_t widest = 0;
  for (std::int64_t x = 0; x < slabs; ++x)
    widest = std::max(widest, column_elements(layout, starts[static_cast<std::size_t>(x)],
                                              starts[static_cast<std::size_t>(x + 1)]) *
                                  4);
  void* buffer[2] = {};
  cuda::Event ready[2], done[2];
  for (int i = 0; i < (slabs > 1 ? 2 : 1); ++i) buffer[i] = take(widest);
  // Destroyed before the scratch: whatever throws, the queued work ends before it is freed.
  const DrainStream drain_compute{s}, drain_upload{up};

  Streamed st{sv, {}, {}, nullptr, {}};
  for (int f = 0; f < kF; ++f) {
    if (!z.used[static_cast<std::size_t>(f)]) continue;
    st.stack[f] = take(n * nb * z.bytes(f));
    if (f == 0) continue;
    sv.tiles[f] = st.stack[f];  // the forward panels and the backward stacks take turns
    st.z[f] = take(n * rows * z.bytes(f));
    sv.block[f] = take(nb * rows * z.bytes(f));
    if (!z.span_used[static_cast<std::size_t>(f)]) continue;
    sv.span_tiles[f] = take(n * z.span() * z.bytes(f));
    sv.span_block[f] = take(z.span() * rows * z.bytes(f));
  }
  if (z.hp3) sv.c_scratch[static_cast<int>(OperandFormat::fp16)] = take(nb * rows * 2);
  if (z.dp) sv.c_scratch[static_cast<int>(OperandFormat::fp64)] = take(nb * rows * 8);
  if (z.inverses) {
    sv.inverses = static_cast<float*>(take(nt * nb * nb * 4));
    sv.inverse_scratch = static_cast<float*>(take(apply_inverse_scratch(nb, rows) * 4));
    HS_CUDA_CHECK(cudaMemsetAsync(sv.inverses, 0, static_cast<std::size_t>(nt * nb * nb) * 4, s));
  }
  float* own_b = z.own_b ? static_cast<float*>(take(rows * n * 4)) : nullptr;
  sv.flag = static_cast<FailureCode*>(take(sizeof(FailureCode)));
  HS_CUDA_CHECK(cudaMemsetAsync(sv.flag, 0xff, sizeof(FailureCode), s));
  sv.build_tags(tags);
  st.build_column_tags(tags);
  auto* dev_tags = static_cast<FailureCode*>(
      take(std::max<std::int64_t>(1, static_cast<std::int64_t>(tags.size())) * 8));
  HS_CUDA_CHECK(cudaMemcpyAsync(dev_tags, tags.data(), tags.size() * sizeof(FailureCode),
                                cudaMemcpyHostToDevice, s));
  sv.dev_tags = dev_tags;
  auto* dev_diagonal = static_cast<std::int64_t*>(take(nt * 8));
  HS_CUDA_CHECK(cudaMemcpyAsync(dev_diagonal, diagonal.data(), diagonal.size() * 8,
                                cudaMemcpyHostToDevice, s));
  st.diagonal = dev_diagonal;

  // The slabs in the order the passes read them, for every block of rows.
  std::vector<std::pair<std::int64_t, bool>> order;  // (slab, forward)
  for (std::int64_t x = 0; x < slabs; ++x) order.emplace_back(x, true);
  for (std::int64_t x = slabs - 1; x >= 0; --x) order.emplace_back(x, false);
  std::int64_t holds[2] = {-1, -1};  // the slab in each buffer
  const auto* host = static_cast<const char*>(l.storage.data());
  // The buffer slab x is in, or the one not in use uploaded with it after its last reader.
  auto place = [&](std::int64_t x, int avoid) {
    for (int i = 0; i < 2; ++i)
      if (holds[i] == x) return i;
    const int i = avoid == 0 ? 1 : 0;
    const std::int64_t c0 = starts[static_cast<std::size_t>(x)];
    const std::int64_t bytes =
        column_elements(layout, c0, starts[static_cast<std::size_t>(x + 1)]) * 4;
    HS_CUDA_CHECK(cudaStreamWaitEvent(up, done[i].get(), 0));
    HS_CUDA_CHECK(cudaMemcpyAsync(buffer[i], host + layout.tile_offset(c0, c0) * 4,
                                  static_cast<std::size_t>(bytes), cudaMemcpyHostToDevice, up));
    ready[i].record(up);
    holds[i] = x;
    report.host_to_device += bytes;
    return i;
  };
  const std::int64_t blocks = (r + rows - 1) / rows;
  // b's entries finite: here where b is on the device or in several blocks (the first block's
  // results would go back before the last block is read), else once its one block is uploaded.
  if (!z.own_b || blocks > 1) {
    report.input_non_finite = first_non_finite(b);
    if (report.input_non_finite >= 0) return report;
  }
  auto* first_bad = static_cast<unsigned long long*>(take(8));
  const auto steps = static_cast<std::int64_t>(order.size());
  int current = place(order[0].first, 1);
  for (std::int64_t block = 0; block < blocks; ++block) {
    // With a hook the blocks are cut from the end of b: the first one solved ends at its last row.
    const std::int64_t r0 = hook ? std::max<std::int64_t>(0, r - (block + 1) * rows) : block * rows;
    const std::int64_t count = hook ? r - block * rows - r0 : std::min(rows, r - r0);
    sv.r = count;
    sv.b = z.own_b ? own_b : b.data_as<float>();
    if (z.own_b) {
      HS_CUDA_CHECK(cudaMemcpyAsync(own_b, b.data_as<float>() + r0 * n,
                                    static_cast<std::size_t>(count * n * 4), cudaMemcpyHostToDevice,
                                    s));
      report.host_to_device += count * n * 4;
      if (blocks == 1) {
        unsigned long long bad = ~0ULL;
        HS_CUDA_CHECK(cudaMemsetAsync(first_bad, 0xff, 8, s));
        first_non_finite_async(own_b, count * n, first_bad, s);
        HS_CUDA_CHECK(cudaMemcpyAsync(&bad, first_bad, 8, cudaMemcpyDeviceToHost, s));
        stream.synchronize();
        if (bad != ~0ULL) {
          report.input_non_finite = static_cast<std::int64_t>(bad);
          return report;
        }
      }
    }
    for (std::int64_t t = 0; t < steps; ++t) {
      const auto [x, forward] = order[static_cast<std::size_t>(t)];
      const bool last = t + 1 == steps;
      if (!last || block + 1 < blocks)  // the next slab comes in while this one computes
        (void)place(order[static_cast<std::size_t>(last ? 0 : t + 1)].first, current);
      HS_CUDA_CHECK(cudaStreamWaitEvent(s, ready[current].get(), 0));
      const std::int64_t c0 = starts[static_cast<std::size_t>(x)];
      const std::int64_t c1 = starts[static_cast<std::size_t>(x + 1)];
      sv.base = static_cast<const float*>(buffer[current]);
      sv.origin = layout.tile_offset(c0, c0);
      if (forward) {
        st.forward(c0, c1);
      } else {
        for (std::int64_t k = c1 - 1; k >= c0; --k) st.backward(k);
      }
      done[current].record(s);
      if (!last || block + 1 < blocks) {
        const std::int64_t next = order[static_cast<std::size_t>(last ? 0 : t + 1)].first;
        current = holds[0] == next ? 0 : 1;
      }
    }
    // The solution's entries finite (an FP32 overflow of a nearly singular factor's solve).
    HS_CUDA_CHECK(cudaMemsetAsync(first_bad, 0xff, 8, s));
    first_non_finite_async(sv.b, count * n, first_bad, s);
    const auto download = [&] {
      if (!z.own_b) return;
      HS_CUDA_CHECK(cudaMemcpyAsync(b.data_as<float>() + r0 * n, own_b,
                                    static_cast<std::size_t>(count * n * 4), cudaMemcpyDeviceToHost,
                                    s));
      report.device_to_host += count * n * 4;
    };
    // Without a hook the block goes back behind its check; a hook sees only a finite block, so
    // the check is read first.
    if (!hook) download();
    sv.inverses_ready = true;
    FailureCode code = kNoFailure;
    HS_CUDA_CHECK(cudaMemcpyAsync(&code, sv.flag, sizeof(FailureCode), cudaMemcpyDeviceToHost, s));
    unsigned long long bad = ~0ULL;
    HS_CUDA_CHECK(cudaMemcpyAsync(&bad, first_bad, 8, cudaMemcpyDeviceToHost, s));
    stream.synchronize();
    if (code != kNoFailure) throw_solve_failure(code, sv);
    if (bad != ~0ULL) {
      report.output_non_finite = r0 * n + static_cast<std::int64_t>(bad);
      break;
    }
    if (hook) {
      hook(sv.b, r0, count, s);
      download();
    }
  }
  if (hook) stream.synchronize();  // the last block's rows are back
  report.slabs = slabs;
  report.row_blocks = blocks;
  return report;
}

}  // namespace halfscope::linalg::detail
