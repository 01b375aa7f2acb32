// Single-channel 2D convolution (study 000): every method of the study on CPU and GPU, in every
// precision, with the semantics of scipy.signal.convolve2d.
//
//   out = convolve2d(image, kernel, {.mode = ConvMode::same, .precision = Precision::Mixed});
//
// `mode` full / same / valid and `boundary` zero / circular follow scipy.signal.convolve2d with
// boundary='fill' (fillvalue 0) and boundary='wrap'. A true convolution flips the kernel;
// `correlate` computes scipy.signal.correlate2d instead. As in SciPy, `valid` needs one input at
// least as large as the other in both dimensions and then swaps them if the kernel is the larger.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/precision.hpp"

namespace halfscope {

namespace conv {
class KernelPrep;  // src/conv/kernel_prep.hpp
}

enum class ConvMode { Full, Same, Valid };
enum class Boundary { Zero, Circular };

/// How the convolution is computed. CPU: Direct, FFT. GPU: Naive, Register (PRCF), FFT, Gemm,
/// Cudnn, Tensor, Separable (a kernel that is a sum of at most 4 outer products within its storage
/// rounding, such as a Gaussian, as 1-D row and column passes). Auto picks by measuring on the
/// first call for a shape and kernel rank (docs/conv.md, "How auto chooses").
enum class ConvMethod { Auto, Direct, FFT, Naive, Register, Gemm, Cudnn, Tensor, Separable };

std::string_view conv_mode_name(ConvMode m) noexcept;
std::string_view boundary_name(Boundary b) noexcept;
std::string_view conv_method_name(ConvMethod m) noexcept;
/// Parsers accept the names above in lower case ("same", "circular", "register"); they throw
/// InvalidInput listing the valid names.
ConvMode parse_conv_mode(std::string_view text);
Boundary parse_boundary(std::string_view text);
ConvMethod parse_conv_method(std::string_view text);

struct ConvOptions {
  ConvMode mode = ConvMode::Full;  // SciPy's default
  Boundary boundary = Boundary::Zero;
  bool correlate = false;
  ConvMethod method = ConvMethod::Auto;
  Precision precision = Precision::Single;
  DeviceKind device = DeviceKind::Auto;
  /// For method Auto on the GPU: time the candidate methods on the first call of a shape and
  /// remember the fastest (FFTW-style planning). Off, or with HALFSCOPE_CONV_MEASURE=0 in the
  /// environment, a documented heuristic chooses instead (conv_heuristic_method).
  bool plan_by_measuring = true;
  /// For GPU calls with a device output in half, mixed or bf16 (naive, register, tensor): off
  /// (the default), the FP16 / BF16 output-overflow check completes before the call returns, as
  /// for host outputs. On, the call returns once its work is enqueued and the check runs later
  /// (see convolve2d_into): for iterative solvers and benchmarks that check once per iteration
  /// with conv_check_overflow(). A deferred overflow is reported only by a later call on the same
  /// thread or by conv_check_overflow(); one still pending when the thread exits is lost (a
  /// destructor cannot throw), so a caller that defers must call conv_check_overflow().
  bool defer_overflow_check = false;
};

/// Output extent (rows, cols) of a convolution of an (r x c) image with a (kr x kc) kernel.
/// Throws InvalidInput for empty inputs or, in valid mode, inputs where neither contains the other.
std::pair<std::int64_t, std::int64_t> conv_output_shape(std::int64_t r, std::int64_t c,
                                                        std::int64_t kr, std::int64_t kc,
                                                        ConvMode mode);

/// Convolves a 2-D image with a 2-D kernel (any real dtypes; converted to the precision's storage
/// type with overflow counted: an FP16 overflow is a NumericalError, never an inf). Host arrays
/// give a host result; device arrays a device result. The result's dtype is storage_dtype().
Array convolve2d(const Array& image, const Array& kernel, const ConvOptions& options = {});

/// As convolve2d, into a preallocated `out` of the output shape and storage dtype, in the same
/// memory as the image (no allocation and no copy when the inputs are already device arrays of
/// the storage dtype: the form benchmarks and iterative solvers use). GPU work is enqueued on the
/// default stream and ordered with later work on it; results are complete when the call returns
/// for host outputs.
///
/// FP16 / BF16 overflow: an overflowed output pixel is a NumericalError before the call returns,
/// unless `options.defer_overflow_check` is set and the output is on the device. Then the naive,
/// register and tensor methods return before their result is checked, so that back-to-back calls
/// run at the kernels' speed; the NumericalError (naming the method and saying it comes from an
/// earlier call) is thrown by a later convolve2d / convolve2d_into call on the same thread, or
/// by conv_check_overflow(), which the caller must call before relying on the device result.
void convolve2d_into(const Array& image, const Array& kernel, Array& out,
                     const ConvOptions& options = {});

/// A kernel prepared for many convolutions with one set of options, as an FFTW plan is: the kernel
/// in the precision's storage type (flipped for correlation), its copy on the GPU the calls run on,
/// and the low-rank factors that method Separable, and Auto on the GPU, use. Those are found once,
/// here, so a call on device arrays neither converts the kernel nor reads it back to factor it (a
/// synchronisation per call for a device kernel otherwise): with `defer_overflow_check` a call only
/// enqueues its work, and back-to-back calls run at the kernels' speed. For a point-spread
/// function applied at every iteration of a solver, a filter over a stream of images.
///
///   ConvPlan blur(psf, {.mode = ConvMode::Same, .precision = Precision::Mixed});
///   blur.run(image, out);   // = convolve2d_into(image, psf, out, options)
///
/// The plan holds a copy: later changes to the caller's kernel array do not reach it. Calls may
/// come from several threads. Errors are those of convolve2d, from the constructor for the kernel
/// (conversion to the storage type) and from run for everything else.
class ConvPlan {
 public:
  explicit ConvPlan(const Array& kernel, const ConvOptions& options = {});
  ~ConvPlan();
  ConvPlan(ConvPlan&&) noexcept;
  ConvPlan& operator=(ConvPlan&&) noexcept;

  /// convolve2d_into(image, kernel, out, options()).
  void run(const Array& image, Array& out) const;
  /// convolve2d(image, kernel, options()).
  [[nodiscard]] Array operator()(const Array& image) const;
  /// The method a call on `image` runs (conv_resolve_method). Auto with a plan considers the
  /// separable method for every kernel of a rank worth running, from 5x5 (rank one) on, where a
  /// call without one starts at 7x7: the plan has factored the kernel already.
  [[nodiscard]] ConvMethod resolve_method(const Array& image) const;
  [[nodiscard]] const ConvOptions& options() const noexcept { return options_; }

 private:
  ConvOptions options_;
  std::unique_ptr<const conv::KernelPrep> kernel_;
};

/// Waits for this thread's GPU convolutions whose FP16 / BF16 overflow check was deferred
/// (ConvOptions::defer_overflow_check with a device output, see convolve2d_into) and throws
/// NumericalError for the first that overflowed. Returns at once when none is pending (and always
/// in CPU-only builds).
void conv_check_overflow();

/// The method a call with these arguments runs: `options.method`, or what Auto chooses (planning
/// by measurement on the first call of a shape when enabled). Validates like convolve2d.
ConvMethod conv_resolve_method(const Array& image, const Array& kernel, const ConvOptions& options);

/// The method Auto picks without measuring, for a kernel of (krows x kcols), a precision and a
/// resolved device (Cpu or Cuda). See docs/conv.md for the rule and the measurements behind it.
/// On the GPU, a kernel of width >= 9 that is separable (of a rank worth running) takes the
/// Separable method before this rule applies: that depends on the kernel's values, not its size.
ConvMethod conv_heuristic_method(std::int64_t krows, std::int64_t kcols, Precision precision,
                                 DeviceKind device);

/// The precisions a method supports on a device kind ("direct on the CPU: double, single, half,
/// mixed, bf16"), for messages and for the benchmark's sweep.
std::vector<Precision> conv_supported_precisions(ConvMethod method, DeviceKind device);

}  // namespace halfscope
