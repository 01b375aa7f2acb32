// Device re-layout between dense C-order matrices and tile storage (tiles_cuda.hpp). Each block
// moves a 32 x 32 piece of one tile through shared memory, so both the dense rows (along j) and
// the tile's columns (along i) are read and written in coalesced runs; a list of the stored
// tiles (offset, tile row and column, height, width) tells each block where its tile lies.
#include "linalg/tiles_cuda.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"
#include "linalg/tile_cuda.hpp"  // after_legacy_stream

namespace halfscope::linalg::detail {

namespace {

constexpr int kPiece = 32;  // a piece is kPiece x kPiece elements (kMaxDeviceRelayoutTile / 255)
constexpr int kRows = 8;    // threads per block: kPiece x kRows, each moving kPiece / kRows

struct TileDesc {
  long long offset;  // first element of the tile in the storage
  long long i0, j0;  // matrix row and column of its first element
  int h, w;          // its height (leading dimension) and width
};

// This block's piece (blockIdx.y) of tile `d`, with `pieces_per_col` pieces per tile column:
// its first row and column; false for a piece a smaller last tile does not have.
__device__ inline bool piece_origin(const TileDesc& d, int pieces_per_col, int& r0, int& c0) {
  const int p = static_cast<int>(blockIdx.y);
  r0 = (p % pieces_per_col) * kPiece;
  c0 = (p / pieces_per_col) * kPiece;
  return r0 < d.h && c0 < d.w;
}

template <class Src, class Dst>
__global__ void __launch_bounds__(kPiece* kRows)
    dense_to_tiles_kernel(const Src* __restrict__ dense, long long cols, bool lower,
                          const TileDesc* __restrict__ tiles, int pieces_per_col,
                          Dst* __restrict__ out) {
  __shared__ Dst s[kPiece][kPiece + 1];
  const TileDesc d = tiles[blockIdx.x];
  int r0 = 0, c0 = 0;
  if (!piece_origin(d, pieces_per_col, r0, c0)) return;
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  // Read along the dense rows: s[r][c] = A(i0 + r, j0 + c), the lower triangle only.
  for (int k = ty; k < kPiece; k += kRows) {
    const int r = r0 + k, c = c0 + tx;
    if (r < d.h && c < d.w) {
      const long long i = d.i0 + r, j = d.j0 + c;
      const Src v = lower && j > i ? dense[j * cols + i] : dense[i * cols + j];
      s[k][tx] = static_cast<Dst>(v);
    }
  }
  __syncthreads();
  // Write along the tile's columns (column-major, leading dimension h).
  for (int k = ty; k < kPiece; k += kRows) {
    const int c = c0 + k, r = r0 + tx;
    if (r < d.h && c < d.w) out[d.offset + static_cast<long long>(c) * d.h + r] = s[tx][k];
  }
}

template <class T>
__global__ void __launch_bounds__(kPiece* kRows)
    tiles_to_dense_kernel(const T* __restrict__ in, const TileDesc* __restrict__ tiles,
                          int pieces_per_col, bool lower, bool mirror, long long cols,
                          T* __restrict__ dense) {
  __shared__ T s[kPiece][kPiece + 1];
  const TileDesc d = tiles[blockIdx.x];
  int r0 = 0, c0 = 0;
  if (!piece_origin(d, pieces_per_col, r0, c0)) return;
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  // Read along the tile's columns; the mirror A(j, i) = A(i, j) is a dense row along i, so it is
  // written from here, coalesced too.
  for (int k = ty; k < kPiece; k += kRows) {
    const int c = c0 + k, r = r0 + tx;
    if (r < d.h && c < d.w) {
      const T v = in[d.offset + static_cast<long long>(c) * d.h + r];
      s[tx][k] = v;
      const long long i = d.i0 + r, j = d.j0 + c;
      if (mirror && j < i) dense[j * cols + i] = v;
    }
  }
  __syncthreads();
  // Write along the dense rows; in a lower layout only the lower triangle (the strict upper
  // half of a diagonal tile is not part of the matrix stored).
  for (int k = ty; k < kPiece; k += kRows) {
    const int r = r0 + k, c = c0 + tx;
    if (r < d.h && c < d.w) {
      const long long i = d.i0 + r, j = d.j0 + c;
      if (!lower || j <= i) dense[i * cols + j] = s[k][tx];
    }
  }
}

// The stored tiles of a layout, on the device (freed in stream order).
struct TileList {
  cuda::StreamScratch list;
  std::int64_t count = 0;
  int pieces_per_col = 0, pieces = 0;
  TileList(const TileLayout& l, cudaStream_t stream)
      : list(
            std::max<std::int64_t>(l.tile_count(), 1) * static_cast<std::int64_t>(sizeof(TileDesc)),
            stream) {
    std::vector<TileDesc> host;
    host.reserve(static_cast<std::size_t>(l.tile_count()));
    const std::int64_t nb = l.tile_size();
    for (std::int64_t tj = 0; tj < l.tile_cols(); ++tj)
      for (std::int64_t ti = l.fill() == TileFill::lower ? tj : 0; ti < l.tile_rows(); ++ti)
        host.push_back({l.tile_offset(ti, tj), ti * nb, tj * nb,
                        static_cast<int>(l.tile_height(ti)), static_cast<int>(l.tile_width(tj))});
    count = std::ssize(host);
    pieces_per_col = static_cast<int>((nb + kPiece - 1) / kPiece);
    pieces = pieces_per_col * pieces_per_col;
    if (nb > kMaxDeviceRelayoutTile)  // the pieces of one tile index the grid's y (< 2^16)
      throw Unsupported("tiles on the device: tiles of " + std::to_string(nb) +
                        " are wider than the " + std::to_string(kMaxDeviceRelayoutTile) +
                        " the device re-layout handles");
    HS_CUDA_CHECK(cudaMemcpyAsync(list.get(), host.data(), host.size() * sizeof(TileDesc),
                                  cudaMemcpyHostToDevice, stream));
    // `host` goes out of scope: the pageable copy must have been taken before the return.
    HS_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
};

template <class Src, class Dst>
void launch_to_tiles(const Array& dense, TileMatrix& out, const TileList& t, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(t.count), static_cast<unsigned>(t.pieces));
  dense_to_tiles_kernel<Src, Dst><<<grid, dim3(kPiece, kRows), 0, s>>>(
      dense.data_as<Src>(), out.layout.cols(), out.layout.fill() == TileFill::lower,
      t.list.as<TileDesc>(), t.pieces_per_col, out.storage.data_as<Dst>());
  HS_CHECK_LAUNCH();
}

}  // namespace

void dense_to_tiles_cuda(const Array& dense, TileMatrix& out, cudaStream_t stream) {
  after_legacy_stream(stream);  // the matrix may have been written on the legacy stream
  const TileList t(out.layout, stream);
  if (t.count == 0) return;
  const bool src64 = dense.dtype() == DType::f64, dst64 = out.dtype() == DType::f64;
  if (src64 && dst64)
    launch_to_tiles<double, double>(dense, out, t, stream);
  else if (src64)
    launch_to_tiles<double, float>(dense, out, t, stream);
  else if (dst64)
    launch_to_tiles<float, double>(dense, out, t, stream);
  else
    launch_to_tiles<float, float>(dense, out, t, stream);
  HS_CUDA_CHECK(cudaStreamSynchronize(stream));  // the tile list is freed on return
}

void tiles_to_dense_cuda(const TileMatrix& tiles, Array& dense, UpperTriangle upper,
                         cudaStream_t stream) {
  after_legacy_stream(stream);  // the tiles may have been written on the legacy stream
  const TileLayout& l = tiles.layout;
  const bool lower = l.fill() == TileFill::lower;
  // A zero upper triangle: clear everything, then write the lower triangle.
  if (lower && upper == UpperTriangle::zero)
    HS_CUDA_CHECK(
        cudaMemsetAsync(dense.data(), 0, static_cast<std::size_t>(dense.nbytes()), stream));
  const TileList t(l, stream);
  if (t.count == 0) return;
  const dim3 grid(static_cast<unsigned>(t.count), static_cast<unsigned>(t.pieces));
  const bool mirror = lower && upper == UpperTriangle::mirror;
  if (tiles.dtype() == DType::f64)
    tiles_to_dense_kernel<double><<<grid, dim3(kPiece, kRows), 0, stream>>>(
        tiles.storage.data_as<double>(), t.list.as<TileDesc>(), t.pieces_per_col, lower, mirror,
        l.cols(), dense.data_as<double>());
  else
    tiles_to_dense_kernel<float><<<grid, dim3(kPiece, kRows), 0, stream>>>(
        tiles.storage.data_as<float>(), t.list.as<TileDesc>(), t.pieces_per_col, lower, mirror,
        l.cols(), dense.data_as<float>());
  HS_CHECK_LAUNCH();
  HS_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace halfscope::linalg::detail
