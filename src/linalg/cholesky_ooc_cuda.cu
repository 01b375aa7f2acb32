// Out-of-core tile Cholesky on one GPU (issue 9; cholesky_cuda.hpp): a host matrix larger than
// the device memory it may use, factored by slabs of tile columns (left-looking over slabs,
// right-looking within one).
//
// The tile columns are cut into slabs whose tiles (each column from its diagonal tile down: a
// contiguous range of the host layout), with their split16 parts, fit half the budget; two slab
// buffers alternate, and so do two sets of step buffers (converted panels, C scratch). Slab s
// (columns c0 .. c1 - 1, its own Factor) goes through:
//  1. upload of its tiles (upload stream), as soon as slab s - 2 went back and slab s - 1's left
//     phase copied what it needs from it;
//  2. the left phase, on its own stream L, beside slab s - 1's in-core steps: every factored
//     column k < c0, from tile row c0 down, into one of two staging buffers (copy-in stream; the
//     copy of the next column overlaps the updates with this one), converted to the formats its
//     consumers need and applied to every column of the slab with the in-core factorization's
//     variants, pointer-array groups and split16 diagonal updates. First the columns of slab
//     s - 1, still on the device, copied from there as their panels finish (so slab s + 1 can
//     come into that buffer while the rest runs; a third to a half of what would otherwise cross
//     the link for 5 to 10 slabs), then the older ones in ascending order, streamed from the
//     host. Only the order of each tile's sum differs from in core (within the same bounds);
//  3. the in-core steps k = c0 .. c1 - 1 restricted to the slab (panel stream: spotrf, panel
//     solve, conversions, look-ahead on column k + 1; update stream, above L's priority: the
//     slab's other columns); column k is copied back to the host (copy-out stream) as soon as its
//     panel is done, so the copies overlap the slab's remaining updates.
// The panel chain of a slab, with only the slab's few columns to overlap, left the GPU idle when
// the next left phase waited behind it on one update stream, and the left phase had no split16
// (0.58 of the in-core rate for a mixed policy at 94908a7).
// Input checks (a policy that does not read the tile norms): slabs 0 and 1 are scanned on the
// device as they arrive, the host checks the other columns beside them, and no column goes back
// before both passed (slab 0 stays on the device until then).
// Data moved: the matrix in and out once, plus sum over slabs of the factored columns' part below
// the slab but the previous slab's (about n^3 / (6 w) - n^2 / 2 elements for slabs w columns
// wide). Each slab records failures in its own flag word, and slab s - 1 is checked while slab s
// runs, so a failure stops the work within about one slab and the error names the same kind of
// tile as in core (the earliest failure of the first slab that fails).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "halfscope/core/cublas.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cusolver.hpp"
#include "halfscope/core/error.hpp"
#include "linalg/cholesky_cuda.hpp"
#include "linalg/cholesky_factor_cuda.hpp"
#include "linalg/out_of_core_cuda.hpp"
#include "linalg/panel_trsm_cuda.hpp"
#include "linalg/solve_support_cuda.hpp"
#include "linalg/tile_cuda.hpp"

namespace halfscope::linalg::detail {
namespace {

// Where a slab's split16 parts start in its buffer: after its tiles, 256-byte aligned.
std::int64_t split_offset(const TileLayout& l, std::int64_t c0, std::int64_t c1) {
  return (column_elements(l, c0, c1) * 4 + 255) / 256 * 256;
}

// Device bytes of slab [c0, c1): its tiles and, with split16, the FP16 parts of one panel tile
// per column (the rows of the slab's diagonal tiles, Factor::split_parts).
std::int64_t slab_bytes(const TileLayout& l, std::int64_t c0, std::int64_t c1, bool split16) {
  const std::int64_t nb = l.tile_size();
  return split16 ? split_offset(l, c0, c1) + (c1 - c0) * 8 * nb * nb
                 : column_elements(l, c0, c1) * 4;
}

// First column of every slab, then NT: the widest runs of columns that fit half of what the
// budget leaves beside `fixed`.
std::vector<std::int64_t> plan_slabs(const TileLayout& l, std::int64_t budget, std::int64_t fixed,
                                     bool split16) {
  const std::int64_t nt = l.tile_cols();
  const std::int64_t cap = (budget - fixed) / 2;
  const std::int64_t first = slab_bytes(l, 0, 1, split16);  // the tallest column
  if (cap < first)
    throw InvalidInput("cholesky_tiles: device_memory: " + gb(budget) +
                       " is too small for the out-of-core factorization of n = " +
                       std::to_string(l.rows()) + " in tiles of " + std::to_string(l.tile_size()) +
                       ": it needs at least " + gb(fixed + 2 * first) + " (two slabs of one tile " +
                       "column, " + gb(first) + " each, and " + gb(fixed) + " of scratch)");
  std::vector<std::int64_t> starts{0};
  for (std::int64_t c = 1; c < nt; ++c)
    if (slab_bytes(l, starts.back(), c + 1, split16) > cap) starts.push_back(c);
  starts.push_back(nt);
  return starts;
}

}  // namespace

std::int64_t in_core_device_bytes(const TileLayout& l, const std::vector<GemmVariant>& v,
                                  std::int64_t parts) {
  const std::int64_t nt = l.tile_cols();
  // plan_groups: at most one pointer triple per (k, i, j), k < j <= i, j owned (fewer than
  // NT^3 / 6 in all).
  return l.element_count() * 4 + scratch_bytes(l, v) +
         nt * nt * nt / 6 * 3 * 8 / std::max<std::int64_t>(parts, 1);
}

std::int64_t device_budget(int device, std::int64_t requested) {
  const cuda::DeviceGuard restore;
  HS_CUDA_CHECK(cudaSetDevice(device));
  std::size_t free = 0, total = 0;
  HS_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  const auto usable = static_cast<std::int64_t>(static_cast<double>(free) * 0.95);
  return requested > 0 ? std::min(requested, usable) : usable;
}

std::int64_t out_of_core_fixed_bytes(const TileLayout& l, const std::vector<GemmVariant>& v) {
  const std::int64_t nt = l.tile_cols(), nb = l.tile_size(), n = l.rows();
  const std::int64_t panel_elems = std::max<std::int64_t>(n - nb, 0) * nb;
  // The pointer arrays of every slab: one triple per grouped update (k, j, i), k + 3 <= j <= i
  // (Factor::plan_groups; each in the slab of column j, whatever the slabs), as in core.
  std::int64_t triples = 0;
  for (std::int64_t j = 3; j < nt; ++j) {
    std::int64_t per_step = l.tile_height(j) == nb ? 1 : 0;
    for (std::int64_t i = j + 1; i < nt; ++i)
      per_step += rounds_c(v[static_cast<std::size_t>(i * nt + j)]) ? 0 : 1;
    triples += (j - 2) * per_step;
  }
  // The second factor's step buffers, the staging columns, the slab flags.
  std::int64_t bytes = scratch_bytes(l, v) + step_buffer_bytes(l, v) + 2 * panel_elems * 4 +
                       nt * 8 + triples * 3 * 8;
  if (wants_fast_fp32(v)) bytes += panel_trsm_split_scratch(n - nb, nb) * 2 + nt * 4;
  return bytes;
}

OutOfCore cholesky_cuda_out_of_core(TileMatrix& a, const std::vector<GemmVariant>& variants,
                                    const std::string& policy_name, FailedTile* failed, int device,
                                    std::int64_t budget,
                                    const std::function<void(std::int64_t)>& check_input) {
  const TileLayout& l = a.layout;
  const std::int64_t nt = l.tile_rows(), nb = l.tile_size(), n = l.rows();
  const bool fast = wants_fast_fp32(variants);
  const std::vector<std::int64_t> starts =
      plan_slabs(l, budget, out_of_core_fixed_bytes(l, variants), fast);
  const auto slabs = static_cast<std::int64_t>(starts.size()) - 1;
  const cuda::DeviceGuard restore;
  HS_CUDA_CHECK(cudaSetDevice(device));
  const HostPin pin(a.storage.data(), a.storage.nbytes(), a.storage.memory());
  float* host = a.storage.data_as<float>();
  // The input checks beside the first slab (reads only, like the uploads) of the columns the
  // device does not scan (below); joined before any column is written back, and on every way out.
  struct Checks {
    std::thread thread;
    std::exception_ptr error;
    void wait() {
      if (thread.joinable()) thread.join();
      if (error) std::rethrow_exception(std::exchange(error, nullptr));
    }
    ~Checks() {
      if (thread.joinable()) thread.join();
    }
  } checks;
  const std::int64_t host_checked =
      starts[static_cast<std::size_t>(std::min<std::int64_t>(2, slabs))];
  if (check_input)
    checks.thread = std::thread([&checks, &check_input, host_checked] {
      try {
        check_input(host_checked);
      } catch (...) {
        checks.error = std::current_exception();
      }
    });

  // The panel chain first, then the in-core updates that feed it, then the left phases' bulk.
  cuda::Stream panel_stream(cuda::StreamPriority::high),
      update_stream(cuda::StreamPriority::raised), left_stream, up_stream, in_stream, out_stream;
  const cudaStream_t p = panel_stream.get(), u = update_stream.get(), ls = left_stream.get(),
                     up = up_stream.get(), in = in_stream.get(), out = out_stream.get();
  cuda::CusolverHandle solver(p);
  cuda::CublasHandle panel_blas, update_blas, left_blas;
  HS_CUBLAS_CHECK(cublasSetStream(panel_blas.get(), p));
  HS_CUBLAS_CHECK(cublasSetStream(update_blas.get(), u));
  HS_CUBLAS_CHECK(cublasSetStream(left_blas.get(), ls));

  // What the slabs' factors share: the scratch of the panel stream, the tags, the exponents
  // (from the host diagonal: the device never holds all of it); two sets of step buffers.
  Factor proto{a, variants};
  proto.nt = nt, proto.nb = nb, proto.fast_fp32 = fast;
  if (fast) {
    std::vector<std::int64_t> offsets, heights;
    for (std::int64_t j = 0; j < nt; ++j) {
      offsets.push_back(l.tile_offset(j, j));
      heights.push_back(l.tile_height(j));
    }
    proto.exponent_of = diagonal_exponents_host(host, offsets, heights);
  }
  PanelScratch ps;  // freed in P's order after the streams drained (below)
  make_scratch(proto, solver.get(), p, ps, false);
  Factor other = proto;
  take_step_buffers(other, p, ps);
  std::int64_t slab_max = 0;
  for (std::int64_t s = 0; s < slabs; ++s)
    slab_max = std::max(slab_max, slab_bytes(l, starts[s], starts[s + 1], fast));
  char* slab[2] = {static_cast<char*>(ps.take(slab_max, p)), nullptr};
  slab[1] = slabs > 1 ? static_cast<char*>(ps.take(slab_max, p)) : slab[0];
  const std::int64_t panel_elems = std::max<std::int64_t>(n - nb, 0) * nb;
  float* stage[2] = {static_cast<float*>(ps.take(std::max<std::int64_t>(panel_elems, 1) * 4, p)),
                     static_cast<float*>(ps.take(std::max<std::int64_t>(panel_elems, 1) * 4, p))};
  // The slabs' failure words, then the first non-finite input entry the device scan saw.
  auto* flags = static_cast<FailureCode*>(ps.take((slabs + 1) * 8, p));
  HS_CUDA_CHECK(cudaMemsetAsync(flags, 0xff, static_cast<std::size_t>(slabs + 1) * 8, p));
  auto* scan = reinterpret_cast<unsigned long long*>(flags + slabs);

  // One factor per slab, its step groups planned for every panel it sees (streamed or its own).
  std::vector<Factor> fs;
  std::vector<const void*> a_host, b_host;
  std::vector<void*> c_host;
  for (std::int64_t s = 0; s < slabs; ++s) {
    const std::int64_t c0 = starts[s], c1 = starts[s + 1];
    fs.push_back(s % 2 == 0 ? proto : other);
    Factor& f = fs.back();
    f.base = reinterpret_cast<float*>(slab[s % 2]), f.origin = l.tile_offset(c0, c0);
    f.flag = flags + s, f.first_resident = c0, f.resident_end = c1, f.streamed_row0 = c0;
    f.streamed[0] = stage[0], f.streamed[1] = stage[1];
    if (fast) f.split = slab[s % 2] + split_offset(l, c0, c1);
    f.plan_groups(a_host, b_host, c_host);
  }
  {
    const auto bytes =
        static_cast<std::int64_t>(std::max<std::size_t>(a_host.size(), 1) * sizeof(void*));
    void* ptrs[3] = {ps.take(bytes, p), ps.take(bytes, p), ps.take(bytes, p)};
    for (Factor& f : fs)
      f.a_ptrs = static_cast<const void**>(ptrs[0]), f.b_ptrs = static_cast<const void**>(ptrs[1]),
      f.c_ptrs = static_cast<void**>(ptrs[2]);
    const std::size_t copy = a_host.size() * sizeof(void*);
    const void* from[3] = {a_host.data(), b_host.data(), c_host.data()};
    for (int t = 0; t < 3 && copy > 0; ++t)
      HS_CUDA_CHECK(cudaMemcpyAsync(ptrs[t], from[t], copy, cudaMemcpyHostToDevice, p));
  }
  HS_CUDA_CHECK(cudaStreamSynchronize(p));  // the host tables may go
  // Declared after the scratch, so run first: no queued copy or kernel outlives its buffers.
  struct DrainAll {
    cudaStream_t s[6];
    ~DrainAll() {
      for (const cudaStream_t x : s)
        if (cudaStreamSynchronize(x) != cudaSuccess) (void)cudaGetLastError();
    }
  } const drain{{p, u, ls, up, in, out}};

  const auto events = [](std::int64_t count) {
    std::vector<std::unique_ptr<cuda::Event>> e;
    for (std::int64_t i = 0; i < count; ++i) e.push_back(std::make_unique<cuda::Event>());
    return e;
  };
  auto panel_done = events(nt), col_done = events(nt), update_done = events(nt),
       written = events(nt), stage_read = events(2), slab_free = events(2), staged = events(1),
       uploaded = events(slabs), left_done = events(slabs), inner_done = events(slabs),
       previous_read = events(slabs), scanned = events(1);
  // Recorded once on L so that every staging copy can wait on its buffer's last reader.
  for (const auto& e : stage_read) e->record(ls);
  OutOfCore result;
  result.slabs = slabs;
  const auto wait = [](cudaStream_t stream, const std::unique_ptr<cuda::Event>& e) {
    HS_CUDA_CHECK(cudaStreamWaitEvent(stream, e->get(), 0));
  };
  // Slab s's tiles in once slab s - 2 went back, its steps are done, and slab s - 1's left phase
  // copied its columns.
  const auto upload = [&](std::int64_t s) {
    const std::int64_t c0 = starts[s], elems = column_elements(l, c0, starts[s + 1]);
    if (s >= 2)
      wait(up, slab_free[s % 2]), wait(up, inner_done[s - 2]), wait(up, previous_read[s - 1]);
    HS_CUDA_CHECK(cudaMemcpyAsync(slab[s % 2], host + l.tile_offset(c0, c0),
                                  static_cast<std::size_t>(elems) * 4, cudaMemcpyHostToDevice, up));
    result.host_to_device += elems * 4;
    if (check_input && s < 2) {  // columns the host checks leave to the device
      first_non_finite_async(reinterpret_cast<const float*>(slab[s % 2]), elems, scan, up);
      scanned[0]->record(up);
    }
    uploaded[s]->record(up);
  };
  // The left phase of slab s on L: every factored column k < c0 applied to the slab's columns,
  // first those of slab s - 1, copied from its buffer as their panels finish (even when held back
  // for the input checks; slab s + 1 may then come into that buffer while the older columns,
  // streamed from the host, are applied).
  const auto left_phase = [&](std::int64_t s) {
    const Factor& f = fs[static_cast<std::size_t>(s)];
    const Factor& previous = fs[static_cast<std::size_t>(s - 1)];
    const std::int64_t c0 = starts[s], c1 = starts[s + 1], p0 = starts[s - 1];
    wait(ls, uploaded[s]);
    if (s >= 2) wait(ls, inner_done[s - 2]);  // the last user of this parity's step buffers
    for (std::int64_t step = 0; step < c0; ++step) {
      const std::int64_t k = step < c0 - p0 ? p0 + step : step - (c0 - p0);
      const std::int64_t from = l.tile_offset(c0, k);
      const std::int64_t elems = l.tile_offset(k, k) + column_elements(l, k) - from;
      wait(in, stage_read[k % 2]);
      if (k >= p0) {
        wait(in, panel_done[k]);
        HS_CUDA_CHECK(cudaMemcpyAsync(stage[k % 2], previous.base + (from - previous.origin),
                                      static_cast<std::size_t>(elems) * 4, cudaMemcpyDeviceToDevice,
                                      in));
        if (k == c0 - 1) previous_read[s]->record(in);
      } else {
        wait(in, written[k]);
        HS_CUDA_CHECK(cudaMemcpyAsync(stage[k % 2], host + from,
                                      static_cast<std::size_t>(elems) * 4, cudaMemcpyHostToDevice,
                                      in));
        result.host_to_device += elems * 4;
      }
      staged[0]->record(in);
      wait(ls, staged[0]);
      f.convert_panel(ls, ps.tags, k);
      for (std::int64_t j = std::max(k + 1, c0); j < std::min(k + 3, c1); ++j)
        f.update_column(left_blas.get(), ls, 1, k, j);
      f.update_rest(left_blas.get(), ls, k);
      stage_read[k % 2]->record(ls);
    }
    left_done[s]->record(ls);
  };
  // Column k of slab s back to the host once its panel is done.
  const auto write_back = [&](std::int64_t s, std::int64_t k) {
    wait(out, panel_done[k]);
    const std::int64_t elems = column_elements(l, k);
    HS_CUDA_CHECK(
        cudaMemcpyAsync(host + l.tile_offset(k, k), fs[static_cast<std::size_t>(s)].tile(k, k),
                        static_cast<std::size_t>(elems) * 4, cudaMemcpyDeviceToHost, out));
    result.device_to_host += elems * 4;
    written[k]->record(out);
  };
  // The in-core steps of slab s (cholesky_cuda's, within the slab), its columns copied back as
  // they become final (or, when `hold`, by the caller once the input checks passed).
  const auto inner_phase = [&](std::int64_t s, bool hold) {
    const Factor& f = fs[static_cast<std::size_t>(s)];
    const std::int64_t c0 = starts[s], c1 = starts[s + 1];
    if (s >= 1) wait(p, left_done[s]);
    for (std::int64_t k = c0; k < c1; ++k) {
      f.factor_panel(solver.get(), panel_blas.get(), ps.work, ps.lwork, ps.infos, ps.leaf, k);
      // Parity k % 2 was last read by step k - 2's updates (or by the left phase, waited above).
      if (k - 2 >= c0 && k + 1 < nt) wait(p, update_done[k - 2]);
      f.convert_panel(p, ps.tags, k);
      panel_done[k]->record(p);
      if (!hold) write_back(s, k);
      if (k + 1 < c1) {
        if (k - 1 >= c0) wait(p, col_done[k - 1]);
        f.update_column(panel_blas.get(), p, 0, k, k + 1);
      }
      wait(u, panel_done[k]);
      if (k + 2 < c1) f.update_column(update_blas.get(), u, 1, k, k + 2);
      col_done[k]->record(u);
      f.update_rest(update_blas.get(), u, k);
      update_done[k]->record(u);
    }
    inner_done[s]->record(u);
    if (!hold) slab_free[s % 2]->record(out);
  };
  // Throws the first failure of slab s once its work is done (the slabs before it passed).
  std::vector<int> infos(static_cast<std::size_t>(nt), 0);
  const auto check = [&](std::int64_t s) {
    const std::int64_t c1 = starts[s + 1];
    HS_CUDA_CHECK(cudaEventSynchronize(written[c1 - 1]->get()));
    FailureCode code = kNoFailure;
    HS_CUDA_CHECK(cudaMemcpy(infos.data(), ps.infos, static_cast<std::size_t>(c1) * sizeof(int),
                             cudaMemcpyDeviceToHost));
    HS_CUDA_CHECK(cudaMemcpy(&code, flags + s, sizeof code, cudaMemcpyDeviceToHost));
    throw_first_failure(fs[static_cast<std::size_t>(s)], infos, code, policy_name, failed);
  };

  upload(0);
  wait(p, uploaded[0]);
  for (std::int64_t s = 0; s < slabs; ++s) {
    const bool hold = s == 0 && check_input;
    inner_phase(s, hold);
    if (s + 1 < slabs) {  // beside this slab's steps
      upload(s + 1);
      left_phase(s + 1);
    }
    if (hold) {
      // The GPU works on slab 0 meanwhile; nothing has reached `a` yet. A non-finite entry the
      // device saw is named by the host's check of every column, which comes first.
      std::exception_ptr host_error;
      try {
        checks.wait();
      } catch (...) {
        host_error = std::current_exception();
      }
      unsigned long long seen = 0;
      HS_CUDA_CHECK(cudaEventSynchronize(scanned[0]->get()));
      HS_CUDA_CHECK(cudaMemcpy(&seen, scan, sizeof seen, cudaMemcpyDeviceToHost));
      if (seen != ~0ULL) check_input(0);
      if (host_error) std::rethrow_exception(host_error);
      for (std::int64_t k = 0; k < starts[1]; ++k) write_back(0, k);
      slab_free[0]->record(out);
    }
    if (s >= 1) check(s - 1);
  }
  check(slabs - 1);
  HS_CUDA_CHECK(cudaStreamSynchronize(out));
  result.workspace = ps.bytes;
  return result;
}

}  // namespace halfscope::linalg::detail
