// Study 001 Table I on the GPU (backends.hpp: cublas_cuda): for each channel the explicit
// observation (Hankel) matrix of a chunk of window starts (rows x K, kernels/hankel.cuh) times the
// channel's templates (K x T) by cublasGemmEx, then normalization by the FP64 window and template
// norms and the network sum in a separate kernel (kernels/normalize.cuh).
//
//   variant  A, B (H, templates)   C (dot products)   compute type
//   1        FP32                  FP32               CUBLAS_COMPUTE_32F (default math: no TF32)
//   2        FP16                  FP32               CUBLAS_COMPUTE_32F
//   3        FP16                  FP16               CUBLAS_COMPUTE_32F
//   4        FP16                  FP16               CUBLAS_COMPUTE_16F (tensor cores, FP16 sums)
//
// FP16 variants divide the data by its global max |S| and the (demeaned) templates by theirs before
// rounding, as the study does, so no operand overflows and |dot| <= K; the scales are undone in the
// normalization. A dot product that still overflows (FP16 C with K > 65504, or FP16 accumulation)
// is reported as NumericalError. Rows are every window start (moveouts differ per template, so
// every start may be needed; with step > 1 some rows are unused: this is a baseline).
//
// Floors (study case, one chunk per ~1e6 rows, H100, FP32): H is 4.32e6 x 256 x 4 B = 4.4 GB,
// written once and read once by the GEMM: ~8.8 GB -> ~2.6 ms at 3.35 TB/s, against 35.4 GFLOP ->
// ~0.7 ms at FP32 rate: bound by the matrix's bytes, as the study found. `gemm_ms` times the
// GemmEx calls alone (CUDA events), the study's timing.
#include "mfilter/cublas_cuda.hpp"

#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <string>

#include "halfscope/core/cublas.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"
#include "mfilter/backends.hpp"
#include "mfilter/baseline_cuda.cuh"
#include "mfilter/kernels/hankel.cuh"

namespace halfscope::mfilter {

namespace {

std::atomic<std::int64_t> g_budget{tuning::kCublasMatrixBudgetBytes};

/// Element sizes and cuBLAS types of one variant.
struct Variant {
  bool half_in;   // A and B in FP16
  bool half_out;  // C in FP16
  cublasComputeType_t compute;
};

Variant variant_types(int v) {
  switch (v) {
    case 1:
      return {false, false, CUBLAS_COMPUTE_32F};
    case 2:
      return {true, false, CUBLAS_COMPUTE_32F};
    case 3:
      return {true, true, CUBLAS_COMPUTE_32F};
    case 4:
      return {true, true, CUBLAS_COMPUTE_16F};
    default:
      throw InvalidInput("cublas_cuda: expected variant 1, 2, 3 or 4 (study 001 Table I), found " +
                         std::to_string(v));
  }
}

template <class Op>
void build_hankel(const float* x, std::int64_t s0, std::int64_t rows, std::int64_t k,
                  const float* absmax, void* h, cudaStream_t stream) {
  kernels::hankel_kernel<Op>
      <<<cuda::grid_blocks(rows * k, tuning::kThreads, tuning::kBlocksPerSm), tuning::kThreads, 0,
         stream>>>(x, s0, rows, k, absmax, static_cast<Op*>(h));
  HS_CHECK_LAUNCH();
}

}  // namespace

std::int64_t set_cublas_matrix_budget_bytes(std::int64_t bytes) {
  if (bytes < 1)
    throw InvalidInput("set_cublas_matrix_budget_bytes: expected a positive byte count, found " +
                       std::to_string(bytes));
  return g_budget.exchange(bytes);
}

void cublas_cuda(const DeviceProblem& p, int variant, float* gemm_ms) {
  const Variant v = variant_types(variant);
  const Dims& d = p.dims;
  if (gemm_ms) *gemm_ms = 0.0f;
  if (d.templates == 0 || d.n_corr == 0) return;
  // cuBLAS takes int sizes and leading dimensions: K, T and the templates' leading dimension
  // C * K (each template's channels are interleaved in B) must all fit.
  if (d.length > 2147483647 || d.templates > 2147483647 || d.channels * d.length > 2147483647)
    throw InvalidInput(
        "cublas_cuda: expected K, T and C x K below 2^31 (cuBLAS int sizes and leading "
        "dimensions), found K = " +
        std::to_string(d.length) + ", T = " + std::to_string(d.templates) +
        ", C x K = " + std::to_string(d.channels * d.length));
  const std::int64_t windows = baseline::window_count(d);
  baseline::WindowStats ws(p);
  baseline::TemplateOperands tmpl(p, v.half_in);
  std::optional<baseline::DataAbsMax> data_max;
  if (v.half_in) data_max.emplace(p);
  baseline::NonfiniteFlag flag(p.stream);
  baseline::clear_output(p);

  const std::int64_t in_size = v.half_in ? 2 : 4, out_size = v.half_out ? 2 : 4;
  const std::int64_t row_bytes = d.length * in_size + d.templates * out_size;
  const std::int64_t max_rows = std::min<std::int64_t>(2147483647, windows);
  const std::int64_t chunk = std::clamp<std::int64_t>(g_budget.load() / row_bytes, 1, max_rows);
  cuda::StreamScratch h(chunk * d.length * in_size, p.stream);
  cuda::StreamScratch dot(chunk * d.templates * out_size, p.stream);

  cuda::CublasLease lease(p.stream);
  const float one_f = 1.0f, zero_f = 0.0f;
  const __half one_h = __float2half_rn(1.0f), zero_h = __float2half_rn(0.0f);
  const bool h16 = v.compute == CUBLAS_COMPUTE_16F;
  const cudaDataType in_type = v.half_in ? CUDA_R_16F : CUDA_R_32F;
  const cudaDataType out_type = v.half_out ? CUDA_R_16F : CUDA_R_32F;
  cuda::EventTimer timer(p.stream);

  kernels::NormalizeArgs a = baseline::normalize_args(p, ws, tmpl, flag);
  if (v.half_in) {
    a.data_absmax = data_max->get();
    a.tmpl_absmax = tmpl.absmax();
  }
  for (std::int64_t c = 0; c < d.channels; ++c) {
    const float* x = p.data + c * d.samples;
    const char* b = static_cast<const char*>(tmpl.operand()) + c * d.length * in_size;
    for (std::int64_t s0 = 0; s0 < windows; s0 += chunk) {
      const std::int64_t rows = std::min(chunk, windows - s0);
      if (v.half_in)
        build_hankel<__half>(x, s0, rows, d.length, data_max->get(), h.get(), p.stream);
      else
        build_hankel<float>(x, s0, rows, d.length, nullptr, h.get(), p.stream);
      // Column-major view: dot (rows x T, ld rows) = H^T^T (rows x K) * B (K x T, ld C*K).
      if (gemm_ms) timer.start();
      HS_CUBLAS_CHECK(cublasGemmEx(
          lease.get(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows),
          static_cast<int>(d.templates), static_cast<int>(d.length),
          h16 ? static_cast<const void*>(&one_h) : &one_f, h.get(), in_type,
          static_cast<int>(d.length), b, in_type, static_cast<int>(d.channels * d.length),
          h16 ? static_cast<const void*>(&zero_h) : &zero_f, dot.get(), out_type,
          static_cast<int>(rows), v.compute, CUBLAS_GEMM_DEFAULT));
      if (gemm_ms) *gemm_ms += timer.stop_ms();
      a.channel = c;
      a.s0 = s0;
      a.rows = rows;
      if (v.half_out)
        baseline::launch_normalize(a, kernels::MatrixDot<__half>{dot.as<__half>(), rows}, p.stream);
      else
        baseline::launch_normalize(a, kernels::MatrixDot<float>{dot.as<float>(), rows}, p.stream);
    }
  }
  flag.check(p.stream, ("cublas" + std::to_string(variant)).c_str());
}

}  // namespace halfscope::mfilter
