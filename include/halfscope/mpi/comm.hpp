// The MPI layer of the scale-out (issue 9, DESIGN.md section 6): one process (rank) per GPU, or
// per CPU socket without GPU, started by mpirun / mpiexec / srun. Only in builds with MPI
// (halfscope/config.hpp: HALFSCOPE_HAS_MPI); the library target is halfscope::mpi.
//
// Collective calls must be made by every rank of a communicator in the same order. A failure on
// one rank must therefore never leave the others waiting in a collective: work that can fail
// runs inside `agree`, which makes every rank throw the same error, or the process ends the whole
// job with `abort_job`.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace halfscope::mpi {

/// Whether an MPI launcher started this process: its environment names a world size (Open MPI,
/// PMIx, PMI-1/2 as MPICH's Hydra and Slurm's srun set them). A plain `halfscope ...` then never
/// initialises MPI.
[[nodiscard]] bool launched() noexcept;

/// Whether MPI is initialised and not yet finalised in this process.
[[nodiscard]] bool active() noexcept;

/// MPI for the lifetime of the object: MPI_Init_thread (MPI_THREAD_FUNNELED: only the thread
/// that initialised calls MPI; OpenMP and device threads never do) unless already initialised,
/// MPI_Finalize on destruction if this object initialised it. Throws Error if MPI cannot start.
class Environment {
 public:
  Environment(int& argc, char**& argv);
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

 private:
  bool owns_ = false;
};

/// A communicator: MPI_COMM_WORLD (not owned) or one made by split (freed on destruction).
/// Every method is collective over the communicator unless it says otherwise. Sizes are 64-bit:
/// payloads beyond MPI's int counts travel in chunks. MPI errors throw Error naming the call.
class Comm {
 public:
  Comm() = default;
  ~Comm();
  Comm(Comm&& other) noexcept;
  Comm& operator=(Comm&& other) noexcept;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  /// All ranks of the job.
  [[nodiscard]] static Comm world();

  /// This rank's number in [0, size()) (not collective).
  [[nodiscard]] int rank() const noexcept { return rank_; }
  /// Ranks in the communicator (not collective).
  [[nodiscard]] int size() const noexcept { return size_; }
  /// The MPI handle, for calls this class does not wrap (not collective).
  [[nodiscard]] MPI_Comm raw() const noexcept { return comm_; }

  /// The ranks with the same `color`, numbered by `key` (then by rank here).
  [[nodiscard]] Comm split(int color, int key) const;
  void barrier() const;

  /// `bytes` bytes at `data` from `root` to every rank.
  void broadcast_bytes(void* data, std::int64_t bytes, int root) const;
  template <class T>
  void broadcast(std::span<T> values, int root) const {
    static_assert(std::is_trivially_copyable_v<T>);
    broadcast_bytes(values.data(), static_cast<std::int64_t>(values.size_bytes()), root);
  }
  /// `text` from root; every rank returns root's string.
  [[nodiscard]] std::string broadcast_string(const std::string& text, int root) const;

  /// Point to point (not collective): `bytes` bytes to / from rank `peer` with `tag` (< 2^20).
  void send_bytes(const void* data, std::int64_t bytes, int peer, int tag) const;
  void receive_bytes(void* data, std::int64_t bytes, int peer, int tag) const;

  /// Element-wise sums and maxima over ranks, in place on every rank.
  void sum(std::span<double> values) const;
  void sum(std::span<std::int64_t> values) const;
  void max(std::span<std::int64_t> values) const;
  [[nodiscard]] double sum(double value) const;
  [[nodiscard]] std::int64_t sum(std::int64_t value) const;
  [[nodiscard]] std::int64_t max(std::int64_t value) const;
  [[nodiscard]] std::int64_t min(std::int64_t value) const;

  /// Every rank's bytes (any length, zero included) on `root`, in rank order; empty elsewhere.
  [[nodiscard]] std::vector<std::vector<std::byte>> gather_bytes(std::span<const std::byte> mine,
                                                                 int root) const;

 private:
  Comm(MPI_Comm comm, bool owned);
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool owned_ = false;
  int rank_ = 0, size_ = 0;
};

namespace detail {
/// Throws on every rank when `error` (this rank's failure, or null) is set on any rank.
void settle(const Comm& comm, std::exception_ptr error);
}  // namespace detail

/// Runs `step` on every rank, then agrees on the outcome (one small collective): when any rank
/// failed, every rank throws the error of the lowest failing rank, its type kept (InvalidInput,
/// IoError, Unsupported, CudaError, NumericalError, NotPositiveDefinite, else Error) and its
/// message prefixed "MPI rank r: ". Put each piece of work that can fail on some ranks only
/// (reading a file, a factorization step) inside one, so no rank is left in a collective.
template <class F>
void agree(const Comm& comm, F&& step) {
  std::exception_ptr error;
  try {
    step();
  } catch (...) {
    error = std::current_exception();
  }
  detail::settle(comm, error);
}

/// Whether the error with this message (what()) was thrown by `agree` on this thread (every rank
/// throws it, so only rank 0 needs to report it and every rank can end normally). Keyed by the
/// message, so an agreed error caught earlier never vouches for a later one.
[[nodiscard]] bool failure_was_agreed(std::string_view message) noexcept;

/// Ends the whole job from a rank that failed outside `agree`: prints "halfscope: error: MPI rank
/// r of n: <message>" on stderr and calls MPI_Abort with `status`, which the launcher turns into
/// the end of every rank (never a hang in a collective).
[[noreturn]] void abort_job(const std::string& message, int status) noexcept;

/// The CUDA device a GPU rank uses: its rank among the ranks of its host (MPI_Comm_split_type)
/// modulo the devices the host has; -1 without a device. Collective over `comm`.
int rank_device(const Comm& comm);

/// How many ranks of this rank's host use its device (rank_device): ceil((ranks of the host -
/// device) / devices of the host); 1 without a device. Collective over `comm`.
int device_sharers(const Comm& comm);

}  // namespace halfscope::mpi
