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
// The tile kernels run where the rank's tiles live (linalg/rank_kernels.hpp): on the host
// (cholesky_tile_ops.cpp, OpenMP) or on the rank's GPU, which only queues each step's updates,
// so the MPI waits of the next panel overlap them.
//
// Failures never leave a rank waiting: every message ends with a status word (1 when the sender
// knew of a failure); a rank that failed or heard of a failure stops computing but completes the
// same schedule of broadcasts, which depends on the layout only.
#include "mpi/cholesky_steps.hpp"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
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
        const std::string& policy, CholeskyTraffic& traffic, int device)
      : c_(comms),
        layout_(a.layout()),
        traffic_(traffic),
        nt_(layout_.tile_rows()),
        nb_(layout_.tile_size()),
        p_(a.grid().rows),
        q_(a.grid().cols) {
    for (auto* requests : {&row_req_, &col_req_})
      for (auto& r : *requests) r.assign(static_cast<std::size_t>(nt_), MPI_REQUEST_NULL);
    linalg::detail::RankShare share;
    share.layout = &layout_, share.p = p_, share.q = q_, share.row = c_.row, share.col = c_.col;
    share.local = a.local_data(), share.local_elements = a.local_elements();
    share.threads = c_.threads;
    share.offsets.assign(static_cast<std::size_t>(nt_ * nt_), -1);
    for (std::int64_t j = 0; j < nt_; ++j)
      for (std::int64_t i = j; i < nt_; ++i)
        if (a.owns(i, j))
          share.offsets[static_cast<std::size_t>(i * nt_ + j)] = a.tile(i, j) - a.local_data();
    linalg::detail::RecordFailure record = [this](std::int64_t k, std::int64_t i, std::int64_t j,
                                                  std::exception_ptr error,
                                                  const FailedTile& tile) {
      this->record(failure_key(nt_, k, i, j), std::move(error), tile);
    };
    kern_ = device < 0
                ? make_host_rank_kernels(share, variants, policy, c_.threads, record)
                : linalg::detail::make_device_rank_kernels(device, share, variants, policy, record);
  }

  [[nodiscard]] std::int64_t scratch_bytes() const { return kern_->scratch_bytes(); }

  RankFailure run() {
    factor_panel(0);
    finish_panel(0);
    for (std::int64_t k = 0; k + 1 < nt_; ++k) {
      // Whether this rank computes step k is fixed before panel k + 1 can add a failure, so
      // every GEMM of step k runs on a rank that was sound when the step began (a GPU rank
      // learns of its own overflows when it polls; results after one are discarded anyway).
      if (kern_->poll()) failed_ = true;
      const bool skip = failed_;
      update(k, k + 1, k + 1, skip, false);
      factor_panel(k + 1);
      update(k, k + 2, nt_ - 1, skip, true);
      finish_panel(k + 1);
    }
    kern_->finish();
    return std::move(first_);
  }

 private:
  [[nodiscard]] std::int64_t height(std::int64_t i) const { return layout_.tile_height(i); }
  [[nodiscard]] bool in_my_row(std::int64_t i) const { return i % p_ == c_.row; }
  [[nodiscard]] bool in_my_col(std::int64_t i) const { return i % q_ == c_.col; }
  [[nodiscard]] int parity(std::int64_t k) const { return static_cast<int>(k % 2); }

  // The buffer of L(i, k) for steps of parity `par`: its row's broadcast when i is in this
  // rank's process row, else its column's; the status word after height(i) nb floats.
  [[nodiscard]] float* buffer(int par, std::int64_t i) const { return kern_->panel_buffer(par, i); }
  [[nodiscard]] std::int64_t buffer_size(std::int64_t i) const { return height(i) * nb_ + 1; }
  void mark(int par, std::int64_t i) const {
    buffer(par, i)[height(i) * nb_] = failed_ ? 1.0f : 0.0f;
  }
  void hear(int par, std::int64_t i) {
    if (buffer(par, i)[height(i) * nb_] != 0.0f) failed_ = true;
  }

  // Keeps the earliest failure (called from OpenMP threads).
  void record(std::int64_t key, std::exception_ptr error, FailedTile tile) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (key < first_.key) first_ = RankFailure{key, std::move(error), tile};
  }
  [[nodiscard]] bool any_failure() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return first_.key != kNoFailure;
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

  // POTRF of (k, k) and its broadcast down column k mod Q, TRSM of the owned panel tiles, and
  // the row broadcasts of panel k posted (not waited for).
  void factor_panel(std::int64_t k) {
    const int par = parity(k);
    const std::int64_t hk = height(k);
    const int kr = static_cast<int>(k % p_), kc = static_cast<int>(k % q_);
    kern_->reuse_buffers(par);
    if (c_.col == kc) {
      float* diag = kern_->diagonal_buffer();
      if (c_.row == kr) {
        if (!failed_) kern_->factor_diagonal(k);
        if (any_failure()) failed_ = true;
        diag[hk * hk] = failed_ ? 1.0f : 0.0f;
      }
      MPI_Request request = MPI_REQUEST_NULL;
      post(diag, hk * hk + 1, kr, c_.col_comm, &request);
      wait(&request, 1);
      if (diag[hk * hk] != 0.0f) failed_ = true;
      std::vector<std::int64_t> mine;
      for (std::int64_t i = k + 1; i < nt_; ++i)
        if (in_my_row(i)) mine.push_back(i);
      if (!failed_) {
        kern_->diagonal_arrived(k);
        kern_->solve_panel(k, mine);
      }
      for (const std::int64_t i : mine) mark(par, i);
    }
    for (std::int64_t i = k + 1; i < nt_; ++i)
      if (in_my_row(i))
        post(buffer(par, i), buffer_size(i), kc, c_.row_comm,
             &row_req_[par][static_cast<std::size_t>(i)]);
    next_column_ = k + 1;
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
        post(buffer(par, i), buffer_size(i), root, c_.col_comm, &request);
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
      hear(par, i);
      mark(par, i);
      post(buffer(par, i), buffer_size(i), root, c_.col_comm, &request);
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
  // for all, and hands the panel to the kernels.
  void finish_panel(std::int64_t k) {
    const int par = parity(k);
    forward_columns(k, true);
    wait(row_req_[par].data(), static_cast<int>(nt_));
    wait(col_req_[par].data(), static_cast<int>(nt_));
    for (std::int64_t i = k + 1; i < nt_; ++i)
      if (in_my_row(i) || (in_my_col(i) && i + 1 < nt_)) hear(par, i);
    if (!failed_) kern_->panel_arrived(k);
  }

  // Step k's updates of this rank's tiles (i, j) with j in [j_first, j_last], i >= j; with
  // `progress_next` panel k + 1's broadcasts are moved on while they run.
  void update(std::int64_t k, std::int64_t j_first, std::int64_t j_last, bool skip,
              bool progress_next) {
    if (skip) return;
    std::function<void()> progress_fn;
    if (progress_next) progress_fn = [this, k] { progress(k + 1); };
    kern_->update(k, j_first, j_last, progress_fn);
    if (any_failure()) failed_ = true;
  }

  const GridComms& c_;
  const linalg::TileLayout& layout_;
  CholeskyTraffic& traffic_;
  std::int64_t nt_, nb_;
  int p_, q_;
  bool failed_ = false;           // this rank failed or heard of a failure
  std::int64_t next_column_ = 0;  // the next column broadcast forward_columns considers
  RankFailure first_;
  std::mutex mutex_;
  std::unique_ptr<linalg::detail::RankKernels> kern_;
  // Per panel parity, per tile row i: the pending broadcast of L(i, k).
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

RankFailure factor_steps(DistTileMatrix& a, const GridComms& comms,
                         const std::vector<GemmVariant>& variants, const std::string& policy_name,
                         int device, CholeskyTraffic& traffic, std::int64_t* scratch) {
  // The buffers (and a GPU rank's device copy) are the only allocations: agreed on, so no rank
  // starts the schedule alone.
  std::unique_ptr<Steps> steps;
  agree(a.comm(),
        [&] { steps = std::make_unique<Steps>(a, comms, variants, policy_name, traffic, device); });
  *scratch = std::max(*scratch, steps->scratch_bytes());
  try {
    return steps->run();
  } catch (const std::exception& e) {
    // Not a failure of the arithmetic (those are recorded, never thrown) but of the machinery
    // (a CUDA or cuBLAS call): the other ranks may already wait on this one's broadcasts.
    abort_job(std::string("MPI tile Cholesky: ") + e.what(), 1);
  }
}

}  // namespace halfscope::mpi::detail
