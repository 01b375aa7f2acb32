// Standalone prototype: ways to place a day of the matched-filtering network case (30 channels x
// 4.32e6 float32 samples, 0.52 GB of pageable host memory) on one or two devices, before
// choosing how the devices of one host receive the data (src/mfilter/staged_upload.cpp,
// docs/scaling.md). Times, median of 5 after one warm-up: pageable cudaMemcpy from 1-8 host
// threads per device; staging through two pinned 8 MiB blocks per thread (memcpy into one while
// the other's DMA runs) with 1-16 threads per device; page-locking the array in place
// (cudaHostRegister, one copy, unregister); host memcpy alone with 1-16 threads. On a GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90 bench/prototypes/upload_staging.cu -o up && ./up
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>
#define CK(x)                                                               \
  do {                                                                      \
    cudaError_t e = (x);                                                    \
    if (e != cudaSuccess) {                                                 \
      std::printf("%s: %s line %d\n", #x, cudaGetErrorString(e), __LINE__); \
      std::exit(1);                                                         \
    }                                                                       \
  } while (0)
static const size_t kBytes = size_t{30} * 4320000 * 4;
static char* host;
static char* dev[2];
static char* pin[2][16][2];
static const size_t kBlock = size_t{8} << 20;
double now() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
void run_threads(int n, const std::function<void(int)>& f) {
  std::vector<std::thread> t;
  for (int i = 0; i < n; ++i) t.emplace_back(f, i);
  for (auto& x : t) x.join();
}
// Pageable: `per` threads per device, devices [0, nd): each device takes bytes [d*B/nd,
// (d+1)*B/nd).
void pageable(int nd, int per) {
  run_threads(nd * per, [&](int i) {
    const int d = i / per, k = i % per;
    CK(cudaSetDevice(d));
    const size_t lo = kBytes * d / nd, hi = kBytes * (d + 1) / nd;
    const size_t a = lo + (hi - lo) * k / per, b = lo + (hi - lo) * (k + 1) / per;
    CK(cudaMemcpy(dev[d] + a, host + a, b - a, cudaMemcpyHostToDevice));
  });
}
// Staged: `per` threads per device, each copying 8 MiB blocks into its two pinned buffers.
void staged(int nd, int per) {
  run_threads(nd * per, [&](int i) {
    const int d = i / per, k = i % per;
    CK(cudaSetDevice(d));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t ev[2];
    CK(cudaEventCreateWithFlags(&ev[0], cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&ev[1], cudaEventDisableTiming));
    const size_t lo = kBytes * d / nd, hi = kBytes * (d + 1) / nd;
    const size_t a = lo + (hi - lo) * k / per, b = lo + (hi - lo) * (k + 1) / per;
    int j = 0;
    for (size_t o = a; o < b; o += kBlock, ++j) {
      const size_t m = std::min(kBlock, b - o);
      if (j >= 2) CK(cudaEventSynchronize(ev[j % 2]));
      std::memcpy(pin[d][k][j % 2], host + o, m);
      CK(cudaMemcpyAsync(dev[d] + o, pin[d][k][j % 2], m, cudaMemcpyHostToDevice, s));
      CK(cudaEventRecord(ev[j % 2], s));
    }
    CK(cudaStreamSynchronize(s));
    CK(cudaEventDestroy(ev[0]));
    CK(cudaEventDestroy(ev[1]));
    CK(cudaStreamDestroy(s));
  });
}
void bench(const char* name, const std::function<void()>& f) {
  f();
  std::vector<double> t;
  for (int r = 0; r < 5; ++r) {
    const double t0 = now();
    f();
    t.push_back(now() - t0);
  }
  std::sort(t.begin(), t.end());
  std::printf("%-34s median %7.2f ms (min %7.2f) %6.1f GB/s\n", name, t[2], t[0],
              kBytes / t[2] / 1e6);
}
int main() {
  int nd = 0;
  CK(cudaGetDeviceCount(&nd));
  nd = std::min(nd, 2);
  host = static_cast<char*>(std::malloc(kBytes));
  std::memset(host, 1, kBytes);
  for (int d = 0; d < nd; ++d) {
    CK(cudaSetDevice(d));
    CK(cudaMalloc(&dev[d], kBytes));
    for (int k = 0; k < 16; ++k)
      for (int b = 0; b < 2; ++b) CK(cudaMallocHost(&pin[d][k][b], kBlock));
  }
  char name[64];
  for (int per : {1, 2, 4, 8}) {
    std::snprintf(name, 64, "pageable 1 dev x %d threads", per);
    bench(name, [&] { pageable(1, per); });
  }
  if (nd == 2)
    for (int per : {1, 2, 4}) {
      std::snprintf(name, 64, "pageable 2 dev x %d threads", per);
      bench(name, [&] { pageable(2, per); });
    }
  for (int per : {1, 2, 4, 8, 16}) {
    std::snprintf(name, 64, "staged 1 dev x %d threads", per);
    bench(name, [&] { staged(1, per); });
  }
  if (nd == 2)
    for (int per : {1, 2, 4, 8}) {
      std::snprintf(name, 64, "staged 2 dev x %d threads", per);
      bench(name, [&] { staged(2, per); });
    }
  // Page-locking the caller's array in place.
  for (int r = 0; r < 3; ++r) {
    double t0 = now();
    CK(cudaHostRegister(host, kBytes, cudaHostRegisterDefault));
    const double reg = now() - t0;
    CK(cudaSetDevice(0));
    t0 = now();
    CK(cudaMemcpy(dev[0], host, kBytes, cudaMemcpyHostToDevice));
    const double cp = now() - t0;
    t0 = now();
    CK(cudaHostUnregister(host));
    const double un = now() - t0;
    std::printf("register %.2f ms, copy %.2f ms, unregister %.2f ms\n", reg, cp, un);
  }
  // Host memcpy alone, 1..16 threads (the staging's ceiling).
  char* other = static_cast<char*>(std::malloc(kBytes));
  std::memset(other, 0, kBytes);
  for (int th : {1, 4, 8, 16}) {
    std::snprintf(name, 64, "host memcpy %d threads", th);
    bench(name, [&] {
      run_threads(th, [&](int i) {
        const size_t a = kBytes * i / th, b = kBytes * (i + 1) / th;
        std::memcpy(other + a, host + a, b - a);
      });
    });
  }
  return 0;
}
