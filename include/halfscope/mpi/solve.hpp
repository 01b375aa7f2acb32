// Triangular solves with a distributed tile Cholesky factor (issue 9): X A = B, A = L L^T with L
// spread 2D block-cyclic (halfscope/mpi/tiles.hpp, the factor of mpi::cholesky), B's rows (the
// independent right-hand sides, e.g. the rows of Ctm) split over the ranks.
//
// Scheme: every rank solves its own rows; the factor comes to it one tile column (panel) at a
// time, each tile broadcast by its owner (the P owners of panel k each broadcast their tiles of
// it in one message), so a rank never holds more than one panel of L (n x nb floats) besides its
// own tiles. The forward substitution walks the panels k = 0 .. NT-1, the backward one NT-1 .. 0
// (left-looking: block k takes the updates by the tiles (i, k), i > k, of panel k, i from NT-1
// down, then the transposed diagonal solve), which applies to every block the same GEMMs in the
// same order as linalg::solve_right's right-looking sweep: the same kernels on the same operands,
// so each row equals the one-process row bit for bit (measured: OpenBLAS gives a column the same
// result whatever the call's width; its own thread count changes the last bits of the one-process
// reconstructor too, so compare at the same BLAS thread count).
//
// Data moved: each rank receives every tile of L it does not own twice (once per substitution;
// the last panel of the forward sweep is reused): about 4 n (n + nb) (1 - 1 / (P Q)) bytes
// whatever its share of rows (preset mid, n = 10,240, nb = 512: 220 MB per rank on 2 ranks,
// 330 MB on 4; n = 10^5: ~40 GB). The scheme pays off with many right-hand sides per rank (Ctm's
// m rows), and keeps the rows where they are generated and where R is written.
//
// GPU ranks (options.devices = {d}): each rank with rows assembles a whole copy of L on device d
// from the same broadcasts (one sweep: every tile it does not own received once, about
// 2 n (n + nb) (1 - 1 / (P Q)) bytes), the copy of each panel overlapping the next broadcast, then
// solves its rows there with the one-process GPU substitutions (linalg::solve_right on a device
// factor) and the variant table of the CPU ranks. Device memory per rank: L (n (n + nb) / 2
// floats, 20 GB at n = 10^5) plus its rows and the solve's scratch.
#pragma once

#include <cstdint>

#include "halfscope/core/array.hpp"
#include "halfscope/linalg/solve.hpp"
#include "halfscope/mpi/tiles.hpp"

namespace halfscope::mpi {

/// What a distributed solve did on this rank.
struct SolveTraffic {
  std::int64_t bytes_sent = 0;      // panel bytes broadcast as root (counted once per receiver)
  std::int64_t bytes_received = 0;  // panel bytes received from the owners
  std::int64_t broadcasts = 0;      // broadcasts this rank took part in
};

/// X A = B in place for this rank's rows: `l` a factor from mpi::cholesky (lower float32 tiles),
/// `b` this rank's r x n C-contiguous float32 rows (r >= 0; an empty Array for none) in host
/// memory, or on a GPU rank in its device's memory (options.devices' device, current on the
/// calling thread; solved there without a copy),
/// overwritten with B A^-1. Collective over l.comm(): every rank calls it, with or without rows.
/// The variant of each off-diagonal GEMM is options.policy's choice from the Frobenius norms of
/// L's tiles and of L (one sum over the ranks), as in linalg::solve_right; diagonal tiles by FP32
/// TRSM. options.devices: empty for a CPU rank, or one CUDA device of this host for a GPU rank
/// (above; several ranks may share a device). Errors reach every rank (agree): InvalidInput for
/// another layout, dtype, shape, a non-finite entry of b or more than one device, NumericalError
/// for an FP16 overflow (naming the tile of L) or a non-finite solution, CudaError when the device
/// lacks the memory for L, Unsupported for a GPU rank in a build without CUDA. `traffic`, when
/// given, receives this rank's figures.
linalg::SolveReport solve_right(const DistTileMatrix& l, Array& b,
                                const linalg::SolveOptions& options = {},
                                SolveTraffic* traffic = nullptr);

}  // namespace halfscope::mpi
