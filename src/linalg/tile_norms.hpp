// Frobenius norms of the stored tiles of a float32 tile matrix, host or device (internal header):
// what the precision policies see (policy.hpp TileQuery). Owner: the GPU Cholesky work.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/tiles.hpp"

namespace halfscope::linalg::detail {

/// Norms of the stored tiles, indexed i * NT + j (NT = tile rows); zero for tiles not stored and
/// for the tile columns before `first_column` (left unread). Host storage is read on the CPU in
/// FP64; device storage by a kernel (FP64 sums) and copied back.
std::vector<double> tile_norms(const TileMatrix& a, std::int64_t first_column = 0);

/// Frobenius norm of `count` contiguous FP32 values (one host tile), summed in FP64 in storage
/// order: the per-tile norm of tile_norms, shared with the MPI Cholesky so its norms match.
double frobenius_norm(const float* values, std::int64_t count);

/// Throws InvalidInput when a stored tile's norm (from tile_norms) is not finite, naming the tile
/// and its first non-finite entry (global row and column). A non-finite FP64 sum of FP32 squares
/// means a NaN/Inf entry: finite FP32 squares (<= 1.2e77) cannot overflow FP64 in a tile's sum.
/// `what` starts the message ("cholesky_tiles: the matrix").
void require_finite(const TileMatrix& a, const std::vector<double>& norms, const std::string& what);

/// The first diagonal tile k whose stored entries are not all finite, or -1: one FP64 norm per
/// diagonal tile (a kernel and one readback on the device). Used on a finished factor: any
/// non-finite entry of L(i, k) reaches the diagonal tile (i, i) through its SYRK.
std::int64_t first_non_finite_diagonal(const TileMatrix& a);

/// The Frobenius norm of the whole matrix from tile_norms: a lower layout's off-diagonal tiles
/// stand for themselves and their mirror.
double matrix_norm(const TileMatrix& a, const std::vector<double>& norms);
double matrix_norm(const TileLayout& layout, const std::vector<double>& norms);

/// The variant of each off-diagonal tile (i > j) of a lower layout by `policy` from `norms`;
/// diagonal and upper entries are SP. Indexed i * NT + j.
std::vector<GemmVariant> choose_variants(const TileMatrix& a, const std::vector<double>& norms,
                                         const Policy& policy);
/// The same from the layout alone (the MPI Cholesky, whose tiles are spread over ranks).
std::vector<GemmVariant> choose_variants(const TileLayout& layout, const std::vector<double>& norms,
                                         const Policy& policy);

}  // namespace halfscope::linalg::detail
