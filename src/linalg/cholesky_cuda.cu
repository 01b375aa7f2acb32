// GPU tile Cholesky (src/linalg/cholesky_cuda.hpp): study 002 Algorithm 1, right-looking, with
// look-ahead of one panel.
//
// Step k on the panel stream P: spotrf(k, k) (info kept on the device), one solve of the tiles
// below it (panel_trsm, where they lie), conversion of the panel into each
// low-precision format a consumer needs (each tile once, into a double-buffered panel copy), event
// panel_done[k], then the update of column k + 1 with panel k (so panel k + 1 can start at once).
// On the update stream U: wait panel_done[k], update column k + 2 first (ssyrk on the diagonal
// tile, then one strided-batched GEMM per run of equal variants down the column: A = panel tiles
// (stride nb^2), B = the column's panel tile (stride 0), C = the column's tiles (stride nb^2)),
// recording col_done[k] (what P needs for its step k + 1 look-ahead update), then columns k + 3 ..
// NT - 1: their SYRKs (the full diagonal tiles as batched groups, split16 FP16 GEMMs under a policy
// with tiles below FP32), and their GEMMs as one pointer-array batch per variant and tile height
// (pointers planned on the host and uploaded once; HP2 / HP3 / DP, which round C through scratch,
// stay column by column) and update_done[k] at the end (the panel buffer of parity k may then be
// overwritten by step k + 2). No device-wide synchronisation.
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
#include "linalg/panel_trsm_cuda.hpp"
#include "linalg/tile_cuda.hpp"

namespace halfscope::linalg::detail {

// Host tables of the first consumer of each panel tile per format (0: none), as failure codes:
// tags[f][k * NT + (i - k - 1)] for tile (i, k). A consumer reads (i, k) as A when it updates
// (i, j), k < j < i, and as B when it updates (i2, i), i2 > i.
FormatsInUse formats_in_use(std::int64_t nt, const std::vector<GemmVariant>& variants) {
  FormatsInUse in_use;
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j + 1; i < nt; ++i) {
      const GemmVariant v = variants[static_cast<std::size_t>(i * nt + j)];
      in_use.operand[static_cast<int>(operand_format(v))] = true;
      if (v == GemmVariant::HP3 || v == GemmVariant::DP)
        in_use.c[static_cast<int>(c_format(v))] = true;
    }
  return in_use;
}

std::vector<std::vector<FailureCode>> consumer_tags(const Factor& fc) {
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
  return tags;
}

void throw_overflow(GemmVariant v, FailureCode code, const std::string& policy,
                    FailedTile* failed) {
  const DecodedFailure d = decode_failure(code);
  if (failed) {
    *failed = {d.ti, d.tj};
    if (d.kind == FailureKind::operand)
      failed->part = FailedPart::operand, failed->oi = d.second ? d.tj : d.ti, failed->ok = d.step;
    else if (d.kind == FailureKind::c_entry)
      failed->part = FailedPart::c_entry;
  }
  std::string what;
  if (d.kind == FailureKind::operand)
    what = "an entry of its operand L" + tile_text(d.second ? d.tj : d.ti, d.step);
  else
    what = d.kind == FailureKind::c_entry ? "a C entry" : "a result entry (an FP16 product or sum)";
  throw NumericalError("GEMM " + std::string(gemm_variant_name(v)) + " updating tile " +
                       tile_text(d.ti, d.tj) + " (step " + std::to_string(d.step) + ", policy " +
                       policy + "): " + what +
                       " does not fit the variant's format (FP16 holds |x| <= 65504); use a "
                       "higher-precision policy for this tile or --recover");
}

void throw_failure(const Factor& fc, FailureCode code, const std::string& policy,
                   FailedTile* failed) {
  const DecodedFailure d = decode_failure(code);
  throw_overflow(fc.variant(d.ti, d.tj), code, policy, failed);
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
    throw pivot_failure(policy_name, k, nb, info);
  }
  if (code != kNoFailure) throw_failure(fc, code, policy_name, failed);
}

void take_step_buffers(Factor& fc, cudaStream_t stream, PanelScratch& s) {
  const std::int64_t n = fc.a.layout.rows(), nb = fc.nb;
  const std::int64_t panel_elems = std::max<std::int64_t>(n - nb, 0) * nb;
  for (int f = 0; f < kFormats; ++f)
    for (int side = 0; side < 2; ++side) fc.panel[f][side] = fc.c_scratch[f][side] = nullptr;
  if (panel_elems == 0) return;
  const FormatsInUse in_use = formats_in_use(fc.nt, fc.variants);
  for (int f = 1; f < kFormats; ++f)
    for (int side = 0; side < 2; ++side) {
      const std::int64_t bytes = panel_elems * format_bytes(static_cast<OperandFormat>(f));
      if (in_use.operand[f]) fc.panel[f][side] = s.take(bytes, stream);
      if (in_use.c[f]) fc.c_scratch[f][side] = s.take(bytes, stream);
    }
}

void make_scratch(Factor& fc, cusolverDnHandle_t solver, cudaStream_t stream, PanelScratch& s,
                  bool split_parts) {
  const std::int64_t nt = fc.nt, nb = fc.nb, n = fc.a.layout.rows();
  const FormatsInUse in_use = formats_in_use(nt, fc.variants);
  const auto tags = consumer_tags(fc);
  const std::int64_t panel_elems = std::max<std::int64_t>(n - nb, 0) * nb;
  for (int f = 1; f < kFormats && panel_elems > 0; ++f) {
    if (!in_use.operand[f]) continue;
    const auto bytes = static_cast<std::int64_t>(tags[f].size() * sizeof(FailureCode));
    s.tags[f] = static_cast<FailureCode*>(s.take(bytes, stream));
    HS_CUDA_CHECK(cudaMemcpyAsync(s.tags[f], tags[f].data(), static_cast<std::size_t>(bytes),
                                  cudaMemcpyHostToDevice, stream));
  }
  take_step_buffers(fc, stream, s);
  fc.flag = static_cast<FailureCode*>(s.take(sizeof(FailureCode), stream));
  HS_CUDA_CHECK(cudaMemsetAsync(fc.flag, 0xff, sizeof(FailureCode), stream));  // kNoFailure
  s.infos = static_cast<int*>(s.take(nt * static_cast<std::int64_t>(sizeof(int)), stream));
  HS_CUDA_CHECK(cudaMemsetAsync(s.infos, 0, static_cast<std::size_t>(nt) * sizeof(int), stream));
  s.leaf = static_cast<float*>(s.take(panel_trsm_scratch(n - nb, nb) * 4, stream));
  if (fc.fast_fp32 && panel_elems > 0) {
    if (split_parts) fc.split = s.take(4 * panel_elems * 2, stream);  // four FP16 parts an entry
    fc.exponents = static_cast<int*>(s.take(nt * static_cast<std::int64_t>(sizeof(int)), stream));
    if (fc.exponent_of.empty()) {
      std::vector<std::int64_t> offsets, heights;
      for (std::int64_t j = 0; j < nt; ++j) {
        offsets.push_back(fc.offset(j, j));
        heights.push_back(fc.height(j));
      }
      fc.exponent_of = diagonal_exponents(fc.base, offsets, heights, fc.exponents, stream);
    } else {
      HS_CUDA_CHECK(cudaMemcpyAsync(fc.exponents, fc.exponent_of.data(),
                                    static_cast<std::size_t>(nt) * sizeof(int),
                                    cudaMemcpyHostToDevice, stream));
    }
    fc.panel_split = s.take(panel_trsm_split_scratch(n - nb, nb) * 2, stream);
  }
  // The size query reads no data: any device pointer does.
  HS_CUSOLVER_CHECK(cusolverDnSpotrf_bufferSize(solver, CUBLAS_FILL_MODE_LOWER,
                                                static_cast<int>(std::min(nb, n)), s.leaf,
                                                static_cast<int>(std::min(nb, n)), &s.lwork));
  s.work = static_cast<float*>(
      s.take(std::max(s.lwork, 1) * static_cast<std::int64_t>(sizeof(float)), stream));
  HS_CUDA_CHECK(cudaStreamSynchronize(stream));  // `tags` is freed on return
}

std::int64_t step_buffer_bytes(const TileLayout& layout, const std::vector<GemmVariant>& variants) {
  const std::int64_t nt = layout.tile_rows(), nb = layout.tile_size(), n = layout.rows();
  const std::int64_t panel_elems = std::max<std::int64_t>(n - nb, 0) * nb;
  const FormatsInUse in_use = formats_in_use(nt, variants);
  std::int64_t bytes = 0;
  for (int f = 1; f < kFormats; ++f) {
    const std::int64_t b = format_bytes(static_cast<OperandFormat>(f));
    if (in_use.operand[f]) bytes += 2 * panel_elems * b;
    if (in_use.c[f]) bytes += 2 * panel_elems * b;
  }
  return bytes;
}

std::int64_t scratch_bytes(const TileLayout& layout, const std::vector<GemmVariant>& variants) {
  const std::int64_t nt = layout.tile_rows(), nb = layout.tile_size(), n = layout.rows();
  const FormatsInUse in_use = formats_in_use(nt, variants);
  // panel_trsm's scratch, pivots, flag, consumer tags, one factor's step buffers (the drivers
  // that ask, several devices and out of core, never take the one-device driver's split16 parts
  // of whole panels)
  std::int64_t bytes =
      panel_trsm_scratch(n - nb, nb) * 4 + nt * 4 + 8 + step_buffer_bytes(layout, variants);
  for (int f = 1; f < kFormats; ++f)
    if (in_use.operand[f]) bytes += nt * nt * 8;
  return bytes + bytes / 100 + (4 << 20);
}

void Factor::factor_panel(cusolverDnHandle_t solver, cublasHandle_t blas, float* work, int lwork,
                          int* infos, float* leaf, std::int64_t k) const {
  const std::int64_t hk = height(k);
  HS_CUSOLVER_CHECK(cusolverDnSpotrf(solver, CUBLAS_FILL_MODE_LOWER, static_cast<int>(hk),
                                     tile(k, k), static_cast<int>(hk), work, lwork, infos + k));
  if (k + 1 >= nt) return;
  PanelBlocks panel;  // the tiles below (k, k), where they lie
  panel.x = tile(k + 1, k), panel.count = nt - k - 1, panel.rows = nb;
  panel.last_rows = height(nt - 1), panel.stride = nb * nb;
  PanelSplit split;
  if (panel_split != nullptr) {
    split.exponents = exponents + k, split.host_exponents = exponent_of.data() + k;
    split.parts = panel_split, split.flag = flag;
  }
  panel_trsm(blas, tile(k, k), nb, panel, nb, leaf, panel_split != nullptr ? &split : nullptr);
}

void Factor::convert_panel(cudaStream_t stream, FailureCode* const* tags, std::int64_t k) const {
  const bool far = k < first_resident;
  const std::int64_t row0 = far ? streamed_row0 : k + 1;
  if (row0 >= nt) return;
  for (int f = 1; f < kFormats; ++f) {
    if (!panel[f][0]) continue;
    BlockSet set;
    set.base = far ? streamed[k % 2] : base, set.first = far ? 0 : offset(row0, k);
    set.stride = nb * nb, set.count = nt - row0, set.rows = nb, set.last_rows = height(nt - 1);
    set.cols = nb, set.dst_stride = nb * nb, set.tags = tags[f] + k * nt + (row0 - k - 1);
    convert_blocks(set, rounding_for(static_cast<OperandFormat>(f)), panel[f][k % 2], flag, stream);
  }
}

std::int64_t cholesky_cuda(TileMatrix& a, const std::vector<GemmVariant>& variants,
                           const std::string& policy_name, FailedTile* failed) {
  Factor fc{a, variants};
  fc.nt = a.layout.tile_rows(), fc.nb = a.layout.tile_size();
  fc.base = a.storage.data_as<float>();
  const std::int64_t nt = fc.nt;
  fc.fast_fp32 = wants_fast_fp32(variants);
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

  PanelScratch ps;  // freed in P's order at the end
  make_scratch(fc, solver.get(), p, ps);
  const auto take = [&](std::int64_t bytes) { return ps.take(bytes, p); };
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
  std::vector<std::unique_ptr<cuda::Event>> panel_done, col_done, update_done;
  for (std::int64_t k = 0; k < nt; ++k) {
    panel_done.push_back(std::make_unique<cuda::Event>());
    col_done.push_back(std::make_unique<cuda::Event>());
    update_done.push_back(std::make_unique<cuda::Event>());
  }
  const DrainStreams drain{p, u};
  for (std::int64_t k = 0; k < nt; ++k) {
    fc.factor_panel(solver.get(), panel_blas.get(), ps.work, ps.lwork, ps.infos, ps.leaf, k);
    // Parity k % 2 was last read by step k - 2's updates.
    if (k >= 2 && k + 1 < nt) HS_CUDA_CHECK(cudaStreamWaitEvent(p, update_done[k - 2]->get(), 0));
    fc.convert_panel(p, ps.tags, k);
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
  HS_CUDA_CHECK(cudaMemcpyAsync(info_host.data(), ps.infos,
                                static_cast<std::size_t>(nt) * sizeof(int), cudaMemcpyDeviceToHost,
                                p));
  HS_CUDA_CHECK(cudaMemcpyAsync(&code, fc.flag, sizeof(FailureCode), cudaMemcpyDeviceToHost, p));
  HS_CUDA_CHECK(cudaStreamSynchronize(p));
  throw_first_failure(fc, info_host, code, policy_name, failed);
  return ps.bytes;
}

}  // namespace halfscope::linalg::detail
