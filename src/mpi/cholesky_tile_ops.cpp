// A CPU rank's tile kernels for the MPI tile Cholesky (src/mpi/cholesky_steps.hpp): those of
// linalg::cholesky_tiles' CPU path, called the same way with the same operands, so the factor
// equals the one-process CPU factor bit for bit; the updates spread over OpenMP threads.
#include <omp.h>

#include <array>
#include <cstring>
#include <string>
#include <utility>

#include "halfscope/core/error.hpp"
#include "linalg/gemm_variants.hpp"
#include "mpi/cholesky_steps.hpp"

namespace halfscope::mpi::detail {
namespace {

using linalg::GemmVariant;
using linalg::detail::FailedPart;
using linalg::detail::FailedTile;

// One trailing update of step k: tile C = (i, j) (i >= j > k) -= L(i, k) L(j, k)^T, the operands
// with ld = their tile heights.
struct TileUpdate {
  std::int64_t k, i, j;
  const float* lik;
  const float* ljk;
  float* c;
};

class HostRank final : public linalg::detail::RankKernels {
 public:
  HostRank(const linalg::detail::RankShare& share, const std::vector<GemmVariant>& variants,
           std::string policy, int threads, linalg::detail::RecordFailure record)
      : s_(share),
        variants_(variants),
        policy_(std::move(policy)),
        threads_(threads),
        record_(std::move(record)),
        nt_(share.layout->tile_rows()),
        nb_(share.layout->tile_size()) {
    diag_.resize(static_cast<std::size_t>(nb_ * nb_ + 1));
    for (auto& set : buffers_) set.resize(static_cast<std::size_t>(nt_));
    for (std::int64_t i = 1; i < nt_; ++i)
      for (auto& set : buffers_)
        if (s_.needs_panel_row(i))
          set[static_cast<std::size_t>(i)].resize(static_cast<std::size_t>(height(i) * nb_ + 1));
  }

  float* panel_buffer(int parity, std::int64_t i) override {
    return buffers_[static_cast<std::size_t>(parity)][static_cast<std::size_t>(i)].data();
  }
  float* diagonal_buffer() override { return diag_.data(); }
  void reuse_buffers(int) override {}

  void factor_diagonal(std::int64_t k) override {
    float* t = tile(k, k);
    const std::int64_t h = height(k);
    const std::int64_t info = linalg::detail::potrf_lower(h, t, h);
    // A rejected argument is a bug, not the matrix's: not a NumericalError, never retried.
    if (info < 0) throw Error("LAPACKE_spotrf rejected argument " + std::to_string(-info));
    if (info > 0)
      record_(k, k, k,
              std::make_exception_ptr(linalg::detail::pivot_failure(policy_, k, nb_, info)),
              FailedTile{k, k});
    std::memcpy(diag_.data(), t, static_cast<std::size_t>(h * h) * sizeof(float));
  }

  void diagonal_arrived(std::int64_t) override {}

  void solve_panel(std::int64_t k, const std::vector<std::int64_t>& rows) override {
    const std::int64_t hk = height(k);
#pragma omp parallel for schedule(dynamic) num_threads(threads_)
    for (std::size_t x = 0; x < rows.size(); ++x) {
      const std::int64_t i = rows[x];
      linalg::detail::trsm_right_lower_trans(height(i), hk, diag_.data(), hk, tile(i, k),
                                             height(i));
    }
    for (const std::int64_t i : rows)
      std::memcpy(panel_buffer(static_cast<int>(k % 2), i), tile(i, k),
                  static_cast<std::size_t>(height(i) * hk) * sizeof(float));
  }

  void panel_arrived(std::int64_t) override {}

  void update(std::int64_t k, std::int64_t j_first, std::int64_t j_last,
              const std::function<void()>& progress) override {
    std::vector<std::pair<std::int64_t, std::int64_t>> tiles;
    for (std::int64_t j = j_first; j <= j_last; ++j)
      for (std::int64_t i = j; i < nt_ && s_.in_col(j); ++i)
        if (s_.in_row(i)) tiles.emplace_back(i, j);
    const int par = static_cast<int>(k % 2);
#pragma omp parallel for schedule(dynamic) num_threads(threads_)
    for (std::size_t x = 0; x < tiles.size(); ++x) {
      const auto [i, j] = tiles[x];
      // The operands as cholesky_cpu passes them: L(i, k), L(j, k), ld = their heights.
      const TileUpdate u{k, i, j, panel_buffer(par, i), panel_buffer(par, j), tile(i, j)};
      const GemmVariant v = variants_[static_cast<std::size_t>(i * nt_ + j)];
      try {
        update_tile(v, u);
      } catch (...) {
        record_(k, i, j, std::current_exception(), classify_failure(v, u));
      }
      // MPI is called from the master thread only (MPI_THREAD_FUNNELED).
      if (progress && omp_get_thread_num() == 0) progress();
    }
  }

  bool poll() override {
    return false;
  }  // failures are recorded as they happen
  void finish() override {}

  [[nodiscard]] std::int64_t scratch_bytes() const override {
    std::int64_t floats = static_cast<std::int64_t>(diag_.size());
    for (const auto& set : buffers_)
      for (const auto& b : set) floats += static_cast<std::int64_t>(b.size());
    return floats * static_cast<std::int64_t>(sizeof(float));
  }

 private:
  [[nodiscard]] std::int64_t height(std::int64_t i) const {
    return s_.layout->tile_height(i);
  }
  [[nodiscard]] float* tile(std::int64_t i, std::int64_t j) const {
    return s_.local + s_.offsets[static_cast<std::size_t>(i * nt_ + j)];
  }

  void update_tile(GemmVariant v, const TileUpdate& u) const {
    const std::int64_t hi = height(u.i), hk = height(u.k);
    if (u.i == u.j) {
      linalg::detail::syrk_lower(hi, hk, u.lik, hi, u.c, hi);
      return;
    }
    const std::int64_t hj = height(u.j);
    linalg::detail::gemm_nt_update(v, hi, hj, hk, u.lik, hi, u.ljk, hj, u.c, hi,
                                   linalg::detail::TileLabel{u.i, u.j});
  }

  // After a failed GEMM: which input did not fit FP16? Only the FP16 variants can overflow an
  // input: BF16 / TF32 keep FP32's exponent range.
  [[nodiscard]] FailedTile classify_failure(GemmVariant v, const TileUpdate& u) const {
    FailedTile f{u.i, u.j};
    if (u.i == u.j) return f;
    const std::int64_t hk = height(u.k);
    for (const auto& [o, operand] : {std::pair{u.i, u.lik}, std::pair{u.j, u.ljk}}) {
      if (!linalg::gemm_variant_uses_fp16(v) ||
          !linalg::detail::exceeds_half(operand, height(o), hk))
        continue;
      f.part = FailedPart::operand, f.oi = o, f.ok = u.k;
      return f;
    }
    if ((v == GemmVariant::HP2 || v == GemmVariant::HP3) &&
        linalg::detail::exceeds_half(u.c, height(u.i), height(u.j)))
      f.part = FailedPart::c_entry;
    return f;
  }

  linalg::detail::RankShare s_;
  std::vector<GemmVariant> variants_;
  std::string policy_;
  int threads_;
  linalg::detail::RecordFailure record_;
  std::int64_t nt_, nb_;
  std::vector<float> diag_;
  std::array<std::vector<std::vector<float>>, 2> buffers_;  // per parity, per tile row
};

}  // namespace

std::unique_ptr<linalg::detail::RankKernels> make_host_rank_kernels(
    const linalg::detail::RankShare& share, const std::vector<GemmVariant>& variants,
    const std::string& policy, int threads, linalg::detail::RecordFailure record) {
  return std::make_unique<HostRank>(share, variants, policy, threads, std::move(record));
}

}  // namespace halfscope::mpi::detail
