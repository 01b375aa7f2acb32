// Triangular solves with a distributed tile factor (include/halfscope/mpi/solve.hpp): the panel
// broadcasts and, per panel, the kernels of src/linalg/solve_cpu.cpp on this rank's rows; or, on
// a GPU rank, every panel into the device's copy of L (src/linalg/rank_solve.hpp) and one GPU
// solve of the rows.
//
// Rows as in solve_cpu.cpp: the r x n row-major right-hand sides are the column-major n x r B^T,
// so block k (rows [k nb, k nb + h_k) of every right-hand side) is a BLAS operand with leading
// dimension n. OpenMP threads take slices of right-hand sides of the width solve_right_cpu uses.
#include "halfscope/mpi/solve.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "linalg/gemm_variants.hpp"
#include "linalg/rank_solve.hpp"
#include "linalg/solve_cpu.hpp"
#include "linalg/solve_internal.hpp"
#include "mpi/reconstructor_threads.hpp"

namespace halfscope::mpi {
namespace {

using linalg::GemmVariant;
using linalg::detail::Op;

using linalg::detail::trsm_left_lower;  // solve_cpu.cpp's, so diagonal solves match it

// The solve policy's variants from the tile norms of L: each owner computes its tiles' norms as
// factor_norms_cpu does, one sum over the ranks collects them (the other ranks add zeros, which
// is exact), and ||L||_F is summed in factor_norms_cpu's order, so the table equals the
// one-process table.
std::vector<GemmVariant> variants_of(const DistTileMatrix& l, const linalg::Policy& policy) {
  const linalg::TileLayout& layout = l.layout();
  const std::int64_t nt = layout.tile_rows();
  std::vector<double> norms(static_cast<std::size_t>(nt * nt + 1), 0.0);
  if (!policy.reads_norms()) return linalg::detail::solve_variants(nt, norms, policy);
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j; i < nt; ++i)
      if (l.owns(i, j))
        norms[static_cast<std::size_t>(i * nt + j)] =
            linalg::detail::factor_tile_norm(layout, i, j, l.tile(i, j));
  l.comm().sum(norms);
  linalg::detail::set_factor_norm(norms, nt);
  return linalg::detail::solve_variants(nt, norms, policy);
}

// One tile column of L on every rank: tiles (k .. NT-1, k), grouped by the process row that owns
// them (tile i on grid row i mod P, in the grid column k mod Q), each group one broadcast from its
// owner. tile(i) points at tile (i, k) in the buffer. With two buffers, successive columns
// alternate between them (the previous column stays readable while the next one arrives).
class Panel {
 public:
  Panel(const DistTileMatrix& l, SolveTraffic& traffic, int buffers = 1)
      : l_(l), traffic_(traffic), buffers_(static_cast<std::size_t>(buffers)) {
    const linalg::TileLayout& layout = l.layout();
    for (std::vector<float>& b : buffers_)
      b.resize(static_cast<std::size_t>(layout.rows() * layout.tile_size()));
    offsets_.resize(static_cast<std::size_t>(layout.tile_rows()));
  }

  void load(std::int64_t k) {
    if (k == column_) return;
    if (column_ >= 0) current_ = (current_ + 1) % buffers_.size();
    const linalg::TileLayout& layout = l_.layout();
    const ProcessGrid& grid = l_.grid();
    const Comm& comm = l_.comm();
    const std::int64_t nt = layout.tile_rows(), w = layout.tile_width(k);
    std::int64_t at = 0;
    for (int p = 0; p < grid.rows; ++p) {
      const std::int64_t first = at;
      for (std::int64_t i = k; i < nt; ++i)
        if (i % grid.rows == p) {
          offsets_[static_cast<std::size_t>(i)] = at;
          at += layout.tile_height(i) * w;
        }
      const std::int64_t count = at - first;
      if (count == 0) continue;  // every rank knows: no broadcast
      const int root = grid.owner(p, k);
      float* buffer = buffers_[current_].data();
      float* group = buffer + first;
      if (root == comm.rank()) {
        // A panel of the E-ELT is up to 400 MB: copied on the rank's threads.
#pragma omp parallel for schedule(static)
        for (std::int64_t i = k; i < nt; ++i)
          if (i % grid.rows == p)
            std::copy_n(l_.tile(i, k), layout.tile_height(i) * w,
                        buffer + offsets_[static_cast<std::size_t>(i)]);
      }
      const auto bytes = static_cast<std::int64_t>(count * sizeof(float));
      comm.broadcast_bytes(group, bytes, root);
      ++traffic_.broadcasts;
      if (root == comm.rank())
        traffic_.bytes_sent += bytes * (comm.size() - 1);
      else
        traffic_.bytes_received += bytes;
    }
    column_ = k;
  }

  [[nodiscard]] const float* tile(std::int64_t i) const {
    return buffers_[current_].data() + offsets_[static_cast<std::size_t>(i)];
  }

 private:
  const DistTileMatrix& l_;
  SolveTraffic& traffic_;
  std::vector<std::vector<float>> buffers_;
  std::size_t current_ = 0;
  std::vector<std::int64_t> offsets_;
  std::int64_t column_ = -1;
};

// This rank's right-hand sides: cols columns of B^T (ld n) per slice.
struct Rows {
  float* b = nullptr;
  std::int64_t r = 0, n = 0, width = 1;
};

// Runs `step(slice pointer, slice width)` on every slice of the rows, OpenMP over slices; the
// first exception is kept in `error` (later panels are then skipped, the broadcasts are not).
template <class Step>
void for_slices(const Rows& rows, std::exception_ptr& error, const Step& step) {
  if (error || rows.r == 0) return;
  linalg::detail::for_rhs_slices(rows.b, rows.r, rows.n, rows.width, error, step);
}

std::int64_t first_non_finite(const Array& b) {
  return b.empty() ? -1 : linalg::detail::first_non_finite(b);  // host or device
}

std::string position(std::int64_t index, std::int64_t n) {
  return "row " + std::to_string(index / n) + ", column " + std::to_string(index % n);
}

// The CPU rank: the forward and backward sweeps panel by panel (the scheme of solve.hpp).
void solve_on_host(const DistTileMatrix& l, const Rows& rows,
                   const std::vector<GemmVariant>& variants, SolveTraffic& traffic,
                   std::exception_ptr& error) {
  const linalg::TileLayout& layout = l.layout();
  const std::int64_t n = layout.rows(), nt = layout.tile_rows(), nb = layout.tile_size();
  const auto variant = [&](std::int64_t i, std::int64_t j) {
    return variants[static_cast<std::size_t>(i * nt + j)];
  };
  const auto h = [&](std::int64_t i) { return layout.tile_height(i); };
  Panel panel(l, traffic);
  // Forward: L Z = B^T. Block k by the diagonal tile, then block i -= L_ik Z_k for i > k.
  for (std::int64_t k = 0; k < nt; ++k) {
    panel.load(k);
    for_slices(rows, error, [&](float* x, std::int64_t cols) {
      trsm_left_lower(false, h(k), cols, panel.tile(k), h(k), x + k * nb, n);
      for (std::int64_t i = k + 1; i < nt; ++i)
        linalg::detail::gemm_update(variant(i, k), Op::N, Op::N, h(i), cols, h(k), panel.tile(i),
                                    h(i), x + k * nb, n, x + i * nb, n,
                                    {i, k, "of the forward substitution with tile of L", false});
    });
  }
  // Backward: L^T X^T = Z. Block k -= (L_ik)^T X_i for i = NT-1 down to k + 1 (the order in which
  // the right-looking sweep of solve_cpu.cpp applies them), then the transposed diagonal solve.
  for (std::int64_t k = nt - 1; k >= 0; --k) {
    panel.load(k);
    for_slices(rows, error, [&](float* x, std::int64_t cols) {
      for (std::int64_t i = nt - 1; i > k; --i)
        linalg::detail::gemm_update(variant(i, k), Op::T, Op::N, h(k), cols, h(i), panel.tile(i),
                                    h(i), x + i * nb, n, x + k * nb, n,
                                    {i, k, "of the backward substitution with tile of L", false});
      trsm_left_lower(true, h(k), cols, panel.tile(k), h(k), x + k * nb, n);
    });
  }
}

// A GPU rank: each panel goes into the device's copy of L while the next one is broadcast (two
// buffers), then the rows are solved there in one call with the same variant table. A rank
// without rows only takes part in the broadcasts; a rank whose device fails keeps taking part and
// reports at the end.
void solve_on_device(const DistTileMatrix& l, int device, Array& b,
                     const std::vector<GemmVariant>& variants, SolveTraffic& traffic,
                     std::exception_ptr& error) {
  const std::int64_t nt = l.layout().tile_rows();
  Panel panel(l, traffic, 2);  // before the copy, which may still read it until destroyed
  std::unique_ptr<linalg::detail::DeviceFactor> copy;
  const auto attempt = [&](const auto& step) {
    if (error) return;
    try {
      step();
    } catch (...) {
      error = std::current_exception();
    }
  };
  if (!b.empty())
    attempt([&] {
      copy = linalg::detail::make_device_factor(device, l.layout(), omp_get_max_threads());
    });
  std::vector<const float*> tiles;
  for (std::int64_t k = 0; k < nt; ++k) {
    panel.load(k);
    attempt([&] {
      if (!copy) return;
      tiles.clear();
      for (std::int64_t i = k; i < nt; ++i) tiles.push_back(panel.tile(i));
      copy->load_column(k, tiles);
    });
  }
  attempt([&] {
    if (copy) copy->solve(b, variants);
  });
}

}  // namespace

linalg::SolveReport solve_right(const DistTileMatrix& l, Array& b,
                                const linalg::SolveOptions& options, SolveTraffic* traffic) {
  const Comm& comm = l.comm();
  const detail::HostThreadShare share(comm);
  const linalg::TileLayout& layout = l.layout();
  const std::int64_t n = layout.rows(), nt = layout.tile_rows();
  agree(comm, [&] {
    if (layout.fill() != linalg::TileFill::lower)
      throw InvalidInput("mpi::solve_right: l: expected a lower tile layout, found a full one");
    if (options.devices.size() > 1)
      throw InvalidInput(
          "mpi::solve_right: devices: expected at most one CUDA device per rank (a GPU rank), "
          "found " +
          std::to_string(options.devices.size()));
    if (b.empty()) return;
    // Device rows only on a GPU rank (its device is checked where they are solved).
    if (b.ndim() != 2 || b.dim(1) != n || b.dtype() != DType::f32 || !b.is_c_contiguous() ||
        (b.on_device() && options.devices.empty()))
      throw InvalidInput(
          "mpi::solve_right: b: expected this rank's rows, a C-contiguous float32 array of "
          "shape [r, " +
          std::to_string(n) + "] in host memory (or a GPU rank's device memory; the matrix is " +
          std::to_string(n) + " x " + std::to_string(n) + "), found " + b.describe());
    if (const std::int64_t bad = first_non_finite(b); bad >= 0)
      throw InvalidInput(
          "mpi::solve_right: b: every entry must be finite, found a non-finite "
          "one at this rank's " +
          position(bad, n));
  });
  const std::vector<GemmVariant> variants = variants_of(l, options.policy);
  Rows rows;  // the CPU rank's view of b
  rows.b = b.empty() ? nullptr : b.data_as<float>();
  rows.r = b.empty() ? 0 : b.dim(0);
  rows.n = n;
  rows.width = linalg::detail::rhs_slice_width(rows.r);  // solve_right_cpu's slicing

  SolveTraffic local;
  std::exception_ptr error;
  if (options.devices.empty())
    solve_on_host(l, rows, variants, local, error);
  else
    solve_on_device(l, options.devices.front(), b, variants, local, error);
  agree(comm, [&] {
    if (error) std::rethrow_exception(error);
    if (const std::int64_t bad = first_non_finite(b); bad >= 0)
      throw NumericalError("mpi::solve_right with policy " + options.policy.name() +
                           ": the solution has a non-finite entry at this rank's " +
                           position(bad, n) +
                           " (FP32 overflow: the factor is nearly singular or badly scaled)");
  });
  if (traffic != nullptr) *traffic = local;
  linalg::SolveReport report;
  report.policy = options.policy.name();
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j + 1; i < nt; ++i)
      ++report.tiles[static_cast<std::size_t>(variants[static_cast<std::size_t>(i * nt + j)])];
  return report;
}

}  // namespace halfscope::mpi
