// Host side of the GPU conversions (include/halfscope/core/convert_cuda.hpp). Device code:
// kernels/convert.cuh.
#include "halfscope/core/convert_cuda.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "core/kernels/convert.cuh"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope {

namespace {

// Launch shape, measured on an H200 with 2^28 elements (bench scratch, 2026-11): narrowing with a
// grid-stride grid of 8 blocks of 256 per SM runs at 3.88 TB/s (91% of cudaMemcpyAsync's 4.25),
// while a one-pass grid (one block per 1024 elements) falls to 2.1 TB/s because every block pays
// the count reduction. Widening has no reduction and is fastest one-pass: 4.12 TB/s.
constexpr int kThreads = 256;    // multiple of 32, as block_commit requires
constexpr int kBlocksPerSm = 8;  // narrowing: one full wave of 2048 threads per SM

// Elements to skip until `p` is `align`-byte aligned, or -1 if it never will be (p not even
// aligned to its element size).
long long head_to_align(const void* p, std::uintptr_t element, std::uintptr_t align) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (a % element != 0) return -1;
  return static_cast<long long>(((align - a % align) % align) / element);
}

// The vector split for 4-element groups: `in` needs 4 * in_size alignment and `out` 4 * out_size.
kernels::VectorSplit split_for(const void* in, std::uintptr_t in_size, const void* out,
                               std::uintptr_t out_size, std::int64_t n) {
  const long long hi = head_to_align(in, in_size, 4 * in_size);
  const long long ho = head_to_align(out, out_size, 4 * out_size);
  if (hi < 0 || hi != ho || hi > n) return {n, 0, 0};
  return {hi, (n - hi) / 4, (n - hi) % 4};
}

// Blocks for a split: a grid-stride grid of kBlocksPerSm per SM when `persistent`, else one
// thread per unit of work (capped at the grid limit; the kernels' grid-stride loops cover the
// rest).
int grid_for(const kernels::VectorSplit& split, bool persistent) {
  const long long work = std::max(split.vectors, split.head + split.tail);
  const long long blocks = (work + kThreads - 1) / kThreads;
  long long cap = INT_MAX;
  if (persistent) {
    int device = 0;
    int sms = 0;
    HS_CUDA_CHECK(cudaGetDevice(&device));
    HS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    cap = static_cast<long long>(sms) * kBlocksPerSm;
  }
  return static_cast<int>(std::clamp<long long>(blocks, 1, cap));
}

void check_args(const void* in, const void* out, std::int64_t n, const char* what) {
  if (n < 0)
    throw InvalidInput(std::string(what) + ": negative element count " + std::to_string(n));
  if (n > 0 && (in == nullptr || out == nullptr))
    throw InvalidInput(std::string(what) + ": null device pointer for " + std::to_string(n) +
                       " elements");
}

// Stream-ordered device allocation of the counters, freed on the same stream even on error.
class DeviceCounters {
 public:
  explicit DeviceCounters(cudaStream_t s) : stream_(s) {
    HS_CUDA_CHECK(
        cudaMallocAsync(reinterpret_cast<void**>(&ptr_), sizeof(kernels::ConversionCounters), s));
  }
  ~DeviceCounters() {
    if (cudaFreeAsync(ptr_, stream_) != cudaSuccess) (void)cudaGetLastError();
  }
  DeviceCounters(const DeviceCounters&) = delete;
  DeviceCounters& operator=(const DeviceCounters&) = delete;
  [[nodiscard]] kernels::ConversionCounters* get() const noexcept { return ptr_; }

 private:
  cudaStream_t stream_;
  kernels::ConversionCounters* ptr_ = nullptr;
};

template <class Format>
ConversionReport narrow_device(const float* in, std::uint16_t* out, std::int64_t n, cudaStream_t s,
                               const char* what) {
  check_args(in, out, n, what);
  ConversionReport report;
  report.count = n;
  if (n == 0) return report;

  const kernels::VectorSplit split = split_for(in, sizeof(float), out, sizeof(std::uint16_t), n);
  DeviceCounters counters(s);
  const kernels::ConversionCounters zero{0, 0, 0, 0, LLONG_MAX};
  HS_CUDA_CHECK(cudaMemcpyAsync(counters.get(), &zero, sizeof zero, cudaMemcpyHostToDevice, s));
  kernels::narrow_kernel<Format>
      <<<grid_for(split, true), kThreads, 0, s>>>(in, out, split, counters.get());
  HS_CHECK_LAUNCH();
  kernels::ConversionCounters host{};
  HS_CUDA_CHECK(cudaMemcpyAsync(&host, counters.get(), sizeof host, cudaMemcpyDeviceToHost, s));
  HS_CUDA_CHECK(cudaStreamSynchronize(s));

  report.overflow = static_cast<std::int64_t>(host.overflow);
  report.underflow = static_cast<std::int64_t>(host.underflow);
  report.subnormal = static_cast<std::int64_t>(host.subnormal);
  report.nan = static_cast<std::int64_t>(host.nan);
  report.first_overflow_index = host.first_overflow == LLONG_MAX ? -1 : host.first_overflow;
  return report;
}

template <class Format>
void widen_device(const std::uint16_t* in, float* out, std::int64_t n, cudaStream_t s,
                  const char* what) {
  check_args(in, out, n, what);
  if (n == 0) return;
  const kernels::VectorSplit split = split_for(in, sizeof(std::uint16_t), out, sizeof(float), n);
  kernels::widen_kernel<Format><<<grid_for(split, false), kThreads, 0, s>>>(in, out, split);
  HS_CHECK_LAUNCH();
}

void require_device_contiguous(const Array& a, DType expected, const char* what) {
  if (a.empty()) throw InvalidInput(std::string(what) + ": empty array");
  if (!a.on_device())
    throw InvalidInput(std::string(what) + ": expected a device array, got " + a.describe());
  if (expected != a.dtype())
    throw InvalidInput(std::string(what) + ": expected " + std::string(dtype_name(expected)) +
                       ", got " + a.describe());
  if (!a.is_c_contiguous())
    throw InvalidInput(std::string(what) + ": expected a C-contiguous array, got " + a.describe());
}

}  // namespace

ConversionReport convert_to_half_device(const float* d_in, Half* d_out, std::int64_t n,
                                        cudaStream_t s) {
  return narrow_device<kernels::HalfFormat>(d_in, reinterpret_cast<std::uint16_t*>(d_out), n, s,
                                            "convert_to_half_device");
}

ConversionReport convert_to_bf16_device(const float* d_in, BFloat16* d_out, std::int64_t n,
                                        cudaStream_t s) {
  return narrow_device<kernels::BFloat16Format>(d_in, reinterpret_cast<std::uint16_t*>(d_out), n, s,
                                                "convert_to_bf16_device");
}

void convert_to_float_device(const Half* d_in, float* d_out, std::int64_t n, cudaStream_t s) {
  widen_device<kernels::HalfFormat>(reinterpret_cast<const std::uint16_t*>(d_in), d_out, n, s,
                                    "convert_to_float_device");
}

void convert_to_float_device(const BFloat16* d_in, float* d_out, std::int64_t n, cudaStream_t s) {
  widen_device<kernels::BFloat16Format>(reinterpret_cast<const std::uint16_t*>(d_in), d_out, n, s,
                                        "convert_to_float_device");
}

Array to_half_device(const Array& device_f32, ConversionReport* report, cudaStream_t s) {
  require_device_contiguous(device_f32, DType::f32, "to_half_device");
  Array out(DType::f16, device_f32.shape(), Memory::device);
  const ConversionReport r = convert_to_half_device(device_f32.data_as<float>(),
                                                    out.data_as<Half>(), device_f32.size(), s);
  if (report) *report += r;
  return out;
}

Array to_bf16_device(const Array& device_f32, ConversionReport* report, cudaStream_t s) {
  require_device_contiguous(device_f32, DType::f32, "to_bf16_device");
  Array out(DType::bf16, device_f32.shape(), Memory::device);
  const ConversionReport r = convert_to_bf16_device(device_f32.data_as<float>(),
                                                    out.data_as<BFloat16>(), device_f32.size(), s);
  if (report) *report += r;
  return out;
}

Array to_float_device(const Array& device_narrow, cudaStream_t s) {
  const DType t = device_narrow.dtype();
  require_device_contiguous(device_narrow, t == DType::bf16 ? DType::bf16 : DType::f16,
                            "to_float_device");
  Array out(DType::f32, device_narrow.shape(), Memory::device);
  if (t == DType::bf16)
    convert_to_float_device(device_narrow.data_as<BFloat16>(), out.data_as<float>(),
                            device_narrow.size(), s);
  else
    convert_to_float_device(device_narrow.data_as<Half>(), out.data_as<float>(),
                            device_narrow.size(), s);
  HS_CUDA_CHECK(cudaStreamSynchronize(s));
  return out;
}

}  // namespace halfscope
