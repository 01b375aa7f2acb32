// Device code of the edge-point path of the GPU covariance generator (covariance_cuda_edges.cu):
// the direct sensor pairs (LGS x NGS in Cmm, truth x LGS in Ctm) whose lenslet arrays are both
// unrotated.
//
// Every structure function of an element is D between two slope end points on a layer: the slope
// of subaperture p along x runs from its left x-edge point (x_p - d/2, y_p) to its right one
// (x_p + d/2, y_p), along y from the bottom y-edge point (x_p, y_p - d/2) to the top one. On layer
// l a point P of sensor a sits at scale_al P + shift_al, and the edge points are p+- = u_p +- s1/2
// (size = pitch x scale), so with du = u_p - u_q (covariance_plan.hpp):
//   p+ - q- = du + (s1 + s2)/2, p- - q+ = du - (s1 + s2)/2, p+ - q+ = du + (s1 - s2)/2,
//   p- - q- = du - (s1 - s2)/2: xx = [D(p+ - q-) + D(p- - q+) - D(p+ - q+) - D(p- - q-)] / 2,
// yy the same with y-edge points, xy (x of p, y of q) with right / left x-edges of p against
// bottom / top y-edges of q: (u_p + s1/2) - u_q, v_p - (v_q - s2/2) = (du + s1/2, dv + s2/2),
// and yx (y of p, x of q) with top / bottom of p against left / right of q: (du + s2/2, dv + s1/2),
// exactly the arguments of vk_cross_term (covariance_terms.cuh). The layer sum is linear, so one
// table per pair and point-set combination, T[P][Q] = sum_l w_l G_l(pos_al(P) - pos_bl(Q)) (layers
// either sensor does not see skipped, as in the direct path), gives every element as 4 gathers:
//   cov = kSlopeUnit2 / (2 pitch_a pitch_b) [T(A+, B-) + T(A-, B+) - T(A+, B+) - T(A-, B-)].
// Neighbouring subapertures of a row share x-edge points (of a column, y-edge points), so a sensor
// of K subapertures and N rows has ~K + N x-edge points: E-ELT ~5,700 per sensor, 4 tables of
// 3.2e7 entries x 60 layers = 7.8e9 structure functions per pair against 3.1e7 elements x 16 x 60
// = 3.0e10 for the direct sum (4x fewer), then the gathers (memory-bound, 64 x 64 element blocks
// reuse a ~70 x 70 patch of each table through L2).
// Measured (H200, 2026-11-21, E-ELT Cmm, 60 layers, f32 lower tiles of 1024): 870 ms for the whole
// call against 1662 ms with the element path; the 20 edge pairs take 846 ms (tables and gathers
// together, ~42 ms a pair), the rest of the matrix 18 ms. 1.56e11 structure functions in ~0.8 s is
// 1.9e11 / s, below the direct path's 4.7e11 / s: every evaluation here reloads the two sensors'
// layer geometry (10 broadcast loads per layer) that the direct path shares among the 4 of a
// term; several entries per thread (same P, Q strided by the warp width) would amortise them.
#pragma once

#include <cstdint>

#include "ao/kernels/covariance_elements.cuh"

namespace halfscope::ao::detail {

/// The tables of one unordered sensor pair (a, b): four planes, in this order: xx (x-edges of a x
/// x-edges of b), yy (y x y), xy (x of a x y of b), yx (y of a x x of b), each row-major with the
/// points of b fastest.
struct DevEdgeTables {
  int a = 0, b = 0;
  std::int64_t nxa = 0, nya = 0, nxb = 0, nyb = 0;  // edge points of each kind per sensor
  const double* xa = nullptr;  // x-edge points of a: x coordinates (pupil, m); then y below
  const double* xa_y = nullptr;
  const double* ya = nullptr;  // y-edge points of a
  const double* ya_y = nullptr;
  const double* xb = nullptr;
  const double* xb_y = nullptr;
  const double* yb = nullptr;
  const double* yb_y = nullptr;
  double* t = nullptr;  // the four planes, contiguous
  double factor = 0;    // kSlopeUnit2 / (2 pitch_a pitch_b)
  [[nodiscard]] __host__ __device__ std::int64_t plane_size(int k) const {
    return k == 0 ? nxa * nxb : k == 1 ? nya * nyb : k == 2 ? nxa * nyb : nya * nxb;
  }
  [[nodiscard]] __host__ __device__ std::int64_t total() const {
    return plane_size(0) + plane_size(1) + plane_size(2) + plane_size(3);
  }
};

/// One thread per table entry: the layer sum of w_l G_l over the layers both sensors see.
/// (Internal linkage, like the other non-template kernels of these headers.)
static __global__ void __launch_bounds__(kCovTableThreads)
    covariance_edge_table_kernel(CovKernelArgs args, DevEdgeTables e) {
  const std::int64_t total = e.total();
  const PlanSensorLayer* ga = args.geom + static_cast<std::int64_t>(e.a) * args.nlayers;
  const PlanSensorLayer* gb = args.geom + static_cast<std::int64_t>(e.b) * args.nlayers;
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t loc = t;
    int plane = 0;
    while (loc >= e.plane_size(plane)) loc -= e.plane_size(plane++);
    const bool a_x = plane == 0 || plane == 2;  // a's points are x-edges
    const bool b_x = plane == 0 || plane == 3;
    const std::int64_t nq = b_x ? e.nxb : e.nyb;
    const std::int64_t P = loc / nq, Q = loc % nq;
    const double pax = a_x ? __ldg(&e.xa[P]) : __ldg(&e.ya[P]);
    const double pay = a_x ? __ldg(&e.xa_y[P]) : __ldg(&e.ya_y[P]);
    const double pbx = b_x ? __ldg(&e.xb[Q]) : __ldg(&e.yb[Q]);
    const double pby = b_x ? __ldg(&e.xb_y[Q]) : __ldg(&e.yb_y[Q]);
    double acc = 0.0;
    for (int l = 0; l < args.nlayers; ++l) {
      if (__ldg(&ga[l].size) == 0.0 || __ldg(&gb[l].size) == 0.0) continue;
      const double du = (__ldg(&ga[l].scale) * pax + __ldg(&ga[l].shift_x)) -
                        (__ldg(&gb[l].scale) * pbx + __ldg(&gb[l].shift_x));
      const double dv = (__ldg(&ga[l].scale) * pay + __ldg(&ga[l].shift_y)) -
                        (__ldg(&gb[l].scale) * pby + __ldg(&gb[l].shift_y));
      acc = fma(
          __ldg(&args.layers[l].weight),
          vk_g<VkLayout::degree_major>(du, dv, __ldg(&args.layers[l].kq), args.vk_deg, args.vks),
          acc);
    }
    e.t[t] = acc;
  }
}

/// Storage offset of element (i, j) of the target, or -1 when it is not generated (upper tiles of
/// a lower layout, tiles or rows left out of a selection). Matches the addressing of
/// covariance_element_kernel.
__device__ __forceinline__ std::int64_t covariance_offset(const CovOutput& out, std::int64_t cols,
                                                          std::int64_t rows, std::int64_t i,
                                                          std::int64_t j) {
  if (!out.tiled)
    return i < out.row_begin || i >= out.row_end ? -1 : (i - out.row_begin) * cols + j;
  const std::int64_t ti = i / out.nb, tj = j / out.nb;
  const std::int64_t h = min(out.nb, rows - ti * out.nb);
  const std::int64_t w = min(out.nb, cols - tj * out.nb);
  const std::int64_t start = covariance_tile_start(out, ti, tj, w);
  return start < 0 ? -1 : start + (i - ti * out.nb) + (j - tj * out.nb) * h;
}

/// The ordered block (rows of sensor r, columns of sensor c) of an edge pair: its rectangle in the
/// matrix and whether r is the tables' b (then element (i, j) reads the tables at (j, i): the
/// matrix is symmetric where both orders occur, i.e. in Cmm).
struct DevEdgeBlock {
  std::int64_t row0 = 0, rows = 0, col0 = 0, cols = 0;
  bool transposed = false;
};

/// One CUDA block per kCovBlock x kCovBlock square of the rectangle, the fast thread index along
/// the storage's contiguous direction (rows inside a column-major tile, columns of a dense
/// row-major matrix), kCovThreads / kCovBlock lines at a time along the other.
template <class T, bool Tiled>
__global__ void __launch_bounds__(kCovThreads)
    covariance_edge_gather_kernel(CovKernelArgs args, CovOutput out, DevEdgeTables e,
                                  DevEdgeBlock blk, const int4* __restrict__ edges) {
  const std::int64_t nbr = (blk.rows + kCovBlock - 1) / kCovBlock;
  const std::int64_t bi = blockIdx.x % nbr, bj = blockIdx.x / nbr;
  const std::int64_t i0 = blk.row0 + bi * kCovBlock, j0 = blk.col0 + bj * kCovBlock;
  const std::int64_t i1 = min(blk.row0 + blk.rows, i0 + kCovBlock);
  const std::int64_t j1 = min(blk.col0 + blk.cols, j0 + kCovBlock);
  if constexpr (Tiled) {
    if (out.lower && (i1 - 1) / out.nb < j0 / out.nb) return;  // the whole square is unstored
  }
  constexpr int kSlow = kCovThreads / kCovBlock;
  const int fast = static_cast<int>(threadIdx.x) % kCovBlock;
  const int slow = static_cast<int>(threadIdx.x) / kCovBlock;
  const std::int64_t planes[4] = {0, e.plane_size(0), e.plane_size(0) + e.plane_size(1),
                                  e.plane_size(0) + e.plane_size(1) + e.plane_size(2)};
  T* const data = static_cast<T*>(out.data);
  for (int s = slow; s < kCovBlock; s += kSlow) {
    const std::int64_t i = Tiled ? i0 + fast : i0 + s;
    const std::int64_t j = Tiled ? j0 + s : j0 + fast;
    if (i >= i1 || j >= j1) continue;
    const std::int64_t at = covariance_offset(out, args.cols, args.rows, i, j);
    if (at < 0) continue;
    std::int32_t ri = __ldg(&args.row_info[i]), cj = __ldg(&args.col_info[j]);
    if (blk.transposed) {
      const std::int32_t k = ri;
      ri = cj;
      cj = k;
    }
    const int ax_p = ri & 1, ax_q = cj & 1;
    const int4 ep = __ldg(&edges[ri >> 8]), eq = __ldg(&edges[cj >> 8]);
    // (left, right, bottom, top) per subaperture: A+- of p and B+- of q on their axes.
    const std::int64_t ap = ax_p == 0 ? ep.y : ep.w, am = ax_p == 0 ? ep.x : ep.z;
    const std::int64_t bp = ax_q == 0 ? eq.y : eq.w, bm = ax_q == 0 ? eq.x : eq.z;
    const int plane = ax_p == ax_q ? ax_p : (ax_p == 0 ? 2 : 3);
    const std::int64_t nq = ax_q == 0 ? e.nxb : e.nyb;
    const double* t = e.t + planes[plane];
    const double v = (__ldg(&t[ap * nq + bm]) + __ldg(&t[am * nq + bp])) -
                     (__ldg(&t[ap * nq + bp]) + __ldg(&t[am * nq + bm]));
    data[at] = static_cast<T>(e.factor * v);
  }
}

}  // namespace halfscope::ao::detail
