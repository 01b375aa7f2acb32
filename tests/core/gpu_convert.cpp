// GPU FP32 <-> FP16 / BF16 conversions against the CPU reference (convert.hpp): identical result
// bits and identical counts, on hostile data (overflow, underflow, subnormals, exact ties, NaN,
// inf), at every alignment and length the vector path distinguishes.
#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/convert.hpp"
#include "test_support.hpp"

#if HALFSCOPE_WITH_CUDA
#include "halfscope/core/convert_cuda.hpp"
#include "halfscope/core/cuda.hpp"
#endif

namespace halfscope {
namespace {

#if HALFSCOPE_WITH_CUDA
// Values that exercise every branch of the rounding and the classification.
std::vector<float> hostile_floats(std::int64_t n, std::uint64_t seed) {
  const float specials[] = {0.0f,
                            -0.0f,
                            1.0f,
                            65504.0f,
                            65519.996f,
                            65520.0f,
                            -65520.0f,
                            1e6f,
                            -3.4e38f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            std::bit_cast<float>(0x7f800001u),
                            std::bit_cast<float>(0xffa5a5a5u),
                            0x1p-24f,
                            0x1p-25f,
                            0x1.000002p-25f,
                            0x1p-26f,
                            0x1.8p-24f,
                            0x1p-14f,
                            0x1.ff8p-15f,
                            1e-40f,
                            -1e-45f,
                            0x1p-133f,
                            0x1.008p-126f,
                            std::numeric_limits<float>::max(),
                            3.3961514e38f};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::uint32_t> bits;
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_real_distribution<float> expo(-30.0f, 17.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    float x = 0;
    if (i < static_cast<std::int64_t>(std::size(specials))) {
      x = specials[i];
    } else {
      switch (bits(rng) % 6) {
        case 0:
          x = std::bit_cast<float>(bits(rng));
          break;  // anything, NaN and inf included
        case 1:
          x = std::exp2(expo(rng)) * (unit(rng) < 0 ? -1.0f : 1.0f);
          break;   // FP16 range edges
        case 2: {  // exactly halfway between two adjacent finite halves
          const auto h = static_cast<std::uint16_t>(bits(rng) % 0x7bffu);
          const float lo = Half::from_bits(h).to_float(),
                      hi = Half::from_bits(static_cast<std::uint16_t>(h + 1)).to_float();
          x = 0.5f * (lo + hi) * (bits(rng) % 2 ? -1.0f : 1.0f);
          break;
        }
        case 3:
          x = std::bit_cast<float>((bits(rng) & 0xfeff0000u) | 0x8000u);
          break;  // BF16 tie
        case 4:
          x = std::bit_cast<float>(bits(rng) & 0x807fffffu);
          break;  // float subnormal
        default:
          x = unit(rng);
      }
    }
    v[static_cast<std::size_t>(i)] = x;
  }
  return v;
}

void expect_same_report(const ConversionReport& gpu, const ConversionReport& cpu,
                        const std::string& what) {
  EXPECT_EQ(gpu.count, cpu.count) << what;
  EXPECT_EQ(gpu.overflow, cpu.overflow) << what;
  EXPECT_EQ(gpu.underflow, cpu.underflow) << what;
  EXPECT_EQ(gpu.subnormal, cpu.subnormal) << what;
  EXPECT_EQ(gpu.nan, cpu.nan) << what;
  EXPECT_EQ(gpu.first_overflow_index, cpu.first_overflow_index) << what;
}

// Device copy of `v` starting `offset` elements into a fresh allocation (to misalign it).
template <class T>
struct DeviceVector {
  std::shared_ptr<Buffer> buffer;
  T* ptr = nullptr;
  DeviceVector(std::int64_t n, std::int64_t offset)
      : buffer(Buffer::allocate((n + offset + 1) * static_cast<std::int64_t>(sizeof(T)),
                                Memory::device)),
        ptr(static_cast<T*>(buffer->data()) + offset) {}
  void upload(const std::vector<T>& v) {
    copy_bytes(ptr, Memory::device, v.data(), Memory::host,
               static_cast<std::int64_t>(v.size() * sizeof(T)));
  }
  std::vector<T> download(std::int64_t n) const {
    std::vector<T> v(static_cast<std::size_t>(n));
    copy_bytes(v.data(), Memory::host, ptr, Memory::device,
               n * static_cast<std::int64_t>(sizeof(T)));
    return v;
  }
};

template <class Narrow, class Convert, class Reference>
void check_narrowing(const std::vector<float>& in, std::int64_t in_off, std::int64_t out_off,
                     Convert convert, Reference reference, const std::string& what) {
  const auto n = static_cast<std::int64_t>(in.size());
  DeviceVector<float> d_in(n, in_off);
  DeviceVector<Narrow> d_out(n, out_off);
  d_in.upload(in);
  const ConversionReport gpu = convert(d_in.ptr, d_out.ptr, n);
  std::vector<Narrow> expected(in.size());
  const ConversionReport cpu = reference(std::span<const float>(in), std::span<Narrow>(expected));
  expect_same_report(gpu, cpu, what);
  const std::vector<Narrow> got = d_out.download(n);
  std::int64_t mismatches = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (got[i].bits != expected[i].bits && mismatches++ < 5)
      ADD_FAILURE() << what << ": element " << i << " = " << in[i] << " (0x" << std::hex
                    << std::bit_cast<std::uint32_t>(in[i]) << "): GPU 0x" << got[i].bits
                    << ", CPU 0x" << expected[i].bits << std::dec;
  }
  EXPECT_EQ(mismatches, 0) << what;
}

const std::int64_t kLengths[] = {0, 1, 3, 1000003};
// (input offset, output offset) in elements: aligned, both shifted alike (vector path with a
// head), and shifted differently (scalar path).
const std::pair<std::int64_t, std::int64_t> kOffsets[] = {{0, 0}, {1, 1}, {3, 3}, {1, 0}, {0, 3}};

template <class Narrow>
std::vector<Narrow> every_bit_pattern() {
  std::vector<Narrow> v(65536);
  for (std::uint32_t b = 0; b < 65536; ++b) v[b] = Narrow::from_bits(static_cast<std::uint16_t>(b));
  return v;
}
#endif

TEST(GpuConvert, FloatToHalfMatchesCpuBitForBit) {
  HS_REQUIRE_GPU();
#if HALFSCOPE_WITH_CUDA
  for (const std::int64_t n : kLengths)
    for (const auto& [io, oo] : kOffsets) {
      const auto in = hostile_floats(n, 1000 + static_cast<std::uint64_t>(n + io));
      const auto ref = [](std::span<const float> a, std::span<Half> b) {
        return convert_to_half(a, b);
      };
      const auto gpu = [](const float* a, Half* b, std::int64_t m) {
        return convert_to_half_device(a, b, m);
      };
      check_narrowing<Half>(in, io, oo, gpu, ref,
                            "half n=" + std::to_string(n) + " offsets " + std::to_string(io) + "," +
                                std::to_string(oo));
    }
#endif
}

TEST(GpuConvert, FloatToBFloat16MatchesCpuBitForBit) {
  HS_REQUIRE_GPU();
#if HALFSCOPE_WITH_CUDA
  for (const std::int64_t n : kLengths)
    for (const auto& [io, oo] : kOffsets) {
      const auto in = hostile_floats(n, 2000 + static_cast<std::uint64_t>(n + io));
      const auto ref = [](std::span<const float> a, std::span<BFloat16> b) {
        return convert_to_bf16(a, b);
      };
      const auto gpu = [](const float* a, BFloat16* b, std::int64_t m) {
        return convert_to_bf16_device(a, b, m);
      };
      check_narrowing<BFloat16>(in, io, oo, gpu, ref,
                                "bf16 n=" + std::to_string(n) + " offsets " + std::to_string(io) +
                                    "," + std::to_string(oo));
    }
#endif
}

TEST(GpuConvert, FirstOverflowIsTheSmallestIndexAcrossBlocks) {
  HS_REQUIRE_GPU();
#if HALFSCOPE_WITH_CUDA
  std::vector<float> in = test::random_floats(1000003, -2.0f, 2.0f, 7);
  for (const std::int64_t i : {999999, 500001, 900000, 1000002})
    in[static_cast<std::size_t>(i)] = 1e5f;
  DeviceVector<float> d_in(1000003, 0);
  DeviceVector<Half> d_out(1000003, 0);
  d_in.upload(in);
  const ConversionReport r = convert_to_half_device(d_in.ptr, d_out.ptr, 1000003);
  EXPECT_EQ(r.overflow, 4);
  EXPECT_EQ(r.first_overflow_index, 500001);
  EXPECT_EQ(r.nan, 0);
  EXPECT_THROW(require_finite(r, "test"), NumericalError);
#endif
}

TEST(GpuConvert, WideningIsExactForEveryBitPattern) {
  HS_REQUIRE_GPU();
#if HALFSCOPE_WITH_CUDA
  const auto halves = every_bit_pattern<Half>();
  const auto bf16s = every_bit_pattern<BFloat16>();
  std::vector<float> want_h(65536), want_b(65536);
  convert_to_float(std::span<const Half>(halves), std::span<float>(want_h));
  convert_to_float(std::span<const BFloat16>(bf16s), std::span<float>(want_b));
  // The last n patterns of each format (the tail holds the infinities and NaNs).
  const auto check = [](const auto& all, const std::vector<float>& want, std::int64_t n,
                        std::int64_t in_off, std::int64_t out_off, const char* name) {
    using Narrow = typename std::decay_t<decltype(all)>::value_type;
    DeviceVector<Narrow> in(n, in_off);
    DeviceVector<float> out(n, out_off);
    in.upload(std::vector<Narrow>(all.end() - n, all.end()));
    convert_to_float_device(in.ptr, out.ptr, n);
    HS_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> got = out.download(n);
    int mismatches = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint32_t g = std::bit_cast<std::uint32_t>(got[static_cast<std::size_t>(i)]);
      const std::uint32_t w =
          std::bit_cast<std::uint32_t>(want[static_cast<std::size_t>(65536 - n + i)]);
      if (g != w && mismatches++ < 5)
        ADD_FAILURE() << name << " bits 0x" << std::hex << (65536 - n + i) << ": GPU 0x" << g
                      << ", CPU 0x" << w << std::dec << " (n=" << n << ", offsets " << in_off << ","
                      << out_off << ")";
    }
    EXPECT_EQ(mismatches, 0) << name;
  };
  for (const std::int64_t n : {std::int64_t{3}, std::int64_t{65536}})
    for (const auto& [io, oo] : kOffsets) {
      check(halves, want_h, n, io, oo, "half");
      check(bf16s, want_b, n, io, oo, "bf16");
    }
#endif
}

TEST(GpuConvert, ArrayHelpersRoundTripAndRejectWrongInput) {
  HS_REQUIRE_GPU();
#if HALFSCOPE_WITH_CUDA
  const std::vector<float> values = hostile_floats(15, 5);
  const Array host = Array::from_values<float>(values, {3, 5});
  const Array dev = host.to(Memory::device);
  ConversionReport r;
  const Array h = to_half_device(dev, &r);
  EXPECT_EQ(h.dtype(), DType::f16);
  EXPECT_EQ(h.shape(), (Shape{3, 5}));
  EXPECT_TRUE(h.on_device());
  ConversionReport cpu;
  const Array want = host.astype(DType::f16, &cpu);
  expect_same_report(r, cpu, "to_half_device");
  const Array back = h.to(Memory::host);
  for (std::int64_t i = 0; i < 15; ++i)
    EXPECT_EQ(back.data_as<Half>()[i].bits, want.data_as<Half>()[i].bits) << i;
  const Array wide = to_float_device(h).to(Memory::host);
  for (std::int64_t i = 0; i < 15; ++i)
    EXPECT_EQ(std::bit_cast<std::uint32_t>(wide.data_as<float>()[i]),
              std::bit_cast<std::uint32_t>(want.data_as<Half>()[i].to_float()));
  const Array b = to_bf16_device(dev).to(Memory::host);
  const Array want_b = host.astype(DType::bf16);
  for (std::int64_t i = 0; i < 15; ++i)
    EXPECT_EQ(b.data_as<BFloat16>()[i].bits, want_b.data_as<BFloat16>()[i].bits);

  EXPECT_THROW((void)to_half_device(host), InvalidInput);                // host array
  EXPECT_THROW((void)to_half_device(h), InvalidInput);                   // not float32
  EXPECT_THROW((void)to_float_device(dev), InvalidInput);                // not 16-bit
  EXPECT_THROW((void)to_half_device(dev.slice(1, 0, 2)), InvalidInput);  // not contiguous
  EXPECT_THROW((void)convert_to_half_device(nullptr, nullptr, 5), InvalidInput);
  EXPECT_THROW((void)convert_to_half_device(dev.data_as<float>(), nullptr, -1), InvalidInput);
#endif
}

// 64-bit indexing: more than 2^31 elements, with the overflows and a NaN beyond index 2^31.
TEST(GpuConvert, MoreThanTwoToThe31Elements) {
  HS_REQUIRE_GPU();
#if HALFSCOPE_WITH_CUDA
  const std::int64_t n = (std::int64_t{1} << 31) + 4099;
  std::size_t free_bytes = 0, total = 0;
  HS_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  if (free_bytes < static_cast<std::size_t>(6 * n + (std::int64_t{1} << 30)))
    GTEST_SKIP() << "needs " << (6 * n >> 30) << " GiB of free device memory";
  DeviceVector<float> in(n, 0);
  DeviceVector<Half> out(n, 0);
  HS_CUDA_CHECK(
      cudaMemset(in.ptr, 0x3c, static_cast<std::size_t>(n) * 4));  // every float 0x3c3c3c3c
  const float fill = std::bit_cast<float>(0x3c3c3c3cu);
  const std::int64_t late = (std::int64_t{1} << 31) + 1;
  const float big = 1e6f, nan = std::numeric_limits<float>::quiet_NaN();
  copy_bytes(in.ptr + n - 2, Memory::device, &big, Memory::host, 4);
  copy_bytes(in.ptr + late, Memory::device, &big, Memory::host, 4);
  copy_bytes(in.ptr + n - 1, Memory::device, &nan, Memory::host, 4);
  const ConversionReport r = convert_to_half_device(in.ptr, out.ptr, n);
  EXPECT_EQ(r.count, n);
  EXPECT_EQ(r.overflow, 2);
  EXPECT_EQ(r.first_overflow_index, late);
  EXPECT_EQ(r.nan, 1);
  EXPECT_EQ(r.underflow, 0);
  EXPECT_EQ(r.subnormal, 0);
  std::vector<Half> tail(8);
  copy_bytes(tail.data(), Memory::host, out.ptr + n - 8, Memory::device, 16);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(tail[static_cast<std::size_t>(i)].bits, Half(fill).bits) << i;
  EXPECT_EQ(tail[6].bits, 0x7c00u);
  EXPECT_EQ(tail[7].bits, Half(nan).bits);
  Half around[3];
  copy_bytes(around, Memory::host, out.ptr + late - 1, Memory::device, 6);
  EXPECT_EQ(around[0].bits, Half(fill).bits);
  EXPECT_EQ(around[1].bits, 0x7c00u);
  EXPECT_EQ(around[2].bits, Half(fill).bits);
#endif
}

}  // namespace
}  // namespace halfscope
