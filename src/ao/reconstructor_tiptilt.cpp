// The LGS tip-tilt constants as a low-rank term: host side (src/ao/reconstructor_tiptilt.hpp).
#include "ao/reconstructor_tiptilt.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "halfscope/ao/covariance.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::ao::detail {
namespace {

void check_rows(const Array& x, const char* who) {
  if (x.dtype() != DType::f32 || x.ndim() != 2 || !x.is_c_contiguous())
    throw InvalidInput(std::string(who) + ": expected a C-contiguous 2-D float32 array");
}

// Solves P S = T for P (rows x q) by Gaussian elimination with partial pivoting on S^T (q is at
// most twice the number of LGS, a handful): S^T P^T = T^T column by column of P^T.
std::vector<double> solve_small(std::vector<double> s, const std::vector<double>& t,
                                std::int64_t rows, std::int64_t q) {
  // a = S^T (q x q), row-major.
  std::vector<double> a(static_cast<std::size_t>(q * q));
  for (std::int64_t i = 0; i < q; ++i)
    for (std::int64_t j = 0; j < q; ++j)
      a[static_cast<std::size_t>(i * q + j)] = s[static_cast<std::size_t>(j * q + i)];
  std::vector<double> b(static_cast<std::size_t>(q * rows));  // T^T, q x rows
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < q; ++g)
      b[static_cast<std::size_t>(g * rows + r)] = t[static_cast<std::size_t>(r * q + g)];
  for (std::int64_t k = 0; k < q; ++k) {
    std::int64_t piv = k;
    for (std::int64_t i = k + 1; i < q; ++i)
      if (std::abs(a[static_cast<std::size_t>(i * q + k)]) >
          std::abs(a[static_cast<std::size_t>(piv * q + k)]))
        piv = i;
    const double pivot = a[static_cast<std::size_t>(piv * q + k)];
    if (!(std::abs(pivot) > 0) || !std::isfinite(pivot))
      throw NumericalError(
          "tomographic_reconstructor: the LGS tip-tilt correction C^-1 + U^T K^-1 U is singular "
          "at column " +
          std::to_string(k));
    if (piv != k) {
      for (std::int64_t j = 0; j < q; ++j)
        std::swap(a[static_cast<std::size_t>(k * q + j)], a[static_cast<std::size_t>(piv * q + j)]);
      for (std::int64_t r = 0; r < rows; ++r)
        std::swap(b[static_cast<std::size_t>(k * rows + r)],
                  b[static_cast<std::size_t>(piv * rows + r)]);
    }
    for (std::int64_t i = k + 1; i < q; ++i) {
      const double f = a[static_cast<std::size_t>(i * q + k)] / pivot;
      if (f == 0) continue;
      for (std::int64_t j = k; j < q; ++j)
        a[static_cast<std::size_t>(i * q + j)] -= f * a[static_cast<std::size_t>(k * q + j)];
      for (std::int64_t r = 0; r < rows; ++r)
        b[static_cast<std::size_t>(i * rows + r)] -= f * b[static_cast<std::size_t>(k * rows + r)];
    }
  }
  for (std::int64_t k = q - 1; k >= 0; --k)
    for (std::int64_t r = 0; r < rows; ++r) {
      double v = b[static_cast<std::size_t>(k * rows + r)];
      for (std::int64_t j = k + 1; j < q; ++j)
        v -= a[static_cast<std::size_t>(k * q + j)] * b[static_cast<std::size_t>(j * rows + r)];
      b[static_cast<std::size_t>(k * rows + r)] = v / a[static_cast<std::size_t>(k * q + k)];
    }
  std::vector<double> p(static_cast<std::size_t>(rows * q));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < q; ++g)
      p[static_cast<std::size_t>(r * q + g)] = b[static_cast<std::size_t>(g * rows + r)];
  return p;
}

}  // namespace

std::vector<TiptiltGroup> lgs_tiptilt_groups(const AoSystem& system) {
  std::vector<TiptiltGroup> groups;
  std::int64_t offset = 0;
  for (const Sensor& s : system.sensors) {
    const auto count = static_cast<std::int64_t>(valid_subapertures(system, s).size());
    // The same gate as the covariance plan: the constant is part of the noise terms.
    if (system.noise.enabled && s.guide_star == GuideStar::lgs && s.lgs_tiptilt_arcsec2 > 0) {
      const auto weight = static_cast<float>(1.0 / static_cast<double>(count));
      groups.push_back({offset, count, s.lgs_tiptilt_arcsec2, weight});          // x slopes
      groups.push_back({offset + count, count, s.lgs_tiptilt_arcsec2, weight});  // y slopes
    }
    offset += 2 * count;
  }
  return groups;
}

AoSystem without_lgs_tiptilt(const AoSystem& system) {
  AoSystem k = system;
  for (Sensor& s : k.sensors) s.lgs_tiptilt_arcsec2 = 0;
  return k;
}

void write_indicator_rows(Array& rhs, std::int64_t first_row,
                          const std::vector<TiptiltGroup>& groups) {
  check_rows(rhs, "write_indicator_rows");
  const std::int64_t n = rhs.dim(1), q = static_cast<std::int64_t>(groups.size());
  Array rows = Array::zeros(DType::f32, {q, n});
  for (std::int64_t g = 0; g < q; ++g) {
    const TiptiltGroup& gr = groups[static_cast<std::size_t>(g)];
    std::fill_n(rows.data_as<float>() + g * n + gr.first, gr.count, gr.weight);
  }
  copy_bytes(rhs.data_as<float>() + first_row * n, rhs.memory(), rows.data(), Memory::host,
             rows.nbytes());
}

std::vector<double> group_sums(const Array& x, const std::vector<TiptiltGroup>& groups) {
  check_rows(x, "group_sums");
#if HALFSCOPE_WITH_CUDA
  if (x.on_device()) return group_sums_cuda(x, groups);
#endif
  const std::int64_t rows = x.dim(0), n = x.dim(1), q = static_cast<std::int64_t>(groups.size());
  std::vector<double> sums(static_cast<std::size_t>(rows * q));
  const float* data = x.data_as<float>();
  // Eight running sums per group, so the loop vectorizes without reassociating (no fast-math):
  // one pass at memory speed instead of one dependent FP64 add per element.
  constexpr std::int64_t kLanes = 8;
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < q; ++g) {
      const TiptiltGroup& gr = groups[static_cast<std::size_t>(g)];
      const float* v = data + r * n + gr.first;
      double lane[kLanes] = {};
      std::int64_t c = 0;
      for (; c + kLanes <= gr.count; c += kLanes)
        for (std::int64_t k = 0; k < kLanes; ++k) lane[k] += v[c + k];
      double s = 0;
      for (; c < gr.count; ++c) s += v[c];
      for (const double l : lane) s += l;
      sums[static_cast<std::size_t>(r * q + g)] = s;
    }
  return sums;
}

void subtract_rank_update(Array& x, std::int64_t rows, const std::vector<double>& p,
                          std::int64_t w_row, std::int64_t q) {
  check_rows(x, "subtract_rank_update");
#if HALFSCOPE_WITH_CUDA
  if (x.on_device()) return subtract_rank_update_cuda(x, rows, p, w_row, q);
#endif
  const std::int64_t n = x.dim(1);
  float* data = x.data_as<float>();
  const float* w = data + w_row * n;
  // By chunks of a row held in FP64, one group at a time: the inner loop runs along the columns
  // (vectorized), each element still takes its q terms in group order; W's chunk stays in cache.
  constexpr std::int64_t kChunk = 1024;
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    double acc[kChunk];
    for (std::int64_t c0 = 0; c0 < n; c0 += kChunk) {
      const std::int64_t len = std::min(kChunk, n - c0);
      float* xr = data + r * n + c0;
      for (std::int64_t c = 0; c < len; ++c) acc[c] = xr[c];
      for (std::int64_t g = 0; g < q; ++g) {
        const double pg = p[static_cast<std::size_t>(r * q + g)];
        const float* wg = w + g * n + c0;
        for (std::int64_t c = 0; c < len; ++c) acc[c] -= pg * static_cast<double>(wg[c]);
      }
      for (std::int64_t c = 0; c < len; ++c) xr[c] = static_cast<float>(acc[c]);
    }
  }
}

std::vector<double> tiptilt_system(std::vector<double> w_sums,
                                   const std::vector<TiptiltGroup>& groups) {
  const auto q = static_cast<std::int64_t>(groups.size());
  // W U D, then (D^-1 C D^-1)^-1 = D C^-1 D on the diagonal.
  for (std::int64_t r = 0; r < q; ++r)
    for (std::int64_t g = 0; g < q; ++g)
      w_sums[static_cast<std::size_t>(r * q + g)] *= groups[static_cast<std::size_t>(g)].weight;
  for (std::int64_t g = 0; g < q; ++g) {
    const TiptiltGroup& gr = groups[static_cast<std::size_t>(g)];
    const double d = gr.weight;
    w_sums[static_cast<std::size_t>(g * q + g)] += d * d / gr.variance;
  }
  return w_sums;
}

std::vector<double> tiptilt_coefficients(const std::vector<double>& s, std::vector<double> x_sums,
                                         std::int64_t rows,
                                         const std::vector<TiptiltGroup>& groups) {
  const auto q = static_cast<std::int64_t>(groups.size());
  for (std::int64_t r = 0; r < rows; ++r)  // T = X U D
    for (std::int64_t g = 0; g < q; ++g)
      x_sums[static_cast<std::size_t>(r * q + g)] *= groups[static_cast<std::size_t>(g)].weight;
  return solve_small(s, x_sums, rows, q);
}

void apply_tiptilt_correction(Array& solved, std::int64_t m,
                              const std::vector<TiptiltGroup>& groups) {
  const auto q = static_cast<std::int64_t>(groups.size());
  if (q == 0) return;
  // All m + q rows at once: the first m give X U, the last q give W U.
  std::vector<double> sums = group_sums(solved, groups);
  const std::vector<double> s = tiptilt_system({sums.begin() + m * q, sums.end()}, groups);
  sums.resize(static_cast<std::size_t>(m * q));
  const std::vector<double> p = tiptilt_coefficients(s, std::move(sums), m, groups);
  subtract_rank_update(solved, m, p, m, q);
}

#if !HALFSCOPE_WITH_CUDA
void DeviceTiptiltBlocks::operator()(float*, std::int64_t, std::int64_t, void*) {
  throw Unsupported("LGS tip-tilt correction on the device: halfscope was built without CUDA");
}
#endif

}  // namespace halfscope::ao::detail
