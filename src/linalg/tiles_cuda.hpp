// Device re-layout between a dense C-order matrix and tile storage (internal header, CUDA builds
// only; include/halfscope/linalg/tiles.hpp describes both layouts). TileMatrix::from_dense and
// to_dense use it when both sides are in device memory, so a CuPy or PyTorch matrix is tiled and
// its factor made dense again where they are, not through host memory (E-ELT size: 40 GB each
// way, a minute through pageable host memory).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "halfscope/core/array.hpp"
#include "halfscope/linalg/tiles.hpp"

namespace halfscope::linalg::detail {

/// The widest tile the device re-layout handles (wider ones go through the host).
inline constexpr std::int64_t kMaxDeviceRelayoutTile = 8160;

/// Tiles the device dense matrix `dense` (float32 or float64, rows x cols, C order) into
/// `out.storage` (device, float32 or float64) on `stream`; a lower layout reads the lower triangle
/// only (the strict upper half of each diagonal tile mirrored from it).
void dense_to_tiles_cuda(const Array& dense, TileMatrix& out, cudaStream_t stream);

/// The device dense copy of device tiles (same dtype) into `dense` (rows x cols, C order, device)
/// on `stream`. A lower layout is mirrored into the upper triangle (UpperTriangle::mirror) or has
/// a zero strict upper triangle (UpperTriangle::zero).
void tiles_to_dense_cuda(const TileMatrix& tiles, Array& dense, UpperTriangle upper,
                         cudaStream_t stream);

}  // namespace halfscope::linalg::detail
