// Checks and dispatch shared by the solves (solve.cpp) and the refinement (refine.cpp)
// (internal header).
#pragma once

#include <cstdint>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/tiles.hpp"

namespace halfscope::linalg::detail {

/// InvalidInput "<function>: <name>: expected ..." unless `l` is a non-empty lower float32 tile
/// matrix.
void check_factor(const TileMatrix& l, const char* function, const char* name);

/// InvalidInput naming the function, the argument, the matrix size n and b's dtype / shape /
/// memory unless b is a C-contiguous float32 r x n array (or, with allow_vector, n or n x r) in
/// the memory of `l` (any memory with `any_memory`: a host factor solved on a device).
void check_rhs(const TileMatrix& l, const Array& b, const char* function, const char* name,
               bool allow_vector, bool any_memory = false);

/// Linear index of the first non-finite entry of a float32 array (host or device), or -1.
std::int64_t first_non_finite(const Array& x);

/// The solve policy's variant per tile of the factor (indexed i * NT + j), from L's norms.
std::vector<GemmVariant> factor_variants(const TileMatrix& l, const Policy& policy);

/// X A = B in place for the checked r x n rows `b` (host or device) with these variants.
void solve_rows(const TileMatrix& l, Array& b, const std::vector<GemmVariant>& variants);

/// out = in^T for C-contiguous float32 2-D arrays of the same memory (out already shaped).
void transpose(const Array& in, Array& out);

}  // namespace halfscope::linalg::detail
