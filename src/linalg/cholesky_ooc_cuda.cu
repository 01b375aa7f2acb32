// Out-of-core tile Cholesky on one GPU (issue 9; cholesky_cuda.hpp): a host matrix larger than
// the device memory it may use, factored by slabs of tile columns (left-looking over slabs,
// right-looking within one).
//
// The tile columns are cut into slabs whose tiles (each column from its diagonal tile down: a
// contiguous range of the host layout) fit half the budget; two slab buffers alternate. Slab s
// (columns c0 .. c1 - 1) goes through:
//  1. upload of its tiles (copy-in stream, queued while slab s - 1 is still factored);
//  2. the left phase, on the update stream: every factored column k < c0, from tile row c0 down,
//     streamed from the host into one of two staging buffers (the copy of column k + 1 overlaps
//     the updates with column k), converted to the low-precision formats its consumers need, and
//     applied to every column of the slab: exactly the trailing updates the in-core factorization
//     would have made with panel k, in the same order (k ascending), with the same variants;
//  3. the in-core steps k = c0 .. c1 - 1 restricted to the slab (panel stream: spotrf, panel
//     solve, conversions, look-ahead on column k + 1; update stream: the slab's other columns);
//     column k is copied back to the host (copy-out stream) as soon as its panel is done, so the
//     copies overlap the slab's remaining updates and the next slab's left phase can stream it.
// Data moved: the matrix in and out once, plus sum over slabs of the factored columns' part below
// the slab (about n^3 / (6 w) elements for slabs w columns wide). Each slab records failures in
// its own flag word, and slab s - 1 is checked while slab s runs, so a failure stops the work
// within about one slab and the error names the same kind of tile as in core (the earliest
// failure of the first slab that fails).
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

namespace halfscope::linalg::detail {
namespace {

// Pins pageable host storage for the call (DMA at full speed, copies asynchronous) and unpins it
// after; storage already pinned is left alone. A refusal to pin (a locked-memory limit) leaves
// the copies pageable: slower and synchronous with the host, still correct.
class HostPin {
 public:
  HostPin(void* data, std::int64_t bytes, Memory memory) {
    if (memory != Memory::host || bytes == 0) return;
    if (cudaHostRegister(data, static_cast<std::size_t>(bytes), cudaHostRegisterPortable) ==
        cudaSuccess)
      data_ = data;
    else
      (void)cudaGetLastError();
  }
  ~HostPin() {
    if (data_ && cudaHostUnregister(data_) != cudaSuccess) (void)cudaGetLastError();
  }
  HostPin(const HostPin&) = delete;
  HostPin& operator=(const HostPin&) = delete;

 private:
  void* data_ = nullptr;
};

std::int64_t slab_elements(const TileLayout& l, std::int64_t c0, std::int64_t c1) {
  const std::int64_t end = c1 < l.tile_cols() ? l.tile_offset(c1, c1) : l.element_count();
  return end - l.tile_offset(c0, c0);
}

std::string gb(std::int64_t bytes) {
  return std::to_string(static_cast<double>(bytes) / 1e9).substr(0, 6) + " GB";
}

// First column of every slab, then NT: the widest runs of columns whose tiles fit `cap` bytes.
std::vector<std::int64_t> plan_slabs(const TileLayout& l, std::int64_t budget, std::int64_t fixed) {
  const std::int64_t nt = l.tile_cols();
  const std::int64_t cap = (budget - fixed) / 2;
  const std::int64_t first = slab_elements(l, 0, 1) * 4;  // the tallest column
  if (cap < first)
    throw InvalidInput("cholesky_tiles: device_memory: " + gb(budget) +
                       " is too small for the out-of-core factorization of n = " +
                       std::to_string(l.rows()) + " in tiles of " + std::to_string(l.tile_size()) +
                       ": it needs at least " + gb(fixed + 2 * first) + " (two slabs of one tile " +
                       "column, " + gb(first) + " each, and " + gb(fixed) + " of scratch)");
  std::vector<std::int64_t> starts{0};
  for (std::int64_t c = 1; c < nt; ++c)
    if (slab_elements(l, starts.back(), c + 1) * 4 > cap) starts.push_back(c);
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
  const std::int64_t panel_elems =
      std::max<std::int64_t>(l.rows() - l.tile_size(), 0) * l.tile_size();
  return scratch_bytes(l, v) + 2 * panel_elems * 4 + l.tile_cols() * 8;  // staging, slab flags
}

OutOfCore cholesky_cuda_out_of_core(TileMatrix& a, const std::vector<GemmVariant>& variants,
                                    const std::string& policy_name, FailedTile* failed, int device,
                                    std::int64_t budget, const std::function<void()>& check_input) {
  const TileLayout& l = a.layout;
  const std::int64_t nt = l.tile_rows(), nb = l.tile_size(), n = l.rows();
  const std::vector<std::int64_t> starts =
      plan_slabs(l, budget, out_of_core_fixed_bytes(l, variants));
  const auto slabs = static_cast<std::int64_t>(starts.size()) - 1;
  const cuda::DeviceGuard restore;
  HS_CUDA_CHECK(cudaSetDevice(device));
  const HostPin pin(a.storage.data(), a.storage.nbytes(), a.storage.memory());
  float* host = a.storage.data_as<float>();
  // The input checks beside the first slab (reads only, like the uploads); joined before any
  // column is written back, and on every way out.
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
  if (check_input)
    checks.thread = std::thread([&checks, &check_input] {
      try {
        check_input();
      } catch (...) {
        checks.error = std::current_exception();
      }
    });

  cuda::Stream panel_stream(cuda::StreamPriority::high), update_stream, in_stream, out_stream;
  const cudaStream_t p = panel_stream.get(), u = update_stream.get(), in = in_stream.get(),
                     out = out_stream.get();
  cuda::CusolverHandle solver(p);
  cuda::CublasHandle panel_blas, update_blas;
  HS_CUBLAS_CHECK(cublasSetStream(panel_blas.get(), p));
  HS_CUBLAS_CHECK(cublasSetStream(update_blas.get(), u));

  Factor fc{a, variants};
  fc.nt = nt, fc.nb = nb;
  PanelScratch ps;  // freed in P's order after the streams drained (below)
  make_scratch(fc, solver.get(), p, ps);
  std::int64_t slab_max = 0;
  for (std::int64_t s = 0; s < slabs; ++s)
    slab_max = std::max(slab_max, slab_elements(l, starts[s], starts[s + 1]));
  float* slab[2] = {static_cast<float*>(ps.take(slab_max * 4, p)), nullptr};
  slab[1] = slabs > 1 ? static_cast<float*>(ps.take(slab_max * 4, p)) : slab[0];
  const std::int64_t panel_elems = std::max<std::int64_t>(n - nb, 0) * nb;
  float* stage[2] = {static_cast<float*>(ps.take(std::max<std::int64_t>(panel_elems, 1) * 4, p)),
                     static_cast<float*>(ps.take(std::max<std::int64_t>(panel_elems, 1) * 4, p))};
  auto* flags = static_cast<FailureCode*>(ps.take(slabs * 8, p));
  HS_CUDA_CHECK(cudaMemsetAsync(flags, 0xff, static_cast<std::size_t>(slabs) * 8, p));
  HS_CUDA_CHECK(cudaStreamSynchronize(p));
  // Declared after the scratch, so run first: no queued copy or kernel outlives its buffers.
  struct DrainAll {
    cudaStream_t s[4];
    ~DrainAll() {
      for (const cudaStream_t x : s)
        if (cudaStreamSynchronize(x) != cudaSuccess) (void)cudaGetLastError();
    }
  } const drain{{p, u, in, out}};

  const auto events = [](std::int64_t count) {
    std::vector<std::unique_ptr<cuda::Event>> e;
    for (std::int64_t i = 0; i < count; ++i) e.push_back(std::make_unique<cuda::Event>());
    return e;
  };
  auto panel_done = events(nt), col_done = events(nt), update_done = events(nt),
       written = events(nt), stage_read = events(2), slab_free = events(2), uploaded = events(1),
       left_done = events(1);
  // Recorded once on U so that every staging copy can wait on its buffer's last reader, even the
  // first copies of a slab, whose buffers the previous slab's left phase may still be reading.
  for (const auto& e : stage_read) e->record(u);
  OutOfCore result;
  result.slabs = slabs;
  const auto upload = [&](std::int64_t s) {
    const std::int64_t c0 = starts[s], elems = slab_elements(l, c0, starts[s + 1]);
    if (s >= 2) HS_CUDA_CHECK(cudaStreamWaitEvent(in, slab_free[s % 2]->get(), 0));
    HS_CUDA_CHECK(cudaMemcpyAsync(slab[s % 2], host + l.tile_offset(c0, c0),
                                  static_cast<std::size_t>(elems) * 4, cudaMemcpyHostToDevice, in));
    result.host_to_device += elems * 4;
  };
  // The left phase of slab s: every factored column k < c0 streamed in and applied.
  const auto left_phase = [&](std::int64_t s) {
    const std::int64_t c0 = starts[s], c1 = starts[s + 1];
    uploaded[0]->record(in);
    HS_CUDA_CHECK(cudaStreamWaitEvent(u, uploaded[0]->get(), 0));
    fc.first_resident = c0, fc.streamed_row0 = c0, fc.streamed[0] = stage[0],
    fc.streamed[1] = stage[1];
    for (std::int64_t k = 0; k < c0; ++k) {
      const std::int64_t from = l.tile_offset(c0, k);
      const std::int64_t elems = l.tile_offset(k, k) + column_elements(l, k) - from;
      HS_CUDA_CHECK(cudaStreamWaitEvent(in, written[k]->get(), 0));
      HS_CUDA_CHECK(cudaStreamWaitEvent(in, stage_read[k % 2]->get(), 0));
      HS_CUDA_CHECK(cudaMemcpyAsync(stage[k % 2], host + from, static_cast<std::size_t>(elems) * 4,
                                    cudaMemcpyHostToDevice, in));
      result.host_to_device += elems * 4;
      uploaded[0]->record(in);
      HS_CUDA_CHECK(cudaStreamWaitEvent(u, uploaded[0]->get(), 0));
      fc.convert_panel(u, ps.tags, k);
      for (std::int64_t j = c0; j < c1; ++j) fc.update_column(update_blas.get(), u, 1, k, j);
      stage_read[k % 2]->record(u);
    }
    left_done[0]->record(u);
  };
  // Column k of the slab at fc back to the host once its panel is done.
  const auto write_back = [&](std::int64_t k) {
    HS_CUDA_CHECK(cudaStreamWaitEvent(out, panel_done[k]->get(), 0));
    const std::int64_t elems = column_elements(l, k);
    HS_CUDA_CHECK(cudaMemcpyAsync(host + l.tile_offset(k, k), fc.tile(k, k),
                                  static_cast<std::size_t>(elems) * 4, cudaMemcpyDeviceToHost,
                                  out));
    result.device_to_host += elems * 4;
    written[k]->record(out);
  };
  // The in-core steps of slab s, its columns copied back as they become final (or, when
  // `hold`, by the caller once the input checks passed).
  const auto inner_phase = [&](std::int64_t s, bool hold) {
    const std::int64_t c0 = starts[s], c1 = starts[s + 1];
    HS_CUDA_CHECK(cudaStreamWaitEvent(p, left_done[0]->get(), 0));
    for (std::int64_t k = c0; k < c1; ++k) {
      fc.factor_panel(solver.get(), panel_blas.get(), ps.work, ps.lwork, ps.infos, ps.leaf, k);
      // Parity k % 2 was last read by step k - 2's updates (or by the left phase, waited above).
      if (k - 2 >= c0 && k + 1 < nt)
        HS_CUDA_CHECK(cudaStreamWaitEvent(p, update_done[k - 2]->get(), 0));
      fc.convert_panel(p, ps.tags, k);
      panel_done[k]->record(p);
      if (!hold) write_back(k);
      if (k + 1 < c1) {
        if (k - 1 >= c0) HS_CUDA_CHECK(cudaStreamWaitEvent(p, col_done[k - 1]->get(), 0));
        fc.update_column(panel_blas.get(), p, 0, k, k + 1);
      }
      HS_CUDA_CHECK(cudaStreamWaitEvent(u, panel_done[k]->get(), 0));
      if (k + 2 < c1) fc.update_column(update_blas.get(), u, 1, k, k + 2);
      col_done[k]->record(u);
      for (std::int64_t j = k + 3; j < c1; ++j) fc.update_column(update_blas.get(), u, 1, k, j);
      update_done[k]->record(u);
    }
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
    throw_first_failure(fc, infos, code, policy_name, failed);
  };

  upload(0);
  for (std::int64_t s = 0; s < slabs; ++s) {
    const std::int64_t c0 = starts[s];
    fc.base = slab[s % 2], fc.origin = l.tile_offset(c0, c0), fc.flag = flags + s;
    left_phase(s);
    if (s + 1 < slabs) upload(s + 1);  // overlaps this slab's in-core steps
    const bool hold = s == 0 && check_input;
    inner_phase(s, hold);
    if (hold) {
      checks.wait();  // the GPU works on slab 0 meanwhile; nothing has reached `a` yet
      for (std::int64_t k = 0; k < starts[1]; ++k) write_back(k);
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
