// GPU backend `cudnn` (backends.hpp: cudnn_cuda): the single-channel convolution through cuDNN's
// legacy API, cudnnConvolutionForward on a 1 x 1 x H x W tensor and a 1 x 1 x kr x kc filter.
//
// Geometry (geometry.hpp): out(i, j) = sum_{u,v} k(u, v) in(i + row0 - u, j + col0 - v). cuDNN's
// CUDNN_CONVOLUTION mode flips the filter, y(i) = sum_r x(i + r - pad) w(kr - 1 - r), which is the
// formula with pad = kr - 1 - row0; dispatch has already flipped the kernel for a correlation
// (conv.cpp), so the backend always asks for CUDNN_CONVOLUTION (CUDNN_CROSS_CORRELATION would undo
// exactly that flip). cuDNN pads both sides by the same amount, so its output has
// rows + kr - 1 - 2 row0 rows: `full`, `valid` and `same` with odd kernels under the zero boundary
// are expressed by padding alone and cuDNN writes the caller's output directly. Everything else --
// the circular boundary, SciPy's `same` centring of an even kernel ((kr-1)/2 for a convolution,
// kr/2 for a correlation, one row off the symmetric padding), windows reaching past the full
// result -- first extends the image explicitly into scratch (kernels/cudnn_support.cuh: zeros or
// the periodic wrap, out_rows + kr - 1 rows) and runs cuDNN unpadded on it: one more pass over the
// input, still exactly the geometry's window with no crop of the output.
//
// Precisions: single (FP32 data and compute, CUDNN_FMA_MATH: CUDNN_DEFAULT_MATH would let cuDNN 8+
// use TF32 tensor cores on sm_80+, which is not FP32 accuracy), half (FP16 data, FP16 compute:
// cuDNN's "true half" configuration) and mixed (FP16 data, FP32 compute); half and mixed allow
// tensor cores (CUDNN_TENSOR_OP_MATH). The algorithm is chosen once per problem (device,
// precision, extents, padding) by cudnnFindConvolutionForwardAlgorithmEx, among the
// direct-summation algorithms only (implicit GEMM, precomputed implicit GEMM, GEMM, direct):
// cuDNN's FFT and Winograd algorithms carry norm-wise rather than per-pixel error bounds, and
// halfscope's own `fft` method is the FFT rung. The choice, its math type and workspace size are
// cached for the process; the workspace is stream-ordered scratch of each call.
//
// FP16 outputs are scanned for non-finite values (one read of the output and one stream
// synchronisation, as every narrow-storage GPU backend does); an inf or NaN produced from finite
// inputs is a NumericalError, never returned.
#include "halfscope/config.hpp"

#if HALFSCOPE_WITH_CUDA && HALFSCOPE_WITH_CUDNN

#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <climits>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>

#include "conv/backends.hpp"
#include "conv/cuda_backend_util.hpp"
#include "conv/cudnn_handles.hpp"
#include "conv/kernels/cudnn_support.cuh"
#include "conv/kernels/cudnn_tuning.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::conv {

namespace cudnn {
namespace {

struct IdleHandle {
  int device;
  cudnnHandle_t handle;
};

// Never destroyed: destroying cuDNN handles from a static destructor races the CUDA runtime's own
// teardown at exit (as core's cuBLAS pool).
struct HandlePool {
  std::mutex mutex;
  std::list<IdleHandle> idle;
};
HandlePool& pool() {
  static auto* p = new HandlePool;
  return *p;
}

}  // namespace

HandleLease::HandleLease(cudaStream_t stream) {
  HS_CUDA_CHECK(cudaGetDevice(&device_));
  {
    std::lock_guard lock(pool().mutex);
    auto& idle = pool().idle;
    for (auto it = idle.begin(); it != idle.end(); ++it)
      if (it->device == device_) {
        handle_ = it->handle;
        idle.erase(it);
        break;
      }
  }
  if (!handle_) HS_CUDNN_CHECK(cudnnCreate(&handle_));
  if (const cudnnStatus_t s = cudnnSetStream(handle_, stream); s != CUDNN_STATUS_SUCCESS) {
    (void)cudnnDestroy(handle_);
    handle_ = nullptr;
    HS_CUDNN_CHECK(s);
  }
}

HandleLease::~HandleLease() {
  if (!handle_) return;
  std::lock_guard lock(pool().mutex);
  pool().idle.push_front({device_, handle_});
}

}  // namespace cudnn

namespace {

/// cuDNN's types for one precision.
struct CudnnTypes {
  cudnnDataType_t data, compute;
  cudnnMathType_t math;
};

CudnnTypes cudnn_types(Precision p) {
  switch (p) {
    case Precision::Single:
      return {CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH};
    case Precision::Half:
      return {CUDNN_DATA_HALF, CUDNN_DATA_HALF, CUDNN_TENSOR_OP_MATH};
    case Precision::Mixed:
      return {CUDNN_DATA_HALF, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH};
    default:
      throw Unsupported("cudnn (cuda): precision " + std::string(precision_name(p)) +
                        " is not supported; supported: single, half, mixed");
  }
}

constexpr std::array<cudnnConvolutionFwdAlgo_t, 4> kDirectAlgorithms{
    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
    CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_DIRECT};

bool is_direct_algorithm(cudnnConvolutionFwdAlgo_t a) {
  for (const auto d : kDirectAlgorithms)
    if (a == d) return true;
  return false;
}

/// The chosen algorithm of one problem.
struct Choice {
  cudnnConvolutionFwdAlgo_t algo;
  cudnnMathType_t math;
  std::size_t workspace;
};

// device, data and compute types, input rows and columns, kernel rows and columns, padding
using ProblemKey = std::tuple<int, int, int, int, int, int, int, int>;

/// A status by which cuDNN declines a problem (a bad or unsupported parameter: padding beyond the
/// image, an extent it does not take), as opposed to a resource or runtime failure.
bool is_refusal(cudnnStatus_t s) {
#if CUDNN_MAJOR >= 9
  // cuDNN 9 groups its codes by category: 2000-2999 BAD_PARAM*, 3000-3999 NOT_SUPPORTED*.
  const int v = static_cast<int>(s);
  return v >= 2000 && v < 4000;
#else
  return s == CUDNN_STATUS_BAD_PARAM || s == CUDNN_STATUS_NOT_SUPPORTED;
#endif
}

/// cuDNN declined the problem while its descriptors were set up (is_refusal). The padded attempt
/// catches this alone and retries on the explicitly extended image; anything else propagates.
struct ProblemRefused : Unsupported {
  using Unsupported::Unsupported;
};

void setup(cudnnStatus_t s, const char* call) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  if (is_refusal(s))
    throw ProblemRefused(std::string("cudnn (cuda): ") + call +
                         " declined the problem: " + cudnnGetErrorString(s));
  HS_CUDNN_CHECK(s);
}

/// One convolution as cuDNN describes it: descriptors set up for an input of xr x xc, padding
/// (ph, pw), and an output that must come out as (out_rows x out_cols).
struct Problem {
  cudnn::TensorDescriptor x, y;
  cudnn::FilterDescriptor w;
  cudnn::ConvolutionDescriptor conv;

  Problem(const CudnnTypes& t, int xr, int xc, int kr, int kc, int ph, int pw,
          std::int64_t out_rows, std::int64_t out_cols) {
    setup(cudnnSetTensor4dDescriptor(x.get(), CUDNN_TENSOR_NCHW, t.data, 1, 1, xr, xc),
          "cudnnSetTensor4dDescriptor");
    setup(cudnnSetFilter4dDescriptor(w.get(), t.data, CUDNN_TENSOR_NCHW, 1, 1, kr, kc),
          "cudnnSetFilter4dDescriptor");
    setup(cudnnSetConvolution2dDescriptor(conv.get(), ph, pw, 1, 1, 1, 1, CUDNN_CONVOLUTION,
                                          t.compute),
          "cudnnSetConvolution2dDescriptor");
    HS_CUDNN_CHECK(cudnnSetConvolutionMathType(conv.get(), t.math));
    int n = 0, c = 0, h = 0, wd = 0;
    setup(cudnnGetConvolution2dForwardOutputDim(conv.get(), x.get(), w.get(), &n, &c, &h, &wd),
          "cudnnGetConvolution2dForwardOutputDim");
    if (n != 1 || c != 1 || h != out_rows || wd != out_cols)
      throw CudaError("cudnn (cuda): cuDNN describes a " + std::to_string(h) + "x" +
                      std::to_string(wd) + " output where the geometry needs " +
                      std::to_string(out_rows) + "x" + std::to_string(out_cols) +
                      " (padding arithmetic out of step with cuDNN)");
    setup(cudnnSetTensor4dDescriptor(y.get(), CUDNN_TENSOR_NCHW, t.data, 1, 1, h, wd),
          "cudnnSetTensor4dDescriptor");
  }
};

/// The fastest direct-summation algorithm for `pr`, measured by cuDNN on the call's own buffers
/// (it overwrites `y`, which the call writes afterwards anyway), or none; cached per key. "None"
/// is cached only when it is definite (every direct algorithm declined the problem or needs more
/// than the workspace cap): a transient failure (ALLOC_FAILED, an execution failure) is retried
/// on the next call. FP32 data always runs with CUDNN_FMA_MATH: CUDNN_DEFAULT_MATH, which Find
/// may report, lets cuDNN use TF32 tensor cores on sm_80+, not the precision "single" promises.
std::optional<Choice> choose_algorithm(const ProblemKey& key, cudnnHandle_t h, const Problem& pr,
                                       const CudnnTypes& types, const void* x, const void* w,
                                       void* y, cudaStream_t s) {
  static std::mutex mutex;
  static auto* cache = new std::map<ProblemKey, std::optional<Choice>>;  // process lifetime
  std::lock_guard lock(mutex);
  if (const auto it = cache->find(key); it != cache->end()) return it->second;

  std::size_t workspace = 0;
  for (const auto a : kDirectAlgorithms) {
    std::size_t bytes = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(h, pr.x.get(), pr.w.get(), pr.conv.get(),
                                                pr.y.get(), a, &bytes) == CUDNN_STATUS_SUCCESS &&
        bytes <= static_cast<std::size_t>(tuning::kCudnnWorkspaceCapBytes))
      workspace = std::max(workspace, bytes);
  }
  cuda::StreamScratch scratch(static_cast<std::int64_t>(workspace), s);
  std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf{};
  int returned = 0;
  HS_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
      h, pr.x.get(), x, pr.w.get(), w, pr.conv.get(), pr.y.get(), y, static_cast<int>(perf.size()),
      &returned, perf.data(), scratch.get(), workspace));
  // perf is sorted fastest first.
  const bool fp32 = types.data == CUDNN_DATA_FLOAT;
  bool transient = false;
  for (int r = 0; r < returned; ++r) {
    const auto& p = perf[static_cast<std::size_t>(r)];
    if (!is_direct_algorithm(p.algo)) continue;
    if (p.status == CUDNN_STATUS_SUCCESS && p.memory <= workspace &&
        (!fp32 || p.mathType == CUDNN_FMA_MATH || p.mathType == CUDNN_DEFAULT_MATH)) {
      const Choice c{p.algo, fp32 ? CUDNN_FMA_MATH : p.mathType, p.memory};
      cache->emplace(key, c);
      return c;
    }
    if (p.status != CUDNN_STATUS_SUCCESS && !is_refusal(p.status)) transient = true;
  }
  if (!transient) cache->emplace(key, std::nullopt);
  return std::nullopt;
}

/// Narrow storage: throws NumericalError when an output is not finite although the inputs are.
template <class T>
void check_outputs_finite(const Geometry& g, Precision p, const Array& image, const Array& kernel,
                          const Array& out, cudaStream_t s) {
  cuda::StreamScratch counts(2 * sizeof(unsigned long long), s);
  auto* d = counts.as<unsigned long long>();
  auto* host = static_cast<unsigned long long*>(cuda::pinned_mailbox());
  HS_CUDA_CHECK(cudaMemsetAsync(d, 0, 2 * sizeof(unsigned long long), s));
  const auto count = [&](const Array& a, unsigned long long* total) {
    kernels::cudnn::count_nonfinite<T>
        <<<cuda::grid_blocks(a.size(), tuning::kCudnnThreads, tuning::kCudnnBlocksPerSm),
           tuning::kCudnnThreads, 0, s>>>(static_cast<const T*>(a.data()), a.size(), total);
    HS_CHECK_LAUNCH();
  };
  count(out, d);
  HS_CUDA_CHECK(cudaMemcpyAsync(host, d, sizeof(unsigned long long), cudaMemcpyDeviceToHost, s));
  HS_CUDA_CHECK(cudaStreamSynchronize(s));
  const unsigned long long bad_out = host[0];
  if (bad_out == 0) return;
  // Only on failure: were the inputs themselves non-finite (then inf/NaN is the right answer)?
  count(image, d + 1);
  count(kernel, d + 1);
  HS_CUDA_CHECK(
      cudaMemcpyAsync(host + 1, d + 1, sizeof(unsigned long long), cudaMemcpyDeviceToHost, s));
  HS_CUDA_CHECK(cudaStreamSynchronize(s));
  if (host[1] != 0) return;
  throw NumericalError("cudnn (cuda): " + std::to_string(bad_out) + " of " +
                       std::to_string(g.out_rows * g.out_cols) +
                       " output pixels overflowed FP16 (largest finite 65504) although every "
                       "input is finite; scale the image or the kernel down" +
                       (p == Precision::Half ? ", or use precision mixed" : ""));
}

/// One cuDNN convolution of the geometry: through cuDNN's padding (`padded`, the zero boundary
/// with a symmetric window) or on the explicitly extended image. False when cuDNN has no eligible
/// algorithm for it.
bool convolve(const Geometry& g, const CudnnTypes& types, bool padded, const Array& image,
              const Array& kernel, Array& out, cudaStream_t stream) {
  const std::int64_t xr = padded ? g.rows : g.out_rows + g.krows - 1;
  const std::int64_t xc = padded ? g.cols : g.out_cols + g.kcols - 1;
  // cuDNN's legacy tensors take int extents and fewer than 2^31 elements.
  for (const std::int64_t n : {xr * xc, g.out_rows * g.out_cols, g.krows * g.kcols})
    if (n > INT_MAX)
      throw Unsupported("cudnn (cuda): " + std::to_string(n) +
                        " elements in one tensor, cuDNN's limit is 2^31 - 1; use method fft");
  const int ph = padded ? static_cast<int>(g.krows - 1 - g.row0) : 0;
  const int pw = padded ? static_cast<int>(g.kcols - 1 - g.col0) : 0;

  const std::int64_t item = image.itemsize();
  cuda::StreamScratch extended(padded ? 1 : xr * xc * item, stream);
  const void* x = image.data();
  if (!padded) {
    const auto launch = [&](auto* in) {
      using T = std::remove_const_t<std::remove_pointer_t<decltype(in)>>;
      kernels::cudnn::extend_image<T>
          <<<cuda::grid_blocks(xr * xc, tuning::kCudnnThreads, tuning::kCudnnBlocksPerSm),
             tuning::kCudnnThreads, 0, stream>>>(in, g.rows, g.cols, extended.as<T>(), xr, xc,
                                                 g.row0 - g.krows + 1, g.col0 - g.kcols + 1,
                                                 g.boundary == Boundary::Circular ? 1 : 0);
      HS_CHECK_LAUNCH();
    };
    if (item == 4)
      launch(static_cast<const float*>(image.data()));
    else
      launch(static_cast<const __half*>(image.data()));
    x = extended.get();
  }

  const Problem pr(types, static_cast<int>(xr), static_cast<int>(xc), static_cast<int>(g.krows),
                   static_cast<int>(g.kcols), ph, pw, g.out_rows, g.out_cols);
  int device = 0;
  HS_CUDA_CHECK(cudaGetDevice(&device));
  const ProblemKey key{device,
                       static_cast<int>(types.data) * 16 + static_cast<int>(types.compute),
                       static_cast<int>(xr),
                       static_cast<int>(xc),
                       static_cast<int>(g.krows),
                       static_cast<int>(g.kcols),
                       ph,
                       pw};
  const cudnn::HandleLease handle(stream);
  const auto c =
      choose_algorithm(key, handle.get(), pr, types, x, kernel.data(), out.data(), stream);
  if (!c) return false;
  HS_CUDNN_CHECK(cudnnSetConvolutionMathType(pr.conv.get(), c->math));
  cuda::StreamScratch workspace(static_cast<std::int64_t>(c->workspace), stream);
  const float one = 1.0f, zero = 0.0f;  // scaling factors are float for FP16 and FP32 data
  HS_CUDNN_CHECK(cudnnConvolutionForward(handle.get(), &one, pr.x.get(), x, pr.w.get(),
                                         kernel.data(), pr.conv.get(), c->algo, workspace.get(),
                                         c->workspace, &zero, pr.y.get(), out.data()));
  return true;
}

/// After the convolution: the FP16 outputs' finiteness check.
void finish(const Geometry& g, Precision p, const CudnnTypes& types, const Array& image,
            const Array& kernel, const Array& out, cudaStream_t stream) {
  if (types.data == CUDNN_DATA_HALF) check_outputs_finite<__half>(g, p, image, kernel, out, stream);
}

}  // namespace

void cudnn_cuda(const Geometry& g, Precision p, const Array& image, const Array& kernel, Array& out,
                cudaStream_t stream) {
  static constexpr Precision kSupported[] = {Precision::Single, Precision::Half, Precision::Mixed};
  check_gpu_call("cudnn (cuda)", g, p, image, kernel, out, kSupported);
  const CudnnTypes types = cudnn_types(p);

  // Padding expresses the window when it is symmetric and the boundary is zero (file comment).
  const bool paddable = g.boundary == Boundary::Zero && g.row0 >= 0 && g.col0 >= 0 &&
                        g.row0 < g.krows && g.col0 < g.kcols &&
                        g.rows + g.krows - 1 - 2 * g.row0 == g.out_rows &&
                        g.cols + g.kcols - 1 - 2 * g.col0 == g.out_cols;
  bool done = false;
  if (paddable) {
    // cuDNN may refuse some padded problems (padding beyond the image, for a kernel larger than
    // it): the explicit extension below computes those too.
    // Only cuDNN declining the descriptors is caught: a runtime failure (out of memory, a
    // sticky CUDA error) is reported as itself, not retried into a misleading second error.
    try {
      done = convolve(g, types, true, image, kernel, out, stream);
    } catch (const ProblemRefused&) {
      done = false;
    }
  }
  if (!done && !convolve(g, types, false, image, kernel, out, stream))
    throw Unsupported("cudnn (cuda): cuDNN offers no direct-summation algorithm for a " +
                      std::to_string(g.rows) + "x" + std::to_string(g.cols) + " image and a " +
                      std::to_string(g.krows) + "x" + std::to_string(g.kcols) +
                      " kernel in precision " + std::string(precision_name(p)) +
                      "; use method register or fft");
  finish(g, p, types, image, kernel, out, stream);
}

}  // namespace halfscope::conv

#endif  // HALFSCOPE_WITH_CUDA && HALFSCOPE_WITH_CUDNN
