// GPU FFT convolution (backends.hpp: fft_cuda), the study's cuFFT method done in as few passes as
// the library allows:
//
//   fingerprint kernel (spectrum cache) -> pad image -> R2C -> [cached kernel spectrum, or pad
//   kernel -> R2C] -> multiply -> C2R -> read the window out, counting non-finite outputs
//
// Real-to-complex transforms only (half the work and memory of C2C); the grid is as small as the
// output window allows and a length cuFFT likes (fft_layout.hpp); the 1/N of the inverse transform
// is folded into the cached kernel spectrum, so the product is one pass and the readout a copy.
//
// Precisions: double (D2Z/Z2D), single (R2C/C2R), mixed (FP16 storage, FP32 transforms: widened in
// the pad kernel, rounded once in the readout), bf16 (likewise with BF16 storage) and half (FP16
// storage and FP16 transforms through cufftXt; power-of-two grids only, as cuFFT requires). For
// half the study's section V recipe keeps the unnormalised transforms inside the FP16 range: the
// image is scaled by 2^-ceil(m/2) and the kernel by 2^-floor(m/2) before the forward transforms
// (N = 2^m grid points, so both factors are about 1/sqrt(N), are exact powers of two, and their
// product is exactly the inverse transform's 1/N: nothing needs undoing after C2R). The forward
// spectra are then bounded by ||x||_1 / sqrt(N) instead of ||x||_1 (a 256x256 image of values ~100
// on a 512x512 grid: 12800 instead of 6.5e6 > 65504). Any output that is still not finite (a
// result beyond 65504, or a transform that overflowed anyway) is counted and reported as a
// NumericalError, never returned as inf.
//
// Floors, 4096x4096 image, 65x65 kernel, `same`, single, on an H100 (3.35 TB/s, ~50 TFLOP/s FP32):
// grid 4200x4200 (N = 17.6M, spectrum 4200x2101 complex = 70.6 MB). Bytes: pad 138 MB, R2C ~282
// MB (two passes of cuFFT, read + write), multiply 212 MB, C2R ~282 MB, readout 134 MB: ~1.05 GB
// -> ~0.31 ms; a new kernel adds its pad (71 MB) and R2C (~282 MB): ~0.1 ms more. Flops: ~2.5 N
// log2 N per real transform, ~1.1 GFLOP each, ~3.3 GFLOP in all -> ~0.07 ms: memory-bound by 4x.
// Expected ~0.35 - 0.45 ms with the kernel spectrum cached (each pass at 80 - 90% of copy
// bandwidth), ~0.5 ms without; the next step would be cuFFT LTO callbacks fusing pad, multiply and
// readout into the transforms' loads and stores (~0.2 ms).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cufftXt.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "conv/backends.hpp"
#include "conv/cuda_backend_util.hpp"
#include "conv/fft_layout.hpp"
#include "conv/fft_plan_cache_cuda.hpp"
#include "conv/kernels/fft.cuh"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::conv {

namespace {

using namespace gpufft;

using cuda::aligned;
using cuda::grid_blocks;
using cuda::StreamScratch;
using tuning::kFftBlocksPerSm;
using tuning::kFftThreads;

/// Storage type T, transform types R (real) and C (complex), cuFFT's real type.
template <class T, class R, class C, cudaDataType kRealType>
struct FftTypes {
  using Storage = T;
  using Real = R;
  using Complex = C;
  static constexpr cudaDataType real_type = kRealType;
  static constexpr bool half_transform = std::is_same_v<R, __half>;
};
using FftDouble = FftTypes<double, double, double2, CUDA_R_64F>;
using FftSingle = FftTypes<float, float, float2, CUDA_R_32F>;
using FftMixed = FftTypes<__half, float, float2, CUDA_R_32F>;
using FftBF16 = FftTypes<__nv_bfloat16, float, float2, CUDA_R_32F>;
using FftHalf = FftTypes<__half, __half, __half2, CUDA_R_16F>;

/// What the host reads back: the fingerprint, then the count of non-finite outputs.
struct Mailbox {
  kernels::fftk::KernelFingerprint fingerprint;
  unsigned long long nonfinite;
};

template <class R>
R real_from(double x) {
  if constexpr (std::is_same_v<R, __half>)
    return __float2half_rn(static_cast<float>(x));
  else
    return static_cast<R>(x);
}

/// Image and kernel factors before the forward transforms (see the file comment).
struct Scales {
  double image = 1.0;
  double kernel = 1.0;
};
Scales scales_for(bool half_transform, std::int64_t grid_points) {
  if (!half_transform) return {1.0, 1.0 / static_cast<double>(grid_points)};
  int m = 0;
  while ((std::int64_t{1} << m) < grid_points) ++m;
  return {std::ldexp(1.0, -(m - m / 2)), std::ldexp(1.0, -(m / 2))};
}

void check_grid(const FftLayout& l, bool half_transform, const Geometry& g) {
  constexpr std::int64_t kMaxAxis = std::int64_t{1} << 31;
  constexpr std::int64_t kMaxPoints = std::int64_t{1} << 36;
  const bool too_big =
      l.rows.n > kMaxAxis || l.cols.n > kMaxAxis ||
      l.rows.n * l.cols.n > (half_transform ? (std::int64_t{1} << 32) : kMaxPoints);
  if (too_big)
    throw Unsupported("fft (cuda): a " + std::to_string(g.rows) + "x" + std::to_string(g.cols) +
                      " image with a " + std::to_string(g.krows) + "x" + std::to_string(g.kcols) +
                      " kernel needs a " + std::to_string(l.rows.n) + "x" +
                      std::to_string(l.cols.n) + " transform grid, beyond what cuFFT transforms" +
                      (half_transform ? " in FP16 (2^32 points)" : ""));
}

std::string nonfinite_message(Precision p, unsigned long long bad, std::int64_t outputs,
                              const FftLayout& l) {
  std::string m = "fft (cuda) in precision " + std::string(precision_name(p)) + ": " +
                  std::to_string(bad) + " of " + std::to_string(outputs) +
                  " outputs are not finite (grid " + std::to_string(l.rows.n) + "x" +
                  std::to_string(l.cols.n) + "): ";
  if (p == Precision::Half)
    return m +
           "a result beyond the float16 range (65504), or an FP16 transform that overflowed "
           "despite the 1/sqrt(N) pre-scaling; precision mixed or single keeps the range";
  if (p == Precision::Mixed)
    return m + "a result beyond the float16 range (65504); precision bf16 or single keeps it";
  return m + "the result exceeds the range of " + std::string(dtype_name(storage_dtype(p)));
}

template <class F>
void run_fft(const Geometry& g, Precision p, const Array& image, const Array& kernel, Array& out,
             cudaStream_t s) {
  using T = typename F::Storage;
  using R = typename F::Real;
  using C = typename F::Complex;
  constexpr bool kHalf = F::half_transform;
  constexpr int V = 16 / static_cast<int>(sizeof(T));  // storage elements per 16-byte access

  const FftLayout l = plan_fft_layout(g, kHalf ? FftSizeRule::PowerOfTwo : FftSizeRule::Smooth);
  T* dout = static_cast<T*>(out.data());
  if (l.all_zero) {  // the window lies outside the full convolution: all zeros, nothing to do
    HS_CUDA_CHECK(cudaMemsetAsync(dout, 0, static_cast<std::size_t>(out.nbytes()), s));
    return;
  }
  check_grid(l, kHalf, g);
  int device = 0;
  HS_CUDA_CHECK(cudaGetDevice(&device));
  const std::int64_t points = l.real_elems();
  const std::int64_t spectrum_elems = l.spectrum_elems();
  const Scales scales = scales_for(kHalf, points);

  PlanKey key{device, 2, {1, 1}, F::real_type, false};
  key.rank = l.plan_dims(key.dims);
  PlanKey inverse_key = key;
  inverse_key.inverse = true;
  const PlanLease forward(key, s);
  const PlanLease inverse(inverse_key, s);

  StreamScratch grid(points * static_cast<std::int64_t>(sizeof(R)), s);
  StreamScratch spectrum(spectrum_elems * static_cast<std::int64_t>(sizeof(C)), s);
  StreamScratch box(sizeof(Mailbox), s);
  auto* host = static_cast<Mailbox*>(cuda::pinned_mailbox());
  auto* dbox = box.as<Mailbox>();
  HS_CUDA_CHECK(cudaMemsetAsync(dbox, 0, sizeof(Mailbox), s));

  // 1. Fingerprint the kernel against the cached spectra of this geometry; the host waits for
  //    it below, while the image is padded and transformed.
  const SpectrumKey skey{device,         p,       l.rows.n,      l.cols.n,
                         g.krows,        g.kcols, l.rows.period, l.cols.period,
                         kernel.nbytes()};
  const bool use_cache = fft_spectrum_cache_enabled();
  std::vector<std::shared_ptr<SpectrumEntry>> candidates;
  cuda::Event fingerprinted;
  if (use_cache) {
    candidates = spectrum_candidates(skey);
    kernels::fftk::FingerprintArgs args{};
    args.data = static_cast<const unsigned char*>(kernel.data());
    args.nbytes = kernel.nbytes();
    args.count = static_cast<int>(candidates.size());
    for (int c = 0; c < args.count; ++c) {
      HS_CUDA_CHECK(cudaStreamWaitEvent(s, candidates[c]->ready.get(), 0));
      args.candidates[c] = static_cast<const unsigned char*>(candidates[c]->kernel_copy->data());
    }
    kernels::fftk::fingerprint_kernel<<<
        grid_blocks((args.nbytes + 3) / 4, kFftThreads, kFftBlocksPerSm), kFftThreads, 0, s>>>(
        args, &dbox->fingerprint);
    HS_CHECK_LAUNCH();
    HS_CUDA_CHECK(cudaMemcpyAsync(&host->fingerprint, &dbox->fingerprint,
                                  sizeof(kernels::fftk::KernelFingerprint), cudaMemcpyDeviceToHost,
                                  s));
    fingerprinted.record(s);
  }

  // 2. Image onto the grid, forward transform.
  R* dgrid = grid.as<R>();
  C* dspec = spectrum.as<C>();
  {
    const auto* dimage = static_cast<const T*>(image.data());
    const bool vec_load = aligned(dimage, sizeof(T) * V) && l.cols.image % V == 0;
    const bool vec_store = aligned(dgrid, sizeof(R) * V) && l.cols.n % V == 0;
    const std::int64_t groups = l.rows.n * ((l.cols.n + V - 1) / V);
    kernels::fftk::pad_image_kernel<T, R, V, kHalf>
        <<<grid_blocks(groups, kFftThreads, kFftBlocksPerSm), kFftThreads, 0, s>>>(
            dimage, dgrid, l.rows, l.cols, real_from<R>(scales.image), vec_load, vec_store);
    HS_CHECK_LAUNCH();
  }
  HS_CUFFT_CHECK(cufftXtExec(forward.get(), dgrid, dspec, CUFFT_FORWARD));

  // 3. The kernel's spectrum: cached, or computed now (and cached when the cache is on).
  const auto compute_kernel_spectrum = [&](C* into) {
    kernels::fftk::pad_kernel_kernel<T, R, kHalf>
        <<<grid_blocks(points, kFftThreads, kFftBlocksPerSm), kFftThreads, 0, s>>>(
            static_cast<const T*>(kernel.data()), dgrid, l.rows, l.cols,
            real_from<R>(scales.kernel));
    HS_CHECK_LAUNCH();
    HS_CUFFT_CHECK(cufftXtExec(forward.get(), dgrid, into, CUFFT_FORWARD));
  };
  std::shared_ptr<SpectrumEntry> entry;
  std::optional<StreamScratch> own;
  const C* kspec = nullptr;
  if (use_cache) {
    HS_CUDA_CHECK(cudaEventSynchronize(fingerprinted.get()));
    const std::uint64_t hash =
        host->fingerprint.hash ^ kernels::fftk::mix64(static_cast<std::uint64_t>(kernel.nbytes()));
    for (std::size_t c = 0; c < candidates.size() && !entry; ++c)
      if (candidates[c]->hash == hash && host->fingerprint.mismatch[c] == 0) entry = candidates[c];
    count_spectrum_lookup(entry != nullptr);
    if (entry) {
      touch_spectrum(entry);  // its ready event was waited on before the fingerprint
    } else {
      entry =
          make_spectrum_entry(skey, hash, spectrum_elems * static_cast<std::int64_t>(sizeof(C)));
      compute_kernel_spectrum(static_cast<C*>(entry->spectrum->data()));
      HS_CUDA_CHECK(cudaMemcpyAsync(entry->kernel_copy->data(), kernel.data(),
                                    static_cast<std::size_t>(kernel.nbytes()),
                                    cudaMemcpyDeviceToDevice, s));
      entry->ready.record(s);
      insert_spectrum(entry);
    }
    kspec = static_cast<const C*>(entry->spectrum->data());
  } else {
    own.emplace(spectrum_elems * static_cast<std::int64_t>(sizeof(C)), s);
    compute_kernel_spectrum(own->as<C>());
    kspec = own->as<C>();
  }

  // 4. Product, 5. inverse transform, 6. the window out.
  kernels::fftk::spectrum_multiply_kernel<C>
      <<<grid_blocks(spectrum_elems / (16 / static_cast<int>(sizeof(C))) + 1, kFftThreads,
                     kFftBlocksPerSm),
         kFftThreads, 0, s>>>(dspec, kspec, spectrum_elems);
  HS_CHECK_LAUNCH();
  HS_CUFFT_CHECK(cufftXtExec(inverse.get(), dspec, dgrid, CUFFT_INVERSE));
  {
    const bool vec_load = aligned(dgrid, sizeof(R) * V) && l.cols.n % V == 0;
    const bool vec_store = aligned(dout, sizeof(T) * V) && g.out_cols % V == 0;
    const std::int64_t groups = g.out_rows * ((g.out_cols + V - 1) / V);
    kernels::fftk::readout_kernel<R, T, V>
        <<<grid_blocks(groups, kFftThreads, tuning::kFftReadoutBlocksPerSm), kFftThreads, 0, s>>>(
            dgrid, dout, g.out_rows, g.out_cols, l.rows, l.cols, vec_load, vec_store,
            &dbox->nonfinite);
    HS_CHECK_LAUNCH();
  }
  HS_CUDA_CHECK(cudaMemcpyAsync(&host->nonfinite, &dbox->nonfinite, sizeof(unsigned long long),
                                cudaMemcpyDeviceToHost, s));
  HS_CUDA_CHECK(cudaStreamSynchronize(s));
  if (host->nonfinite != 0)
    throw NumericalError(nonfinite_message(p, host->nonfinite, out.size(), l));
}

}  // namespace

void fft_cuda(const Geometry& g, Precision p, const Array& image, const Array& kernel, Array& out,
              cudaStream_t stream) {
  switch (p) {
    case Precision::Double:
    case Precision::Single:
    case Precision::Half:
    case Precision::Mixed:
    case Precision::BF16:
      break;
    default:
      throw Unsupported("fft (cuda) supports precisions double, single, half, mixed, bf16; not " +
                        std::string(precision_name(p)));
  }
  check_gpu_call("fft (cuda)", g, p, image, kernel, out);
  switch (p) {
    case Precision::Double:
      return run_fft<FftDouble>(g, p, image, kernel, out, stream);
    case Precision::Single:
      return run_fft<FftSingle>(g, p, image, kernel, out, stream);
    case Precision::Mixed:
      return run_fft<FftMixed>(g, p, image, kernel, out, stream);
    case Precision::BF16:
      return run_fft<FftBF16>(g, p, image, kernel, out, stream);
    default:
      return run_fft<FftHalf>(g, p, image, kernel, out, stream);
  }
}

}  // namespace halfscope::conv
