// The steps of the MPI tile Cholesky (src/mpi/cholesky_steps.hpp).
//
// Step k of the right-looking algorithm on a P x Q grid: the owner of (k, k) factors it (POTRF)
// and broadcasts L(k, k) down process column k mod Q; the owners of the panel tiles (i, k) solve
// them (TRSM) and broadcast each L(i, k) along process row i mod P (for the tiles (i, j)); the
// rank of that row in column i mod Q forwards it down its process column (for the tiles (j, i),
// j > i). Every rank then updates its trailing tiles: SYRK on (i, i), GEMM in the tile's variant
// on (i, j). Look-ahead: step k first updates column k + 1, so panel k + 1 is factored and its
// row broadcasts are in flight while the rest of step k's updates run. Panel buffers alternate
// between two sets (panel k is read while panel k + 1 is filled).
//
// Failures never leave a rank waiting: every message ends with a status word (1 when the sender
// knew of a failure); a rank that failed or heard of a failure stops computing but completes the
// same schedule of broadcasts, which depends on the layout only.
#include "mpi/cholesky_steps.hpp"

#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>

#include "halfscope/core/error.hpp"

namespace halfscope::mpi::detail {
namespace {

using linalg::GemmVariant;
using linalg::detail::FailedTile;

class Steps {
 public:
  Steps(DistTileMatrix& a, const GridComms& comms, const std::vector<GemmVariant>& variants,
        const std::string& policy, CholeskyTraffic& traffic)
      : a_(a),
        c_(comms),
        layout_(a.layout()),
        variants_(variants),
        policy_(policy),
        traffic_(traffic),
        nt_(layout_.tile_rows()),
        nb_(layout_.tile_size()),
        p_(a.grid().rows),
        q_(a.grid().cols) {
    diag_.resize(static_cast<std::size_t>(nb_ * nb_ + 1));
    for (auto* set : {&row_, &col_})
      for (auto& buffers : *set) buffers.resize(static_cast<std::size_t>(nt_));
    for (auto* set : {&row_req_, &col_req_})
      for (auto& requests : *set) requests.assign(static_cast<std::size_t>(nt_), MPI_REQUEST_NULL);
    // Buffers for the panel tiles this rank receives or sends: those of its process row, and
    // those of its process column that its row does not already bring.
    for (std::int64_t i = 1; i < nt_; ++i)
      for (int par = 0; par < 2; ++par) {
        const auto size = static_cast<std::size_t>(height(i) * nb_ + 1);
        if (in_my_row(i))
          row_[par][static_cast<std::size_t>(i)].resize(size);
        else if (in_my_col(i))
          col_[par][static_cast<std::size_t>(i)].resize(size);
      }
  }

  RankFailure run() {
    factor_panel(0);
    finish_panel(0);
    for (std::int64_t k = 0; k + 1 < nt_; ++k) {
      // Whether this rank computes step k is fixed before panel k + 1 can add a failure, so
      // every GEMM of step k runs on a rank that was sound when the step began.
      const bool skip = failed_;
      update(k, k + 1, k + 1, skip, false);
      factor_panel(k + 1);
      update(k, k + 2, nt_ - 1, skip, true);
      finish_panel(k + 1);
    }
    return std::move(first_);
  }

 private:
  [[nodiscard]] std::int64_t height(std::int64_t i) const { return layout_.tile_height(i); }
  [[nodiscard]] bool in_my_row(std::int64_t i) const { return i % p_ == c_.row; }
  [[nodiscard]] bool in_my_col(std::int64_t i) const { return i % q_ == c_.col; }
  [[nodiscard]] int parity(std::int64_t k) const { return static_cast<int>(k % 2); }

  // L(i, k) as this rank holds it during step k: from its row's broadcast when i is in its
  // process row, else from its column's.
  [[nodiscard]] const float* panel(std::int64_t k, std::int64_t i) const {
    const auto& set = in_my_row(i) ? row_ : col_;
    return set[static_cast<std::size_t>(parity(k))][static_cast<std::size_t>(i)].data();
  }

  // Keeps the earliest failure (called from OpenMP threads).
  void record(std::int64_t key, std::exception_ptr error, FailedTile tile) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (key < first_.key) first_ = RankFailure{key, std::move(error), tile};
  }

  void count(const Comm& comm, int root, std::int64_t elements) {
    if (comm.size() < 2) return;
    const std::int64_t bytes = elements * static_cast<std::int64_t>(sizeof(float));
    if (comm.rank() == root)
      traffic_.bytes_sent += bytes * (comm.size() - 1);
    else
      traffic_.bytes_received += bytes;
    ++traffic_.broadcasts;
  }

  void post(float* buffer, std::int64_t elements, int root, const Comm& comm,
            MPI_Request* request) {
    count(comm, root, elements);
    check_mpi(MPI_Ibcast(buffer, static_cast<int>(elements), MPI_FLOAT, root, comm.raw(), request),
              "MPI_Ibcast");
  }

  void wait(MPI_Request* requests, int n) {
    const auto t0 = std::chrono::steady_clock::now();
    check_mpi(MPI_Waitall(n, requests, MPI_STATUSES_IGNORE), "MPI_Waitall");
    traffic_.wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  void mark(std::vector<float>& buffer) const { buffer.back() = failed_ ? 1.0f : 0.0f; }
  void hear(const std::vector<float>& buffer) {
    if (buffer.back() != 0.0f) failed_ = true;
  }

  // POTRF of (k, k) and its broadcast down column k mod Q, TRSM of the owned panel tiles, and
  // the row broadcasts of panel k posted (not waited for).
  void factor_panel(std::int64_t k) {
    const int par = parity(k);
    const std::int64_t hk = height(k);
    const int kr = static_cast<int>(k % p_), kc = static_cast<int>(k % q_);
    if (c_.col == kc) {
      if (c_.row == kr) {
        float* t = a_.tile(k, k);
        if (!failed_) potrf(k, t);
        std::memcpy(diag_.data(), t, static_cast<std::size_t>(hk * hk) * sizeof(float));
        diag_[static_cast<std::size_t>(hk * hk)] = failed_ ? 1.0f : 0.0f;
      }
      MPI_Request request = MPI_REQUEST_NULL;
      post(diag_.data(), hk * hk + 1, kr, c_.col_comm, &request);
      wait(&request, 1);
      if (diag_[static_cast<std::size_t>(hk * hk)] != 0.0f) failed_ = true;
      std::vector<std::int64_t> mine;
      for (std::int64_t i = k + 1; i < nt_; ++i)
        if (in_my_row(i)) mine.push_back(i);
      if (!failed_) {
#pragma omp parallel for schedule(dynamic) num_threads(c_.threads)
        for (std::size_t x = 0; x < mine.size(); ++x) {
          const std::int64_t i = mine[x];
          linalg::detail::trsm_right_lower_trans(height(i), hk, diag_.data(), hk, a_.tile(i, k),
                                                 height(i));
        }
      }
      for (const std::int64_t i : mine) {
        auto& buffer = row_[par][static_cast<std::size_t>(i)];
        std::memcpy(buffer.data(), a_.tile(i, k),
                    static_cast<std::size_t>(height(i) * hk) * sizeof(float));
        mark(buffer);
      }
    }
    for (std::int64_t i = k + 1; i < nt_; ++i)
      if (in_my_row(i)) {
        auto& buffer = row_[par][static_cast<std::size_t>(i)];
        post(buffer.data(), static_cast<std::int64_t>(buffer.size()), kc, c_.row_comm,
             &row_req_[par][static_cast<std::size_t>(i)]);
      }
    next_column_ = k + 1;
  }

  void potrf(std::int64_t k, float* t) {
    try {
      potrf_tile(layout_, k, t, policy_);
    } catch (...) {
      record(failure_key(nt_, k, k, k), std::current_exception(), FailedTile{k, k});
      failed_ = true;
    }
  }

  // Posts the column broadcasts of panel k from next_column_ on, in increasing i on every rank
  // of a column (the order of the collectives on col_comm). The root of one (the rank of row
  // i mod P) forwards what its row broadcast brought: it waits for it when `block`, else stops
  // at the first that has not arrived (to go on later).
  void forward_columns(std::int64_t k, bool block) {
    const int par = parity(k);
    for (; next_column_ + 1 < nt_; ++next_column_) {
      const std::int64_t i = next_column_;
      if (!in_my_col(i)) continue;
      const int root = static_cast<int>(i % p_);
      auto& request = col_req_[par][static_cast<std::size_t>(i)];
      if (root != c_.row) {
        auto& buffer = col_[par][static_cast<std::size_t>(i)];
        post(buffer.data(), static_cast<std::int64_t>(buffer.size()), root, c_.col_comm, &request);
        continue;
      }
      auto& arrived = row_req_[par][static_cast<std::size_t>(i)];
      if (block) {
        wait(&arrived, 1);
      } else {
        int done = 0;
        check_mpi(MPI_Test(&arrived, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (!done) return;
      }
      auto& buffer = row_[par][static_cast<std::size_t>(i)];
      hear(buffer);
      mark(buffer);
      post(buffer.data(), static_cast<std::int64_t>(buffer.size()), root, c_.col_comm, &request);
    }
  }

  // Moves panel k's broadcasts on while the updates run (called by the OpenMP master thread,
  // the one thread that may call MPI): MPI libraries without a progress thread advance
  // non-blocking collectives only inside MPI calls, so without this the look-ahead would post
  // panel k early but move it only at finish_panel.
  void progress(std::int64_t k) {
    forward_columns(k, false);
    int done = 0;
    check_mpi(
        MPI_Testall(static_cast<int>(nt_), row_req_[parity(k)].data(), &done, MPI_STATUSES_IGNORE),
        "MPI_Testall");
  }

  // Completes panel k: forwards the rest of the row broadcasts down the process columns, waits
  // for all.
  void finish_panel(std::int64_t k) {
    const int par = parity(k);
    forward_columns(k, true);
    wait(row_req_[par].data(), static_cast<int>(nt_));
    wait(col_req_[par].data(), static_cast<int>(nt_));
    for (std::int64_t i = k + 1; i < nt_; ++i) {
      if (in_my_row(i))
        hear(row_[par][static_cast<std::size_t>(i)]);
      else if (in_my_col(i) && i + 1 < nt_)
        hear(col_[par][static_cast<std::size_t>(i)]);
    }
  }

  // Step k's updates of this rank's tiles (i, j) with j in [j_first, j_last], i >= j; with
  // `progress` panel k + 1's broadcasts are moved on between tiles.
  void update(std::int64_t k, std::int64_t j_first, std::int64_t j_last, bool skip,
              bool progress_next) {
    if (skip) return;
    std::vector<std::pair<std::int64_t, std::int64_t>> tiles;
    for (std::int64_t j = j_first; j <= j_last; ++j)
      for (std::int64_t i = j; i < nt_ && in_my_col(j); ++i)
        if (in_my_row(i)) tiles.emplace_back(i, j);
#pragma omp parallel for schedule(dynamic) num_threads(c_.threads)
    for (std::size_t x = 0; x < tiles.size(); ++x) {
      const auto [i, j] = tiles[x];
      // The operands as cholesky_cpu passes them: L(i, k), L(j, k), ld = their heights.
      const TileUpdate u{k, i, j, panel(k, i), panel(k, j), a_.tile(i, j)};
      const GemmVariant v = variants_[static_cast<std::size_t>(i * nt_ + j)];
      try {
        update_tile(layout_, v, u);
      } catch (...) {
        record(failure_key(nt_, k, i, j), std::current_exception(),
               classify_failure(layout_, v, u));
      }
      if (progress_next && omp_get_thread_num() == 0) progress(k + 1);
    }
    if (first_.key != kNoFailure) failed_ = true;
  }

  DistTileMatrix& a_;
  const GridComms& c_;
  const linalg::TileLayout& layout_;
  const std::vector<GemmVariant>& variants_;
  const std::string& policy_;
  CholeskyTraffic& traffic_;
  std::int64_t nt_, nb_;
  int p_, q_;
  bool failed_ = false;           // this rank failed or heard of a failure
  std::int64_t next_column_ = 0;  // the next column broadcast forward_columns considers
  RankFailure first_;
  std::mutex mutex_;
  std::vector<float> diag_;
  // Per panel parity, per tile row i: L(i, k) with its status word, and its pending broadcast.
  std::array<std::vector<std::vector<float>>, 2> row_, col_;
  std::array<std::vector<MPI_Request>, 2> row_req_, col_req_;
};

}  // namespace

void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  abort_job(std::string("MPI tile Cholesky: ") + call +
                " failed: " + std::string(text, static_cast<std::size_t>(length)),
            1);
}

std::int64_t panel_buffer_bytes(const DistTileMatrix& a, const GridComms& comms) {
  const linalg::TileLayout& layout = a.layout();
  const std::int64_t nb = layout.tile_size();
  std::int64_t elements = nb * nb + 1;
  for (std::int64_t i = 1; i < layout.tile_rows(); ++i)
    if (i % a.grid().rows == comms.row || i % a.grid().cols == comms.col)
      elements += 2 * (layout.tile_height(i) * nb + 1);
  return elements * static_cast<std::int64_t>(sizeof(float));
}

RankFailure factor_steps(DistTileMatrix& a, const GridComms& comms,
                         const std::vector<GemmVariant>& variants, const std::string& policy_name,
                         CholeskyTraffic& traffic) {
  // The buffers are the only allocation: agreed on, so no rank starts the schedule alone.
  std::unique_ptr<Steps> steps;
  agree(a.comm(),
        [&] { steps = std::make_unique<Steps>(a, comms, variants, policy_name, traffic); });
  return steps->run();
}

}  // namespace halfscope::mpi::detail
