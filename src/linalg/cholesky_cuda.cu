// GPU tile Cholesky (src/linalg/cholesky_cuda.hpp): study 002 Algorithm 1, right-looking, with
// look-ahead of one panel.
//
// Step k on the panel stream P: spotrf(k, k) (info kept on the device), one strsm of the tiles
// below it (gathered into a tall matrix), conversion of the panel into each low-precision format a
// consumer needs (each tile once, into a double-buffered panel copy), event panel_done[k], then the
// update of column k + 1 with panel k (so panel k + 1 can start at once). On the update stream U:
// wait panel_done[k], update column k + 2 first (ssyrk on the diagonal tile, then one
// strided-batched GEMM per run of equal variants down the column: A = panel tiles (stride nb^2), B
// = the column's panel tile (stride 0), C = the column's tiles (stride nb^2)), recording
// col_done[k] (what P needs for its step k + 1 look-ahead update), then columns k + 3 .. NT - 1:
// their SYRKs, and their GEMMs as one pointer-array batch per variant and tile height (pointers
// planned on the host and uploaded once; HP2 / HP3 / DP, which round C through scratch, stay column
// by column) and update_done[k] at the end (the panel buffer of parity k may then be overwritten by
// step k + 2). No device-wide synchronisation.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <memory>
#include <string>

#include "halfscope/core/cublas.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/cusolver.hpp"
#include "halfscope/core/error.hpp"
#include "linalg/cholesky_cuda.hpp"
#include "linalg/cholesky_factor_cuda.hpp"
#include "linalg/tile_cuda.hpp"

namespace halfscope::linalg::detail {

// Host tables of the first consumer of each panel tile per format (0: none), as failure codes:
// tags[f][k * NT + (i - k - 1)] for tile (i, k). A consumer reads (i, k) as A when it updates
// (i, j), k < j < i, and as B when it updates (i2, i), i2 > i.
std::vector<std::vector<FailureCode>> consumer_tags(const Factor& fc, bool used[kFormats]) {
  const std::int64_t nt = fc.nt;
  std::vector<std::vector<FailureCode>> tags(
      kFormats,
      std::vector<FailureCode>(static_cast<std::size_t>(std::max<std::int64_t>(nt * nt, 1)), 0));
  for (std::int64_t k = 0; k < nt; ++k)
    for (std::int64_t i = k + 1; i < nt; ++i) {
      auto slot = [&](OperandFormat f) -> FailureCode& {
        return tags[static_cast<std::size_t>(f)][static_cast<std::size_t>(k * nt + i - k - 1)];
      };
      for (std::int64_t j = k + 1; j < i; ++j) {
        const OperandFormat f = operand_format(fc.variant(i, j));
        if (f != OperandFormat::fp32 && slot(f) == 0)
          slot(f) = failure_code(k, FailureKind::operand, false, i, j);
      }
      for (std::int64_t i2 = i + 1; i2 < nt; ++i2) {
        const OperandFormat f = operand_format(fc.variant(i2, i));
        if (f != OperandFormat::fp32 && slot(f) == 0)
          slot(f) = failure_code(k, FailureKind::operand, true, i2, i);
      }
    }
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j + 1; i < nt; ++i)
      used[static_cast<int>(operand_format(fc.variant(i, j)))] = true;
  return tags;
}

void throw_failure(const Factor& fc, FailureCode code, const std::string& policy,
                   FailedTile* failed) {
  const DecodedFailure d = decode_failure(code);
  if (failed) {
    *failed = {d.ti, d.tj};
    if (d.kind == FailureKind::operand)
      failed->part = FailedPart::operand, failed->oi = d.second ? d.tj : d.ti, failed->ok = d.step;
    else if (d.kind == FailureKind::c_entry)
      failed->part = FailedPart::c_entry;
  }
  const std::string v(gemm_variant_name(fc.variant(d.ti, d.tj)));
  std::string what;
  if (d.kind == FailureKind::operand)
    what = "an entry of its operand L" + tile_text(d.second ? d.tj : d.ti, d.step);
  else
    what = d.kind == FailureKind::c_entry ? "a C entry" : "a result entry (an FP16 product or sum)";
  throw NumericalError("GEMM " + v + " updating tile " + tile_text(d.ti, d.tj) + " (step " +
                       std::to_string(d.step) + ", policy " + policy + "): " + what +
                       " does not fit the variant's format (FP16 holds |x| <= 65504); use a "
                       "higher-precision policy for this tile or --recover");
}

void throw_first_failure(const Factor& fc, const std::vector<int>& infos, FailureCode code,
                         const std::string& policy_name, FailedTile* failed) {
  const std::int64_t nt = fc.nt, nb = fc.nb;
  // The earliest failure wins; a pivot failing at step k precedes the overflows of its panel.
  const std::int64_t flag_step = code == kNoFailure ? nt : decode_failure(code).step;
  for (std::int64_t k = 0; k < std::min(nt, flag_step + 1); ++k) {
    const std::int64_t info = infos[static_cast<std::size_t>(k)];
    if (info == 0) continue;
    if (failed) *failed = {k, k};
    // A rejected argument is a bug in this call, not the matrix's: CudaError, so that --recover
    // (which retries NumericalErrors) does not blame the precision.
    if (info < 0)
      throw CudaError("cusolverDnSpotrf rejected argument " + std::to_string(-info) + " at tile " +
                      tile_text(k, k));
    throw NotPositiveDefinite("Cholesky with policy " + policy_name + ": tile (" +
                              std::to_string(k) + ", " + std::to_string(k) +
                              ") is not positive definite: leading minor of order " +
                              std::to_string(k * nb + info) + " (global pivot index " +
                              std::to_string(k * nb + info - 1) + ", 0-based)");
  }
  if (code != kNoFailure) throw_failure(fc, code, policy_name, failed);
}

std::int64_t cholesky_cuda(TileMatrix& a, const std::vector<GemmVariant>& variants,
                           const std::string& policy_name, FailedTile* failed) {
  Factor fc{a, variants};
  fc.nt = a.layout.tile_rows(), fc.nb = a.layout.tile_size();
  fc.base = a.storage.data_as<float>();
  const std::int64_t nt = fc.nt, nb = fc.nb, n = a.layout.rows();
  // The panel stream is the critical path: its kernels go first when both streams have work.
  cuda::Stream panel_stream(cuda::StreamPriority::high), update_stream;
  const cudaStream_t p = panel_stream.get(), u = update_stream.get();
  cuda::CusolverHandle solver(p);
  cuda::CublasHandle panel_blas, update_blas;
  HS_CUBLAS_CHECK(cublasSetStream(panel_blas.get(), p));
  HS_CUBLAS_CHECK(cublasSetStream(update_blas.get(), u));
  // A may have been written asynchronously on the legacy stream by the caller.
  after_legacy_stream(p);
  after_legacy_stream(u);

  bool used[kFormats] = {};
  const auto tags = consumer_tags(fc, used);
  const std::int64_t panel_elems = std::max<std::int64_t>(n - nb, 0) * nb;
  std::vector<std::unique_ptr<cuda::StreamScratch>> scratch;  // freed in P's order at the end
  std::int64_t workspace = 0;
  auto take = [&](std::int64_t bytes) {
    scratch.push_back(std::make_unique<cuda::StreamScratch>(bytes, p));
    workspace += bytes;
    return scratch.back()->get();
  };
  FailureCode* tag_tables[kFormats] = {};
  for (int f = 1; f < kFormats && panel_elems > 0; ++f) {
    if (!used[f]) continue;
    const auto fmt = static_cast<OperandFormat>(f);
    for (int parity = 0; parity < 2; ++parity)
      fc.panel[f][parity] = take(panel_elems * format_bytes(fmt));
    const auto bytes = static_cast<std::int64_t>(tags[f].size() * sizeof(FailureCode));
    tag_tables[f] = static_cast<FailureCode*>(take(bytes));
    HS_CUDA_CHECK(cudaMemcpyAsync(tag_tables[f], tags[f].data(), static_cast<std::size_t>(bytes),
                                  cudaMemcpyHostToDevice, p));
  }
  for (const GemmVariant v : {GemmVariant::HP3, GemmVariant::DP}) {
    if (!used[static_cast<int>(operand_format(v))] || panel_elems == 0) continue;
    bool any = false;
    for (const GemmVariant x : variants) any |= x == v;
    const OperandFormat cf = c_format(v);
    if (any && !fc.c_scratch[static_cast<int>(cf)][0])
      for (int side = 0; side < 2; ++side)
        fc.c_scratch[static_cast<int>(cf)][side] = take(panel_elems * format_bytes(cf));
  }
  {
    std::vector<const void*> a_host, b_host;
    std::vector<void*> c_host;
    fc.plan_groups(a_host, b_host, c_host);
    const auto bytes =
        static_cast<std::int64_t>(std::max<std::size_t>(a_host.size(), 1) * sizeof(void*));
    fc.a_ptrs = static_cast<const void**>(take(bytes));
    fc.b_ptrs = static_cast<const void**>(take(bytes));
    fc.c_ptrs = static_cast<void**>(take(bytes));
    const std::size_t copy = a_host.size() * sizeof(void*);
    if (copy > 0) {
      HS_CUDA_CHECK(cudaMemcpyAsync(fc.a_ptrs, a_host.data(), copy, cudaMemcpyHostToDevice, p));
      HS_CUDA_CHECK(cudaMemcpyAsync(fc.b_ptrs, b_host.data(), copy, cudaMemcpyHostToDevice, p));
      HS_CUDA_CHECK(cudaMemcpyAsync(fc.c_ptrs, c_host.data(), copy, cudaMemcpyHostToDevice, p));
      // The host arrays are freed at the end of this block: wait for the copies.
      HS_CUDA_CHECK(cudaStreamSynchronize(p));
    }
  }
  fc.flag = static_cast<FailureCode*>(take(sizeof(FailureCode)));
  HS_CUDA_CHECK(cudaMemsetAsync(fc.flag, 0xff, sizeof(FailureCode), p));  // kNoFailure
  auto* infos = static_cast<int*>(take(nt * static_cast<std::int64_t>(sizeof(int))));
  HS_CUDA_CHECK(cudaMemsetAsync(infos, 0, static_cast<std::size_t>(nt) * sizeof(int), p));
  int lwork = 0;
  HS_CUSOLVER_CHECK(cusolverDnSpotrf_bufferSize(solver.get(), CUBLAS_FILL_MODE_LOWER,
                                                static_cast<int>(std::min(nb, n)), fc.base,
                                                static_cast<int>(std::min(nb, n)), &lwork));
  auto* work =
      static_cast<float*>(take(std::max(lwork, 1) * static_cast<std::int64_t>(sizeof(float))));

  std::vector<std::unique_ptr<cuda::Event>> panel_done, col_done, update_done;
  for (std::int64_t k = 0; k < nt; ++k) {
    panel_done.push_back(std::make_unique<cuda::Event>());
    col_done.push_back(std::make_unique<cuda::Event>());
    update_done.push_back(std::make_unique<cuda::Event>());
  }
  auto* tall = static_cast<float*>(take(std::max<std::int64_t>(panel_elems, 1) * 4));
  const DrainStreams drain{p, u};
  const float one = 1.0f;
  for (std::int64_t k = 0; k < nt; ++k) {
    const std::int64_t hk = fc.height(k);
    HS_CUSOLVER_CHECK(cusolverDnSpotrf(solver.get(), CUBLAS_FILL_MODE_LOWER, static_cast<int>(hk),
                                       fc.tile(k, k), static_cast<int>(hk), work, lwork,
                                       infos + k));
    if (k + 1 < nt) {
      // One strsm for the whole panel: the tiles (k+1 .. NT-1, k) each have their own leading
      // dimension, so they are gathered into one tall column-major matrix (ld = its rows) and
      // scattered back. One tall solve keeps the GPU busy where a strsm per tile (measured: the
      // panel stream's critical path) did not; the arithmetic is strsm's either way.
      const std::int64_t rows = n - (k + 1) * nb;
      BlockSet tiles;
      tiles.base = fc.base, tiles.first = a.layout.tile_offset(k + 1, k), tiles.stride = nb * nb;
      tiles.count = nt - k - 1, tiles.rows = nb, tiles.last_rows = fc.height(nt - 1),
      tiles.cols = nb;
      tiles.dst_stride = nb, tiles.dst_ld = rows, tiles.tag_base = 1;  // copies never overflow
      convert_blocks(tiles, Rounding::copy, tall, fc.flag, p);
      const PedanticMath strict(panel_blas.get());
      HS_CUBLAS_CHECK(cublasStrsm(panel_blas.get(), CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER,
                                  CUBLAS_OP_T, CUBLAS_DIAG_NON_UNIT, static_cast<int>(rows),
                                  static_cast<int>(nb), &one, fc.tile(k, k), static_cast<int>(nb),
                                  tall, static_cast<int>(rows)));
      BlockSet back = tiles;
      back.base = tall, back.first = 0, back.stride = nb, back.src_ld = rows;
      back.dst_stride = nb * nb, back.dst_ld = 0;
      convert_blocks(back, Rounding::copy, fc.tile(k + 1, k), fc.flag, p);
    }
    if (k + 1 < nt) {
      // Parity k % 2 was last read by step k - 2's updates.
      if (k >= 2) HS_CUDA_CHECK(cudaStreamWaitEvent(p, update_done[k - 2]->get(), 0));
      for (int f = 1; f < kFormats; ++f) {
        if (!fc.panel[f][0]) continue;
        BlockSet set;
        set.base = fc.base, set.first = a.layout.tile_offset(k + 1, k), set.stride = nb * nb;
        set.count = nt - k - 1, set.rows = nb, set.last_rows = fc.height(nt - 1), set.cols = nb;
        set.dst_stride = nb * nb, set.tags = tag_tables[f] + k * nt;
        convert_blocks(set, rounding_for(static_cast<OperandFormat>(f)), fc.panel[f][k % 2],
                       fc.flag, p);
      }
    }
    panel_done[k]->record(p);
    if (k + 1 < nt) {
      // Look-ahead: column k + 1 needs step k - 1's update of it (U's first column then).
      if (k >= 1) HS_CUDA_CHECK(cudaStreamWaitEvent(p, col_done[k - 1]->get(), 0));
      fc.update_column(panel_blas.get(), p, 0, k, k + 1);
    }
    if (k + 2 < nt) {
      HS_CUDA_CHECK(cudaStreamWaitEvent(u, panel_done[k]->get(), 0));
      fc.update_column(update_blas.get(), u, 1, k, k + 2);
      col_done[k]->record(u);
      fc.update_rest(update_blas.get(), u, k);
    }
    update_done[k]->record(u);
  }
  // One readback: every pivot and the overflow flag.
  std::vector<int> info_host(static_cast<std::size_t>(nt));
  FailureCode code = kNoFailure;
  HS_CUDA_CHECK(cudaStreamWaitEvent(p, update_done[nt - 1]->get(), 0));
  HS_CUDA_CHECK(cudaMemcpyAsync(info_host.data(), infos, static_cast<std::size_t>(nt) * sizeof(int),
                                cudaMemcpyDeviceToHost, p));
  HS_CUDA_CHECK(cudaMemcpyAsync(&code, fc.flag, sizeof(FailureCode), cudaMemcpyDeviceToHost, p));
  HS_CUDA_CHECK(cudaStreamSynchronize(p));
  throw_first_failure(fc, info_host, code, policy_name, failed);
  return workspace;
}

}  // namespace halfscope::linalg::detail
