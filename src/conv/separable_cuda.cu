// GPU backend `separable`: a kernel that is a sum of a few outer products (separable.hpp) runs as
// a row pass into an intermediate in the arithmetic type, then a column pass that sums the terms
// (kernels/separable.cuh); a rank-one kernel of width 3-7 on aligned rows in one pass instead,
// through the register method's streaming kernel (stream_rank_one). FP64, FP32, FP16 (half: FP16
// arithmetic, the row sums rounded to FP16 as every FP16 multiply-add is) and FP16 / BF16 storage
// with FP32 arithmetic (mixed, bf16).
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "conv/backends.hpp"
#include "conv/cuda_backend_util.hpp"
#include "conv/direct_cuda_common.hpp"
#include "conv/kernels/separable.cuh"
#include "conv/overflow_check.hpp"
#include "conv/separable.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::conv {
namespace {

using detail::check_direct_call;
using detail::current_device_limits;
using detail::DeviceLimits;
using detail::grid_x;
using detail::grid_y;
using detail::make_conv_args;

constexpr const char* kName = "separable (GPU) convolution";
constexpr Precision kSupported[] = {Precision::Double, Precision::Single, Precision::Half,
                                    Precision::Mixed, Precision::BF16};

std::int64_t round_up(std::int64_t x, std::int64_t m) {
  return (x + m - 1) / m * m;
}

template <class K>
void allow_smem(K* kernel, std::int64_t bytes, const DeviceLimits& dev, const Geometry& g) {
  if (bytes > dev.smem_optin)
    throw Unsupported(std::string(kName) + ": a " + std::to_string(g.krows) + "x" +
                      std::to_string(g.kcols) + " kernel needs " + std::to_string(bytes) +
                      " bytes of shared memory per block, this GPU allows " +
                      std::to_string(dev.smem_optin) + "; use method fft");
  detail::allow_shared_memory(kernel, bytes);
}

template <class Prec>
void run(const Geometry& g, Precision p, const Array& image, const Array& kernel, Array& out,
         const SeparableFactors& f, cudaStream_t stream) {
  using A = typename Prec::A;
  namespace k = kernels;
  k::SepArgs a;
  a.c = make_conv_args(g, image, kernel, out);
  a.rank = f.rank;
  a.rpad = static_cast<int>(round_up(g.kcols, k::kSepChunk));
  a.cpad = static_cast<int>(round_up(g.krows, k::kSepChunk));
  a.tpitch = round_up(g.out_cols, k::kSepRowOutputs);

  // The taps reversed (both passes slide forward over their line) and zero-padded.
  std::vector<A> taps(static_cast<std::size_t>(f.rank) * (a.rpad + a.cpad), A(0));
  for (int r = 0; r < f.rank; ++r) {
    for (std::int64_t v = 0; v < g.kcols; ++v)
      taps[static_cast<std::size_t>(r * a.rpad + v)] =
          static_cast<A>(f.row[static_cast<std::size_t>(r * g.kcols + g.kcols - 1 - v)]);
    for (std::int64_t u = 0; u < g.krows; ++u)
      taps[static_cast<std::size_t>(f.rank * a.rpad + r * a.cpad + u)] =
          static_cast<A>(f.col[static_cast<std::size_t>(r * g.krows + g.krows - 1 - u)]);
  }
  const std::int64_t tap_bytes = round_up(static_cast<std::int64_t>(taps.size() * sizeof(A)), 256);
  const std::int64_t plane = g.rows * a.tpitch;
  cuda::StreamScratch scratch(tap_bytes + f.rank * plane * static_cast<std::int64_t>(sizeof(A)),
                              stream);
  auto* base = static_cast<unsigned char*>(scratch.get());
  a.taps = base;
  a.tmp = base + tap_bytes;
  HS_CUDA_CHECK(
      cudaMemcpyAsync(base, taps.data(), taps.size() * sizeof(A), cudaMemcpyHostToDevice, stream));

  std::optional<OverflowCheck> overflow;  // narrow storage (overflow_check.hpp)
  if constexpr (Prec::kNarrow) {
    overflow.emplace(stream, kName, p, g.out_rows * g.out_cols);
    a.c.overflow = overflow->counter();
  }
  const DeviceLimits dev = current_device_limits();
  const std::int64_t row_smem =
      (k::kSepRowSpan + a.rpad + f.rank * a.rpad) * static_cast<std::int64_t>(sizeof(A));
  auto* row_kernel = &k::separable_row_kernel<Prec>;
  allow_smem(row_kernel, row_smem, dev, g);
  const dim3 row_grid(grid_x(round_up(g.out_cols, k::kSepRowSpan) / k::kSepRowSpan, kName),
                      grid_y(g.rows));
  row_kernel<<<row_grid, k::kSepRowThreads, static_cast<std::size_t>(row_smem), stream>>>(a);
  HS_CHECK_LAUNCH();

  const std::int64_t col_smem =
      ((k::kSepColSpan + a.cpad) * 32 + f.rank * a.cpad) * static_cast<std::int64_t>(sizeof(A));
  auto* col_kernel = &k::separable_column_kernel<Prec>;
  allow_smem(col_kernel, col_smem, dev, g);
  const dim3 col_grid(grid_x(round_up(g.out_cols, 32) / 32, kName),
                      grid_y(round_up(g.out_rows, k::kSepColSpan) / k::kSepColSpan));
  col_kernel<<<col_grid, dim3(32, k::kSepColThreadsY), static_cast<std::size_t>(col_smem),
               stream>>>(a);
  HS_CHECK_LAUNCH();
  if (overflow) overflow->finish();
}

// A rank-one kernel of width 3-7 on aligned rows: one streaming pass (the register method's
// streaming kernel with a row sum per input row, register_launch.cuh) instead of two passes
// through an intermediate. False where that kernel does not apply.
bool stream_rank_one(const Geometry& g, Precision p, const Array& image, const Array& kernel,
                     Array& out, const SeparableFactors& f, cudaStream_t stream) {
  if (g.krows > kernels::SepTaps::kMaxWidth || g.krows != g.kcols) return false;
  const kernels::SepTaps taps =
      kernels::SepTaps::of(f.row.data(), f.col.data(), static_cast<int>(g.krows));
  const kernels::ConvArgs a = make_conv_args(g, image, kernel, out);
  switch (p) {
    case Precision::Single:
      return detail::separable_stream_single(g, p, a, taps, stream);
    case Precision::Half:
      return detail::separable_stream_half(g, p, a, taps, stream);
    case Precision::Mixed:
      return detail::separable_stream_mixed(g, p, a, taps, stream);
    case Precision::BF16:
      return detail::separable_stream_bf16(g, p, a, taps, stream);
    default:
      return false;  // FP64: the two passes
  }
}

}  // namespace

void separable_cuda(const Geometry& g, Precision p, const Array& image, const Array& kernel,
                    Array& out, cudaStream_t stream, const SeparableFactors* factors) {
  check_direct_call(kName, g, p, image, kernel, out, kSupported);
  std::optional<SeparableFactors> own;
  if (!factors) {
    own = factor_separable(kernel, separable_tolerance(p), kSeparableMaxRank);
    if (!own)
      throw Unsupported(std::string(kName) + ": the " + std::to_string(g.krows) + "x" +
                        std::to_string(g.kcols) + " kernel is not a sum of at most " +
                        std::to_string(kSeparableMaxRank) +
                        " outer products within its storage rounding (or has a non-finite "
                        "tap); use method register, tensor or fft");
    factors = &*own;
  }
  if (factors->krows != g.krows || factors->kcols != g.kcols || factors->rank < 1)
    throw InvalidInput(std::string(kName) + ": factors of a " + std::to_string(factors->krows) +
                       "x" + std::to_string(factors->kcols) + " kernel (rank " +
                       std::to_string(factors->rank) + ") given for a " + std::to_string(g.krows) +
                       "x" + std::to_string(g.kcols) + " kernel");
  if (factors->rank == 1 && stream_rank_one(g, p, image, kernel, out, *factors, stream)) return;
  switch (p) {
    case Precision::Double:
      run<kernels::PrecDouble>(g, p, image, kernel, out, *factors, stream);
      break;
    case Precision::Single:
      run<kernels::PrecSingle>(g, p, image, kernel, out, *factors, stream);
      break;
    case Precision::Half:
      run<kernels::PrecHalf>(g, p, image, kernel, out, *factors, stream);
      break;
    case Precision::Mixed:
      run<kernels::PrecMixed>(g, p, image, kernel, out, *factors, stream);
      break;
    default:
      run<kernels::PrecBF16>(g, p, image, kernel, out, *factors, stream);
      break;
  }
}

}  // namespace halfscope::conv
