// solve_right over several CUDA devices of one host (SolveOptions::devices, issue 9): the rows of
// B are independent right-hand sides, so each listed device solves a contiguous block of them
// with its own copy of the factor, on its own host thread; the device that holds L and B solves
// its block in place. One copy of L per other device (peer to peer: 20 GB in about 50 ms over
// NVLink at the E-ELT's n = 100,368) buys a solve with no other traffic. A host factor with one
// listed device goes to the streamed solve (solve_ooc_cuda.cu) instead.
#include "linalg/solve_devices.hpp"

#include <algorithm>
#include <exception>
#include <string>

#include "core/host_threads.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_WITH_CUDA
#include <cuda_runtime.h>

#include "halfscope/core/cuda.hpp"
#include "linalg/cholesky_cuda.hpp"
#include "linalg/solve_cuda.hpp"
#include "linalg/solve_internal.hpp"
#endif

namespace halfscope::linalg::detail {

#if HALFSCOPE_WITH_CUDA

namespace {

void enable_peer_access(int device, int peer) {
  int can = 0;
  HS_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device, peer));
  if (!can || device == peer) return;
  const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled)
    (void)cudaGetLastError();  // enabled by an earlier call: fine
  else
    HS_CUDA_CHECK(e);
}

void check_device(int d, const char* function) {
  int count = 0;
  HS_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (d < 0 || d >= count)
    throw InvalidInput(std::string(function) + ": devices: CUDA device " + std::to_string(d) +
                       " does not exist (this host has " + std::to_string(count) + ")");
}

}  // namespace

std::pair<std::int64_t, std::int64_t> solve_rows_streamed(const TileMatrix& l, Array& b,
                                                          const std::vector<GemmVariant>& variants,
                                                          int device, std::int64_t device_memory,
                                                          SolveReport& report,
                                                          const RowBlockHook& hook) {
  check_device(device, "solve_right");
  const StreamedSolve s =
      solve_right_streamed(l, b, variants, device, device_budget(device, device_memory), hook);
  report.slabs = s.slabs;
  report.row_blocks = s.row_blocks;
  report.host_to_device_bytes = s.host_to_device;
  report.device_to_host_bytes = s.device_to_host;
  report.workspace_bytes = s.workspace;
  return {s.input_non_finite, s.output_non_finite};
}

std::int64_t streamed_solve_need(const TileMatrix& l, const Policy& policy, std::int64_t rows) {
  return streamed_solve_need(l.layout, factor_variants(l, policy), rows);
}

void solve_rows_devices(const TileMatrix& l, Array& b, const std::vector<GemmVariant>& variants,
                        const std::vector<int>& devices) {
  if (!l.storage.on_device() || !b.on_device())
    throw InvalidInput("solve_right: devices: the factor and b must be in device memory");
  const int home = cuda::device_of(l.storage.data());
  if (cuda::device_of(b.data()) != home)
    throw InvalidInput("solve_right: devices: b must be on the factor's device " +
                       std::to_string(home) + ", found device " +
                       std::to_string(cuda::device_of(b.data())));
  for (const int d : devices) check_device(d, "solve_right");
  const cuda::DeviceGuard restore;
  HS_CUDA_CHECK(cudaSetDevice(home));
  HS_CUDA_CHECK(cudaDeviceSynchronize());  // L and B, written on any stream of their device
  const std::int64_t r = b.dim(0), n = b.dim(1);
  const auto g = static_cast<std::int64_t>(std::min<std::size_t>(devices.size(), r));
  const auto block = [&](std::int64_t i) {  // rows [r i / g, r (i + 1) / g)
    return std::pair<std::int64_t, std::int64_t>{r * i / g, r * (i + 1) / g};
  };
  const auto work = [&](std::int64_t i) {
    const int device = devices[static_cast<std::size_t>(i)];
    HS_CUDA_CHECK(cudaSetDevice(device));
    const auto [first, last] = block(i);
    Array rows = b.slice(0, first, last);  // contiguous: whole rows of a C-contiguous array
    if (device == home) {
      solve_right_cuda(l, rows, variants);
      return;
    }
    enable_peer_access(device, home);
    TileMatrix mine(l.layout, DType::f32, Memory::device);
    Array part(DType::f32, {last - first, n}, Memory::device);
    HS_CUDA_CHECK(cudaMemcpyPeer(mine.storage.data(), device, l.storage.data(), home,
                                 static_cast<std::size_t>(l.storage.nbytes())));
    HS_CUDA_CHECK(cudaMemcpyPeer(part.data(), device, rows.data(), home,
                                 static_cast<std::size_t>(rows.nbytes())));
    HS_CUDA_CHECK(cudaDeviceSynchronize());
    solve_right_cuda(mine, part, variants);
    HS_CUDA_CHECK(cudaMemcpyPeer(rows.data(), home, part.data(), device,
                                 static_cast<std::size_t>(part.nbytes())));
    HS_CUDA_CHECK(cudaDeviceSynchronize());
  };
  const auto errors = halfscope::detail::on_threads(
      static_cast<std::size_t>(g), [&](std::size_t i) { work(static_cast<std::int64_t>(i)); });
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);  // the first block's failure (earliest rows)
}

#else

std::pair<std::int64_t, std::int64_t> solve_rows_streamed(const TileMatrix&, Array&,
                                                          const std::vector<GemmVariant>&, int,
                                                          std::int64_t, SolveReport&,
                                                          const RowBlockHook&) {
  throw Unsupported("solve_right: devices were given but halfscope was built without CUDA");
}

std::int64_t streamed_solve_need(const TileMatrix&, const Policy&, std::int64_t) {
  throw Unsupported("solve_right: a streamed solve needs a build with CUDA");
}

void solve_rows_devices(const TileMatrix&, Array&, const std::vector<GemmVariant>&,
                        const std::vector<int>&) {
  throw Unsupported("solve_right: devices were given but halfscope was built without CUDA");
}

#endif

}  // namespace halfscope::linalg::detail
