// Timing tool (not a test, not built by CMake): the GPU tile Cholesky (cholesky_tiles on device
// storage) against cusolverDnSpotrf on the same KMS matrix A_ij = exp(-|i - j| / 32) (SPD,
// kappa < 64). Prints one row per (n, nb, policy): wall time of cholesky_tiles (norms, policy,
// factorization, final readback), TFLOP/s counted as n^3 / 3, the speed-up over spotrf and the
// scratch reported in workspace_bytes.
//
// Build on a CUDA machine after building test_linalg_gpu in build-dev (it reuses that target's
// compile and link lines from `ninja -t commands test_linalg_gpu`; the exact command used is in
// /work/notes/c6-cgpu-gpu-run.sh):
//   cholesky_timing [n ...]          default n = 20480 40960, nb 1024 2048,
//                                    policies uniform:SP, uniform:HP1, band:SP=1,HP1=rest
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "halfscope/core/cuda.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/linalg/cholesky.hpp"

namespace hs = halfscope;
namespace la = halfscope::linalg;

namespace {

std::vector<float> kms_row_table(std::int64_t n) {
  std::vector<float> t(static_cast<std::size_t>(n));
  for (std::int64_t d = 0; d < n; ++d)
    t[static_cast<std::size_t>(d)] = static_cast<float>(std::exp(-d / 32.0));
  return t;
}

la::TileMatrix host_tiles(std::int64_t n, std::int64_t nb, const std::vector<float>& rho) {
  la::TileMatrix t(la::TileLayout(n, n, nb, la::TileFill::lower), hs::DType::f32);
  float* s = t.storage.data_as<float>();
  const std::int64_t nt = t.layout.tile_rows();
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t tj = 0; tj < nt; ++tj)
    for (std::int64_t ti = tj; ti < nt; ++ti) {
      float* tile = s + t.layout.tile_offset(ti, tj);
      const std::int64_t h = t.layout.tile_height(ti), w = t.layout.tile_width(tj);
      for (std::int64_t c = 0; c < w; ++c)
        for (std::int64_t r = 0; r < h; ++r)
          tile[c * h + r] = rho[static_cast<std::size_t>(std::abs(ti * nb + r - tj * nb - c))];
    }
  return t;
}

// cusolverDnSpotrf of the dense column-major matrix, milliseconds (CUDA events).
double spotrf_ms(std::int64_t n, const std::vector<float>& rho) {
  std::vector<float> dense(static_cast<std::size_t>(n * n));
#pragma omp parallel for
  for (std::int64_t c = 0; c < n; ++c)
    for (std::int64_t r = 0; r < n; ++r)
      dense[static_cast<std::size_t>(c * n + r)] = rho[static_cast<std::size_t>(std::abs(r - c))];
  float* a = nullptr;
  HS_CUDA_CHECK(cudaMalloc(&a, dense.size() * sizeof(float)));
  HS_CUDA_CHECK(cudaMemcpy(a, dense.data(), dense.size() * sizeof(float), cudaMemcpyHostToDevice));
  cusolverDnHandle_t h = nullptr;
  HS_CUSOLVER_CHECK(cusolverDnCreate(&h));
  int lwork = 0;
  HS_CUSOLVER_CHECK(cusolverDnSpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, static_cast<int>(n), a,
                                                static_cast<int>(n), &lwork));
  float* work = nullptr;
  int* info = nullptr;
  HS_CUDA_CHECK(cudaMalloc(&work, static_cast<std::size_t>(lwork) * sizeof(float)));
  HS_CUDA_CHECK(cudaMalloc(&info, sizeof(int)));
  hs::cuda::EventTimer timer;
  timer.start();
  HS_CUSOLVER_CHECK(cusolverDnSpotrf(h, CUBLAS_FILL_MODE_LOWER, static_cast<int>(n), a,
                                     static_cast<int>(n), work, lwork, info));
  const double ms = timer.stop_ms();
  int info_host = 0;
  HS_CUDA_CHECK(cudaMemcpy(&info_host, info, sizeof(int), cudaMemcpyDeviceToHost));
  if (info_host != 0) std::printf("spotrf info %d\n", info_host);
  (void)cusolverDnDestroy(h);
  HS_CUDA_CHECK(cudaFree(a));
  HS_CUDA_CHECK(cudaFree(work));
  HS_CUDA_CHECK(cudaFree(info));
  return ms;
}

double tiles_ms(const la::TileMatrix& host, const std::string& policy, std::int64_t* workspace) {
  la::TileMatrix dev = host;
  dev.storage = host.storage.to(hs::Memory::device);
  la::CholeskyOptions opts;
  opts.policy = la::parse_policy(policy);
  HS_CUDA_CHECK(cudaDeviceSynchronize());
  const auto t0 = std::chrono::steady_clock::now();
  const la::CholeskyReport r = la::cholesky_tiles(dev, opts);
  const auto t1 = std::chrono::steady_clock::now();
  *workspace = r.workspace_bytes;
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (!hs::cuda_available()) {
      std::printf("no CUDA device\n");
      return 1;
    }
    std::vector<std::int64_t> sizes;
    for (int i = 1; i < argc; ++i) sizes.push_back(std::atoll(argv[i]));
    if (sizes.empty()) sizes = {20480, 40960};
    const std::vector<std::string> policies = {"uniform:SP", "uniform:HP1", "band:SP=1,HP1=rest"};
    {  // warm-up: library initialisation, memory pools
      const auto rho = kms_row_table(4096);
      std::int64_t ws = 0;
      for (const auto& p : policies) (void)tiles_ms(host_tiles(4096, 1024, rho), p, &ws);
      (void)spotrf_ms(4096, rho);
    }
    std::printf(
        "| n | nb | policy | ms | TFLOP/s | vs spotrf | workspace MB "
        "|\n|---|---|---|---|---|---|---|\n");
    for (const std::int64_t n : sizes) {
      const auto rho = kms_row_table(n);
      const double flops = std::pow(static_cast<double>(n), 3) / 3.0;
      const double ref = spotrf_ms(n, rho);
      std::printf("| %lld | - | cusolverDnSpotrf | %.1f | %.1f | 1.00 | - |\n",
                  static_cast<long long>(n), ref, flops / ref * 1e-9);
      for (const std::int64_t nb : {1024, 2048}) {
        const la::TileMatrix host = host_tiles(n, nb, rho);
        for (const auto& p : policies) {
          std::int64_t ws = 0;
          const double ms = tiles_ms(host, p, &ws);
          std::printf("| %lld | %lld | %s | %.1f | %.1f | %.2f | %.0f |\n",
                      static_cast<long long>(n), static_cast<long long>(nb), p.c_str(), ms,
                      flops / ms * 1e-9, ref / ms, static_cast<double>(ws) / 1e6);
          std::fflush(stdout);
        }
      }
    }
  } catch (const hs::Error& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return 0;
}
