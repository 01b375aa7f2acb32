// Launch shapes of the register convolution kernels (register.cuh), as pure functions of the
// output size and the device, so the CUDA launcher (register_launch.cuh) and the host emulation
// test (tests/conv/test_register_emulated.cpp) use the very same numbers. No CUDA dependency.
#pragma once

#include <algorithm>
#include <cstdint>

#include "conv/kernels/register_tuning.hpp"

namespace halfscope::conv::register_plan {

/// One launch: block (tx, ty), grid (grid_x, grid_y) with grid_y capped at 65535 (the kernels
/// loop over n_tile_rows), dynamic shared memory of smem_bytes holding rows of sp pixels.
/// tx == 0 means "does not fit this device".
struct LaunchPlan {
  int tx = 0, ty = 0;
  std::int64_t grid_x = 0, grid_y = 0;
  std::int64_t n_tile_rows = 0;
  int sp = 0;
  std::int64_t smem_bytes = 0;
};

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

/// Shared-memory row pitch (pixels) of a tile tx*p outputs wide: the kw - 1 halo plus the
/// over-read of the last thread's whole 16-byte vectors, rounded to 16 bytes.
constexpr std::int64_t tile_pitch(int tx, int p, int kw, int bytes_per_pixel) {
  const std::int64_t v = 16 / bytes_per_pixel;
  const std::int64_t nv = (p + kw - 1 + v - 1) / v;
  const std::int64_t need = std::max<std::int64_t>(static_cast<std::int64_t>(tx) * p + kw - 1,
                                                   static_cast<std::int64_t>(tx - 1) * p + nv * v);
  return (need + v - 1) / v * v;
}

/// Pitch of the generic kernel's one staged row: 32*p + kcols - 1 pixels, plus the over-read of
/// the last thread's top chunk (pixels [wtop, wtop + 2p) from its start), rounded to 16 bytes.
constexpr std::int64_t generic_pitch(int p, std::int64_t kcols, int bytes_per_pixel) {
  const std::int64_t v = 16 / bytes_per_pixel;
  const std::int64_t wtop = (kcols - 1) / p * p;
  const std::int64_t need = std::max<std::int64_t>(32LL * p + kcols - 1, 31LL * p + wtop + 2LL * p);
  return (need + v - 1) / v * v;
}

/// Which kernel a call runs: the unrolled tile kernel (odd square kernels up to
/// kMaxTemplateWidth; not instantiated for FP64), else the generic one, with its taps in 64 KB of
/// constant memory when they fit, else read from global memory. A tile plan that does not fit
/// the device (plan_tile's tx == 0) falls back to the generic kernel.
enum class Path { Tile, GenericConstant, GenericGlobal };
constexpr std::int64_t kConstantBytes = 65536;
inline Path choose_path(std::int64_t krows, std::int64_t kcols, int coef_bytes_per_tap, bool fp64) {
  if (krows * kcols * coef_bytes_per_tap > kConstantBytes) return Path::GenericGlobal;
  if (!fp64 && krows == kcols && krows % 2 == 1 && krows <= register_tuning::kMaxTemplateWidth)
    return Path::Tile;
  return Path::GenericConstant;
}

/// Unrolled tile kernel of width kw with q output rows per thread.
inline LaunchPlan plan_tile(int kw, int q, int bytes_per_pixel, std::int64_t out_rows,
                            std::int64_t out_cols, int sms, std::int64_t smem_limit) {
  namespace rt = register_tuning;
  constexpr int p = rt::kPacket;
  LaunchPlan plan;
  int tx = rt::kThreadsX;  // narrow outputs: fewer threads along a row, less idle work
  while (tx > rt::kMinThreadsX && static_cast<std::int64_t>(tx / 2) * p >= out_cols) tx /= 2;
  const auto blocks = [&](int ty) {
    return ceil_div(out_cols, tx * p) * ceil_div(out_rows, ty * q);
  };
  int ty = rt::kMaxThreadsY;  // small images: fewer rows per block, more blocks
  while (ty > 1 && blocks(ty) < static_cast<std::int64_t>(rt::kMinBlocksPerSm) * sms) ty /= 2;
  const std::int64_t sp = tile_pitch(tx, p, kw, bytes_per_pixel);
  const auto smem = [&](int t) {
    return (static_cast<std::int64_t>(t) * q + kw - 1) * sp * bytes_per_pixel;
  };
  while (ty > 1 && smem(ty) > smem_limit) ty /= 2;
  if (smem(ty) > smem_limit) return plan;
  plan.tx = tx;
  plan.ty = ty;
  plan.sp = static_cast<int>(sp);
  plan.smem_bytes = smem(ty);
  plan.n_tile_rows = ceil_div(out_rows, static_cast<std::int64_t>(ty) * q);
  plan.grid_x = ceil_div(out_cols, static_cast<std::int64_t>(tx) * p);
  plan.grid_y = std::min<std::int64_t>(plan.n_tile_rows, 65535);
  return plan;
}

/// Streaming kernel with q output rows per thread: tx threads of 8 outputs per block (no shared
/// memory).
inline LaunchPlan plan_stream(int q, std::int64_t out_rows, std::int64_t out_cols) {
  namespace rt = register_tuning;
  LaunchPlan plan;
  int tx = rt::kStreamThreads;
  while (tx > rt::kStreamMinThreads && static_cast<std::int64_t>(tx / 2) * 8 >= out_cols) tx /= 2;
  plan.tx = tx;
  plan.ty = 1;
  plan.n_tile_rows = ceil_div(out_rows, q);
  plan.grid_x = ceil_div(out_cols, static_cast<std::int64_t>(tx) * 8);
  plan.grid_y = std::min<std::int64_t>(plan.n_tile_rows, 65535);
  return plan;
}

/// Generic kernel with p outputs per thread and q rows (blocks are 32 x ty threads).
inline LaunchPlan plan_generic(int p, int q, std::int64_t kcols, int bytes_per_pixel,
                               std::int64_t out_rows, std::int64_t out_cols, int sms,
                               std::int64_t smem_limit) {
  namespace rt = register_tuning;
  LaunchPlan plan;
  const std::int64_t sp = generic_pitch(p, kcols, bytes_per_pixel);
  if (sp * bytes_per_pixel > smem_limit) return plan;
  int ty = rt::kGenericThreadsY;
  while (ty > 1 &&
         ceil_div(out_cols, 32LL * p) * ceil_div(out_rows, static_cast<std::int64_t>(ty) * q) <
             static_cast<std::int64_t>(rt::kMinBlocksPerSm) * sms)
    ty /= 2;
  plan.tx = 32;
  plan.ty = ty;
  plan.sp = static_cast<int>(sp);
  plan.smem_bytes = sp * bytes_per_pixel;
  plan.n_tile_rows = ceil_div(out_rows, static_cast<std::int64_t>(ty) * q);
  plan.grid_x = ceil_div(out_cols, 32LL * p);
  plan.grid_y = std::min<std::int64_t>(plan.n_tile_rows, 65535);
  return plan;
}

}  // namespace halfscope::conv::register_plan
