// Frobenius norms of the stored tiles of a float32 tile matrix, host or device (internal header):
// what the precision policies see (policy.hpp TileQuery). Owner: the GPU Cholesky work.
#pragma once

#include <vector>

#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/tiles.hpp"

namespace halfscope::linalg::detail {

/// Norms of the stored tiles, indexed i * NT + j (NT = tile rows); zero for tiles not stored.
/// Host storage is read on the CPU in FP64; device storage by a kernel (FP64 sums) and copied back.
std::vector<double> tile_norms(const TileMatrix& a);

/// The Frobenius norm of the whole matrix from tile_norms: a lower layout's off-diagonal tiles
/// stand for themselves and their mirror.
double matrix_norm(const TileMatrix& a, const std::vector<double>& norms);

/// The variant of each off-diagonal tile (i > j) of a lower layout by `policy` from `norms`;
/// diagonal and upper entries are SP. Indexed i * NT + j.
std::vector<GemmVariant> choose_variants(const TileMatrix& a, const std::vector<double>& norms,
                                         const Policy& policy);

}  // namespace halfscope::linalg::detail
