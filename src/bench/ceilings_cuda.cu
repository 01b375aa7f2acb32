// GPU ceilings: device-to-device copy bandwidth and cuBLAS GEMM rates per precision
// (include/halfscope/bench/ceilings.hpp). Every number is a median of CUDA-event-timed repeats
// after a warm-up, on fresh random data (never zeros), with the result spot-checked.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "halfscope/bench/ceilings.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/cublas.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/half.hpp"

namespace halfscope::bench {

namespace {

constexpr std::int64_t kMiB = 1 << 20;
constexpr int kThreads = 256;

__device__ double hash_uniform(unsigned long long seed, unsigned long long i) {
  unsigned long long z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1p-52 - 1.0;  // [-1, 1)
}

template <class T>
__device__ T from_double(double x) {
  return static_cast<T>(x);
}
template <>
__device__ __half from_double<__half>(double x) {
  return __float2half_rn(static_cast<float>(x));
}
template <>
__device__ __nv_bfloat16 from_double<__nv_bfloat16>(double x) {
  return __float2bfloat16_rn(static_cast<float>(x));
}

template <class T>
__global__ void fill_random_kernel(T* p, long long n, unsigned long long seed) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    p[i] = from_double<T>(hash_uniform(seed, static_cast<unsigned long long>(i)));
}

// The copy floor: 16-byte accesses, one pass (no grid-stride loop), each block copying a
// contiguous chunk of 2 x 128 words with both loads in flight before the stores. Measured on an
// H200 with 1 GiB: 4.23 TB/s, against 3.9-4.0 TB/s for persistent grid-stride variants (2 to 16
// blocks per SM, 256 to 1024 threads, 1 to 8 loads in flight) and 4.25 TB/s for cudaMemcpyAsync.
constexpr int kCopyUnroll = 2;
constexpr int kCopyThreads = 128;
__global__ void copy_kernel(const int4* __restrict__ src, int4* __restrict__ dst, long long n) {
  const long long base =
      static_cast<long long>(blockIdx.x) * blockDim.x * kCopyUnroll + threadIdx.x;
  int4 v[kCopyUnroll];
#pragma unroll
  for (int u = 0; u < kCopyUnroll; ++u)
    if (base + u * blockDim.x < n) v[u] = src[base + u * blockDim.x];
#pragma unroll
  for (int u = 0; u < kCopyUnroll; ++u)
    if (base + u * blockDim.x < n) dst[base + u * blockDim.x] = v[u];
}

struct Gpu {
  int device = 0;
  int sms = 0;
  cudaStream_t stream = nullptr;
  int grid(long long work) const {
    return static_cast<int>(std::clamp<long long>((work + kThreads - 1) / kThreads, 1, 8LL * sms));
  }
};

template <class T>
void fill_random(const Gpu& g, void* p, long long n, unsigned long long seed) {
  fill_random_kernel<T><<<g.grid(n), kThreads, 0, g.stream>>>(static_cast<T*>(p), n, seed);
  HS_CHECK_LAUNCH();
}

// Median of `repeats` CUDA-event-timed calls after `warmup` untimed ones.
template <class F>
Stats time_device(const Gpu& g, F&& run, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i) run();
  HS_CUDA_CHECK(cudaStreamSynchronize(g.stream));
  cuda::EventTimer timer(g.stream);
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    timer.start();
    run();
    ms.push_back(timer.stop_ms());
  }
  return compute_stats(ms);
}

void say(const CeilingsOptions& o, const std::string& m) {
  if (o.progress) o.progress(m);
}

std::shared_ptr<Buffer> device_buffer(std::int64_t bytes) {
  return Buffer::allocate(bytes, Memory::device);
}

std::vector<BenchCase> copy_cases(const Gpu& g, const CeilingsOptions& o) {
  std::int64_t bytes = o.copy_bytes > 0 ? o.copy_bytes : (o.quick ? 256 : 1024) * kMiB;
  bytes = std::max<std::int64_t>(bytes / 16 * 16, 16);
  say(o, "GPU copy: " + std::to_string(bytes / kMiB) + " MiB device to device");
  auto src = device_buffer(bytes);
  auto dst = device_buffer(bytes);
  fill_random<float>(g, src->data(), bytes / 4, 21);
  const long long n16 = bytes / 16;
  const long long blocks = (n16 + kCopyThreads * kCopyUnroll - 1) / (kCopyThreads * kCopyUnroll);
  if (blocks > INT_MAX)
    throw InvalidInput("GPU copy ceiling: " + std::to_string(bytes) + " bytes is too large");
  const int grid = static_cast<int>(blocks);
  const auto* s = static_cast<const int4*>(src->data());
  auto* d = static_cast<int4*>(dst->data());

  std::vector<BenchCase> cases;
  BenchCase k;
  k.implementation = "halfscope";
  k.method = "copy-kernel";
  k.precision = "bytes";
  k.params = {{"bytes", bytes},
              {"counted", std::string("read+write")},
              {"access_bytes", std::int64_t{16}},
              {"grid", std::int64_t{grid}},
              {"block", std::int64_t{kCopyThreads}},
              {"loads_in_flight", std::int64_t{kCopyUnroll}}};
  HS_CUDA_CHECK(cudaMemsetAsync(dst->data(), 0, static_cast<std::size_t>(bytes), g.stream));
  k.stats = time_device(
      g,
      [&] {
        copy_kernel<<<grid, kCopyThreads, 0, g.stream>>>(s, d, n16);
        HS_CHECK_LAUNCH();
      },
      3, std::max(o.repeats, 10));
  k.GBps = gbps(2.0 * static_cast<double>(bytes), k.stats.median_ms);

  // The copy must be a copy: compare the last 4 KiB (the grid-stride tail) with the source.
  const std::int64_t probe = std::min<std::int64_t>(bytes, 4096);
  std::vector<unsigned char> a(static_cast<std::size_t>(probe)), b(a.size());
  HS_CUDA_CHECK(cudaMemcpy(a.data(), static_cast<const char*>(src->data()) + bytes - probe,
                           a.size(), cudaMemcpyDeviceToHost));
  HS_CUDA_CHECK(cudaMemcpy(b.data(), static_cast<const char*>(dst->data()) + bytes - probe,
                           b.size(), cudaMemcpyDeviceToHost));
  if (a != b)
    throw NumericalError("GPU copy ceiling: the copy kernel's output does not match its input");
  cases.push_back(std::move(k));

  BenchCase m;
  m.implementation = "cuda-runtime";
  m.method = "cudaMemcpyAsync";
  m.precision = "bytes";
  m.params = {
      {"bytes", bytes}, {"counted", std::string("read+write")}, {"kind", std::string("D2D")}};
  m.stats = time_device(
      g,
      [&] {
        HS_CUDA_CHECK(cudaMemcpyAsync(dst->data(), src->data(), static_cast<std::size_t>(bytes),
                                      cudaMemcpyDeviceToDevice, g.stream));
      },
      3, std::max(o.repeats, 10));
  m.GBps = gbps(2.0 * static_cast<double>(bytes), m.stats.median_ms);
  cases.push_back(std::move(m));
  return cases;
}

// The host link (PCIe, or NVLink-C2C on a Grace host): pinned host memory to the device, back,
// and both at once on two streams, the traffic of the out-of-core Cholesky. Recorded beside the
// ceilings, not as one: it bounds copies in and out, not the device's own kernels.
std::vector<BenchCase> host_link_cases(const Gpu& g, const CeilingsOptions& o) {
  std::int64_t bytes = o.copy_bytes > 0 ? o.copy_bytes : (o.quick ? 256 : 1024) * kMiB;
  say(o, "host link: " + std::to_string(bytes / kMiB) + " MiB pinned host <-> device");
  auto host_in = Buffer::allocate(bytes, Memory::pinned);
  auto host_out = Buffer::allocate(bytes, Memory::pinned);
  auto dev_in = device_buffer(bytes), dev_out = device_buffer(bytes);
  std::memset(host_in->data(), 1, static_cast<std::size_t>(bytes));
  cuda::Stream other;
  const cuda::Event fork, join;
  const auto copy = [&](bool in, cudaStream_t stream) {
    HS_CUDA_CHECK(cudaMemcpyAsync(in ? dev_in->data() : host_out->data(),
                                  in ? host_in->data() : dev_out->data(),
                                  static_cast<std::size_t>(bytes),
                                  in ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, stream));
  };
  std::vector<BenchCase> cases;
  for (const char* kind : {"H2D", "D2H", "both"}) {
    BenchCase c;
    c.implementation = "cuda-runtime";
    c.method = "cudaMemcpyAsync";
    c.precision = "bytes";
    c.params = {{"bytes", bytes},
                {"counted", std::string("bytes moved")},
                {"kind", std::string(kind)},
                {"host_memory", std::string("pinned")}};
    const std::string k = kind;
    c.stats = time_device(
        g,
        [&] {
          if (k != "both") return copy(k == "H2D", g.stream);
          fork.record(g.stream);  // the other direction on a second stream, joined back
          HS_CUDA_CHECK(cudaStreamWaitEvent(other.get(), fork.get(), 0));
          copy(true, g.stream);
          copy(false, other.get());
          join.record(other.get());
          HS_CUDA_CHECK(cudaStreamWaitEvent(g.stream, join.get(), 0));
        },
        2, std::max(o.repeats, 10));
    c.GBps = gbps((k == "both" ? 2.0 : 1.0) * static_cast<double>(bytes), c.stats.median_ms);
    cases.push_back(std::move(c));
  }
  // Pageable host memory, as most callers' arrays are: the driver's own staging (one cudaMemcpy)
  // against halfscope's Array copies (copy_bytes: pinned staging on several threads), host
  // clock around each whole synchronous copy.
  Array pageable(DType::u8, {bytes});
  std::memset(pageable.data(), 1, static_cast<std::size_t>(bytes));
  for (const char* kind : {"H2D", "D2H"})
    for (const bool staged : {false, true}) {
      const bool in = std::string(kind) == "H2D";
      BenchCase c;
      c.implementation = staged ? "halfscope" : "cuda-runtime";
      c.method = staged ? "copy_bytes (staged)" : "cudaMemcpy";
      c.precision = "bytes";
      c.params = {{"bytes", bytes},
                  {"counted", std::string("bytes moved")},
                  {"kind", std::string(kind)},
                  {"host_memory", std::string("pageable")}};
      void* dev = in ? dev_in->data() : dev_out->data();
      c.stats = time_host(
          [&] {
            if (staged)
              copy_bytes(in ? dev : pageable.data(), in ? Memory::device : Memory::host,
                         in ? pageable.data() : dev, in ? Memory::host : Memory::device, bytes);
            else
              HS_CUDA_CHECK(cudaMemcpy(in ? dev : pageable.data(), in ? pageable.data() : dev,
                                       static_cast<std::size_t>(bytes),
                                       in ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost));
          },
          2, std::max(o.repeats, 10));
      c.GBps = gbps(static_cast<double>(bytes), c.stats.median_ms);
      cases.push_back(std::move(c));
    }
  return cases;
}

using cuda::CublasHandle;

enum class Elem { f32, f64, f16, bf16 };

// One GEMM configuration. `product_u` bounds the relative error of one product as the tensor
// cores see it (TF32 rounds its inputs), `acc_u` the unit roundoff of the accumulation and
// `out_u` of the stored result: the spot check's bound is (2 product_u + n acc_u) sum|a b| + out_u
// |c|.
using CeilingSlot = double Ceilings::*;
struct GemmSpec {
  const char* precision;
  const char* compute_name;
  const char* math_name;
  const char* accumulate;
  Elem elem;
  cublasComputeType_t compute;
  cublasMath_t math;
  CeilingSlot ceiling;  // nullptr: recorded for comparison, not a ceiling
  double product_u, acc_u, out_u;
};

constexpr GemmSpec kGemms[] = {
    {"single", "CUBLAS_COMPUTE_32F", "CUBLAS_DEFAULT_MATH", "fp32", Elem::f32, CUBLAS_COMPUTE_32F,
     CUBLAS_DEFAULT_MATH, &Ceilings::fp32_TFLOPs, 0, 0x1p-24, 0x1p-24},
    {"single", "CUBLAS_COMPUTE_32F_PEDANTIC", "CUBLAS_PEDANTIC_MATH", "fp32", Elem::f32,
     CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_PEDANTIC_MATH, &Ceilings::fp32_TFLOPs, 0, 0x1p-24,
     0x1p-24},
    {"tf32", "CUBLAS_COMPUTE_32F_FAST_TF32", "CUBLAS_DEFAULT_MATH", "fp32", Elem::f32,
     CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_DEFAULT_MATH, &Ceilings::tf32_TFLOPs, 0x1p-9, 0x1p-24,
     0x1p-24},
    {"mixed", "CUBLAS_COMPUTE_32F", "CUBLAS_DEFAULT_MATH", "fp32", Elem::f16, CUBLAS_COMPUTE_32F,
     CUBLAS_DEFAULT_MATH, &Ceilings::fp16_TFLOPs, 0, 0x1p-24, 0x1p-11},
    {"half", "CUBLAS_COMPUTE_16F", "CUBLAS_DEFAULT_MATH", "fp16", Elem::f16, CUBLAS_COMPUTE_16F,
     CUBLAS_DEFAULT_MATH, nullptr, 0, 0x1p-11, 0x1p-11},
    {"bf16", "CUBLAS_COMPUTE_32F", "CUBLAS_DEFAULT_MATH", "fp32", Elem::bf16, CUBLAS_COMPUTE_32F,
     CUBLAS_DEFAULT_MATH, &Ceilings::bf16_TFLOPs, 0, 0x1p-24, 0x1p-8},
    {"double", "cublasDgemm", "CUBLAS_DEFAULT_MATH", "fp64", Elem::f64, CUBLAS_COMPUTE_64F,
     CUBLAS_DEFAULT_MATH, &Ceilings::fp64_TFLOPs, 0, 0x1p-53, 0x1p-53},
};

std::int64_t elem_size(Elem e) {
  return e == Elem::f64 ? 8 : e == Elem::f32 ? 4 : 2;
}
cudaDataType data_type(Elem e) {
  switch (e) {
    case Elem::f32:
      return CUDA_R_32F;
    case Elem::f64:
      return CUDA_R_64F;
    case Elem::f16:
      return CUDA_R_16F;
    case Elem::bf16:
      return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}
const char* elem_name(Elem e) {
  switch (e) {
    case Elem::f32:
      return "fp32";
    case Elem::f64:
      return "fp64";
    case Elem::f16:
      return "fp16";
    case Elem::bf16:
      return "bf16";
  }
  return "?";
}

// Host value of element `i` of raw bytes of type `e`.
double host_value(const std::vector<unsigned char>& raw, std::size_t i, Elem e) {
  const unsigned char* p = raw.data() + i * static_cast<std::size_t>(elem_size(e));
  switch (e) {
    case Elem::f32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case Elem::f64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case Elem::f16: {
      std::uint16_t b;
      std::memcpy(&b, p, 2);
      return Half::from_bits(b).to_float();
    }
    case Elem::bf16: {
      std::uint16_t b;
      std::memcpy(&b, p, 2);
      return BFloat16::from_bits(b).to_float();
    }
  }
  return NAN;
}

void fill_matrix(const Gpu& g, Elem e, void* p, long long count, unsigned long long seed) {
  switch (e) {
    case Elem::f32:
      fill_random<float>(g, p, count, seed);
      break;
    case Elem::f64:
      fill_random<double>(g, p, count, seed);
      break;
    case Elem::f16:
      fill_random<__half>(g, p, count, seed);
      break;
    case Elem::bf16:
      fill_random<__nv_bfloat16>(g, p, count, seed);
      break;
  }
}

BenchCase gemm_case(const Gpu& g, const CublasHandle& h, const GemmSpec& spec, std::int64_t n,
                    void* a, void* b, void* c, const CeilingsOptions& o, unsigned long long seed) {
  say(o, std::string("GPU GEMM ") + spec.precision + " (" + spec.compute_name +
             ") n=" + std::to_string(n));
  const Elem e = spec.elem;
  fill_matrix(g, e, a, n * n, seed);
  fill_matrix(g, e, b, n * n, seed + 1);
  HS_CUBLAS_CHECK(cublasSetMathMode(h.get(), spec.math));
  const int m = static_cast<int>(n);
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const __half one_h = __float2half(1.0f), zero_h = __float2half(0.0f);
  const auto run = [&] {
    if (e == Elem::f64) {
      HS_CUBLAS_CHECK(cublasDgemm(h.get(), CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one_d,
                                  static_cast<const double*>(a), m, static_cast<const double*>(b),
                                  m, &zero_d, static_cast<double*>(c), m));
    } else {
      const bool half_scalars = spec.compute == CUBLAS_COMPUTE_16F;
      HS_CUBLAS_CHECK(cublasGemmEx(h.get(), CUBLAS_OP_N, CUBLAS_OP_N, m, m, m,
                                   half_scalars ? static_cast<const void*>(&one_h) : &one_f, a,
                                   data_type(e), m, b, data_type(e), m,
                                   half_scalars ? static_cast<const void*>(&zero_h) : &zero_f, c,
                                   data_type(e), m, spec.compute, CUBLAS_GEMM_DEFAULT));
    }
  };
  BenchCase bc;
  bc.implementation = "cublas";
  bc.method = e == Elem::f64 ? "cublasDgemm" : "cublasGemmEx";
  bc.precision = spec.precision;
  bc.params = {{"n", n},
               {"compute", std::string(spec.compute_name)},
               {"math_mode", std::string(spec.math_name)},
               {"a_b_c", std::string(elem_name(e))},
               {"accumulate", std::string(spec.accumulate)},
               {"tf32", spec.compute == CUBLAS_COMPUTE_32F_FAST_TF32},
               {"layout", std::string("NN column-major")}};
  bc.stats = time_device(g, run, 2, std::max(o.repeats, 10));
  const double nn = static_cast<double>(n);
  bc.TFLOPs = tflops(2.0 * nn * nn * nn, bc.stats.median_ms);

  // Spot check C(0,0) = sum_k A(0,k) B(k,0) against a double dot product on the host.
  const std::size_t es = static_cast<std::size_t>(elem_size(e));
  std::vector<unsigned char> row(es * static_cast<std::size_t>(n)), col(row.size()), c00(es);
  HS_CUDA_CHECK(cudaMemcpy2D(row.data(), es, a, es * static_cast<std::size_t>(n), es,
                             static_cast<std::size_t>(n), cudaMemcpyDeviceToHost));
  HS_CUDA_CHECK(cudaMemcpy(col.data(), b, col.size(), cudaMemcpyDeviceToHost));
  HS_CUDA_CHECK(cudaMemcpy(c00.data(), c, es, cudaMemcpyDeviceToHost));
  double ref = 0, mag = 0;
  for (std::size_t k = 0; k < static_cast<std::size_t>(n); ++k) {
    const double p = host_value(row, k, e) * host_value(col, k, e);
    ref += p;
    mag += std::fabs(p);
  }
  const double got = host_value(c00, 0, e);
  const double err = std::fabs(got - ref);
  const double bound = (2 * spec.product_u + nn * spec.acc_u) * mag + spec.out_u * std::fabs(ref);
  bc.error = {{"c00_abs_err", err}, {"c00_worst_bound", bound}};
  if (!(err <= bound))
    throw NumericalError(std::string("GPU GEMM ceiling ") + spec.precision + " (" +
                         spec.compute_name + "): C(0,0) = " + std::to_string(got) + ", expected " +
                         std::to_string(ref) + " within " + std::to_string(bound));
  return bc;
}

void keep_max(double& slot, double value) {
  if (std::isfinite(value) && !(slot >= value)) slot = value;
}

}  // namespace

BenchReport measure_gpu_ceilings(int device, const CeilingsOptions& options) {
  BenchReport r = BenchReport::start("ceilings", describe_cuda_device(device));
  Gpu g;
  g.device = device;
  HS_CUDA_CHECK(cudaSetDevice(device));
  HS_CUDA_CHECK(cudaDeviceGetAttribute(&g.sms, cudaDevAttrMultiProcessorCount, device));
  cuda::Stream stream;
  g.stream = stream.get();

  for (BenchCase& c : copy_cases(g, options)) {
    keep_max(r.ceilings.copy_GBps, c.GBps);
    r.cases.push_back(std::move(c));
  }
  for (BenchCase& c : host_link_cases(g, options)) r.cases.push_back(std::move(c));

  // Three n x n FP64-sized buffers serve every precision; smaller GPUs get a smaller n.
  std::int64_t n = options.gemm_n > 0 ? options.gemm_n : (options.quick ? 4096 : 8192);
  std::size_t free_bytes = 0, total_bytes = 0;
  HS_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  while (options.gemm_n <= 0 && n > 1024 &&
         3.0 * 8.0 * static_cast<double>(n * n) > 0.8 * static_cast<double>(free_bytes))
    n /= 2;
  if (n < 1 || n > 46340)  // n^2 * 8 bytes and cuBLAS's int dimensions stay in range
    throw InvalidInput("GPU ceilings: GEMM order must be in [1, 46340], got " + std::to_string(n));
  auto a = device_buffer(8 * n * n), b = device_buffer(8 * n * n), c = device_buffer(8 * n * n);
  CublasHandle handle;
  HS_CUBLAS_CHECK(cublasSetStream(handle.get(), g.stream));
  unsigned long long seed = 100;
  for (const GemmSpec& spec : kGemms) {
    BenchCase bc =
        gemm_case(g, handle, spec, n, a->data(), b->data(), c->data(), options, seed += 2);
    if (spec.ceiling) keep_max(r.ceilings.*spec.ceiling, bc.TFLOPs);
    r.cases.push_back(std::move(bc));
  }
  return r;
}

}  // namespace halfscope::bench
