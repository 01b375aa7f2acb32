// Tile norms and the policy's choice per tile (src/linalg/tile_norms.hpp), for host and device
// tile matrices.
#include "linalg/tile_norms.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_WITH_CUDA
#include "halfscope/core/cuda.hpp"
#include "linalg/tile_cuda.hpp"
#endif

namespace halfscope::linalg::detail {
namespace {

// Frobenius norm of stored host tile (i, j), FP64 sums.
double host_tile_norm(const TileMatrix& a, std::int64_t i, std::int64_t j) {
  return frobenius_norm(a.storage.data_as<float>() + a.layout.tile_offset(i, j),
                        a.layout.tile_height(i) * a.layout.tile_width(j));
}

// Norms of the listed device tiles (i, j), in order: one kernel and one readback.
std::vector<double> device_norms(const TileMatrix& a,
                                 const std::vector<std::pair<std::int64_t, std::int64_t>>& tiles) {
  std::vector<double> packed(tiles.size());
#if HALFSCOPE_WITH_CUDA
  std::vector<std::int64_t> offsets, elems;
  for (const auto& [i, j] : tiles) {
    offsets.push_back(a.layout.tile_offset(i, j));
    elems.push_back(a.layout.tile_height(i) * a.layout.tile_width(j));
  }
  cuda::Stream stream;
  tile_norms_cuda(a.storage.data_as<float>(), offsets.data(), elems.data(),
                  static_cast<std::int64_t>(offsets.size()), packed.data(), stream.get());
#else
  (void)a;
  throw Unsupported("tile_norms: device memory in a build without CUDA");
#endif
  return packed;
}

}  // namespace

double frobenius_norm(const float* values, std::int64_t count) {
  // Eight independent FP64 partial sums: one running sum is a chain of dependent additions (a
  // core reads 20 GB, the E-ELT matrix, in about 6 s); eight vectorize and run at memory speed.
  // The rounding differs from one running sum's in the last bits only.
  double part[8] = {};
  std::int64_t x = 0;
  for (; x + 8 <= count; x += 8)
    for (int l = 0; l < 8; ++l) part[l] += static_cast<double>(values[x + l]) * values[x + l];
  for (; x < count; ++x) part[0] += static_cast<double>(values[x]) * values[x];
  return std::sqrt(((part[0] + part[1]) + (part[2] + part[3])) +
                   ((part[4] + part[5]) + (part[6] + part[7])));
}

std::vector<double> tile_norms(const TileMatrix& a, std::int64_t first_column) {
  if (a.dtype() != DType::f32)
    throw InvalidInput("tile_norms: expected float32 tiles, found " +
                       std::string(dtype_name(a.dtype())));
  const TileLayout& layout = a.layout;
  const std::int64_t nt = layout.tile_rows(), ntc = layout.tile_cols();
  std::vector<double> norms(static_cast<std::size_t>(nt * ntc), 0.0);
  if (a.storage.on_device()) {
    std::vector<std::pair<std::int64_t, std::int64_t>> tiles;
    for (std::int64_t j = first_column; j < ntc; ++j)
      for (std::int64_t i = 0; i < nt; ++i)
        if (layout.stored(i, j)) tiles.emplace_back(i, j);
    const std::vector<double> packed = device_norms(a, tiles);
    for (std::size_t t = 0; t < packed.size(); ++t)
      norms[static_cast<std::size_t>(tiles[t].first * ntc + tiles[t].second)] = packed[t];
    return norms;
  }
  // Over tiles rather than tile columns: the first column of a lower layout holds NT tiles, the
  // last one.
#pragma omp parallel for schedule(dynamic, 4)
  for (std::int64_t t = 0; t < nt * ntc; ++t) {
    const std::int64_t i = t % nt, j = t / nt;
    if (j >= first_column && layout.stored(i, j))
      norms[static_cast<std::size_t>(i * ntc + j)] = host_tile_norm(a, i, j);
  }
  return norms;
}

void require_finite(const TileMatrix& a, const std::vector<double>& norms,
                    const std::string& what) {
  const TileLayout& layout = a.layout;
  const std::int64_t nt = layout.tile_rows(), ntc = layout.tile_cols();
  for (std::int64_t j = 0; j < ntc; ++j)
    for (std::int64_t i = 0; i < nt; ++i) {
      if (!layout.stored(i, j) || std::isfinite(norms[static_cast<std::size_t>(i * ntc + j)]))
        continue;
      // The error path only: bring this one tile to the host to name the entry.
      const std::int64_t h = layout.tile_height(i), w = layout.tile_width(j);
      std::vector<float> tile(static_cast<std::size_t>(h * w));
      copy_bytes(tile.data(), Memory::host, a.storage.data_as<float>() + layout.tile_offset(i, j),
                 a.storage.memory(), h * w * static_cast<std::int64_t>(sizeof(float)));
      for (std::int64_t e = 0; e < h * w; ++e) {
        const float x = tile[static_cast<std::size_t>(e)];
        if (std::isfinite(x)) continue;
        const std::int64_t r = e % h, c = e / h;  // tiles are column-major, ld = height
        throw InvalidInput(what + " must hold finite values; tile (" + std::to_string(i) + ", " +
                           std::to_string(j) + ") has " + std::to_string(x) + " at row " +
                           std::to_string(i * layout.tile_size() + r) + ", column " +
                           std::to_string(j * layout.tile_size() + c) + " (0-based)");
      }
      throw InvalidInput(what + " must hold finite values; tile (" + std::to_string(i) + ", " +
                         std::to_string(j) + ") has a non-finite Frobenius norm");
    }
}

std::int64_t first_non_finite_diagonal(const TileMatrix& a) {
  const std::int64_t nt = a.layout.tile_rows();
  if (a.storage.on_device()) {
    std::vector<std::pair<std::int64_t, std::int64_t>> tiles;
    for (std::int64_t k = 0; k < nt; ++k) tiles.emplace_back(k, k);
    const std::vector<double> norms = device_norms(a, tiles);
    for (std::int64_t k = 0; k < nt; ++k)
      if (!std::isfinite(norms[static_cast<std::size_t>(k)])) return k;
    return -1;
  }
  for (std::int64_t k = 0; k < nt; ++k)
    if (!std::isfinite(host_tile_norm(a, k, k))) return k;
  return -1;
}

double matrix_norm(const TileMatrix& a, const std::vector<double>& norms) {
  return matrix_norm(a.layout, norms);
}

double matrix_norm(const TileLayout& layout, const std::vector<double>& norms) {
  const std::int64_t nt = layout.tile_rows(), ntc = layout.tile_cols();
  const bool lower = layout.fill() == TileFill::lower;
  double total = 0.0;
  // Column by column, top to bottom: the order the CPU factorization always summed in.
  for (std::int64_t j = 0; j < ntc; ++j)
    for (std::int64_t i = 0; i < nt; ++i) {
      if (!layout.stored(i, j)) continue;
      const double n = norms[static_cast<std::size_t>(i * ntc + j)];
      total += (lower && i != j ? 2.0 : 1.0) * n * n;
    }
  return std::sqrt(total);
}

std::vector<GemmVariant> choose_variants(const TileMatrix& a, const std::vector<double>& norms,
                                         const Policy& policy) {
  return choose_variants(a.layout, norms, policy);
}

std::vector<GemmVariant> choose_variants(const TileLayout& layout, const std::vector<double>& norms,
                                         const Policy& policy) {
  const std::int64_t nt = layout.tile_rows();
  const double total = matrix_norm(layout, norms);
  std::vector<GemmVariant> variants(static_cast<std::size_t>(nt * nt), GemmVariant::SP);
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j + 1; i < nt; ++i)
      variants[static_cast<std::size_t>(i * nt + j)] =
          policy(TileQuery{i, j, norms[static_cast<std::size_t>(i * nt + j)], total, nt});
  return variants;
}

}  // namespace halfscope::linalg::detail
