// GPU naive and register (PRCF) convolutions (src/conv/naive_cuda.cu, register_cuda*.cu) against
// an FP64 direct reference with a derived error bound and a bit-exact emulation of the kernels'
// documented tap order (naive_register_testing.hpp says how), in every precision, both
// boundaries, odd / even / non-square kernels, kernels larger than the image or than constant
// memory, 1xN and Nx1 images, widths that are not multiples of the packet or the block, several
// output windows, FP16/BF16 overflow, and argument errors. Outputs are poisoned with NaN first.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/error.hpp"
#include "naive_register_testing.hpp"
#include "test_support.hpp"

#if HALFSCOPE_WITH_CUDA
#include <cuda_runtime.h>

#include "conv/backends.hpp"
#include "halfscope/conv.hpp"

namespace halfscope::conv {
namespace {

using namespace nrtest;
using Backend = void (*)(const Geometry&, Precision, const Array&, const Array&, Array&,
                         cudaStream_t);

/// Runs `f` on the device (default stream) and returns the output on the host.
Array run(Backend f, Precision p, const Geometry& g, const Data& d) {
  const DType t = storage_dtype(p);
  Array img = host_array(t, g.rows, g.cols, d.img).to(Memory::device);
  Array ker = host_array(t, g.krows, g.kcols, d.ker).to(Memory::device);
  Array out = poisoned_output(t, g).to(Memory::device);
  f(g, p, img, ker, out, nullptr);
  return out.to(Memory::host);
}

void check(Backend f, Precision p, const Geometry& g, const Data& d, const std::string& what,
           CheckOptions opt = {}, Array* keep = nullptr) {
  const Array out = run(f, p, g, d);
  expect_matches(out, p, g, d, what, opt);
  if (keep) *keep = out;
}

void run_suite(Backend f, const char* method, Precision p) {
  std::uint64_t seed = 1;
  for (const Case& c : kCases) {
    const Data d = make_data(c.rows, c.cols, c.krows, c.kcols, storage_dtype(p), seed += 7);
    for (Boundary b : {Boundary::Zero, Boundary::Circular})
      for (const Window& w : windows(c.rows, c.cols, c.krows, c.kcols)) {
        check(f, p, geometry(d, w, b), d, label(method, p, d, w.name, b));
      }
  }
}

TEST(GpuConvNaive, F64Storage_F64Math) {
  HS_REQUIRE_GPU();
  run_suite(&naive_cuda, "naive", Precision::Double);
}
TEST(GpuConvNaive, F32Storage_F32Math) {
  HS_REQUIRE_GPU();
  run_suite(&naive_cuda, "naive", Precision::Single);
}
TEST(GpuConvNaive, F16Storage_F16Math) {
  HS_REQUIRE_GPU();
  run_suite(&naive_cuda, "naive", Precision::Half);
}
TEST(GpuConvNaive, F16Storage_F32Math) {
  HS_REQUIRE_GPU();
  run_suite(&naive_cuda, "naive", Precision::Mixed);
}
TEST(GpuConvNaive, BF16Storage_F32Math) {
  HS_REQUIRE_GPU();
  run_suite(&naive_cuda, "naive", Precision::BF16);
}
TEST(GpuConvRegister, F64Storage_F64Math) {
  HS_REQUIRE_GPU();
  run_suite(&register_cuda, "register", Precision::Double);
}
TEST(GpuConvRegister, F32Storage_F32Math) {
  HS_REQUIRE_GPU();
  run_suite(&register_cuda, "register", Precision::Single);
}
TEST(GpuConvRegister, F16Storage_F16Math) {
  HS_REQUIRE_GPU();
  run_suite(&register_cuda, "register", Precision::Half);
}
TEST(GpuConvRegister, F16Storage_F32Math) {
  HS_REQUIRE_GPU();
  run_suite(&register_cuda, "register", Precision::Mixed);
}
TEST(GpuConvRegister, BF16Storage_F32Math) {
  HS_REQUIRE_GPU();
  run_suite(&register_cuda, "register", Precision::BF16);
}

// The brief's large case: 2049 x 1031 (odd, unaligned) with 35 x 35 (generic register path),
// same window, both boundaries; the error bound, and naive == register bit for bit.
TEST(GpuConvNaiveRegister, Image2049x1031Kernel35x35_AllPrecisions_BoundAndNaiveEqualsRegister) {
  HS_REQUIRE_GPU();
  for (Precision p : kAllPrecisions) {
    const Data d = make_data(2049, 1031, 35, 35, storage_dtype(p), 99);
    for (Boundary b : {Boundary::Zero, Boundary::Circular}) {
      const Geometry g = geometry(d, {"same", 2049, 1031, 17, 17}, b);
      const std::string what =
          std::string(precision_name(p)) + (b == Boundary::Zero ? " zero" : " circular");
      Array naive;
      check(&naive_cuda, p, g, d, "naive " + what, {.exact = false}, &naive);
      check(&register_cuda, p, g, d, "register " + what,
            {.bound = false, .exact = false, .expect_same = &naive});
    }
  }
}

// Kernels too large for 64 KB of constant memory (35,150 taps > 32,768 FP16 / 16,384 FP32): the
// naive kernel reads taps through the read-only cache, the register one from a global copy.
TEST(GpuConvNaiveRegister, Kernel190x185BeyondConstantMemory_AllPrecisions) {
  HS_REQUIRE_GPU();
  for (Precision p : kAllPrecisions) {
    const Data d = make_data(24, 20, 190, 185, storage_dtype(p), 5);
    for (Boundary b : {Boundary::Zero, Boundary::Circular}) {
      const Geometry g = geometry(d, {"window", 30, 25, 95, 90}, b);
      check(&naive_cuda, p, g, d, "naive huge kernel");
      check(&register_cuda, p, g, d, "register huge kernel");
    }
  }
}

// More output rows than one grid's y extent covers (65535 blocks): the kernels' grid-stride
// loops over tile rows. Single precision, unrolled (3x3) and generic (4x4) register paths; then
// aligned rows, which the streaming kernel takes (the tile kernel under test_conv_gpu_tile).
TEST(GpuConvNaiveRegister, TallNx1Image_F32_RowsBeyondGridLimit) {
  HS_REQUIRE_GPU();
  for (std::int64_t k : {3, 4}) {
    const Data d = make_data(2200000, 1, k, k, DType::f32, 11);
    const Geometry g =
        geometry(d, {"same", 2200000, 1, (k - 1) / 2, (k - 1) / 2}, Boundary::Circular);
    check(&naive_cuda, Precision::Single, g, d, "naive tall");
    check(&register_cuda, Precision::Single, g, d, "register tall");
  }
  // 16-byte aligned rows (8 pixels): the streaming kernel's row-group loop at widths 3 and 7.
  for (Precision p : {Precision::Single, Precision::Half})
    for (std::int64_t k : {3, 7}) {
      const Data d = make_data(300000, 8, k, k, storage_dtype(p), 13);
      const Geometry g = geometry(d, {"same", 300000, 8, k / 2, k / 2}, Boundary::Circular);
      check(&register_cuda, p, g, d, "register tall aligned");
    }
}

// FP16/BF16 results that overflow from finite inputs are a NumericalError, never an inf.
TEST(GpuConvNaiveRegister, F16AndBF16OverflowFromFiniteInputs_ThrowsNumericalError) {
  HS_REQUIRE_GPU();
  for (Backend f : {&naive_cuda, &register_cuda})
    for (Precision p : {Precision::Half, Precision::Mixed, Precision::BF16})
      for (std::int64_t k : {3, 4}) {  // unrolled and generic register paths
        // 9 (or 16) taps of 1000 * 10 = 90000 (160000) > 65504; BF16: 1e38 * 10 * 9 > 3.4e38.
        const double big = p == Precision::BF16 ? BFloat16(1e38).to_float() : 1000.0;
        const Data d = constant_data(40, 48, k, big, 10.0);
        const Geometry g = geometry(d, {"same", 40, 48, (k - 1) / 2, (k - 1) / 2}, Boundary::Zero);
        EXPECT_THROW(run(f, p, g, d), NumericalError) << precision_name(p) << " k=" << k;
      }
}

ConvOptions dispatch_options(ConvMethod m, Precision p, bool defer) {
  ConvOptions o;
  o.mode = ConvMode::Same;
  o.method = m;
  o.precision = p;
  o.device = DeviceKind::Cuda;
  o.defer_overflow_check = defer;
  return o;
}

/// Device copies of `d` in storage dtype `t`, and a device output of the `same` shape.
struct DeviceCase {
  Array img, ker, out;
};
DeviceCase device_case(const Data& d, DType t) {
  return {host_array(t, d.rows, d.cols, d.img).to(Memory::device),
          host_array(t, d.krows, d.kcols, d.ker).to(Memory::device),
          Array(t, {d.rows, d.cols}, Memory::device)};
}

// Overflowing data for precision p: 9 taps of big * 10 exceed FP16's 65504 (big 1000) or BF16's
// 3.4e38 (big 1e38) at every pixel.
Data overflowing_data(Precision p) {
  return constant_data(64, 64, 3, p == Precision::BF16 ? BFloat16(1e38).to_float() : 1000.0, 10.0);
}

const std::vector<std::pair<ConvMethod, Precision>> kNarrowDispatchCases = {
    {ConvMethod::Naive, Precision::Half},     {ConvMethod::Naive, Precision::Mixed},
    {ConvMethod::Naive, Precision::BF16},     {ConvMethod::Register, Precision::Half},
    {ConvMethod::Register, Precision::Mixed}, {ConvMethod::Register, Precision::BF16},
    {ConvMethod::Tensor, Precision::Mixed},   {ConvMethod::Tensor, Precision::BF16}};

// By default (no deferral) a device output is checked before the call returns, like a host one:
// nothing is left for a later call or for conv_check_overflow().
TEST(GpuConvNaiveRegister, NarrowOverflowWithDeviceOutput_DefaultThrowsFromTheCallItself) {
  HS_REQUIRE_GPU();
  conv_check_overflow();  // nothing pending from earlier tests
  for (const auto& [m, p] : kNarrowDispatchCases) {
    DeviceCase c = device_case(overflowing_data(p), storage_dtype(p));
    const ConvOptions o = dispatch_options(m, p, false);
    EXPECT_THROW(convolve2d_into(c.img, c.ker, c.out, o), NumericalError)
        << conv_method_name(m) << " " << precision_name(p);
    EXPECT_THROW((void)convolve2d(c.img, c.ker, o), NumericalError);  // device inputs
    EXPECT_NO_THROW(conv_check_overflow()) << conv_method_name(m) << " " << precision_name(p);
  }
}

// Opt-in deferral: one overflowing call followed by 19 clean ones (more than the 16 slots of the
// ring) is reported exactly once, as an earlier call's error, by a later call or by
// conv_check_overflow(), for every narrow method; a host result is still checked at once.
TEST(GpuConvNaiveRegister, DeferredOverflow_ReportedOnceByALaterCallOrConvCheckOverflow) {
  HS_REQUIRE_GPU();
  conv_check_overflow();
  for (const auto& [m, p] : kNarrowDispatchCases) {
    const std::string what =
        std::string(conv_method_name(m)) + " " + std::string(precision_name(p));
    const DType t = storage_dtype(p);
    DeviceCase bad = device_case(overflowing_data(p), t);
    DeviceCase good = device_case(constant_data(64, 64, 3, 0.5, 0.25), t);
    const ConvOptions o = dispatch_options(m, p, true);
    std::vector<std::string> reports;
    for (int call = 0; call < 20; ++call) {
      DeviceCase& c = call == 0 ? bad : good;
      try {
        convolve2d_into(c.img, c.ker, c.out, o);
      } catch (const NumericalError& e) {
        reports.emplace_back(e.what());
      }
    }
    try {
      conv_check_overflow();
    } catch (const NumericalError& e) {
      reports.emplace_back(e.what());
    }
    ASSERT_EQ(reports.size(), 1u) << what;
    EXPECT_NE(reports[0].find("earlier call"), std::string::npos) << what << ": " << reports[0];
    EXPECT_NO_THROW(conv_check_overflow()) << what;  // reported once, not again
    const Array host_img = bad.img.to(Memory::host), host_ker = bad.ker.to(Memory::host);
    EXPECT_THROW((void)convolve2d(host_img, host_ker, o), NumericalError) << what;
    EXPECT_NO_THROW(conv_check_overflow()) << what;
  }
}

// The ring-full wait: while the default stream is held by a host callback, 16 deferred calls
// fill every slot without any completing; the 17th needs the first one's slot, waits for it
// and reports its overflow before launching. The gate opens on a flag (or after 10 s, so that a
// regression that synchronises inside a call fails the expectation instead of hanging).
struct Gate {
  std::atomic<bool> open{false};
};
void CUDART_CB hold_stream(void* p) {
  auto* gate = static_cast<Gate*>(p);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!gate->open.load() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(GpuConvNaiveRegister, DeferredOverflow_RingFullWaitReportsTheOldestCall) {
  HS_REQUIRE_GPU();
  conv_check_overflow();
  for (const ConvMethod m : {ConvMethod::Naive, ConvMethod::Register, ConvMethod::Tensor}) {
    const Precision p = Precision::Mixed;
    DeviceCase bad = device_case(overflowing_data(p), storage_dtype(p));
    DeviceCase good = device_case(constant_data(64, 64, 3, 0.5, 0.25), storage_dtype(p));
    const ConvOptions o = dispatch_options(m, p, true);
    convolve2d_into(good.img, good.ker, good.out, o);  // warm-up: allocations, attributes
    conv_check_overflow();
    Gate gate;
    ASSERT_EQ(cudaLaunchHostFunc(nullptr, &hold_stream, &gate), cudaSuccess);
    int thrown_at = -1;
    for (int call = 0; call < 20; ++call) {
      if (call == 16) gate.open = true;  // the 17th call may now wait for the first
      DeviceCase& c = call == 0 ? bad : good;
      try {
        convolve2d_into(c.img, c.ker, c.out, o);
      } catch (const NumericalError&) {
        EXPECT_EQ(thrown_at, -1) << conv_method_name(m) << ": reported twice";
        thrown_at = call;
      }
    }
    gate.open = true;
    EXPECT_NO_THROW(conv_check_overflow()) << conv_method_name(m);
    EXPECT_EQ(thrown_at, 16) << conv_method_name(m);
  }
}

// An inf already in the image is passed on (SciPy does the same) and is not an overflow.
TEST(GpuConvNaiveRegister, F16InfInInput_PropagatesWithoutError) {
  HS_REQUIRE_GPU();
  for (Backend f : {&naive_cuda, &register_cuda})
    for (Precision p : {Precision::Half, Precision::Mixed}) {
      Data d = constant_data(40, 48, 3, 0.5, 0.25);
      d.img[20 * 48 + 20] = INFINITY;
      const Geometry g = geometry(d, {"same", 40, 48, 1, 1}, Boundary::Zero);
      Array out;
      ASSERT_NO_THROW(out = run(f, p, g, d)) << precision_name(p);
      for (std::int64_t i = 0; i < 40; ++i)
        for (std::int64_t j = 0; j < 48; ++j) {
          const bool touches = std::abs(i - 20) <= 1 && std::abs(j - 20) <= 1;
          const double v = out.at_as_double(i * 48 + j);
          EXPECT_EQ(std::isinf(v), touches) << i << "," << j << " = " << v;
        }
    }
}

TEST(GpuConvNaiveRegister, RejectsUnsupportedPrecisionWrongDtypeAndHostArrays) {
  HS_REQUIRE_GPU();
  const Data d = make_data(8, 8, 3, 3, DType::f32, 3);
  const Geometry g = geometry(d, {"same", 8, 8, 1, 1}, Boundary::Zero);
  for (Backend f : {&naive_cuda, &register_cuda}) {
    EXPECT_THROW(run(f, Precision::TF32, g, d), Unsupported);
    EXPECT_THROW(run(f, Precision::Split, g, d), Unsupported);
    Array img = host_array(DType::f32, 8, 8, d.img).to(Memory::device);
    Array ker = host_array(DType::f32, 3, 3, d.ker).to(Memory::device);
    Array out(DType::f32, {8, 8}, Memory::device);
    EXPECT_THROW(f(g, Precision::Half, img, ker, out, nullptr), InvalidInput);  // f32 for half
    Array host_img = img.to(Memory::host);
    EXPECT_THROW(f(g, Precision::Single, host_img, ker, out, nullptr), InvalidInput);
    Array wrong(DType::f32, {8, 9}, Memory::device);
    EXPECT_THROW(f(g, Precision::Single, img, ker, wrong, nullptr), InvalidInput);
  }
}

}  // namespace
}  // namespace halfscope::conv

#endif  // HALFSCOPE_WITH_CUDA
