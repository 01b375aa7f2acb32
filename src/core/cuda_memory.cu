// Device-memory helpers (see include/halfscope/core/cuda_memory.hpp) and the cuBLAS handle pool
// (include/halfscope/core/cublas.hpp).
#include <algorithm>
#include <list>
#include <mutex>
#include <vector>

#include "halfscope/core/cublas.hpp"
#include "halfscope/core/cuda_memory.hpp"

namespace halfscope::cuda {

void* pinned_mailbox() {
  // A thread's mailbox goes back to a process-wide free list when the thread ends, for the next
  // thread to take: calls over several devices start one host thread per device each time, and
  // allocating and freeing page-locked memory per thread cost about 8 ms per device and call
  // (cudaFreeHost synchronises). The free list lives as long as the process (never freed: the
  // CUDA runtime may be gone at exit).
  struct FreeList {
    std::mutex mutex;
    std::vector<void*> boxes;
  };
  static auto* free_list = new FreeList;
  struct Mailbox {
    void* ptr = nullptr;
    Mailbox() {
      {
        const std::lock_guard lock(free_list->mutex);
        if (!free_list->boxes.empty()) {
          ptr = free_list->boxes.back();
          free_list->boxes.pop_back();
          return;
        }
      }
      HS_CUDA_CHECK(cudaHostAlloc(&ptr, 256, cudaHostAllocPortable));
    }
    ~Mailbox() {
      try {
        const std::lock_guard lock(free_list->mutex);
        free_list->boxes.push_back(ptr);
      } catch (...) {  // no room to keep it: leave it allocated
      }
    }
    Mailbox(const Mailbox&) = delete;
    Mailbox& operator=(const Mailbox&) = delete;
  };
  thread_local Mailbox box;
  return box.ptr;
}

void retain_pool_memory() {
  static std::mutex mutex;
  static std::vector<bool> done;
  int device = 0;
  HS_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard lock(mutex);
  if (done.size() <= static_cast<std::size_t>(device))
    done.resize(static_cast<std::size_t>(device) + 1, false);
  if (done[static_cast<std::size_t>(device)]) return;
  cudaMemPool_t pool = nullptr;
  HS_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  std::uint64_t threshold = 0;
  HS_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  // Never lower a threshold the application (or another library) set higher.
  if (threshold < kPoolRetainedBytes) {
    threshold = kPoolRetainedBytes;
    HS_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  }
  done[static_cast<std::size_t>(device)] = true;
}

int grid_blocks(std::int64_t work, int threads, int blocks_per_sm) {
  int device = 0;
  int sms = 0;
  HS_CUDA_CHECK(cudaGetDevice(&device));
  HS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::int64_t need = (work + threads - 1) / threads;
  return static_cast<int>(std::clamp<std::int64_t>(need, 1, std::int64_t{sms} * blocks_per_sm));
}

CublasHandle::CublasHandle() {
  HS_CUBLAS_CHECK(cublasCreate(&handle_));
  HS_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
}

CublasHandle::~CublasHandle() {
  if (handle_) (void)cublasDestroy(handle_);
}

namespace {

struct IdleHandle {
  int device;
  std::unique_ptr<CublasHandle> handle;
};

struct HandlePool {
  std::mutex mutex;
  std::list<IdleHandle> idle;
};

// Never destroyed: destroying cuBLAS handles from a static destructor races the CUDA runtime's
// own teardown at exit.
HandlePool& pool() {
  static auto* p = new HandlePool;
  return *p;
}

}  // namespace

CublasLease::CublasLease(cudaStream_t stream) : stream_(stream) {
  HS_CUDA_CHECK(cudaGetDevice(&device_));
  {
    std::lock_guard lock(pool().mutex);
    auto& idle = pool().idle;
    const auto it = std::find_if(idle.begin(), idle.end(),
                                 [&](const IdleHandle& h) { return h.device == device_; });
    if (it != idle.end()) {
      handle_ = std::move(it->handle);
      idle.erase(it);
    }
  }
  if (!handle_) handle_ = std::make_unique<CublasHandle>();
  HS_CUBLAS_CHECK(cublasSetStream(handle_->get(), stream));
  HS_CUBLAS_CHECK(cublasSetMathMode(handle_->get(), CUBLAS_DEFAULT_MATH));
}

CublasLease::~CublasLease() {
  if (!handle_) return;
  if (cudaStreamSynchronize(stream_) != cudaSuccess) {
    (void)cudaGetLastError();
    return;  // possibly still in use by a failed stream: drop it
  }
  std::lock_guard lock(pool().mutex);
  pool().idle.push_front({device_, std::move(handle_)});
}

void clear_cublas_handles() {
  std::list<IdleHandle> idle;
  std::lock_guard lock(pool().mutex);
  idle.swap(pool().idle);
}

}  // namespace halfscope::cuda
