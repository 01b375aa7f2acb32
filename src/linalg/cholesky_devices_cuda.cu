// The tile Cholesky over several CUDA devices of one host (issue 9; cholesky_cuda.hpp): tile
// columns dealt round-robin over the listed devices (a 1 x G block-cyclic grid, the layout a
// single host's few GPUs want: every panel goes to every device anyway).
//
// Step k: the owner of column k factors its panel on its panel stream (spotrf, one panel solve,
// the low-precision copies its consumers need), as on one device; every other device copies the
// whole column k (the diagonal tile too) peer to peer into the same place of its own copy of the
// layout (NVLink where present) and makes its own low-precision copies; each device then updates
// the columns it owns with panel k, exactly the single-device updates (Factor in
// cholesky_factor_cuda.hpp). The owner of column k + 1 updates it first, on its panel stream
// (look-ahead), so panel k + 1 can start while the others still update. Events order the
// streams across devices; the host only enqueues, and reads the pivots and overflow flags once.
// Since every panel reaches every device, every device ends with the whole factor: the result
// is copied to the caller's storage from one of them (none when it is the caller's own).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "halfscope/core/cublas.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/cusolver.hpp"
#include "halfscope/core/error.hpp"
#include "linalg/cholesky_cuda.hpp"
#include "linalg/cholesky_factor_cuda.hpp"
#include "linalg/tile_cuda.hpp"

namespace halfscope::linalg::detail {
namespace {

// One listed device's share: its copy of the layout (its own columns, then every panel as it
// arrives), streams, handles and scratch. Members are declared in creation order and destroyed
// in reverse with the device current (Part's destructor), the streams drained first.
struct Part {
  int device = 0;
  TileMatrix copy;  // the caller's storage on the home device, else a new copy of the layout
  std::unique_ptr<cuda::Stream> p, u;
  std::unique_ptr<cuda::CusolverHandle> solver;
  std::unique_ptr<cuda::CublasHandle> panel_blas, update_blas;
  std::unique_ptr<Factor> fc;
  PanelScratch ps;  // the factorization's scratch; ps.bytes counts the copy of the layout too
  std::vector<std::unique_ptr<cuda::Event>> panel_done, col_done, update_done;
  std::unique_ptr<cuda::Event> ready;

  Part() = default;
  Part(const Part&) = delete;
  Part& operator=(const Part&) = delete;
  ~Part() {
    if (cudaSetDevice(device) != cudaSuccess) (void)cudaGetLastError();
    for (const auto& s : {p.get(), u.get()})
      if (s && cudaStreamSynchronize(s->get()) != cudaSuccess) (void)cudaGetLastError();
    ps.blocks.clear();  // stream-ordered frees on p, before the streams go
    fc.reset();
    update_blas.reset();
    panel_blas.reset();
    solver.reset();
    u.reset();
    p.reset();
  }

  void* take(std::int64_t bytes) { return ps.take(bytes, p->get()); }
};

// Creates device d's share: streams, handles, its copy of the layout with its own columns
// (copied from `a`), and the scratch of the single-device factorization.
void set_up(Part& part, TileMatrix& a, const std::vector<GemmVariant>& variants, int home,
            std::int64_t parts, std::int64_t index) {
  HS_CUDA_CHECK(cudaSetDevice(part.device));
  part.p = std::make_unique<cuda::Stream>(cuda::StreamPriority::high);
  part.u = std::make_unique<cuda::Stream>();
  const cudaStream_t p = part.p->get();
  part.solver = std::make_unique<cuda::CusolverHandle>(p);
  part.panel_blas = std::make_unique<cuda::CublasHandle>();
  part.update_blas = std::make_unique<cuda::CublasHandle>();
  HS_CUBLAS_CHECK(cublasSetStream(part.panel_blas->get(), p));
  HS_CUBLAS_CHECK(cublasSetStream(part.update_blas->get(), part.u->get()));
  const TileLayout& l = a.layout;
  const std::int64_t nt = l.tile_rows(), nb = l.tile_size(), n = l.rows();
  if (index == home) {
    part.copy = a;  // shares the caller's storage
  } else {
    part.copy = TileMatrix(l, DType::f32, Memory::device);
    part.ps.bytes += part.copy.storage.nbytes();
    for (std::int64_t j = index; j < nt; j += parts) {
      const std::int64_t at = l.tile_offset(j, j);
      HS_CUDA_CHECK(cudaMemcpyAsync(
          part.copy.storage.data_as<float>() + at, a.storage.data_as<float>() + at,
          static_cast<std::size_t>(column_elements(l, j)) * 4, cudaMemcpyDefault, p));
    }
  }
  part.fc = std::make_unique<Factor>(Factor{part.copy, variants});
  Factor& fc = *part.fc;
  fc.nt = nt, fc.nb = nb, fc.base = part.copy.storage.data_as<float>();
  fc.owned.assign(static_cast<std::size_t>(nt), 0);
  for (std::int64_t j = index; j < nt; j += parts) fc.owned[static_cast<std::size_t>(j)] = 1;

  make_scratch(fc, part.solver->get(), p, part.ps);
  std::vector<const void*> a_host, b_host;
  std::vector<void*> c_host;
  fc.plan_groups(a_host, b_host, c_host);
  const auto ptr_bytes =
      static_cast<std::int64_t>(std::max<std::size_t>(a_host.size(), 1) * sizeof(void*));
  fc.a_ptrs = static_cast<const void**>(part.take(ptr_bytes));
  fc.b_ptrs = static_cast<const void**>(part.take(ptr_bytes));
  fc.c_ptrs = static_cast<void**>(part.take(ptr_bytes));
  if (const std::size_t copy = a_host.size() * sizeof(void*); copy > 0) {
    HS_CUDA_CHECK(cudaMemcpyAsync(fc.a_ptrs, a_host.data(), copy, cudaMemcpyHostToDevice, p));
    HS_CUDA_CHECK(cudaMemcpyAsync(fc.b_ptrs, b_host.data(), copy, cudaMemcpyHostToDevice, p));
    HS_CUDA_CHECK(cudaMemcpyAsync(fc.c_ptrs, c_host.data(), copy, cudaMemcpyHostToDevice, p));
  }
  for (std::int64_t k = 0; k < nt; ++k) {
    part.panel_done.push_back(std::make_unique<cuda::Event>());
    part.col_done.push_back(std::make_unique<cuda::Event>());
    part.update_done.push_back(std::make_unique<cuda::Event>());
  }
  part.ready = std::make_unique<cuda::Event>();
  part.ready->record(p);  // the columns and tables are in place: the update stream may start
  HS_CUDA_CHECK(cudaStreamWaitEvent(part.u->get(), part.ready->get(), 0));
  // The host tables above are freed when this returns.
  HS_CUDA_CHECK(cudaStreamSynchronize(p));
}

// Step k's panel on its owner (Factor::factor_panel).
void factor_panel(Part& part, std::int64_t k) {
  const PanelScratch& ps = part.ps;
  part.fc->factor_panel(part.solver->get(), part.panel_blas->get(), ps.work, ps.lwork, ps.infos,
                        ps.leaf, k);
}

// The low-precision copies of panel k this device's updates read (parity k % 2).
void convert_panel(Part& part, std::int64_t k) {
  // Parity k % 2 was last read by step k - 2's updates.
  if (k >= 2) HS_CUDA_CHECK(cudaStreamWaitEvent(part.p->get(), part.update_done[k - 2]->get(), 0));
  part.fc->convert_panel(part.p->get(), part.ps.tags, k);
}

}  // namespace

std::int64_t cholesky_cuda_devices(TileMatrix& a, const std::vector<GemmVariant>& variants,
                                   const std::string& policy_name, FailedTile* failed,
                                   const std::vector<int>& devices) {
  const TileLayout& l = a.layout;
  const std::int64_t nt = l.tile_rows();
  const cuda::DeviceGuard restore;
  // The caller's device storage, written on any stream of its device, is read by every device:
  // wait for it once. Its device, when listed, works in place ("home").
  int home = -1;
  if (a.storage.on_device()) {
    const int where = cuda::device_of(a.storage.data());
    HS_CUDA_CHECK(cudaSetDevice(where));
    HS_CUDA_CHECK(cudaDeviceSynchronize());
    const auto it = std::find(devices.begin(), devices.end(), where);
    if (it != devices.end()) home = static_cast<int>(it - devices.begin());
  }
  // Peer access where the devices allow it (else cudaMemcpyPeerAsync stages through the host).
  for (const int d : devices)
    for (const int e : devices) {
      int can = 0;
      if (d == e) continue;
      HS_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, d, e));
      if (!can) continue;
      HS_CUDA_CHECK(cudaSetDevice(d));
      const cudaError_t err = cudaDeviceEnablePeerAccess(e, 0);
      if (err == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();
      else
        HS_CUDA_CHECK(err);
    }
  const auto g = static_cast<std::int64_t>(std::min<std::size_t>(devices.size(), nt));
  if (home >= g) home = -1;  // the caller's device got no columns: copy the factor back to it
  std::vector<std::unique_ptr<Part>> parts;
  // Declared after `parts`, so destroyed first: on an exception every device's streams finish
  // before any part's memory goes (a peer copy queued on one device may read another's copy).
  struct DrainAll {
    std::vector<std::unique_ptr<Part>>& parts;
    ~DrainAll() {
      for (const auto& part : parts) {
        if (cudaSetDevice(part->device) != cudaSuccess) (void)cudaGetLastError();
        for (const auto& s : {part->p.get(), part->u.get()})
          if (s && cudaStreamSynchronize(s->get()) != cudaSuccess) (void)cudaGetLastError();
      }
    }
  } drain_all{parts};
  for (std::int64_t i = 0; i < g; ++i) {
    parts.push_back(std::make_unique<Part>());
    parts.back()->device = devices[static_cast<std::size_t>(i)];
    set_up(*parts.back(), a, variants, home, g, i);
  }
  const auto use = [&](std::int64_t i) -> Part& {
    Part& part = *parts[static_cast<std::size_t>(i)];
    HS_CUDA_CHECK(cudaSetDevice(part.device));
    return part;
  };
  // The trailing updates of step k on the owner of panel k + 1 are queued after that panel
  // (deferred_rest): queued at once, they shared the device with the panel's solve, the longest
  // link of the chain of panels that sets the time when the updates are cheap (4 x H200, band
  // policy, when it was one tall cuBLAS strsm: 9.7 ms beside them against about 5 ms alone).
  std::int64_t deferred_rest = -1;
  const auto update_rest = [&](Part& part, std::int64_t k) {
    const cudaStream_t u = part.u->get();
    if (k + 3 < nt) part.fc->update_rest(part.update_blas->get(), u, k);
    part.update_done[k]->record(u);
  };
  for (std::int64_t k = 0; k < nt; ++k) {
    const std::int64_t owner = k % g;
    {
      Part& o = use(owner);
      factor_panel(o, k);
      convert_panel(o, k);
      o.panel_done[k]->record(o.p->get());
      if (deferred_rest == k - 1 && k >= 1) {
        HS_CUDA_CHECK(cudaStreamWaitEvent(o.u->get(), o.panel_done[k]->get(), 0));
        update_rest(o, k - 1);
      }
    }
    for (std::int64_t i = 0; i < g; ++i) {
      if (i == owner) continue;
      Part& part = use(i);
      const Part& o = *parts[static_cast<std::size_t>(owner)];
      const cudaStream_t p = part.p->get();
      HS_CUDA_CHECK(cudaStreamWaitEvent(p, o.panel_done[k]->get(), 0));
      const std::int64_t at = l.tile_offset(k, k);
      HS_CUDA_CHECK(cudaMemcpyPeerAsync(part.fc->base + at, part.device, o.fc->base + at, o.device,
                                        static_cast<std::size_t>(column_elements(l, k)) * 4, p));
      convert_panel(part, k);
      part.panel_done[k]->record(p);
    }
    for (std::int64_t i = 0; i < g; ++i) {
      Part& part = use(i);
      Factor& fc = *part.fc;
      const cudaStream_t p = part.p->get(), u = part.u->get();
      if (k + 1 < nt && fc.owns(k + 1)) {
        // Look-ahead: column k + 1 needs step k - 1's update of it (the update stream's first).
        if (k >= 1) HS_CUDA_CHECK(cudaStreamWaitEvent(p, part.col_done[k - 1]->get(), 0));
        fc.update_column(part.panel_blas->get(), p, 0, k, k + 1);
      }
      HS_CUDA_CHECK(cudaStreamWaitEvent(u, part.panel_done[k]->get(), 0));
      if (k + 2 < nt && fc.owns(k + 2)) fc.update_column(part.update_blas->get(), u, 1, k, k + 2);
      part.col_done[k]->record(u);
      if (g > 1 && k + 1 < nt && fc.owns(k + 1))
        deferred_rest = k;  // queued after panel k + 1, above
      else
        update_rest(part, k);
    }
  }
  // Every device holds the whole factor now (its columns, and every other column as received):
  // the caller's storage gets it from the first device unless it is the home device's own.
  std::vector<int> infos(static_cast<std::size_t>(nt), 0);
  FailureCode code = kNoFailure;
  std::int64_t workspace = 0;
  for (std::int64_t i = 0; i < g; ++i) {
    Part& part = use(i);
    const cudaStream_t p = part.p->get();
    HS_CUDA_CHECK(cudaStreamWaitEvent(p, part.update_done[nt - 1]->get(), 0));
    std::vector<int> mine(static_cast<std::size_t>(nt));
    FailureCode flag = kNoFailure;
    HS_CUDA_CHECK(cudaMemcpyAsync(mine.data(), part.ps.infos, mine.size() * sizeof(int),
                                  cudaMemcpyDeviceToHost, p));
    HS_CUDA_CHECK(cudaMemcpyAsync(&flag, part.fc->flag, sizeof flag, cudaMemcpyDeviceToHost, p));
    HS_CUDA_CHECK(cudaStreamSynchronize(p));
    for (std::int64_t k = i; k < nt; k += g)
      infos[static_cast<std::size_t>(k)] = mine[static_cast<std::size_t>(k)];
    code = std::min(code, flag);  // the device's atomicMin across devices: earliest first
    workspace += part.ps.bytes;
  }
  throw_first_failure(*parts.front()->fc, infos, code, policy_name, failed);
  if (home < 0) {
    Part& first = use(0);
    HS_CUDA_CHECK(cudaMemcpyAsync(a.storage.data(), first.copy.storage.data(),
                                  static_cast<std::size_t>(a.storage.nbytes()), cudaMemcpyDefault,
                                  first.p->get()));
    HS_CUDA_CHECK(cudaStreamSynchronize(first.p->get()));
  }
  return workspace;
}

}  // namespace halfscope::linalg::detail
