// Tuning constants of the GPU FFT convolution (src/conv/fft_cuda.cu). None of them was measured on
// a GPU yet: each says what it was chosen from, and `halfscope bench conv` on an H100/H200 is what
// should confirm or move it.
#pragma once

#include <cstdint>

namespace halfscope::conv::tuning {

/// Threads per block of the pad, readout and multiply kernels: 256 keeps 8 blocks (2048 threads)
/// resident per SM on sm_90 at the <= 32 registers these copy-like kernels need, so every SM has
/// enough loads in flight to cover HBM latency (Little's law: ~3.35 TB/s * ~600 ns ~ 2 MB in
/// flight, ~16 KB per SM, i.e. 16 B from each of 1024 threads).
inline constexpr int kFftThreads = 256;

/// Blocks per SM of the grid-stride kernels: one full wave of 2048 threads per SM (see above);
/// more only adds tail effects, fewer leaves bandwidth idle.
inline constexpr int kFftBlocksPerSm = 8;

/// Minimum resident blocks per SM the readout kernel is compiled for (__launch_bounds__): its
/// index maps and conversions need ~44 registers; capping at 32 (8 blocks) spills, 6 blocks
/// (<= 40 registers, 1536 threads per SM) does not, and still keeps ~24 KB of 16-byte loads in
/// flight per SM, above the ~16 KB the bandwidth-latency product asks for.
inline constexpr int kFftReadoutBlocksPerSm = 6;

/// Kernel spectra kept per geometry for the byte-exact check of a new kernel against cached ones
/// (the check reads the new kernel once per candidate, so a handful keeps it cheap).
inline constexpr int kMaxSpectrumCandidates = 4;

/// Device memory the cached kernel spectra may hold in all (least recently used evicted first).
/// One FP32 8192x8192 spectrum is ~271 MB; 1 GiB keeps a few of the largest, which is what an
/// iterative deconvolution (one PSF, its adjoint, a couple of image sizes) needs.
inline constexpr std::int64_t kSpectrumCacheBytes = std::int64_t{1} << 30;

/// cuFFT plans kept idle (least recently used destroyed first). A plan owns a work area about the
/// size of its data, so the cap bounds the memory parked in unused plans.
inline constexpr int kMaxIdlePlans = 16;

}  // namespace halfscope::conv::tuning
