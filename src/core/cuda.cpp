// The CUDA check macros' error path, and RAII for streams and events
// (include/halfscope/core/cuda.hpp).
#include "halfscope/config.hpp"

#if HALFSCOPE_WITH_CUDA

#include "halfscope/core/cuda.hpp"

#include <cublas_v2.h>

#include <cstring>
#include <string>

namespace halfscope::cuda {

namespace {

// "src/core/foo.cu" rather than the full build path: messages stay one short line.
std::string short_file(const char* file) {
  const std::string f = file ? file : "?";
  std::size_t best = std::string::npos;
  for (const char* root : {"/src/", "/apps/", "/tests/", "/include/", "/python/"}) {
    const auto pos = f.rfind(root);
    if (pos != std::string::npos && (best == std::string::npos || pos > best)) best = pos;
  }
  return best == std::string::npos ? f : f.substr(best + 1);
}

std::string where(const char* expr, const char* file, int line) {
  return std::string(" in ") + (expr ? expr : "?") + " at " + short_file(file) + ":" +
         std::to_string(line);
}

}  // namespace

void throw_cuda_error(cudaError_t code, const char* expr, const char* file, int line) {
  // Clear a non-sticky error so the next check does not report this one again.
  (void)cudaGetLastError();
  throw CudaError(std::string("CUDA error ") + cudaGetErrorName(code) + " (code " +
                  std::to_string(static_cast<int>(code)) + "): " + cudaGetErrorString(code) +
                  where(expr, file, line));
}

void throw_library_error(const char* library, int code, const char* expr, const char* file,
                         int line) {
  std::string name = "status";
  std::string text;
  if (library && std::strcmp(library, "cuBLAS") == 0) {
    const auto status = static_cast<cublasStatus_t>(code);
    name = cublasGetStatusName(status);
    text = std::string(": ") + cublasGetStatusString(status);
  }
  throw CudaError(std::string(library ? library : "CUDA library") + " error " + name + " (code " +
                  std::to_string(code) + ")" + text + where(expr, file, line));
}

int current_device() {
  int device = 0;
  HS_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

int device_of(const void* p) {
  cudaPointerAttributes where{};
  HS_CUDA_CHECK(cudaPointerGetAttributes(&where, p));
  return where.device;
}

DeviceGuard::DeviceGuard() : previous_(current_device()) {}

DeviceGuard::~DeviceGuard() {
  if (cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
}

Stream::Stream(StreamPriority priority) {
  if (priority == StreamPriority::normal) {
    HS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    return;
  }
  int least = 0, greatest = 0;
  HS_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  const int value = priority == StreamPriority::high ? greatest : (least + greatest) / 2;
  HS_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, value));
}

Stream::~Stream() {
  // A destructor must not throw; a failure here (device lost) already surfaced elsewhere.
  if (stream_ && cudaStreamDestroy(stream_) != cudaSuccess) (void)cudaGetLastError();
}

void Stream::synchronize() const {
  HS_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

StreamDrain::~StreamDrain() {
  if (cudaStreamSynchronize(stream) != cudaSuccess) (void)cudaGetLastError();
}

Event::Event() {
  HS_CUDA_CHECK(cudaEventCreate(&event_));
}

Event::~Event() {
  if (event_ && cudaEventDestroy(event_) != cudaSuccess) (void)cudaGetLastError();
}

void Event::record(cudaStream_t stream) const {
  HS_CUDA_CHECK(cudaEventRecord(event_, stream));
}

void EventTimer::start() {
  begin_.record(stream_);
}

float EventTimer::stop_ms() {
  end_.record(stream_);
  HS_CUDA_CHECK(cudaEventSynchronize(end_.get()));
  float ms = 0;
  HS_CUDA_CHECK(cudaEventElapsedTime(&ms, begin_.get(), end_.get()));
  return ms;
}

}  // namespace halfscope::cuda

#endif  // HALFSCOPE_WITH_CUDA
