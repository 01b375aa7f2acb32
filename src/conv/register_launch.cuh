// Host side of the register convolution for one precision family: tap preparation and upload,
// the choice between the unrolled tile kernel and the generic one, launch shapes, the overflow
// check. Included by exactly one register_cuda_<family>.cu per precision, so each family's
// instantiations compile in their own translation unit (with their own __constant__ buffer).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include "conv/direct_cuda_common.hpp"
#include "conv/kernels/register.cuh"
#include "conv/kernels/register_plan.hpp"
#include "conv/kernels/register_tuning.hpp"

namespace halfscope::conv::detail {

namespace rt = register_tuning;

/// Stream-ordered device scratch, freed on the same stream (also on error).
class DeviceScratch {
 public:
  DeviceScratch(std::int64_t bytes, cudaStream_t s) : stream_(s) {
    HS_CUDA_CHECK(cudaMallocAsync(&ptr_, static_cast<std::size_t>(bytes), s));
  }
  ~DeviceScratch() {
    if (cudaFreeAsync(ptr_, stream_) != cudaSuccess) (void)cudaGetLastError();
  }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  [[nodiscard]] void* get() const noexcept { return ptr_; }

 private:
  cudaStream_t stream_;
  void* ptr_ = nullptr;
};

/// Sets the dynamic shared-memory limit of `kernel` when it needs more than the default 48 KB.
template <class K>
void allow_shared_memory(K* kernel, std::int64_t bytes) {
  if (bytes > 48 * 1024)
    HS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes)));
}

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

/// register_cuda for one precision: arguments already checked by register_cuda.cu.
template <class Prec>
void register_run(const Geometry& g, Precision p, kernels::ConvArgs args, cudaStream_t s) {
  using R = typename Prec::R;
  using T = typename kernels::CoefOf<Prec>::T;
  const DeviceLimits dev = current_device_limits();
  std::optional<OverflowCounter> counter;
  if constexpr (Prec::kNarrow) {
    counter.emplace(s);
    args.overflow = counter->get();
  }
  kernels::RegArgs a;
  a.c = args;
  a.vec_in = rows_aligned16(args.image, g.cols * static_cast<std::int64_t>(sizeof(R)));
  a.vec_out = rows_aligned16(args.out, g.out_cols * static_cast<std::int64_t>(sizeof(R)));

  // Taps as CoefOf<Prec>::T: the caller's array itself, except mixed (widened to FP32 first).
  const std::int64_t taps = g.krows * g.kcols;
  const std::int64_t coef_bytes = taps * static_cast<std::int64_t>(sizeof(T));
  std::optional<DeviceScratch> scratch;
  const void* coef = args.kernel;
  if constexpr (kernels::CoefOf<Prec>::kPrepared) {
    scratch.emplace(coef_bytes, s);
    const int blocks =
        static_cast<int>(std::clamp<std::int64_t>(register_plan::ceil_div(taps, 256), 1, 4096));
    kernels::prepare_coefficients<Prec><<<blocks, 256, 0, s>>>(
        static_cast<const R*>(args.kernel), static_cast<T*>(scratch->get()), taps);
    HS_CHECK_LAUNCH();
    coef = scratch->get();
  }
  a.coef = coef;

  const auto path = register_plan::choose_path(g.krows, g.kcols, sizeof(T),
                                               std::is_same_v<Prec, kernels::PrecDouble>);
  if (path == register_plan::Path::GenericGlobal) {
    launch_generic<Prec, false>(a, dev, s);
  } else {
    ConstantMemoryLock lock(s);
    HS_CUDA_CHECK(cudaMemcpyToSymbolAsync(kernels::c_reg_kernel, coef,
                                          static_cast<std::size_t>(coef_bytes), 0,
                                          cudaMemcpyDeviceToDevice, s));
    bool done = false;
    if constexpr (!std::is_same_v<Prec, kernels::PrecDouble>) {  // FP64: generic only
      if (path == register_plan::Path::Tile)
        done =
            dispatch_tile<Prec>(static_cast<int>(g.krows), a, dev, s,
                                std::make_integer_sequence<int, (rt::kMaxTemplateWidth + 1) / 2>{});
    }
    if (!done) launch_generic<Prec, true>(a, dev, s);
    lock.release();
  }
  if (counter) counter->check("register_cuda", p, g.out_rows * g.out_cols);
}

}  // namespace halfscope::conv::detail
