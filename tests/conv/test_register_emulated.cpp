// The GPU naive and register (PRCF) convolution kernels without a GPU: the very device code of
// src/conv/kernels/naive.cuh and register*.cuh, run by the host emulation of
// direct_cuda_emulator.hpp with the launch shapes of register_plan.hpp, checked like the GPU
// test (naive_register_testing.hpp: FP64 bound and bit-exact emulation of the tap order) on the
// same cases, with shared memory poisoned so a pixel staging missed cannot go unnoticed. The GPU
// runs the same checks in gpu_naive_register.cpp. Needs the CUDA toolkit headers (not a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "halfscope/core/error.hpp"
#include "naive_register_testing.hpp"

#if __has_include(<cuda_fp16.h>) && __has_include(<vector_types.h>)
#include "conv/kernels/register_plan.hpp"
#include "direct_cuda_emulator.hpp"
#define HS_HAVE_EMULATOR 1
#else
#define HS_HAVE_EMULATOR 0
#endif

namespace halfscope::conv {
namespace {

#if HS_HAVE_EMULATOR
using namespace nrtest;
namespace rt = register_tuning;
namespace rp = register_plan;

// Launch shapes as on a GPU with kSms SMs: 1 gives the largest blocks (4 warps, as a 4096^2
// image gets on an H100); kSmsH100 shrinks the blocks of small images (one warp row). And the
// opt-in shared memory per block of an H100.
constexpr int kSms = 1, kSmsH100 = 132;
constexpr std::int64_t kSmemLimit = 227 * 1024;

template <class Prec>
constexpr bool kIsDouble = std::is_same_v<Prec, kernels::PrecDouble>;

/// The unrolled widths instantiated here (all of 1..31 would only lengthen the build); other odd
/// widths run the generic kernel, which computes the same bits.
constexpr int kTileWidths[] = {1, 3, 5, 7, 9, 15, 31};

struct Inputs {
  Array img, ker, out;
  kernels::ConvArgs args;
  unsigned overflow = 0;
};

Inputs inputs(Precision p, const Geometry& g, const Data& d) {
  Inputs in;
  const DType t = storage_dtype(p);
  in.img = host_array(t, g.rows, g.cols, d.img);
  in.ker = host_array(t, g.krows, g.kcols, d.ker);
  in.out = poisoned_output(t, g);
  auto& a = in.args;
  a.image = in.img.data();
  a.kernel = in.ker.data();
  a.out = in.out.data();
  a.rows = g.rows;
  a.cols = g.cols;
  a.out_rows = g.out_rows;
  a.out_cols = g.out_cols;
  a.row0 = g.row0;
  a.col0 = g.col0;
  a.krows = static_cast<int>(g.krows);
  a.kcols = static_cast<int>(g.kcols);
  a.circular = g.boundary == Boundary::Circular;
  return in;
}

template <class Prec>
void naive(Inputs& in) {
  auto a = in.args;
  a.overflow = &in.overflow;
  const dim3 block(kernels::kNaiveBlockX, kernels::kNaiveBlockY);
  const dim3 grid(
      static_cast<unsigned>(rp::ceil_div(a.out_cols, block.x)),
      static_cast<unsigned>(std::min<std::int64_t>(rp::ceil_div(a.out_rows, block.y), 65535)));
  const std::int64_t bytes = in.ker.nbytes();
  if (bytes <= kernels::kNaiveConstantBytes) {
    std::memcpy(kernels::c_naive_kernel, in.ker.data(), static_cast<std::size_t>(bytes));
    emu::launch(&kernels::naive_conv_kernel<Prec, true>, grid, block, 0, a);
  } else {
    emu::launch(&kernels::naive_conv_kernel<Prec, false>, grid, block, 0, a);
  }
}

template <class Prec, int KW>
void tile(const kernels::RegArgs& a0, int sms) {
  constexpr int Q = rt::tile_rows_per_thread(KW, std::is_same_v<Prec, kernels::PrecHalf>);
  const auto plan =
      rp::plan_tile(KW, Q, sizeof(typename Prec::R), a0.c.out_rows, a0.c.out_cols, sms, kSmemLimit);
  ASSERT_NE(plan.tx, 0);
  auto a = a0;
  a.sp = plan.sp;
  a.n_tile_rows = plan.n_tile_rows;
  emu::launch(&kernels::register_tile_kernel<Prec, KW, rt::kPacket, Q>,
              dim3(static_cast<unsigned>(plan.grid_x), static_cast<unsigned>(plan.grid_y)),
              dim3(plan.tx, plan.ty), plan.smem_bytes, a);
}

/// The streaming kernel of width KW (register_launch.cuh's stream_width; SEP: its rank-one mode
/// with `taps`, separable_cuda's path), or false where its column offset is not one it is built
/// for.
template <class Prec, int KW, bool SEP = false>
bool stream(const kernels::RegArgs& a, const kernels::SepTaps& taps = {}) {
  const long long lead = KW - 1 - a.c.col0;
  const auto go = [&]<int LEAD>() {
    constexpr int Q = SEP ? rt::stream_separable_rows(KW, std::is_same_v<Prec, kernels::PrecHalf>)
                          : rt::kStreamRows;
    const auto plan = rp::plan_stream(Q, a.c.out_rows, a.c.out_cols);
    emu::launch(&kernels::register_stream_kernel<Prec, KW, LEAD, Q, 1, SEP>,
                dim3(static_cast<unsigned>(plan.grid_x), static_cast<unsigned>(plan.grid_y)),
                dim3(plan.tx), 0, a, taps);
    return true;
  };
  if (lead == KW / 2) return go.template operator()<KW / 2>();
  if (lead == 0) return go.template operator()<0>();
  if (lead == KW - 1) return go.template operator()<KW - 1>();
  return false;
}

template <class Prec, bool kConst>
void generic(const kernels::RegArgs& a0, int sms) {
  constexpr int P = kIsDouble<Prec> ? rt::kGenericPacketDouble : rt::kGenericPacket;
  const auto plan = rp::plan_generic(P, rt::kGenericRows, a0.c.kcols, sizeof(typename Prec::R),
                                     a0.c.out_rows, a0.c.out_cols, sms, kSmemLimit);
  ASSERT_NE(plan.tx, 0);
  auto a = a0;
  a.sp = plan.sp;
  a.n_tile_rows = plan.n_tile_rows;
  emu::launch(&kernels::register_generic_kernel<Prec, P, rt::kGenericRows, kConst>,
              dim3(static_cast<unsigned>(plan.grid_x), static_cast<unsigned>(plan.grid_y)),
              dim3(32, plan.ty), plan.smem_bytes, a);
}

/// Whether widths 3, 5, 7 on aligned rows take the streaming kernel, as register_run does, or
/// the tile kernel (as on unaligned rows, or with HALFSCOPE_CONV_STREAM=0).
enum class StreamUse { AsRegisterRun, Never };

/// register_run of register_launch.cuh, on the emulator.
template <class Prec>
void registered(Inputs& in, int sms, StreamUse use) {
  using R = typename Prec::R;
  using T = typename kernels::CoefOf<Prec>::T;
  kernels::RegArgs a;
  a.c = in.args;
  a.c.overflow = &in.overflow;
  const auto aligned = [](const void* p, std::int64_t row_bytes) {
    return reinterpret_cast<std::uintptr_t>(p) % 16 == 0 && row_bytes % 16 == 0;
  };
  a.vec_in = aligned(a.c.image, a.c.cols * static_cast<std::int64_t>(sizeof(R)));
  a.vec_out = aligned(a.c.out, a.c.out_cols * static_cast<std::int64_t>(sizeof(R)));
  const std::int64_t taps = in.ker.size();
  std::vector<T> coef(static_cast<std::size_t>(taps));
  if constexpr (kernels::CoefOf<Prec>::kPrepared)
    emu::launch(&kernels::prepare_coefficients<Prec>, dim3(1), dim3(64), 0,
                static_cast<const R*>(a.c.kernel), coef.data(), static_cast<long long>(taps));
  else
    std::memcpy(coef.data(), a.c.kernel, coef.size() * sizeof(T));
  a.coef = coef.data();
  const auto path = rp::choose_path(a.c.krows, a.c.kcols, sizeof(T), kIsDouble<Prec>);
  if (path == rp::Path::GenericGlobal) return generic<Prec, false>(a, sms);
  std::memcpy(kernels::c_reg_kernel, coef.data(), coef.size() * sizeof(T));
  bool done = false;
  if constexpr (!kIsDouble<Prec>) {
    if (path == rp::Path::Tile && a.vec_in && a.c.krows == a.c.kcols &&
        use == StreamUse::AsRegisterRun) {
      if (a.c.krows == 3) done = stream<Prec, 3>(a);
      if (a.c.krows == 5) done = stream<Prec, 5>(a);
      if (a.c.krows == 7) done = stream<Prec, 7>(a);
    }
    if (path == rp::Path::Tile && !done) {
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((a.c.krows == kTileWidths[I] ? (tile<Prec, kTileWidths[I]>(a, sms), done = true)
                                      : false) ||
         ...);
      }
      (std::make_index_sequence<std::size(kTileWidths)>{});
    }
  }
  if (!done) generic<Prec, true>(a, sms);
}

enum class Method { Naive, Register };

template <class Prec>
Array run(Method m, Precision p, const Geometry& g, const Data& d, int sms, StreamUse stream) {
  Inputs in = inputs(p, g, d);
  if (m == Method::Naive)
    naive<Prec>(in);
  else
    registered<Prec>(in, sms, stream);
  if (in.overflow) throw NumericalError("emulated overflow count " + std::to_string(in.overflow));
  return in.out;
}

Array run(Method m, Precision p, const Geometry& g, const Data& d, int sms,
          StreamUse stream = StreamUse::AsRegisterRun) {
  switch (p) {
    case Precision::Double:
      return run<kernels::PrecDouble>(m, p, g, d, sms, stream);
    case Precision::Single:
      return run<kernels::PrecSingle>(m, p, g, d, sms, stream);
    case Precision::Half:
      return run<kernels::PrecHalf>(m, p, g, d, sms, stream);
    case Precision::Mixed:
      return run<kernels::PrecMixed>(m, p, g, d, sms, stream);
    default:
      return run<kernels::PrecBF16>(m, p, g, d, sms, stream);
  }
}

/// The GPU test's cases and windows (less the correlation centring, which only moves row0/col0
/// by one as "window" does), emulated with the launch shapes of a GPU with `sms` SMs.
void run_suite(Method m, Precision p, int sms = kSms, std::size_t ncases = std::size(kCases),
               StreamUse stream = StreamUse::AsRegisterRun) {
  const char* name = m == Method::Naive ? "naive" : "register";
  std::uint64_t seed = 1;
  for (std::size_t ic = 0; ic < ncases; ++ic) {
    const Case& c = kCases[ic];
    if (stream != StreamUse::AsRegisterRun &&
        !(c.krows == c.kcols && c.krows % 2 == 1 && c.krows >= 3 && c.krows <= rt::kStreamMaxWidth))
      continue;  // only widths 3-7 can run the other kernel
    const Data d = make_data(c.rows, c.cols, c.krows, c.kcols, storage_dtype(p), seed += 7);
    for (Boundary b : {Boundary::Zero, Boundary::Circular})
      for (const Window& w : windows(c.rows, c.cols, c.krows, c.kcols)) {
        if (std::string(w.name) == "same-corr") continue;
        const Geometry g = geometry(d, w, b);
        const char* kernel = stream == StreamUse::Never ? " tile" : "";
        expect_matches(run(m, p, g, d, sms, stream), p, g, d,
                       label(name, p, d, w.name, b) + " sms=" + std::to_string(sms) + kernel);
      }
  }
}
#endif

#if HS_HAVE_EMULATOR
#define HS_EMULATED_TEST(suite, name, method, precision) \
  TEST(suite, name) {                                    \
    run_suite(method, precision);                        \
  }
#else
#define HS_EMULATED_TEST(suite, name, method, precision) \
  TEST(suite, name) {                                    \
    GTEST_SKIP() << "CUDA toolkit headers not found";    \
  }
#endif

HS_EMULATED_TEST(EmulatedConvNaive, F64Storage_F64Math, Method::Naive, Precision::Double)
HS_EMULATED_TEST(EmulatedConvNaive, F32Storage_F32Math, Method::Naive, Precision::Single)
HS_EMULATED_TEST(EmulatedConvNaive, F16Storage_F16Math, Method::Naive, Precision::Half)
HS_EMULATED_TEST(EmulatedConvNaive, F16Storage_F32Math, Method::Naive, Precision::Mixed)
HS_EMULATED_TEST(EmulatedConvNaive, BF16Storage_F32Math, Method::Naive, Precision::BF16)
HS_EMULATED_TEST(EmulatedConvRegister, F64Storage_F64Math, Method::Register, Precision::Double)
HS_EMULATED_TEST(EmulatedConvRegister, F32Storage_F32Math, Method::Register, Precision::Single)
HS_EMULATED_TEST(EmulatedConvRegister, F16Storage_F16Math, Method::Register, Precision::Half)
HS_EMULATED_TEST(EmulatedConvRegister, F16Storage_F32Math, Method::Register, Precision::Mixed)
HS_EMULATED_TEST(EmulatedConvRegister, BF16Storage_F32Math, Method::Register, Precision::BF16)

#if HS_HAVE_EMULATOR
// The first cases again with an H100's launch shapes: small images get one-warp-row blocks.
TEST(EmulatedConvRegister, F32AndF16_H100LaunchShapes) {
  for (Precision p : {Precision::Single, Precision::Half})
    run_suite(Method::Register, p, kSmsH100, 8);
}

// The tile kernel at the widths the streaming kernel takes on aligned rows (3, 5, 7): what
// unaligned rows and HALFSCOPE_CONV_STREAM=0 run, on the aligned cases too.
TEST(EmulatedConvRegister, TileKernelAtStreamWidths_AllNarrowAndSingle) {
  for (Precision p : {Precision::Single, Precision::Half, Precision::Mixed, Precision::BF16})
    run_suite(Method::Register, p, kSms, std::size(kCases), StreamUse::Never);
}

// Kernels beyond 64 KB of constant memory: taps from global memory in both kernels.
TEST(EmulatedConvNaiveRegister, Kernel190x185BeyondConstantMemory_F16AndF32) {
  for (Precision p : {Precision::Half, Precision::Single})
    for (Method m : {Method::Naive, Method::Register}) {
      const Data d = make_data(9, 7, 190, 185, storage_dtype(p), 5);
      const Geometry g = geometry(d, {"window", 6, 5, 95, 90}, Boundary::Circular);
      expect_matches(run(m, p, g, d, kSms), p, g, d, "huge kernel");
    }
}

// FP16/BF16 overflow from finite inputs is counted; an inf in the input is not.
TEST(EmulatedConvNaiveRegister, OverflowCountedOnlyFromFiniteInputs) {
  for (Method m : {Method::Naive, Method::Register})
    for (Precision p : {Precision::Half, Precision::Mixed, Precision::BF16})
      for (std::int64_t k : {3, 4}) {
        const double big = p == Precision::BF16 ? BFloat16(1e38).to_float() : 1000.0;
        const Data d = constant_data(20, 24, k, big, 10.0);
        const Geometry g = geometry(d, {"same", 20, 24, (k - 1) / 2, (k - 1) / 2}, Boundary::Zero);
        EXPECT_THROW(run(m, p, g, d, kSms), NumericalError) << precision_name(p) << " k=" << k;
        Data inf = constant_data(20, 24, k, 0.5, 0.25);
        inf.img[10 * 24 + 10] = INFINITY;
        EXPECT_NO_THROW(
            run(m, p, geometry(inf, {"same", 20, 24, 1, 1}, Boundary::Zero), inf, kSms));
      }
}

// The streaming kernel for rank-one kernels (SEP: what separable_cuda runs at widths 3-7 on
// aligned rows). Per output, FP32 row sums s_u = sum_v row[v] in(i + row0 - u, j + col0 - v), v
// ascending, then sum_u col[u] s_u, u ascending: emulated bit for bit here, and within the
// direct methods' FP64 bound (the two passes' 2 KW roundings are fewer than KW^2).
std::vector<double> grid_factor(std::int64_t n, std::uint64_t seed) {
  // Multiples of 1/8 in [-1, 1], never 0: at most 3 significant bits, so every tap col[u] row[v]
  // is exact in FP16 and BF16 storage and the stored kernel is exactly of rank one.
  std::vector<double> f;
  for (float x : test::random_floats(n, -1.0f, 1.0f, seed)) {
    const double v = std::round(x * 8.0) / 8.0;
    f.push_back(v == 0 ? 0.125 : v);
  }
  return f;
}

template <class Prec, int KW>
void check_separable_stream(Precision p, std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  Data d = make_data(rows, cols, KW, KW, storage_dtype(p), seed);
  const std::vector<double> col = grid_factor(KW, seed + 2), row = grid_factor(KW, seed + 3);
  // Multiples of 1/8 with 3 significant bits: exact in FP32 and FP16.
  const kernels::SepTaps taps = kernels::SepTaps::of(row.data(), col.data(), KW);
  for (int t = 0; t < KW; ++t) {
    for (int v = 0; v < KW; ++v)
      d.ker[static_cast<std::size_t>(t * KW + v)] =
          col[static_cast<std::size_t>(t)] * row[static_cast<std::size_t>(v)];
  }
  int ran = 0;
  for (Boundary b : {Boundary::Zero, Boundary::Circular})
    for (const Window& w : windows(rows, cols, KW, KW)) {
      const Geometry g = geometry(d, w, b);
      Inputs in = inputs(p, g, d);
      kernels::RegArgs a;
      a.c = in.args;
      a.c.overflow = &in.overflow;
      const auto bytes = static_cast<std::int64_t>(sizeof(typename Prec::R));
      const auto aligned = [](const void* ptr, std::int64_t row_bytes) {
        return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0 && row_bytes % 16 == 0;
      };
      a.vec_in = aligned(a.c.image, g.cols * bytes);
      a.vec_out = aligned(a.c.out, g.out_cols * bytes);
      ASSERT_TRUE(a.vec_in) << "the cases have 16-byte aligned rows";
      if (!stream<Prec, KW, true>(a, taps)) continue;  // a column offset it is not built for
      ++ran;
      const std::string name = label("separable stream", p, d, w.name, b);
      EXPECT_EQ(in.overflow, 0u) << name;
      expect_matches(in.out, p, g, d, name, {.bound = true, .exact = false});
      long long bad = 0;
      for (std::int64_t i = 0; i < g.out_rows; ++i)
        for (std::int64_t j = 0; j < g.out_cols; ++j) {
          // FP32 arithmetic, or FP16 (half): each multiply-add exact, then rounded to FP16.
          const auto fma = [p](double k, double x, double acc) {
            return p == Precision::Half
                       ? static_cast<double>(Half(std::fma(k, x, acc)).to_float())
                       : static_cast<double>(std::fmaf(static_cast<float>(k), static_cast<float>(x),
                                                       static_cast<float>(acc)));
          };
          double acc = 0.0;
          for (int u = 0; u < KW; ++u) {
            double sum = 0.0;
            for (int v = 0; v < KW; ++v)
              sum = fma(taps.row[v], d.in(i + g.row0 - u, j + g.col0 - v, b), sum);
            acc = fma(taps.col[u], sum, acc);
          }
          const double want = p == Precision::Mixed  ? Half(acc).to_float()
                              : p == Precision::BF16 ? BFloat16(acc).to_float()
                                                     : acc;
          if (in.out.at_as_double(i * g.out_cols + j) != want && bad++ == 0)
            ADD_FAILURE() << name << ": out(" << i << ", " << j
                          << ") = " << digits(in.out.at_as_double(i * g.out_cols + j))
                          << ", emulation " << digits(want);
        }
      EXPECT_EQ(bad, 0) << name;
    }
  EXPECT_GE(ran, 4) << "width " << KW;  // full, same, valid at both boundaries at least
}

TEST(EmulatedConvRegister, SeparableStreamRankOne_AllNarrowAndSingle) {
  for (Precision p : {Precision::Single, Precision::Half, Precision::Mixed, Precision::BF16}) {
    const auto each = [&]<class Prec>() {
      check_separable_stream<Prec, 3>(p, 64, 256, 11);
      check_separable_stream<Prec, 3>(p, 2, 8, 12);  // kernel taller than the image
      check_separable_stream<Prec, 5>(p, 40, 136, 13);
      check_separable_stream<Prec, 5>(p, 9, 16, 14);
      check_separable_stream<Prec, 7>(p, 21, 264, 15);
      check_separable_stream<Prec, 7>(p, 5, 8, 16);
    };
    if (p == Precision::Single)
      each.template operator()<kernels::PrecSingle>();
    else if (p == Precision::Half)
      each.template operator()<kernels::PrecHalf>();
    else if (p == Precision::Mixed)
      each.template operator()<kernels::PrecMixed>();
    else
      each.template operator()<kernels::PrecBF16>();
  }
}
#endif

}  // namespace
}  // namespace halfscope::conv
