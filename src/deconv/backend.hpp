// Internal: what the deconvolution solvers (solvers.cpp, written once) need from a device and a
// precision. One Backend = one problem (dirty image g, PSF h, lambda, boundary) on one device in
// one precision; the CPU backend (backend_cpu.cpp) and the CUDA backend (backend_cuda.cu) implement
// it with the same arithmetic contract, so their results agree within the precision's tolerance.
//
// The operator. The PSF's origin is pixel (rows / 2, cols / 2); h^ is the DFT of the PSF shifted so
// that its origin is at index (0, 0) of the FFT grid.
//  - Circular: grid = the image; H f = IFFT(h^ FFT(f)); H^T y = IFFT(conj(h^) FFT(y)); the normal
//    operator Q f = H^T H f + lambda f is one spectral multiply, IFFT((|h^|^2 + lambda) FFT(f)).
//  - Zero: grid = grid_extent(n, pow2) per axis (f zero-extended); H f = the grid's circular
//    convolution cropped to [0, rows) x [0, cols); H^T y = the circular correlation of the
//    zero-extended y, cropped. The grid is large enough that the cropped window sees no
//    wrap-around, so H is exactly the linear convolution. Q f = H^T (crop(H f)) + lambda f.
//
// Arithmetic contract per precision (storage / arithmetic):
//  - double: FP64 / FP64 (FFTW or cuFFT D2Z/Z2D).
//  - single: FP32 / FP32.
//  - half:   FP16 / FP16: vectors stored in FP16, element-wise operations in FP16 (each rounded),
//            FFTs in FP16 (CPU: conv/fft_radix2.hpp on Half; GPU: cufftXt CUDA_R_16F / C_16F) on
//            power-of-two grids, the input pre-scaled by 1 / sqrt(grid size) before each forward
//            and inverse transform (study 000, section V) and the spectra scaled by powers of two
//            so no intermediate overflows; reductions: products rounded to FP16, sums in FP32.
//            The CPU scheme (backend_cpu_half.cpp): x scaled by 2^-(h1 + ceil(log2 max|x|))
//            before the forward FFT, the spectrum stored as S 2^-ceil(log2 max|S|) (computed in
//            FP64, rounded once), the product scaled by 2^-h2 before the inverse, 2^(h1 + h2) =
//            grid size; dot products first scale both operands to a largest magnitude of at most
//            1 by powers of two (backend_cpu_vectors.cpp), so no product overflows.
//  - mixed:  FP16 / FP32: vectors stored in FP16, every operation (FFTs, element-wise, reductions)
//            in FP32 on the converted values, results rounded once to FP16.
// `split` is not a backend precision: the solvers run it with a single and a mixed backend.
//
// FP16 overflow: an operation whose FP16 result overflows (|v| >= 65520 or not finite) makes the
// next call that returns a scalar (dot, criterion, max_abs) or synchronize() throw NumericalError
// naming the operation ("half: normal operator overflowed FP16 (largest 7.1e4)"); the solver adds
// the iteration. Vectors are never silently inf or NaN.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <utility>

#include "halfscope/config.hpp"
#include "halfscope/conv.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/precision.hpp"

namespace halfscope::deconv::detail {

/// The problem, validated and converted once by the driver (deconv.cpp).
struct Problem {
  Array dirty;  // g: float64, host, rows x cols, finite
  Array psf;    // h: float64, host, rows x cols, finite, origin at (rows / 2, cols / 2)
  double lambda = 0.01;
  Boundary boundary = Boundary::Circular;
  [[nodiscard]] std::int64_t rows() const { return dirty.shape()[0]; }
  [[nodiscard]] std::int64_t cols() const { return dirty.shape()[1]; }
};

/// FFT grid extent of one image axis of extent n: n for the circular boundary; for the zero
/// boundary the smallest length >= 2n - 1 - n/2 (and >= n + n/2), so the cropped window sees no
/// wrap-around, rounded up to an even 2^a 3^b 5^c 7^d (pow2 = false) or a power of two (true).
std::int64_t grid_extent(std::int64_t n, Boundary boundary, bool pow2);

/// The PSF placed on a grid_rows x grid_cols grid with its origin at (0, 0) (wrapped), float64:
/// the array whose DFT is h^ for both boundaries.
Array psf_on_grid(const Array& psf, std::int64_t grid_rows, std::int64_t grid_cols);

/// max and min |h^| over the operator's grid (FP64; pow2: the power-of-two grid of half).
std::pair<double, double> spectrum_range(const Problem& problem, bool pow2);
/// max |h^| over the grid (FP64), for L = 2 (max|h^|^2 + lambda) and the FP16 scalings.
double max_abs_spectrum(const Problem& problem, bool pow2);

/// A vector of a backend: an image-sized array (rows x cols) in the backend's storage.
using Vec = int;

/// What one conjugate-gradient step (Backend::cg_step) computed.
struct CgReport {
  double rr = 0;     // r . r before the step
  double e = 1;      // the direction's scale: q = Q (p / e) (scaled_normal's e; 1 without FP16)
  double pq = 0;     // p . Q p = e (p . q)
  double alpha = 0;  // rr / pq
  double rn = 0;     // r . r after the step
  /// pq not positive or rr == 0: this step moved nothing, and neither does any later step until
  /// cg_reset (so steps queued behind a breakdown are harmless).
  bool halted = false;
};

/// FP64 values for one trace row.
struct Evaluation {
  double criterion = 0;  // J(x) in FP64
  double distance = 0;   // ||x - f*|| / ||f*||, NaN without the exact solution
};

class Backend {
 public:
  virtual ~Backend() = default;
  /// double, single, half or mixed.
  [[nodiscard]] virtual Precision precision() const = 0;
  /// Cpu or Cuda.
  [[nodiscard]] virtual DeviceKind device() const = 0;
  /// A new zero-filled vector.
  virtual Vec create() = 0;
  /// out = H^T g (the right-hand side of the normal equations).
  virtual void rhs(Vec out) = 0;
  /// out = Q x = H^T H x + lambda x (x != out).
  virtual void normal(Vec x, Vec out) = 0;
  /// J(x) = ||g - H x||^2 + lambda ||x||^2 in this precision (one H application, two reductions).
  virtual double criterion(Vec x) = 0;
  /// a . b (reduction rule of the precision), returned as double.
  virtual double dot(Vec a, Vec b) = 0;
  /// y = a x + b y, a and b first rounded to the arithmetic type (x may equal y).
  virtual void axpby(double a, Vec x, double b, Vec y) = 0;
  virtual void copy(Vec from, Vec to) = 0;
  /// max |x_i| (exact: no rounding involved).
  virtual double max_abs(Vec x) = 0;
  /// to = scale * src + beta * to, computed in FP32 (FP64 for double) and rounded to storage;
  /// src: rows x cols, C-contiguous, any of f64 / f32 / f16, in this backend's memory (host for the
  /// CPU, device for CUDA). How split moves values between its single and mixed backends.
  virtual void assign(const Array& src, double scale, double beta, Vec to) = 0;
  /// The vector's storage (rows x cols, storage dtype, this backend's memory), valid until the
  /// vector is next written.
  virtual Array view(Vec x) = 0;
  /// Waits for queued work; throws a pending overflow (see above).
  virtual void synchronize() = 0;
  /// A scalar as the arithmetic type holds it (half: rounded to FP16; single, mixed: FP32).
  [[nodiscard]] virtual double round_scalar(double v) const = 0;

  // Conjugate gradients with its scalars kept by the backend: on the GPU they stay on the device,
  // so a step costs no host round trip and the solver can queue the next step before it reads
  // this one's report (solvers_split.cpp). The defaults (cg_step.cpp) run the same operations
  // through the methods above with host scalars; the CUDA backend computes the same values on
  // the device (the same kernels' arithmetic, the same reduction order).

  /// Sets the state for the next step: rr = r . r of the current residual, and beta for its
  /// direction p = r + beta p (0 with p = r: a restart). Every queued report must have been read.
  virtual void cg_reset(double rr, double beta);
  /// Queues one step on Q x = r (x, r, p, q, tmp distinct): p = r + beta p (axpby);
  /// e = scaled_normal(p, tmp, q) (q = Q (p / e)); pq = e (p . q); halts when !(pq > 0) or
  /// rr == 0; alpha = rr / pq; x += alpha p; r -= (alpha e) q; rn = r . r; beta = rn / rr;
  /// rr = rn. Each operation rounds as axpby, dot and scaled_normal do.
  virtual void cg_step(Vec x, Vec r, Vec p, Vec q, Vec tmp, double norm_q);
  /// The report of the oldest queued step not yet read (waits for it; throws a pending FP16
  /// overflow as the scalar methods do).
  virtual CgReport cg_report();

 private:
  struct CgHost {
    double rr = 0, beta = 0;
    bool halted = false;
    std::deque<CgReport> reports;
  };
  CgHost cg_host_;  // the defaults' state (the CUDA backend keeps its own on the device)
};

/// FP64 evaluation of iterates for the trace, on the device of the solver's backends (so no
/// iterate leaves the GPU): J in FP64 and the distance to the exact solution.
class Evaluator {
 public:
  virtual ~Evaluator() = default;
  /// x: rows x cols, f64 / f32 / f16, C-contiguous, in this evaluator's memory.
  virtual Evaluation evaluate(const Array& x) = 0;
};

std::unique_ptr<Backend> make_cpu_backend(const Problem& problem, Precision precision);
/// `exact`: the exact solution (float64 host) or an empty Array (no distances).
std::unique_ptr<Evaluator> make_cpu_evaluator(const Problem& problem, const Array& exact);
#if HALFSCOPE_WITH_CUDA
std::unique_ptr<Backend> make_cuda_backend(const Problem& problem, Precision precision);
std::unique_ptr<Evaluator> make_cuda_evaluator(const Problem& problem, const Array& exact);
/// The circular Wiener solution in FP64 on the GPU (float64 host result).
Array wiener_cuda(const Problem& problem);
#endif

}  // namespace halfscope::deconv::detail
