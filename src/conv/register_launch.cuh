// Host side of the register convolution for one precision family: tap preparation and upload,
// the choice between the unrolled tile kernel and the generic one, launch shapes, the overflow
// check. Included by exactly one register_cuda_<family>.cu per precision, so each family's
// instantiations compile in their own translation unit (with their own __constant__ buffer).
//
// Per-call overhead (the 4096^2 FP16 kernel runs ~16 us, so microseconds of host work count):
// device limits are cached, the prepared taps use a persistent staging buffer, and the overflow
// check reads a mapped counter without an allocation or a copy, deferred for device outputs
// (overflow_check.hpp). The tap upload itself stays on every call: the taps are a device array
// whose contents may change between calls with the same pointer, and telling that without a
// read-back (a synchronisation) is not possible from the host.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "conv/direct_cuda_common.hpp"
#include "conv/kernels/register.cuh"
#include "conv/kernels/register_plan.hpp"
#include "conv/kernels/register_roll.cuh"
#include "conv/kernels/register_tuning.hpp"
#include "conv/overflow_check.hpp"
#include "conv/planner.hpp"
#include "halfscope/core/cuda_memory.hpp"

namespace halfscope::conv::detail {

namespace rt = register_tuning;

/// Q of the unrolled tile kernel of width KW for a precision.
template <class Prec, int KW>
inline constexpr int kTileRows = rt::tile_rows_per_thread(KW,
                                                          std::is_same_v<Prec, kernels::PrecHalf>);

/// P of the generic kernel for a precision.
template <class Prec>
inline constexpr int kGenericPacket =
    std::is_same_v<Prec, kernels::PrecDouble> ? rt::kGenericPacketDouble : rt::kGenericPacket;

/// Launches the unrolled tile kernel of width KW. Returns false when its shared memory does not
/// fit this device (the caller then uses the generic kernel).
template <class Prec, int KW>
bool launch_tile(kernels::RegArgs a, const DeviceLimits& dev, cudaStream_t s) {
  constexpr int P = rt::kPacket, Q = kTileRows<Prec, KW>;
  const auto plan = register_plan::plan_tile(KW, Q, sizeof(typename Prec::R), a.c.out_rows,
                                             a.c.out_cols, dev.sms, dev.smem_optin);
  if (plan.tx == 0) return false;
  a.sp = plan.sp;
  a.n_tile_rows = plan.n_tile_rows;
  auto* kernel = &kernels::register_tile_kernel<Prec, KW, P, Q>;
  allow_shared_memory(kernel, plan.smem_bytes);
  const dim3 grid(grid_x(plan.grid_x, "register_cuda"), grid_y(plan.grid_y));
  kernel<<<grid, dim3(plan.tx, plan.ty), static_cast<std::size_t>(plan.smem_bytes), s>>>(a);
  HS_CHECK_LAUNCH();
  return true;
}

/// The tile kernel for width kw in {1, 3, ..., kMaxTemplateWidth}: one instantiation per width.
template <class Prec, int... I>
bool dispatch_tile(int kw, const kernels::RegArgs& a, const DeviceLimits& dev, cudaStream_t s,
                   std::integer_sequence<int, I...>) {
  bool launched = false;
  ((kw == 2 * I + 1 ? (launched = launch_tile<Prec, 2 * I + 1>(a, dev, s), true) : false) || ...);
  return launched;
}

/// Launches the streaming kernel of width KW whose window reaches LEAD columns left of an output
/// (SEP: the rank-one kernel `sep`).
template <class Prec, int KW, int LEAD, bool SEP>
void launch_stream(const kernels::RegArgs& a, const kernels::SepTaps& sep, cudaStream_t s) {
  constexpr bool wide16 = !std::is_same_v<Prec, kernels::PrecSingle> &&
                          !std::is_same_v<Prec, kernels::PrecHalf>;  // FP32 arithmetic, 16-bit
  constexpr bool fp32 = std::is_same_v<Prec, kernels::PrecSingle>;
  constexpr bool half = std::is_same_v<Prec, kernels::PrecHalf>;
  constexpr int Q = SEP ? rt::stream_separable_rows(KW, half) : rt::kStreamRows;
  constexpr int minb = Q == rt::kStreamRows ? rt::stream_min_blocks(KW, wide16, fp32)
                                            : rt::kStreamSeparableTallMinBlocks;
  const auto plan = register_plan::plan_stream(Q, a.c.out_rows, a.c.out_cols);
  const dim3 grid(grid_x(plan.grid_x, "register_cuda"), grid_y(plan.grid_y));
  kernels::register_stream_kernel<Prec, KW, LEAD, Q, minb, SEP>
      <<<grid, dim3(plan.tx), 0, s>>>(a, sep);
  HS_CHECK_LAUNCH();
}

/// Calls launch(std::integral_constant<int, LEAD>{}) for the columns LEAD = KW - 1 - col0 that a
/// width-KW window reaches left of an output, where that is one the streaming and rolling kernels
/// are built for (`same`, `valid`, `full`: KW / 2, 0 or KW - 1); returns false otherwise.
template <int KW, class Launch>
bool with_lead(long long col0, Launch&& launch) {
  const long long lead = KW - 1 - col0;
  if (lead == KW / 2)
    launch(std::integral_constant<int, KW / 2>{});
  else if (lead == 0)
    launch(std::integral_constant<int, 0>{});
  else if (lead == KW - 1)
    launch(std::integral_constant<int, KW - 1>{});
  else
    return false;
  return true;
}

/// The streaming kernel for width KW when the output's column offset is one it is built for.
template <class Prec, int KW, bool SEP = false>
bool stream_width(const kernels::RegArgs& a, cudaStream_t s, const kernels::SepTaps& sep = {}) {
  return with_lead<KW>(
      a.c.col0, [&](auto lead) { launch_stream<Prec, KW, decltype(lead)::value, SEP>(a, sep, s); });
}

/// HALFSCOPE_CONV_STREAM=0 keeps register_run on the tile kernel where it would take the
/// streaming one (anything else: the default), so the GPU tests and the benchmark can run both.
inline bool stream_disabled_by_env() {
  static const bool off = env_is_zero("HALFSCOPE_CONV_STREAM");
  return off;
}

/// Whether the streaming kernel (register_stream.cuh) is built for a call: odd square kernels of
/// widths 3-7 on 16-byte aligned image rows (`rows_aligned`), at the column offsets of `same`,
/// `valid` and `full`, unless HALFSCOPE_CONV_STREAM=0.
inline bool stream_applies(const Geometry& g, bool rows_aligned) {
  const long long kw = g.krows, lead = kw - 1 - g.col0;
  return rows_aligned && !stream_disabled_by_env() && g.krows == g.kcols && kw % 2 == 1 &&
         kw >= 3 && kw <= rt::kStreamMaxWidth && (lead == kw / 2 || lead == 0 || lead == kw - 1);
}

/// The streaming kernel where stream_applies (SEP: its rank-one mode with `sep`). Returns false
/// otherwise, having launched nothing (register_run: the tile kernel runs).
template <class Prec, bool SEP = false>
bool dispatch_stream(const Geometry& g, const kernels::RegArgs& a, cudaStream_t s,
                     const kernels::SepTaps& sep = {}) {
  static_assert(rt::kStreamMaxWidth == 7, "one branch per odd width 3..kStreamMaxWidth");
  if (!stream_applies(g, a.vec_in)) return false;
  if (g.krows == 3) return stream_width<Prec, 3, SEP>(a, s, sep);
  if (g.krows == 5) return stream_width<Prec, 5, SEP>(a, s, sep);
  return stream_width<Prec, 7, SEP>(a, s, sep);
}

/// Launches the generic kernel (taps in constant memory when kConst, else from a.coef).
template <class Prec, bool kConst>
void launch_generic(kernels::RegArgs a, const DeviceLimits& dev, cudaStream_t s) {
  constexpr int P = kGenericPacket<Prec>, Q = rt::kGenericRows;
  const auto plan =
      register_plan::plan_generic(P, Q, a.c.kcols, sizeof(typename Prec::R), a.c.out_rows,
                                  a.c.out_cols, dev.sms, dev.smem_optin);
  if (plan.tx == 0)
    throw Unsupported(
        "register_cuda: a kernel " + std::to_string(a.c.kcols) + " columns wide needs " +
        std::to_string(register_plan::generic_pitch(P, a.c.kcols, sizeof(typename Prec::R)) *
                       static_cast<std::int64_t>(sizeof(typename Prec::R))) +
        " bytes of shared memory per row, this GPU allows " + std::to_string(dev.smem_optin) +
        "; use method fft or naive");
  a.sp = plan.sp;
  a.n_tile_rows = plan.n_tile_rows;
  auto* kernel = &kernels::register_generic_kernel<Prec, P, Q, kConst>;
  allow_shared_memory(kernel, plan.smem_bytes);
  const dim3 grid(grid_x(plan.grid_x, "register_cuda"), grid_y(plan.grid_y));
  kernel<<<grid, dim3(32, plan.ty), static_cast<std::size_t>(plan.smem_bytes), s>>>(a);
  HS_CHECK_LAUNCH();
}

/// The register kernels' arguments for a call: the rows' alignment, and for narrow storage the
/// overflow counter of `overflow`, emplaced here (overflow_check.hpp) and finished by the caller.
template <class Prec>
kernels::RegArgs start_call(const Geometry& g, Precision p, kernels::ConvArgs args, cudaStream_t s,
                            const char* method, std::optional<OverflowCheck>& overflow) {
  using R = typename Prec::R;
  if constexpr (Prec::kNarrow) {
    overflow.emplace(s, method, p, g.out_rows * g.out_cols);
    args.overflow = overflow->counter();
  }
  kernels::RegArgs a;
  a.c = args;
  a.vec_in = rows_aligned16(args.image, g.cols * static_cast<std::int64_t>(sizeof(R)));
  a.vec_out = rows_aligned16(args.out, g.out_cols * static_cast<std::int64_t>(sizeof(R)));
  return a;
}

/// register_cuda for one precision: arguments already checked by register_cuda.cu.
template <class Prec>
void register_run(const Geometry& g, Precision p, kernels::ConvArgs args, cudaStream_t s) {
  using R = typename Prec::R;
  using T = typename kernels::CoefOf<Prec>::T;
  const DeviceLimits dev = current_device_limits();
  std::optional<OverflowCheck> overflow;
  kernels::RegArgs a = start_call<Prec>(g, p, args, s, "register_cuda", overflow);

  // Taps as CoefOf<Prec>::T: the caller's array itself, except mixed / bf16 (widened to FP32
  // first, into `dst`).
  const std::int64_t taps = g.krows * g.kcols;
  const std::int64_t coef_bytes = taps * static_cast<std::int64_t>(sizeof(T));
  const auto prepare = [&](void* dst) {
    const int blocks =
        static_cast<int>(std::clamp<std::int64_t>(register_plan::ceil_div(taps, 256), 1, 4096));
    kernels::prepare_coefficients<Prec>
        <<<blocks, 256, 0, s>>>(static_cast<const R*>(args.kernel), static_cast<T*>(dst), taps);
    HS_CHECK_LAUNCH();
    return static_cast<const void*>(dst);
  };

  const auto path = register_plan::choose_path(g.krows, g.kcols, sizeof(T),
                                               std::is_same_v<Prec, kernels::PrecDouble>);
  if (path == register_plan::Path::GenericGlobal) {
    std::optional<cuda::StreamScratch> scratch;  // too many taps for constant memory
    a.coef = args.kernel;
    if constexpr (kernels::CoefOf<Prec>::kPrepared) {
      scratch.emplace(coef_bytes, s);
      a.coef = prepare(scratch->get());
    }
    launch_generic<Prec, false>(a, dev, s);
  } else {
    // Per-call host work before the launch is GPU idle time when the stream is empty (a timed
    // call, a solver's first step): the prepared taps go through the device's persistent staging
    // buffer (guarded by the lock, like the __constant__ buffer) instead of a fresh allocation.
    ConstantMemoryLock lock(s);
    a.coef = args.kernel;
    if constexpr (kernels::CoefOf<Prec>::kPrepared)
      a.coef = prepare(lock.staging(kernels::kRegisterConstantBytes));
    HS_CUDA_CHECK(cudaMemcpyToSymbolAsync(kernels::c_reg_kernel, a.coef,
                                          static_cast<std::size_t>(coef_bytes), 0,
                                          cudaMemcpyDeviceToDevice, s));
    bool done = false;
    if constexpr (!std::is_same_v<Prec, kernels::PrecDouble>) {  // FP64: generic only
      if (path == register_plan::Path::Tile)
        done =
            dispatch_stream<Prec>(g, a, s) ||
            dispatch_tile<Prec>(static_cast<int>(g.krows), a, dev, s,
                                std::make_integer_sequence<int, (rt::kMaxTemplateWidth + 1) / 2>{});
    }
    if (!done) launch_generic<Prec, true>(a, dev, s);
    lock.release();
  }
  if (overflow) overflow->finish();
}

/// HALFSCOPE_CONV_ROLL=0 keeps separable_cuda's rank-one kernels on 16-bit storage on the
/// streaming kernel's rank-one mode instead of the rolling kernel (anything else: the default),
/// so the GPU tests and the benchmark can run both.
inline bool roll_disabled_by_env() {
  static const bool off = env_is_zero("HALFSCOPE_CONV_ROLL");
  return off;
}

/// Launches the rolling kernel (register_roll.cuh) of width KW whose window reaches LEAD columns
/// left of an output: column strips of 8 * kRollThreads outputs, each cut into bands of rows so
/// the grid has about kRollBlocksPerSm blocks per SM.
template <class Prec, int KW, int LEAD>
void launch_roll(const kernels::RegArgs& a, const kernels::SepTaps& sep, cudaStream_t s) {
  using R = typename Prec::R;
  const std::int64_t strips = register_plan::ceil_div(a.c.out_cols, 8 * rt::kRollThreads);
  const std::int64_t bands = std::max<std::int64_t>(
      1, register_plan::ceil_div(rt::kRollBlocksPerSm * current_device_limits().sms, strips));
  const std::int64_t band =
      std::max({register_plan::ceil_div(a.c.out_rows, bands), std::int64_t{rt::kRollMinRows},
                register_plan::ceil_div(a.c.out_rows, 65535)});
  if (band > INT_MAX / 2)
    throw Unsupported("separable_cuda: " + std::to_string(a.c.out_rows) +
                      " output rows are too many for one launch");
  const dim3 grid(grid_x(strips, "separable_cuda"),
                  static_cast<unsigned>(register_plan::ceil_div(a.c.out_rows, band)));
  constexpr auto smem =
      static_cast<std::size_t>(rt::kRollRing * kernels::kRollRowPixels) * sizeof(R);
  kernels::register_roll_kernel<Prec, KW, LEAD>
      <<<grid, dim3(rt::kRollThreads), smem, s>>>(a, sep, static_cast<long long>(band));
  HS_CHECK_LAUNCH();
}

/// The rolling kernel for width KW at the column offsets of `same`, `valid` and `full` (the
/// caller has checked stream_applies, which admits only those).
template <class Prec, int KW>
void roll_width(const kernels::RegArgs& a, const kernels::SepTaps& sep, cudaStream_t s) {
  with_lead<KW>(a.c.col0,
                [&](auto lead) { launch_roll<Prec, KW, decltype(lead)::value>(a, sep, s); });
}

/// A rank-one kernel for separable_cuda: odd square kernels of widths 3-7 on 16-byte aligned image
/// rows, at the column offsets of `same`, `valid`, `full`: the rolling kernel on FP16 / BF16
/// storage where register_tuning::roll_rank_one says (not under HALFSCOPE_CONV_ROLL=0), else the
/// streaming kernel's rank-one mode. Returns false, having launched nothing, where neither applies
/// (and under HALFSCOPE_CONV_STREAM=0, so the tests can run the two-pass kernels there too).
template <class Prec>
bool separable_stream_run(const Geometry& g, Precision p, kernels::ConvArgs args,
                          const kernels::SepTaps& taps, cudaStream_t s) {
  using R = typename Prec::R;
  // Decided before start_call: an overflow check left unfinished waits for the stream.
  if (!stream_applies(g, rows_aligned16(args.image, g.cols * static_cast<std::int64_t>(sizeof(R)))))
    return false;
  std::optional<OverflowCheck> overflow;
  const kernels::RegArgs a = start_call<Prec>(g, p, args, s, "separable_cuda", overflow);
  bool rolled = false;
  if constexpr (sizeof(R) == 2) {
    constexpr bool half = std::is_same_v<Prec, kernels::PrecHalf>;
    if (!roll_disabled_by_env() && rt::roll_rank_one(static_cast<int>(g.krows), half)) {
      // Widths 3-7 here (stream_applies); roll_rank_one admits 7, and 5 with FP32 arithmetic.
      if constexpr (half) {
        roll_width<Prec, 7>(a, taps, s);
      } else {
        if (g.krows == 5)
          roll_width<Prec, 5>(a, taps, s);
        else
          roll_width<Prec, 7>(a, taps, s);
      }
      rolled = true;
    }
  }
  if (!rolled) dispatch_stream<Prec, true>(g, a, s, taps);
  if (overflow) overflow->finish();
  return true;
}

}  // namespace halfscope::conv::detail
