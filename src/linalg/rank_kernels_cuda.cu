// A GPU rank of the MPI tile Cholesky (rank_kernels.hpp): the rank's tiles on one device, its
// panels arriving through page-locked host buffers.
//
// Two streams, as in the one-process factorization (cholesky_cuda.cu): P (high priority) runs
// the critical path (POTRF, the panel solves (panel_trsm over the rank's tiles of the column,
// which lie one after another), the copies of arriving panels and their
// low-precision conversions, and the look-ahead update of column k + 1); U runs the rest of each
// step's updates, column k + 2 first (event col_done[k]: P's POTRF / TRSM of panel k + 2 wait for
// it), then the others (update_done[k]: panel k + 2 may then overwrite the parity buffers). The
// host's MPI waits overlap U's work: a step's updates are only queued.
//
// Updates are batched per step and phase (pointer arrays planned once): one cublasGemmBatchedEx
// per variant and tile height, SYRK per diagonal tile, HP2 / HP3 / DP tile by tile (their C is
// rounded around the GEMM). Overflows of FP16 operands and C entries are flagged on the device
// with the code of the tile's first consumer (convert_blocks), read by poll and finish.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/staged_copy.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/cublas.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cusolver.hpp"
#include "halfscope/core/error.hpp"
#include "linalg/cholesky_factor_cuda.hpp"
#include "linalg/panel_trsm_cuda.hpp"
#include "linalg/rank_kernels.hpp"
#include "linalg/tile_cuda.hpp"

namespace halfscope::linalg::detail {
namespace {

// One pointer-array batch: `count` tiles of height m in variant v from `first` in the arrays.
struct Batch {
  GemmVariant v;
  std::int64_t m, first, count;
};

// What one phase of a step updates: batches, diagonal tiles (SYRK) and C-rounding tiles.
struct Phase {
  std::vector<Batch> batches;
  std::vector<std::int64_t> diagonal;                        // j of owned (j, j)
  std::vector<std::pair<std::int64_t, std::int64_t>> tiles;  // HP2 / HP3 / DP tiles (i, j)
};

int select(int device) {
  HS_CUDA_CHECK(cudaSetDevice(device));
  return device;
}

class DeviceRank final : public RankKernels {
 public:
  DeviceRank(int device, const RankShare& share, const std::vector<GemmVariant>& variants,
             std::string policy, RecordFailure record)
      : device_(select(device)),
        s_(share),
        variants_(variants),
        policy_(std::move(policy)),
        record_(std::move(record)),
        nt_(share.layout->tile_rows()),
        nb_(share.layout->tile_size()),
        p_(cuda::StreamPriority::high),
        solver_(p_.get()) {
    HS_CUBLAS_CHECK(cublasSetStream(pblas_.get(), p_.get()));
    HS_CUBLAS_CHECK(cublasSetStream(ublas_.get(), u_.get()));
    allocate();
    plan();
    // Pageable host tiles: staged on the rank's threads (one thread's pageable copy ran at
    // 6.6 GB/s on an H200 host, staged_copy.hpp).
    cuda::upload_staged(local_, s_.local, s_.local_elements * std::int64_t{4},
                        std::min(cuda::staging_threads(1), s_.threads));
  }

  ~DeviceRank() override {
    if (cudaSetDevice(device_) != cudaSuccess) (void)cudaGetLastError();
    for (const auto& s : {p_.get(), u_.get(), poll_.get()})
      if (cudaStreamSynchronize(s) != cudaSuccess) (void)cudaGetLastError();
  }

  float* panel_buffer(int parity, std::int64_t i) override {
    return host_ + panel_host_[static_cast<std::size_t>(parity * nt_ + i)];
  }
  float* diagonal_buffer() override { return host_; }

  void reuse_buffers(int parity) override {
    HS_CUDA_CHECK(cudaEventSynchronize(uploaded_[parity].get()));
    HS_CUDA_CHECK(cudaEventSynchronize(diagonal_up_.get()));
  }

  void factor_diagonal(std::int64_t k) override {
    const cudaStream_t p = p_.get();
    after_column(k);
    const std::int64_t h = height(k);
    HS_CUSOLVER_CHECK(cusolverDnSpotrf(solver_.get(), CUBLAS_FILL_MODE_LOWER, static_cast<int>(h),
                                       tile(k, k), static_cast<int>(h), work_, lwork_, info_));
    HS_CUDA_CHECK(cudaMemcpyAsync(host_, tile(k, k), static_cast<std::size_t>(h * h) * 4,
                                  cudaMemcpyDeviceToHost, p));
    HS_CUDA_CHECK(cudaMemcpyAsync(info_host_, info_, sizeof(int), cudaMemcpyDeviceToHost, p));
    HS_CUDA_CHECK(cudaStreamSynchronize(p));
    const int info = *info_host_;
    if (info < 0)
      throw CudaError("cusolverDnSpotrf rejected argument " + std::to_string(-info) + " at tile " +
                      tile_text(k, k));
    if (info > 0)
      record_(k, k, k, std::make_exception_ptr(pivot_failure(policy_, k, nb_, info)),
              FailedTile{k, k});
  }

  void diagonal_arrived(std::int64_t k) override {
    const std::int64_t h = height(k);
    HS_CUDA_CHECK(cudaMemcpyAsync(diagonal_, host_, static_cast<std::size_t>(h * h) * 4,
                                  cudaMemcpyHostToDevice, p_.get()));
    diagonal_up_.record(p_.get());
  }

  void solve_panel(std::int64_t k, const std::vector<std::int64_t>& rows) override {
    const cudaStream_t p = p_.get();
    after_column(k);
    const std::int64_t hk = height(k);
    if (!rows.empty() && contiguous(k, rows)) {
      // The one-process panel solve (halving, leaves by their inverses): one strsm per tile
      // took 3.5 s of a one-rank E-ELT factorization that one process does in 1.5 s.
      PanelBlocks panel;
      panel.x = tile(rows.front(), k), panel.count = static_cast<std::int64_t>(rows.size());
      panel.rows = nb_, panel.last_rows = height(rows.back()), panel.stride = nb_ * nb_;
      panel_trsm(pblas_.get(), diagonal_, hk, panel, hk, trsm_scratch_);
    } else {
      const float one = 1.0f;
      const PedanticMath strict(pblas_.get());  // strict FP32, as the CPU's strsm
      for (const std::int64_t i : rows)
        HS_CUBLAS_CHECK(cublasStrsm(pblas_.get(), CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER,
                                    CUBLAS_OP_T, CUBLAS_DIAG_NON_UNIT, static_cast<int>(height(i)),
                                    static_cast<int>(hk), &one, diagonal_, static_cast<int>(hk),
                                    tile(i, k), static_cast<int>(height(i))));
    }
    for (const std::int64_t i : rows)
      HS_CUDA_CHECK(cudaMemcpyAsync(panel_buffer(static_cast<int>(k % 2), i), tile(i, k),
                                    static_cast<std::size_t>(height(i) * hk) * 4,
                                    cudaMemcpyDeviceToHost, p));
    HS_CUDA_CHECK(cudaStreamSynchronize(p));
  }

  void panel_arrived(std::int64_t k) override {
    const cudaStream_t p = p_.get();
    const int par = static_cast<int>(k % 2);
    // Parity k % 2 was last read by step k - 2's updates.
    if (k >= 2) HS_CUDA_CHECK(cudaStreamWaitEvent(p, update_done_[k - 2]->get(), 0));
    float* fp32 = panel32(par);
    for (std::int64_t i = k + 1; i < nt_; ++i) {
      if (!s_.needs_panel_row(i)) continue;
      const auto bytes = static_cast<std::size_t>(height(i) * nb_) * 4;
      if (owns(i, k))  // solved here: it is still in the local tiles
        HS_CUDA_CHECK(
            cudaMemcpyAsync(fp32 + i * nb_ * nb_, tile(i, k), bytes, cudaMemcpyDeviceToDevice, p));
      else
        HS_CUDA_CHECK(cudaMemcpyAsync(fp32 + i * nb_ * nb_, panel_buffer(par, i), bytes,
                                      cudaMemcpyHostToDevice, p));
    }
    uploaded_[par].record(p);
    for (int f = 1; f < kFormats && k + 1 < nt_; ++f) {
      if (!formats_[f]) continue;
      const auto fmt = static_cast<OperandFormat>(f);
      BlockSet set;  // rows without a consumer here have tag 0: skipped
      set.base = fp32, set.first = (k + 1) * nb_ * nb_, set.stride = nb_ * nb_;
      set.count = nt_ - k - 1, set.rows = nb_, set.last_rows = height(nt_ - 1), set.cols = nb_;
      set.dst_stride = nb_ * nb_, set.tags = tags_[f] + k * nt_ + k + 1;
      convert_blocks(set, rounding_for(fmt), operand(fmt, par, k + 1), flag_, p);
    }
    panel_ready_[k]->record(p);
  }

  void update(std::int64_t k, std::int64_t j_first, std::int64_t j_last,
              const std::function<void()>& progress) override {
    if (j_first == k + 1 && j_last == k + 1) {
      // Column k + 1 was last updated by step k - 1's first column phase on U.
      if (k >= 1) HS_CUDA_CHECK(cudaStreamWaitEvent(p_.get(), col_done_[k - 1]->get(), 0));
      run(pblas_.get(), p_.get(), 0, k, phases_[static_cast<std::size_t>(3 * k)]);
    } else if (j_first == k + 2 && j_last == nt_ - 1) {
      const cudaStream_t u = u_.get();
      HS_CUDA_CHECK(cudaStreamWaitEvent(u, panel_ready_[k]->get(), 0));
      run(ublas_.get(), u, 1, k, phases_[static_cast<std::size_t>(3 * k + 1)]);
      col_done_[k]->record(u);
      run(ublas_.get(), u, 1, k, phases_[static_cast<std::size_t>(3 * k + 2)]);
      update_done_[k]->record(u);
    } else {
      throw Error("GPU rank: unexpected update range " + std::to_string(j_first) + ".." +
                  std::to_string(j_last) + " in step " + std::to_string(k));
    }
    if (progress) progress();
  }

  bool poll() override {
    HS_CUDA_CHECK(cudaMemcpyAsync(flag_host_, flag_, sizeof(FailureCode), cudaMemcpyDeviceToHost,
                                  poll_.get()));
    HS_CUDA_CHECK(cudaStreamSynchronize(poll_.get()));
    if (*flag_host_ == kNoFailure) return false;
    report(*flag_host_);
    return true;
  }

  void finish() override {
    HS_CUDA_CHECK(cudaStreamSynchronize(u_.get()));
    HS_CUDA_CHECK(cudaStreamSynchronize(p_.get()));
    cuda::download_staged(s_.local, local_, s_.local_elements * std::int64_t{4},
                          std::min(cuda::staging_threads(1), s_.threads));
    FailureCode code = kNoFailure;
    HS_CUDA_CHECK(cudaMemcpy(&code, flag_, sizeof(code), cudaMemcpyDeviceToHost));
    if (code != kNoFailure) report(code);
  }

  [[nodiscard]] std::int64_t scratch_bytes() const override { return bytes_; }

 private:
  [[nodiscard]] std::int64_t height(std::int64_t i) const { return s_.layout->tile_height(i); }
  [[nodiscard]] bool owns(std::int64_t i, std::int64_t j) const {
    return s_.offsets[static_cast<std::size_t>(i * nt_ + j)] >= 0;
  }
  [[nodiscard]] float* tile(std::int64_t i, std::int64_t j) const {
    return local_ + s_.offsets[static_cast<std::size_t>(i * nt_ + j)];
  }
  [[nodiscard]] GemmVariant variant(std::int64_t i, std::int64_t j) const {
    return variants_[static_cast<std::size_t>(i * nt_ + j)];
  }
  [[nodiscard]] float* panel32(int par) const {
    return static_cast<float*>(panel_[0][par]->data());
  }
  // Panel tile row i of parity `par` in format f (the FP32 copy for fp32).
  [[nodiscard]] void* operand(OperandFormat f, int par, std::int64_t i) const {
    return static_cast<char*>(panel_[static_cast<int>(f)][par]->data()) +
           i * nb_ * nb_ * format_bytes(f);
  }

  // P's POTRF or TRSM of panel k waits for column k's update by step k - 2 (U's first phase).
  void after_column(std::int64_t k) {
    if (k >= 2) HS_CUDA_CHECK(cudaStreamWaitEvent(p_.get(), col_done_[k - 2]->get(), 0));
  }

  void report(FailureCode code) {
    const DecodedFailure d = decode_failure(code);
    FailedTile tile;
    std::exception_ptr error;
    try {
      throw_overflow(variant(d.ti, d.tj), code, policy_, &tile);
    } catch (...) {
      error = std::current_exception();
    }
    record_(d.step, d.ti, d.tj, error, tile);
  }

  // Device memory freed with this object (after the streams drain), counted in bytes_.
  void* take(std::int64_t bytes) {
    blocks_.push_back(Buffer::allocate(std::max<std::int64_t>(bytes, 1), Memory::device));
    bytes_ += bytes;
    return blocks_.back()->data();
  }
  void allocate();
  void plan();
  // Whether the tiles (i, k), i in rows, follow one another in the local storage (full tiles of
  // nb^2, the last one possibly shorter), as a panel_trsm panel needs.
  [[nodiscard]] bool contiguous(std::int64_t k, const std::vector<std::int64_t>& rows) const {
    for (std::size_t t = 0; t < rows.size(); ++t)
      if (tile(rows[t], k) != tile(rows.front(), k) + static_cast<std::int64_t>(t) * nb_ * nb_ ||
          (t + 1 < rows.size() && height(rows[t]) != nb_))
        return false;
    return true;
  }
  void run(cublasHandle_t handle, cudaStream_t stream, int lane, std::int64_t k,
           const Phase& phase);

  int device_;
  RankShare s_;
  std::vector<GemmVariant> variants_;
  std::string policy_;
  RecordFailure record_;
  std::int64_t nt_, nb_;
  cuda::Stream p_, u_, poll_;
  cuda::CusolverHandle solver_;
  cuda::CublasHandle pblas_, ublas_;
  cuda::Event uploaded_[2], diagonal_up_;
  std::vector<std::unique_ptr<cuda::Event>> panel_ready_, col_done_, update_done_;
  std::vector<std::shared_ptr<Buffer>> blocks_;  // device memory, freed after the streams drain
  std::shared_ptr<Buffer> panel_[kFormats][2];
  std::shared_ptr<Buffer> pinned_;
  std::int64_t bytes_ = 0;
  bool formats_[kFormats] = {};
  float* local_ = nullptr;
  float* diagonal_ = nullptr;
  float* work_ = nullptr;
  float* trsm_scratch_ = nullptr;  // panel_trsm's, for this rank's rows of a column
  int lwork_ = 0;
  int* info_ = nullptr;
  FailureCode* flag_ = nullptr;
  FailureCode* tags_[kFormats] = {};
  void* c_scratch_[kFormats][2] = {};  // FP16 / FP64 C of HP3 / DP, per lane
  const void** a_ptrs_ = nullptr;
  const void** b_ptrs_ = nullptr;
  void** c_ptrs_ = nullptr;
  std::vector<Phase> phases_;  // per step: look-ahead column, column k + 2, the rest
  float* host_ = nullptr;      // page-locked: the diagonal buffer, then the panel buffers
  std::vector<std::int64_t> panel_host_;  // element offset in host_ per (parity, row)
  int* info_host_ = nullptr;
  FailureCode* flag_host_ = nullptr;
};

void DeviceRank::allocate() {
  local_ = static_cast<float*>(take(s_.local_elements * 4));
  diagonal_ = static_cast<float*>(take(nb_ * nb_ * 4));
  bool c_used[kFormats] = {};
  formats_[0] = true;  // the FP32 panel: SYRK, SP and the source of every conversion
  for (std::int64_t j = 0; j < nt_; ++j)
    for (std::int64_t i = j + 1; i < nt_; ++i) {
      if (!owns(i, j)) continue;
      formats_[static_cast<int>(operand_format(variant(i, j)))] = true;
      if (variant(i, j) == GemmVariant::HP3 || variant(i, j) == GemmVariant::DP)
        c_used[static_cast<int>(c_format(variant(i, j)))] = true;
    }
  // Panels hold every tile row at its place (rows this rank never reads stay unused): simple
  // offsets, 2 n nb elements per format.
  const std::int64_t panel_elems = nt_ * nb_ * nb_;
  for (int f = 0; f < kFormats; ++f)
    for (int par = 0; par < 2 && formats_[f]; ++par) {
      const std::int64_t bytes = panel_elems * format_bytes(static_cast<OperandFormat>(f));
      panel_[f][par] = Buffer::allocate(bytes, Memory::device);
      bytes_ += bytes;
    }
  for (int f = 0; f < kFormats; ++f)
    for (int lane = 0; lane < 2 && c_used[f]; ++lane)
      c_scratch_[f][lane] = take(nb_ * nb_ * format_bytes(static_cast<OperandFormat>(f)));
  flag_ = static_cast<FailureCode*>(take(sizeof(FailureCode)));
  HS_CUDA_CHECK(cudaMemset(flag_, 0xff, sizeof(FailureCode)));  // kNoFailure
  info_ = static_cast<int*>(take(sizeof(int)));
  HS_CUSOLVER_CHECK(cusolverDnSpotrf_bufferSize(solver_.get(), CUBLAS_FILL_MODE_LOWER,
                                                static_cast<int>(nb_), diagonal_,
                                                static_cast<int>(nb_), &lwork_));
  work_ = static_cast<float*>(take(std::max(lwork_, 1) * std::int64_t{4}));
  std::int64_t my_rows = 0;  // rows of the tiles of this rank's grid row
  for (std::int64_t i = 0; i < nt_; ++i)
    if (s_.in_row(i)) my_rows += height(i);
  trsm_scratch_ = static_cast<float*>(take(panel_trsm_scratch(my_rows, nb_) * 4));
  for (std::int64_t k = 0; k < nt_; ++k)
    for (auto* events : {&panel_ready_, &col_done_, &update_done_})
      events->push_back(std::make_unique<cuda::Event>());
  // Page-locked: the flag and pivot mailboxes (16 bytes), the diagonal tile, the panel tiles.
  std::int64_t floats = nb_ * nb_ + 1;
  panel_host_.assign(static_cast<std::size_t>(2 * nt_), 0);
  for (int par = 0; par < 2; ++par)
    for (std::int64_t i = 1; i < nt_; ++i) {
      if (!s_.needs_panel_row(i)) continue;
      panel_host_[static_cast<std::size_t>(par * nt_ + i)] = floats;
      floats += height(i) * nb_ + 1;
    }
  pinned_ = Buffer::allocate(16 + floats * 4, Memory::pinned);
  bytes_ += 16 + floats * 4;
  auto* base = static_cast<char*>(pinned_->data());
  flag_host_ = reinterpret_cast<FailureCode*>(base);
  info_host_ = reinterpret_cast<int*>(base + 8);
  host_ = reinterpret_cast<float*>(base + 16);
}

void DeviceRank::plan() {
  // First consumers of each panel tile per format and step, as failure codes (0: none here, the
  // conversion skips the tile): tags[f][k * NT + i].
  std::vector<std::vector<FailureCode>> tags(kFormats);
  for (int f = 1; f < kFormats; ++f)
    if (formats_[f]) tags[f].assign(static_cast<std::size_t>(nt_ * nt_), 0);
  const auto first = [](FailureCode& tag, FailureCode code) {
    if (tag == 0 || code < tag) tag = code;
  };
  std::vector<const void*> a_host, b_host;
  std::vector<void*> c_host;
  phases_.assign(static_cast<std::size_t>(3 * nt_), {});
  for (std::int64_t k = 0; k + 1 < nt_; ++k) {
    const int par = static_cast<int>(k % 2);
    for (int phase = 0; phase < 3; ++phase) {
      Phase& ph = phases_[static_cast<std::size_t>(3 * k + phase)];
      // Columns k + 1, k + 2 and the rest, each within the matrix.
      const std::int64_t j0 = k + 1 + phase, j1 = phase < 2 ? std::min(j0, nt_ - 1) : nt_ - 1;
      // Tiles of the pointer-array batches, by variant and full height.
      std::vector<std::pair<std::int64_t, std::int64_t>> bucket[4][2];
      constexpr GemmVariant kBatched[4] = {GemmVariant::SP, GemmVariant::TF32, GemmVariant::HP1,
                                           GemmVariant::BF16};
      for (std::int64_t j = j0; j <= j1; ++j) {
        if (!s_.in_col(j)) continue;
        if (owns(j, j)) ph.diagonal.push_back(j);
        for (std::int64_t i = j + 1; i < nt_; ++i) {
          if (!owns(i, j)) continue;
          const GemmVariant v = variant(i, j);
          const auto f = static_cast<int>(operand_format(v));
          if (f != 0) {
            first(tags[f][static_cast<std::size_t>(k * nt_ + i)],
                  failure_code(k, FailureKind::operand, false, i, j));
            first(tags[f][static_cast<std::size_t>(k * nt_ + j)],
                  failure_code(k, FailureKind::operand, true, i, j));
          }
          if (rounds_c(v)) {
            ph.tiles.emplace_back(i, j);
            continue;
          }
          const auto x = std::find(std::begin(kBatched), std::end(kBatched), v) - kBatched;
          bucket[x][height(i) == nb_ ? 0 : 1].emplace_back(i, j);
        }
      }
      for (int x = 0; x < 4; ++x)
        for (int full = 0; full < 2; ++full) {
          const auto& tiles = bucket[x][full];
          if (tiles.empty()) continue;
          const GemmVariant v = kBatched[x];
          const OperandFormat f = operand_format(v);
          ph.batches.push_back(Batch{v, height(tiles.front().first),
                                     static_cast<std::int64_t>(a_host.size()),
                                     static_cast<std::int64_t>(tiles.size())});
          for (const auto& [i, j] : tiles) {
            a_host.push_back(operand(f, par, i));
            b_host.push_back(operand(f, par, j));
            c_host.push_back(tile(i, j));
          }
        }
    }
  }
  const auto upload = [this](const void* host, std::size_t bytes) {
    void* dev = take(static_cast<std::int64_t>(bytes));
    if (bytes > 0) HS_CUDA_CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
    return dev;
  };

  const std::size_t ptr_bytes = a_host.size() * sizeof(void*);
  a_ptrs_ = static_cast<const void**>(upload(a_host.data(), ptr_bytes));
  b_ptrs_ = static_cast<const void**>(upload(b_host.data(), ptr_bytes));
  c_ptrs_ = static_cast<void**>(upload(c_host.data(), ptr_bytes));
  for (int f = 1; f < kFormats; ++f)
    if (formats_[f])
      tags_[f] =
          static_cast<FailureCode*>(upload(tags[f].data(), tags[f].size() * sizeof(FailureCode)));
}

void DeviceRank::run(cublasHandle_t handle, cudaStream_t stream, int lane, std::int64_t k,
                     const Phase& phase) {
  const int par = static_cast<int>(k % 2);
  const float minus_one = -1.0f, one = 1.0f;
  if (!phase.diagonal.empty()) {
    const PedanticMath strict(handle);  // SYRK in strict FP32, as the CPU's
    for (const std::int64_t j : phase.diagonal)
      HS_CUBLAS_CHECK(cublasSsyrk(handle, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N,
                                  static_cast<int>(height(j)), static_cast<int>(nb_), &minus_one,
                                  static_cast<const float*>(operand(OperandFormat::fp32, par, j)),
                                  static_cast<int>(height(j)), &one, tile(j, j),
                                  static_cast<int>(height(j))));
  }
  for (const auto& [i, j] : phase.tiles) {  // C rounded around the GEMM, as gemm_run does
    const GemmVariant v = variant(i, j);
    const OperandFormat f = operand_format(v);
    const std::int64_t m = height(i);
    float* c = tile(i, j);
    GemmBatch g;
    g.m = m, g.n = nb_, g.k = nb_, g.a = operand(f, par, i), g.lda = m;
    g.b = operand(f, par, j), g.ldb = nb_, g.c = c, g.ldc = m;
    BlockSet cset;
    cset.base = c, cset.stride = m * nb_, cset.count = 1, cset.rows = m, cset.last_rows = m;
    cset.cols = nb_, cset.dst_stride = m * nb_;
    cset.tag_base = failure_code(k, FailureKind::c_entry, false, i, j);
    gemm_rounding_c(handle, stream, v, g, cset, failure_code(k, FailureKind::result, false, i, j),
                    c_scratch_[static_cast<int>(c_format(v))][lane], flag_);
  }
  for (const Batch& b : phase.batches) {
    GemmBatch g;
    g.m = b.m, g.n = nb_, g.k = nb_, g.lda = b.m, g.ldb = nb_, g.ldc = b.m, g.batch = b.count;
    g.a_array = a_ptrs_ + b.first, g.b_array = b_ptrs_ + b.first, g.c_array = c_ptrs_ + b.first;
    gemm_batched(handle, b.v, g);
  }
}

}  // namespace

std::unique_ptr<RankKernels> make_device_rank_kernels(int device, const RankShare& share,
                                                      const std::vector<GemmVariant>& variants,
                                                      const std::string& policy,
                                                      RecordFailure record) {
  int count = 0;
  HS_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count)
    throw InvalidInput("MPI tile Cholesky: devices: CUDA device " + std::to_string(device) +
                       " does not exist (this host has " + std::to_string(count) + ")");
  return std::make_unique<DeviceRank>(device, share, variants, policy, std::move(record));
}

}  // namespace halfscope::linalg::detail
