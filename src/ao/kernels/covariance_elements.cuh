// Device code of the GPU covariance generator: the offset tables of equal-geometry sensor pairs
// and the element kernel that writes a dense or tiled, f32 or f64 matrix (covariance_cuda.cu
// launches them).
//
// Floors (write them next to the kernel, STYLE.md): the E-ELT Cmm as lower tiles stores
// n^2 / 2 = 5.0e9 elements: 20 GB in f32 / 40 GB in f64, 4.2 / 8.4 ms at 4.8 TB/s. Elements of a
// pair with a table are one 8-byte gather from an L2-resident table (25 of the 45 pair blocks);
// the rest are the direct FP64 evaluation (covariance_terms.cuh: ~0.74 s load floor), or, for
// unrotated sensor pairs (the default), written afterwards by the edge-point path
// (covariance_edges.cuh), whose elements this kernel skips.
#pragma once

#include <cstdint>

#include "ao/covariance_tuning.hpp"
#include "ao/kernels/covariance_terms.cuh"

namespace halfscope::ao::detail {

/// A measuring or truth sensor as the element kernel sees it.
struct DevSensor {
  double inv_pitch = 0;  // 1 / pitch_m
  double tiptilt = 0;    // lgs_tiptilt (arcsec^2), added to its own xx / yy entries with noise
};

/// Where the offset table of ordered sensor pair (a, b) lies: tables + offset, three planes (xx,
/// yy, xy) of width^2 entries indexed by (dc + radius) + width (dr + radius); offset < 0: no
/// table (direct evaluation). `sign` -1: the table belongs to (b, a) and the offsets are negated.
struct DevPair {
  std::int64_t offset = -1;
  int radius = 0;
  int sign = 1;
  int edge = 0;  // 1: written by the edge-point path (covariance_edges.cuh), skipped here
};

/// One table to build: unordered pair (a, b), a <= b, with identical per-layer scales and sizes,
/// pitches and lattice orientation. Entry (dc, dr) is the covariance of subaperture p of a and q of
/// b with lattice offset (c_p - c_q, r_p - r_q): pupil separation base + pitch (dc e1 + dr e2).
struct DevTableJob {
  std::int64_t offset = 0;
  int a = 0, b = 0, radius = 0;
  double base_x = 0, base_y = 0;  // centre of a's subaperture 0 minus b's
  double e1x = 0, e1y = 0;        // lattice row direction (unit); e2 = (-e1y, e1x)
  double pitch = 0;
  double factor = 0;  // kSlopeUnit2 / (2 pitch_a pitch_b)
};

/// Everything the kernels read.
struct CovKernelArgs {
  const DevSensor* sensors = nullptr;
  int nsensors = 0;
  const PlanSensorLayer* geom = nullptr;  // nsensors x nlayers
  const DevLayer* layers = nullptr;
  int nlayers = 0;
  const double* x = nullptr;  // subaperture centres (all sensors)
  const double* y = nullptr;
  const int2* lattice = nullptr;  // lattice coordinates (column, row) of each subaperture
  const double* noise_xx = nullptr;
  const double* noise_yy = nullptr;
  const double* noise_xy = nullptr;
  bool noise = false;
  const std::int32_t* row_info = nullptr;  // (subaperture << 8) | (sensor << 1) | axis per row
  const std::int32_t* col_info = nullptr;  // the same per column
  const DevPair* pairs = nullptr;          // nsensors x nsensors
  const double* tables = nullptr;
  const double* vk = nullptr;      // the von Karman table in the element kernel's layout
  const double* vk_deg = nullptr;  // the same in degree-major layout (the offset tables)
  VonKarmanScalars vks;
  std::int64_t rows = 0, cols = 0;
  bool any_edge = false;  // some pair has DevPair::edge set
};

/// Output geometry: a dense row-major matrix (tiled == false: one "tile" of rows x cols, or only
/// its rows [row_begin, row_end), stored from `data` on) or a tiled layout (tiles.hpp): tile
/// (ti, tj) starts at col_start[tj] + (ti - first(tj)) nb width(tj), column-major with its height
/// as leading dimension; first(tj) = tj for a lower layout, else 0. With tile_offset (an MPI
/// rank's selection, issue 9) tile (ti, tj) starts at tile_offset[ti * tile_cols + tj] instead,
/// and is not generated where that is negative.
struct CovOutput {
  void* data = nullptr;
  bool tiled = false, lower = false;
  std::int64_t nb = 0;
  std::int64_t tile_rows = 0, tile_cols = 0;
  const std::int64_t* col_start = nullptr;
  const std::int64_t* tile_offset = nullptr;
  std::int64_t row_begin = 0, row_end = 0;      // the dense rows generated
  std::int64_t blocks_per_tile = 1;             // ceil(nb / kCovBlock) per side
  std::int64_t block_rows = 0, block_cols = 0;  // blocks per side of the grid
};

/// Where tile (ti, tj) of height h and width w starts in a tiled output, or -1 when it is not
/// generated (above the diagonal of a lower layout, or left out of a selection).
__device__ __forceinline__ std::int64_t covariance_tile_start(const CovOutput& out, std::int64_t ti,
                                                              std::int64_t tj, std::int64_t w) {
  if (out.lower && ti < tj) return -1;
  if (out.tile_offset != nullptr) return out.tile_offset[ti * out.tile_cols + tj];
  return out.col_start[tj] + (ti - (out.lower ? tj : 0)) * out.nb * w;
}

// Non-template kernels have internal linkage: this header is included by more than one
// translation unit (covariance_cuda.cu, covariance_cuda_edges.cu).
static __global__ void __launch_bounds__(kCovTableThreads)
    covariance_table_kernel(CovKernelArgs args, const DevTableJob* __restrict__ jobs, int njobs,
                            double* __restrict__ tables) {
  for (int jb = 0; jb < njobs; ++jb) {
    const DevTableJob job = jobs[jb];
    const std::int64_t width = 2 * job.radius + 1;
    const std::int64_t plane = width * width;
    for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         e < plane; e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
      const double dc = static_cast<double>(e % width - job.radius);
      const double dr = static_cast<double>(e / width - job.radius);
      const double px = job.base_x + job.pitch * (dc * job.e1x - dr * job.e1y);
      const double py = job.base_y + job.pitch * (dc * job.e1y + dr * job.e1x);
      // Both sensors share scale and size per layer: u_i - u_j = scale (p - q) + shift_a - shift_b.
      double xx = 0, yy = 0, xy = 0;
      const PlanSensorLayer* ga = args.geom + static_cast<std::int64_t>(job.a) * args.nlayers;
      const PlanSensorLayer* gb = args.geom + static_cast<std::int64_t>(job.b) * args.nlayers;
      for (int l = 0; l < args.nlayers; ++l) {
        const double s = ga[l].size;
        if (s == 0.0) continue;
        const double du = ga[l].scale * px + (ga[l].shift_x - gb[l].shift_x);
        const double dv = ga[l].scale * py + (ga[l].shift_y - gb[l].shift_y);
        const double kq = args.layers[l].kq;
        const double w = args.layers[l].weight;
        xx = fma(w,
                 vk_parallel_term<VkLayout::degree_major>(du, dv, s, s, kq, args.vk_deg, args.vks),
                 xx);
        yy = fma(w,
                 vk_parallel_term<VkLayout::degree_major>(dv, du, s, s, kq, args.vk_deg, args.vks),
                 yy);
        xy = fma(w,
                 vk_cross_term<VkLayout::degree_major>(du, dv, 0.5 * s, 0.5 * s, kq, args.vk_deg,
                                                       args.vks),
                 xy);
      }
      double* t = tables + job.offset;
      t[e] = job.factor * xx;
      t[plane + e] = job.factor * yy;
      t[2 * plane + e] = job.factor * xy;
    }
  }
}

/// Element (i, j) in FP64, the structure function from a table in layout L.
template <VkLayout L>
__device__ __forceinline__ double covariance_element(const CovKernelArgs& A, std::int32_t ri,
                                                     std::int32_t cj) {
  const int a = (ri >> 1) & 127, ax_i = ri & 1, p = ri >> 8;
  const int b = (cj >> 1) & 127, ax_j = cj & 1, q = cj >> 8;
  const DevPair pr = A.pairs[a * A.nsensors + b];
  double v;
  if (pr.offset >= 0) {
    const int2 lp = __ldg(&A.lattice[p]);
    const int2 lq = __ldg(&A.lattice[q]);
    const std::int64_t width = 2 * pr.radius + 1;
    const std::int64_t dc = pr.sign * (lp.x - lq.x) + pr.radius;
    const std::int64_t dr = pr.sign * (lp.y - lq.y) + pr.radius;
    const int plane = ax_i == ax_j ? ax_i : 2;
    v = __ldg(&A.tables[pr.offset + (plane * width + dr) * width + dc]);
  } else {
    const double sum =
        direct_layer_sum<L>(A.geom, A.layers, A.nlayers, a, b, __ldg(&A.x[p]), __ldg(&A.y[p]),
                            __ldg(&A.x[q]), __ldg(&A.y[q]), ax_i, ax_j, A.vk, A.vks);
    v = sum * (0.5 * kSlopeUnit2 * A.sensors[a].inv_pitch * A.sensors[b].inv_pitch);
  }
  if (A.noise && a == b) {
    if (ax_i == ax_j) v += A.sensors[a].tiptilt;
    if (p == q) v += ax_i != ax_j ? A.noise_xy[p] : (ax_i == 0 ? A.noise_xx[p] : A.noise_yy[p]);
  }
  return v;
}

/// Whether element (ri, cj) belongs to a pair of the edge-point path (written there).
__device__ __forceinline__ bool covariance_edge_element(const CovKernelArgs& A, std::int32_t ri,
                                                        std::int32_t cj) {
  return A.any_edge && A.pairs[((ri >> 1) & 127) * A.nsensors + ((cj >> 1) & 127)].edge != 0;
}

/// One block: a kCovBlock x kCovBlock square inside one tile (or of the dense matrix); the fast
/// thread index runs along the storage's contiguous direction. A warp covers FastLanes elements
/// along it times 32 / FastLanes across: 32 x 1 writes whole 128-byte lines; 8 x 4 keeps the
/// warp's separations closer together (a 8 x 4 patch of subaperture pairs instead of 32 x 1), so
/// its lanes fall in fewer structure-function intervals and the table loads touch fewer lines.
template <class T, bool Tiled, VkLayout L, int FastLanes>
__global__ void __launch_bounds__(kCovThreads)
    covariance_element_kernel(CovKernelArgs args, CovOutput out) {
  const std::int64_t block = blockIdx.x;
  const std::int64_t brow = block % out.block_rows;
  const std::int64_t bcol = block / out.block_rows;
  std::int64_t row0, col0, row_end, col_end;
  std::int64_t origin, ld;  // element (i, j) is stored at origin + i + j ld (tiled) / i ld + j
  if constexpr (Tiled) {
    const std::int64_t ti = brow / out.blocks_per_tile, tj = bcol / out.blocks_per_tile;
    const std::int64_t h = min(out.nb, args.rows - ti * out.nb);
    const std::int64_t w = min(out.nb, args.cols - tj * out.nb);
    const std::int64_t start = covariance_tile_start(out, ti, tj, w);
    if (start < 0) return;  // not generated
    row0 = ti * out.nb + (brow % out.blocks_per_tile) * kCovBlock;
    col0 = tj * out.nb + (bcol % out.blocks_per_tile) * kCovBlock;
    row_end = min(ti * out.nb + h, row0 + kCovBlock);
    col_end = min(tj * out.nb + w, col0 + kCovBlock);
    if (row0 >= row_end || col0 >= col_end) return;
    origin = start - ti * out.nb - tj * out.nb * h;
    ld = h;
  } else {
    row0 = out.row_begin + brow * kCovBlock;
    col0 = bcol * kCovBlock;
    row_end = min(out.row_end, row0 + kCovBlock);
    col_end = min(args.cols, col0 + kCovBlock);
    origin = -out.row_begin * args.cols;
    ld = args.cols;
  }
  static_assert(32 % FastLanes == 0 && kCovBlock % FastLanes == 0 &&
                kCovThreads / 32 >= kCovBlock / FastLanes && kCovThreads % 32 == 0);
  constexpr int kSlowLanes = 32 / FastLanes;
  constexpr int kFastGroups = kCovBlock / FastLanes;  // warps needed to span the fast direction
  constexpr int kSlowStep = (kCovThreads / 32 / kFastGroups) * kSlowLanes;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int fast = (warp % kFastGroups) * FastLanes + lane % FastLanes;
  const int slow0 = (warp / kFastGroups) * kSlowLanes + lane / FastLanes;
  T* const data = static_cast<T*>(out.data);
  if constexpr (Tiled) {
    const std::int64_t i = row0 + fast;
    if (i >= row_end) return;
    const std::int32_t ri = __ldg(&args.row_info[i]);
    for (std::int64_t j = col0 + slow0; j < col_end; j += kSlowStep) {
      const std::int32_t cj = __ldg(&args.col_info[j]);
      if (covariance_edge_element(args, ri, cj)) continue;
      data[origin + j * ld + i] = static_cast<T>(covariance_element<L>(args, ri, cj));
    }
  } else {
    const std::int64_t j = col0 + fast;
    if (j >= col_end) return;
    const std::int32_t cj = __ldg(&args.col_info[j]);
    for (std::int64_t i = row0 + slow0; i < row_end; i += kSlowStep) {
      const std::int32_t ri = __ldg(&args.row_info[i]);
      if (covariance_edge_element(args, ri, cj)) continue;
      data[origin + i * ld + j] = static_cast<T>(covariance_element<L>(args, ri, cj));
    }
  }
}

/// The device structure function for the tests: out[k] = weight G(kq r[k]^2).
static __global__ void vonkarman_probe_kernel(const double* __restrict__ r, std::int64_t count,
                                              double weight, double kq,
                                              const double* __restrict__ table, VonKarmanScalars k,
                                              double* __restrict__ out) {
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; t < count;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[t] = weight * vonkarman_bracket_q<VkLayout::degree_major>(r[t] * r[t] * kq, table, k);
}

}  // namespace halfscope::ao::detail
