// GPU triangular solves with a tile Cholesky factor (src/linalg/solve_cuda.hpp): X A = B with
// A = L L^T, B r x n row-major = B' (n x r column-major, ld n).
//
// Forward, L Y' = B', step k: block row k solved (W_k = L_kk^-1 B'_k: by the tile's explicit
// inverse as a 3xTF32 GEMM when r >= nb, diag_inverse_cuda.cu; else strsm), W_k converted once into
// the formats its consumers use, panel tiles (i, k) converted once likewise, then
// B'_i -= L_ik W_k for i > k as strided-batched GEMMs over runs of equal variants (A stride nb^2,
// B stride 0, C stride nb rows of B'). Backward, L^T X' = Y', step k from the last: solve with
// L_kk^T (Z_k, the same way), then W_i -= L_ki^T Z_k for i < k: the row tiles (k, i) are gathered
// into one packed buffer per low-precision format so they batch the same way; SP reads them in
// place, one GEMM per tile. HP2 / HP3 / DP, which round or widen C, run one tile at a time. One
// stream: each step needs the previous one, and every GEMM spans all r right-hand sides. Overflow
// flags stay on the device and are read once at the end.
//
// Spans of kSpan tile columns: an update with one tile column reads and writes all of B' below
// (or above) it for 2 nb flops per element, which is memory-bound on an H100 (805 ms of E-ELT
// solves against ~0.3 s of FP16 tensor work). Where every tile a span's columns (rows) apply to
// B' outside the span has one low-precision variant per tile row, the span is solved within
// itself tile by tile, then B' outside it is updated once with K = kSpan nb: the span's tiles of
// each row packed side by side (forward) or stacked (backward), the span's solved blocks stacked.
// Otherwise the span's columns run one by one as above.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "halfscope/core/cublas.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"
#include "linalg/solve_cuda.hpp"
#include "linalg/solve_steps_cuda.cuh"

namespace halfscope::linalg::detail {

[[noreturn]] void throw_solve_failure(FailureCode code, const SolveSteps& sv) {
  const DecodedFailure d = decode_failure(code);
  const std::string v(gemm_variant_name(sv.variant(d.ti, d.tj)));
  const std::string pass = d.step < sv.nt ? "forward" : "backward";
  if (d.kind == FailureKind::operand && !d.second && d.ti == d.tj)
    throw NumericalError("solve_right (" + pass + " substitution): the inverse of diagonal tile " +
                         tile_text(d.ti, d.tj) +
                         " of L is not finite in FP32 (the tile is numerically singular)");
  if (d.kind == FailureKind::c_entry && d.ti == d.tj)  // the block before its diagonal solve
    throw NumericalError("solve_right (" + pass + " substitution): block " + std::to_string(d.ti) +
                         " of the right-hand sides, before its solve with " + "diagonal tile " +
                         tile_text(d.ti, d.tj) +
                         " of L, holds a value that is not finite in FP32 or past TF32's range "
                         "(an earlier update overflowed FP32)");
  std::string what = d.kind == FailureKind::operand
                         ? (d.second ? "an entry of the solved block " + std::to_string(d.ti)
                                     : "an entry of tile " + tile_text(d.ti, d.tj) + " of L")
                     : d.kind == FailureKind::c_entry
                         ? std::string("an entry of the right-hand sides")
                         : std::string("an FP16 result entry");
  if (d.second) {
    throw NumericalError("solve_right (" + pass + " substitution): " + what +
                         " does not fit the FP16 / TF32 / BF16 format its GEMMs use (FP16 holds "
                         "|x| <= 65504); use a higher-precision solve policy");
  }
  throw NumericalError("solve_right (" + pass + " substitution), GEMM " + v + " with tile " +
                       tile_text(d.ti, d.tj) + " of L: " + what +
                       " does not fit the variant's format (FP16 holds |x| <= 65504); use a "
                       "higher-precision solve policy");
}

void solve_right_cuda(const TileMatrix& l, Array& b, const std::vector<GemmVariant>& variants) {
  cuda::Stream stream;
  cuda::CublasHandle handle;
  HS_CUBLAS_CHECK(cublasSetStream(handle.get(), stream.get()));
  SolveSteps sv{l, variants, stream.get(), handle.get()};
  sv.nt = l.layout.tile_rows(), sv.nb = l.layout.tile_size(), sv.n = l.layout.rows();
  sv.r = b.size() / sv.n;
  sv.base = l.storage.data_as<float>();
  sv.b = b.data_as<float>();
  const cudaStream_t s = stream.get();
  after_legacy_stream(s);  // L and b may have been written asynchronously on the legacy stream
  bool used[kSolveFormats] = {};
  for (std::int64_t j = 0; j < sv.nt; ++j)
    for (std::int64_t i = j + 1; i < sv.nt; ++i)
      used[static_cast<int>(operand_format(sv.variant(i, j)))] = true;
  // Host tables, declared before the drain guard so they outlive every queued copy from them.
  std::vector<FailureCode> tags;
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(sv.nt * sv.nt), 0);
  std::vector<std::unique_ptr<cuda::StreamScratch>> scratch;
  // Declared after the scratch (destroyed first): when anything below throws, the GEMMs already
  // queued finish before the caller's b and l are reused, and before the scratch is freed.
  const DrainStream drain{s};
  auto take = [&](std::int64_t bytes) {
    scratch.push_back(std::make_unique<cuda::StreamScratch>(bytes, s));
    return scratch.back()->get();
  };
  for (int f = 1; f < kSolveFormats; ++f) {
    if (!used[f]) continue;
    const std::int64_t bytes = format_bytes(static_cast<OperandFormat>(f));
    sv.tiles[f] = take(sv.n * sv.nb * bytes);
    sv.block[f] = take(sv.nb * sv.r * bytes);
  }
  bool span_used[kSolveFormats] = {};
  for (std::int64_t k0 = 0; k0 < sv.nt; k0 += kSolveSpan)
    for (const bool forward : {true, false}) {
      const std::int64_t k1 = std::min(k0 + kSolveSpan, sv.nt);
      if (!sv.span_fuses(k0, k1, forward)) continue;
      for (std::int64_t i = forward ? k1 : 0; i < (forward ? sv.nt : k0); ++i)
        span_used[static_cast<int>(operand_format(sv.span_variant(i, k0, k1, forward)))] = true;
    }
  for (int f = 1; f < kSolveFormats; ++f) {
    if (!span_used[f]) continue;
    const std::int64_t bytes = format_bytes(static_cast<OperandFormat>(f));
    const std::int64_t span = std::min(kSolveSpan * sv.nb, sv.n);
    sv.span_tiles[f] = take(sv.n * span * bytes);
    sv.span_block[f] = take(span * sv.r * bytes);
  }
  for (const GemmVariant v : {GemmVariant::HP3, GemmVariant::DP})
    if (std::find(variants.begin(), variants.end(), v) != variants.end())
      sv.c_scratch[static_cast<int>(c_format(v))] = take(sv.nb * sv.r * format_bytes(c_format(v)));
  if (sv.r >= sv.nb) {  // the inverses cost nb^3 flops per tile against nb^2 r they save
    sv.inverses = static_cast<float*>(take(sv.nt * sv.nb * sv.nb * 4));
    sv.inverse_scratch = static_cast<float*>(take(apply_inverse_scratch(sv.nb, sv.r) * 4));
  }
  sv.flag = static_cast<FailureCode*>(take(sizeof(FailureCode)));
  HS_CUDA_CHECK(cudaMemsetAsync(sv.flag, 0xff, sizeof(FailureCode), s));
  for (std::int64_t k = 0; k < sv.nt; ++k)
    for (std::int64_t i = 0; i <= k; ++i)
      offsets[static_cast<std::size_t>(k * sv.nt + i)] = l.layout.tile_offset(k, i);
  auto* dev_offsets = static_cast<std::int64_t*>(
      take(static_cast<std::int64_t>(offsets.size() * sizeof(std::int64_t))));
  HS_CUDA_CHECK(cudaMemcpyAsync(dev_offsets, offsets.data(), offsets.size() * sizeof(std::int64_t),
                                cudaMemcpyHostToDevice, s));
  sv.build_tags(tags);
  if (!tags.empty()) {
    const auto bytes = static_cast<std::int64_t>(tags.size() * sizeof(FailureCode));
    auto* dev = static_cast<FailureCode*>(take(bytes));
    HS_CUDA_CHECK(cudaMemcpyAsync(dev, tags.data(), static_cast<std::size_t>(bytes),
                                  cudaMemcpyHostToDevice, s));
    sv.dev_tags = dev;
  }
  sv.solve(dev_offsets);
  FailureCode code = kNoFailure;
  HS_CUDA_CHECK(cudaMemcpyAsync(&code, sv.flag, sizeof(FailureCode), cudaMemcpyDeviceToHost, s));
  stream.synchronize();
  if (code == kNoFailure) return;
  throw_solve_failure(code, sv);
}

}  // namespace halfscope::linalg::detail
