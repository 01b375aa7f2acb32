// The GPU covariance backend on the built-in systems (ao_preset "check" and "mid"), through the
// public API (covariance / covariance_tiles with device cuda): sampled entries against the direct
// FP64 evaluation covariance_entry, within the per-element bound of gpu_covariance_reference.hpp;
// the same entries from the earlier direct kernel (DirectPath::element, not the default edge-point
// tables) within the same bound; and that reference itself against covariance_entry (host only: it
// checks that the test's reading of the plan is the library's).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "ao/covariance_cuda.hpp"
#include "ao/covariance_plan.hpp"
#include "gpu_covariance_reference.hpp"
#include "halfscope/ao/covariance.hpp"
#include "halfscope/ao/system.hpp"
#include "test_support.hpp"

namespace halfscope::ao {
namespace {

constexpr CovarianceKind kKinds[] = {CovarianceKind::cmm, CovarianceKind::ctm, CovarianceKind::ctt};

/// `count` (row, col) pairs of a rows x cols matrix, a tenth of them on or next to the diagonal.
std::vector<std::pair<std::int64_t, std::int64_t>> sample(std::int64_t rows, std::int64_t cols,
                                                          int count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> ri(0, rows - 1), cj(0, cols - 1), near(-2, 2);
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (int k = 0; k < count; ++k) {
    const std::int64_t i = ri(rng);
    const std::int64_t j =
        k % 10 == 0 ? std::clamp<std::int64_t>(i + near(rng), 0, cols - 1) : cj(rng);
    out.emplace_back(i, j);
  }
  return out;
}

TEST(AoCovarianceReference, MatchesCovarianceEntry) {
  // Host only: two FP64 evaluations of one formula with the same reference D; they differ by
  // rounding, far inside the bound.
  const AoSystem system = ao_preset("check", 10);
  const detail::CovariancePlan plan = detail::make_covariance_plan(system, true);
  for (const CovarianceKind kind : kKinds)
    for (const auto& [i, j] :
         sample(covariance_rows(system, kind), covariance_cols(system, kind), 300, 11)) {
      const test::RefElement ref = test::reference_element(plan, kind, i, j);
      const double entry = covariance_entry(system, kind, i, j, true);
      ASSERT_LE(std::fabs(entry - ref.value), ref.bound)
          << covariance_kind_name(kind) << " (" << i << ", " << j << ")";
    }
}

void check_system(const char* name, int layers, int samples, std::int64_t nb) {
  const AoSystem system = ao_preset(name, layers);
  const detail::CovariancePlan plan = detail::make_covariance_plan(system, true);
  CovarianceOptions o;
  o.device = DeviceKind::Cuda;
  for (const CovarianceKind kind : kKinds) {
    const std::int64_t rows = covariance_rows(system, kind), cols = covariance_cols(system, kind);
    const Array dense = covariance(system, kind, o);
    ASSERT_EQ(dense.shape()[0], rows);
    ASSERT_EQ(dense.shape()[1], cols);
    const linalg::TileMatrix tiles = covariance_tiles(system, kind, nb, o);
    const Array tiled = tiles.to_dense();
    const double* d = dense.data_as<double>();
    const double* t = tiled.data_as<double>();
    // The two direct paths (the presets' lenslet arrays are unrotated: every direct pair can use
    // the edge-point tables, and does by default).
    detail::CovarianceCudaReport edge_report, element_report;
    Array device(DType::f64, {rows, cols}, Memory::device);
    detail::CovarianceTarget target{kind, DType::f64, device.data(), rows, cols, nullptr};
    detail::covariance_cuda_report(plan, target, &edge_report);
    EXPECT_EQ(edge_report.edge_pairs, edge_report.direct_pairs);
    detail::CovarianceCudaVariant element;
    element.direct = detail::DirectPath::element;
    detail::covariance_cuda_report(plan, target, &element_report, element);
    EXPECT_EQ(element_report.edge_pairs, 0);
    const Array by_element = device.to(Memory::host);
    const double* e = by_element.data_as<double>();
    double worst = 0, worst_element = 0;
    for (const auto& [i, j] : sample(rows, cols, samples, 7)) {
      const test::RefElement ref = test::reference_element(plan, kind, i, j);
      const double entry = covariance_entry(system, kind, i, j, true);
      const double got = d[i * cols + j];
      ASSERT_LE(std::fabs(got - entry), ref.bound)
          << name << " " << covariance_kind_name(kind) << " (" << i << ", " << j << ")";
      // The tiled target holds the same numbers (the lower layout mirrored by to_dense).
      ASSERT_EQ(t[i * cols + j], kind == CovarianceKind::ctm || i >= j ? got : d[j * cols + i]);
      worst = std::max(worst, std::fabs(got - entry) / ref.bound);
      ASSERT_LE(std::fabs(e[i * cols + j] - entry), ref.bound)
          << name << " " << covariance_kind_name(kind) << " (" << i << ", " << j
          << "), direct path element";
      worst_element = std::max(worst_element, std::fabs(e[i * cols + j] - entry) / ref.bound);
    }
    std::printf(
        "%s %d layers %s (%lld edge-point pairs): max |GPU - covariance_entry| / bound = %.3f "
        "(edge path), %.3f (element path)\n",
        name, layers, std::string(covariance_kind_name(kind)).c_str(),
        static_cast<long long>(edge_report.edge_pairs), worst, worst_element);
  }
}

TEST(AoCovarianceGpuPresets, CheckSystemSampled) {
  HS_REQUIRE_GPU();
  check_system("check", 10, 1500, 100);
}

TEST(AoCovarianceGpuPresets, MidSystemSampled) {
  HS_REQUIRE_GPU();
  check_system("mid", 60, 400, 512);
}

}  // namespace
}  // namespace halfscope::ao
