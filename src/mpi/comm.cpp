// MPI communicators, error agreement and job abort (halfscope/mpi/comm.hpp).
#include "halfscope/mpi/comm.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <new>
#include <utility>

#include "halfscope/core/device.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::mpi {
namespace {

// MPI counts are ints: larger payloads go in pieces of this many bytes.
constexpr std::int64_t kChunk = std::int64_t{1} << 30;

void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(std::string(call) +
              " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

// The message of the last error `agree` threw on this thread (failure_was_agreed).
thread_local std::string agreed_message;

// The halfscope error kinds that travel between ranks; the order is the wire format.
enum class Kind : std::int64_t { error, invalid_input, io, unsupported, cuda, numerical, not_pd };

std::pair<Kind, std::string> classify(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const NotPositiveDefinite& x) {
    return {Kind::not_pd, x.what()};
  } catch (const NumericalError& x) {
    return {Kind::numerical, x.what()};
  } catch (const InvalidInput& x) {
    return {Kind::invalid_input, x.what()};
  } catch (const IoError& x) {
    return {Kind::io, x.what()};
  } catch (const Unsupported& x) {
    return {Kind::unsupported, x.what()};
  } catch (const CudaError& x) {
    return {Kind::cuda, x.what()};
  } catch (const std::bad_alloc&) {
    return {Kind::error, "out of memory"};
  } catch (const std::exception& x) {
    return {Kind::error, x.what()};
  } catch (...) {
    return {Kind::error, "unknown failure"};
  }
}

[[noreturn]] void throw_kind(Kind kind, const std::string& message) {
  agreed_message = message;
  switch (kind) {
    case Kind::invalid_input:
      throw InvalidInput(message);
    case Kind::io:
      throw IoError(message);
    case Kind::unsupported:
      throw Unsupported(message);
    case Kind::cuda:
      throw CudaError(message);
    case Kind::numerical:
      throw NumericalError(message);
    case Kind::not_pd:
      throw NotPositiveDefinite(message);
    case Kind::error:
      break;
  }
  throw Error(message);
}

}  // namespace

bool launched() noexcept {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK",
                           "MPI_LOCALNRANKS", "SLURM_PMIX_MAPPING_SERV"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

bool active() noexcept {
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  return initialised != 0 && finalised == 0;
}

Environment::Environment(int& argc, char**& argv) {
  int initialised = 0;
  check(MPI_Initialized(&initialised), "MPI_Initialized");
  if (initialised) return;
  int provided = 0;
  check(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  owns_ = true;
  // Failures come back as codes (check() turns them into exceptions) instead of ending the job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (provided < MPI_THREAD_FUNNELED) {
    MPI_Finalize();
    throw Error("MPI_Init_thread: this MPI gives no thread support (MPI_THREAD_FUNNELED needed)");
  }
}

Environment::~Environment() {
  if (owns_ && active()) MPI_Finalize();
}

Comm::Comm(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
  check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
}

Comm::~Comm() {
  if (owned_ && comm_ != MPI_COMM_NULL && active()) MPI_Comm_free(&comm_);
}

Comm::Comm(Comm&& other) noexcept
    : comm_(std::exchange(other.comm_, MPI_COMM_NULL)),
      owned_(std::exchange(other.owned_, false)),
      rank_(other.rank_),
      size_(other.size_) {}

Comm& Comm::operator=(Comm&& other) noexcept {
  if (this != &other) {
    Comm old(std::move(*this));
    comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
    owned_ = std::exchange(other.owned_, false);
    rank_ = other.rank_;
    size_ = other.size_;
  }
  return *this;
}

Comm Comm::world() {
  if (!active()) throw Error("MPI is not initialised (start halfscope with mpirun)");
  return Comm(MPI_COMM_WORLD, false);
}

Comm Comm::split(int color, int key) const {
  MPI_Comm out = MPI_COMM_NULL;
  check(MPI_Comm_split(comm_, color, key, &out), "MPI_Comm_split");
  return Comm(out, true);
}

void Comm::barrier() const {
  check(MPI_Barrier(comm_), "MPI_Barrier");
}

void Comm::broadcast_bytes(void* data, std::int64_t bytes, int root) const {
  auto* p = static_cast<char*>(data);
  for (std::int64_t at = 0; at < bytes; at += kChunk)
    check(MPI_Bcast(p + at, static_cast<int>(std::min(kChunk, bytes - at)), MPI_BYTE, root, comm_),
          "MPI_Bcast");
}

std::string Comm::broadcast_string(const std::string& text, int root) const {
  std::int64_t length = static_cast<std::int64_t>(text.size());
  broadcast(std::span<std::int64_t>(&length, 1), root);
  std::string out = rank_ == root ? text : std::string(static_cast<std::size_t>(length), '\0');
  broadcast_bytes(out.data(), length, root);
  return out;
}

void Comm::send_bytes(const void* data, std::int64_t bytes, int peer, int tag) const {
  const auto* p = static_cast<const char*>(data);
  for (std::int64_t at = 0; at < bytes; at += kChunk)
    check(MPI_Send(p + at, static_cast<int>(std::min(kChunk, bytes - at)), MPI_BYTE, peer, tag,
                   comm_),
          "MPI_Send");
}

void Comm::receive_bytes(void* data, std::int64_t bytes, int peer, int tag) const {
  auto* p = static_cast<char*>(data);
  for (std::int64_t at = 0; at < bytes; at += kChunk)
    check(MPI_Recv(p + at, static_cast<int>(std::min(kChunk, bytes - at)), MPI_BYTE, peer, tag,
                   comm_, MPI_STATUS_IGNORE),
          "MPI_Recv");
}

// Element-wise reductions in pieces of at most INT_MAX elements (MPI counts are ints).
template <class T>
void allreduce(std::span<T> values, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  constexpr std::size_t kMax = static_cast<std::size_t>(std::numeric_limits<int>::max());
  for (std::size_t at = 0; at < values.size(); at += kMax)
    check(MPI_Allreduce(MPI_IN_PLACE, values.data() + at,
                        static_cast<int>(std::min(kMax, values.size() - at)), type, op, comm),
          "MPI_Allreduce");
}

void Comm::sum(std::span<double> values) const {
  allreduce(values, MPI_DOUBLE, MPI_SUM, comm_);
}

void Comm::sum(std::span<std::int64_t> values) const {
  allreduce(values, MPI_INT64_T, MPI_SUM, comm_);
}

void Comm::max(std::span<std::int64_t> values) const {
  allreduce(values, MPI_INT64_T, MPI_MAX, comm_);
}

double Comm::sum(double value) const {
  sum(std::span<double>(&value, 1));
  return value;
}

std::int64_t Comm::sum(std::int64_t value) const {
  sum(std::span<std::int64_t>(&value, 1));
  return value;
}

std::int64_t Comm::max(std::int64_t value) const {
  max(std::span<std::int64_t>(&value, 1));
  return value;
}

std::int64_t Comm::min(std::int64_t value) const {
  return -max(-value);
}

std::vector<std::vector<std::byte>> Comm::gather_bytes(std::span<const std::byte> mine,
                                                       int root) const {
  // Sizes first, then each rank's payload point to point (64-bit lengths, any total size).
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(size_), 0);
  sizes[static_cast<std::size_t>(rank_)] = static_cast<std::int64_t>(mine.size());
  sum(std::span<std::int64_t>(sizes));
  constexpr int kTag = 0x6a7;
  std::vector<std::vector<std::byte>> all;
  if (rank_ != root) {
    send_bytes(mine.data(), static_cast<std::int64_t>(mine.size()), root, kTag);
    return all;
  }
  all.resize(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    auto& out = all[static_cast<std::size_t>(r)];
    out.resize(static_cast<std::size_t>(sizes[static_cast<std::size_t>(r)]));
    if (r == root)
      std::copy(mine.begin(), mine.end(), out.begin());
    else
      receive_bytes(out.data(), static_cast<std::int64_t>(out.size()), r, kTag);
  }
  return all;
}

namespace detail {

void settle(const Comm& comm, std::exception_ptr error) {
  const std::int64_t first = comm.min(error ? comm.rank() : comm.size());
  if (first == comm.size()) return;
  auto [kind, message] =
      error && first == comm.rank() ? classify(error) : std::pair<Kind, std::string>{};
  std::int64_t code = static_cast<std::int64_t>(kind);
  comm.broadcast(std::span<std::int64_t>(&code, 1), static_cast<int>(first));
  message = comm.broadcast_string(message, static_cast<int>(first));
  throw_kind(static_cast<Kind>(code), "MPI rank " + std::to_string(first) + ": " + message);
}

}  // namespace detail

bool failure_was_agreed(std::string_view message) noexcept {
  return !agreed_message.empty() && message == agreed_message;
}

void abort_job(const std::string& message, int status) noexcept {
  int rank = 0, size = 1;
  if (active()) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  std::fprintf(stderr, "halfscope: error: MPI rank %d of %d: %s\n", rank, size, message.c_str());
  std::fflush(stderr);
  if (active()) MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);
}

namespace {

// This rank's rank among the ranks of its host, and their count.
std::pair<int, int> host_rank(const Comm& comm) {
  MPI_Comm host = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm.raw(), MPI_COMM_TYPE_SHARED, comm.rank(), MPI_INFO_NULL, &host) !=
      MPI_SUCCESS)
    throw Error("MPI_Comm_split_type failed: cannot tell the ranks of this host apart");
  int local = 0, size = 1;
  MPI_Comm_rank(host, &local);
  MPI_Comm_size(host, &size);
  MPI_Comm_free(&host);
  return {local, size};
}

}  // namespace

int rank_device(const Comm& comm) {
  const int local = host_rank(comm).first;
  const auto devices = static_cast<int>(query_devices().devices.size());
  return devices > 0 ? local % devices : -1;
}

int device_sharers(const Comm& comm) {
  const auto [local, size] = host_rank(comm);
  const auto devices = static_cast<int>(query_devices().devices.size());
  if (devices == 0) return 1;
  const int device = local % devices;
  return (size - device + devices - 1) / devices;
}

}  // namespace halfscope::mpi
