// Convolution dispatch: validate, convert to the precision's storage type, reduce mode, boundary,
// correlation and SciPy's valid-mode swap to one Geometry, choose the method, call the backend.
#include "halfscope/conv.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "conv/backends.hpp"
#include "conv/kernel_prep.hpp"
#include "conv/overflow_check.hpp"
#include "conv/planner.hpp"
#include "core/name_table.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/convert.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_WITH_CUDA
#include "halfscope/core/convert_cuda.hpp"
#endif

namespace halfscope {

namespace {
using detail::name_of;
using detail::parse_name;

constexpr std::array<std::pair<std::string_view, ConvMode>, 3> kModes{
    {{"full", ConvMode::Full}, {"same", ConvMode::Same}, {"valid", ConvMode::Valid}}};
constexpr std::array<std::pair<std::string_view, Boundary>, 2> kBoundaries{
    {{"zero", Boundary::Zero}, {"circular", Boundary::Circular}}};
constexpr std::array<std::pair<std::string_view, ConvMethod>, 9> kMethods{
    {{"auto", ConvMethod::Auto},
     {"direct", ConvMethod::Direct},
     {"fft", ConvMethod::FFT},
     {"naive", ConvMethod::Naive},
     {"register", ConvMethod::Register},
     {"gemm", ConvMethod::Gemm},
     {"cudnn", ConvMethod::Cudnn},
     {"tensor", ConvMethod::Tensor},
     {"separable", ConvMethod::Separable}}};
}  // namespace

std::string_view conv_mode_name(ConvMode m) noexcept {
  return name_of(m, kModes);
}
std::string_view boundary_name(Boundary b) noexcept {
  return name_of(b, kBoundaries);
}
std::string_view conv_method_name(ConvMethod m) noexcept {
  return name_of(m, kMethods);
}
ConvMode parse_conv_mode(std::string_view t) {
  return parse_name(t, kModes, "mode");
}
Boundary parse_boundary(std::string_view t) {
  if (t == "fill") return Boundary::Zero;  // SciPy's names
  if (t == "wrap") return Boundary::Circular;
  return parse_name(t, kBoundaries, "boundary");
}
ConvMethod parse_conv_method(std::string_view t) {
  return parse_name(t, kMethods, "method");
}

std::pair<std::int64_t, std::int64_t> conv_output_shape(std::int64_t r, std::int64_t c,
                                                        std::int64_t kr, std::int64_t kc,
                                                        ConvMode mode) {
  if (r <= 0 || c <= 0 || kr <= 0 || kc <= 0)
    throw InvalidInput("convolve2d: empty input: image " + std::to_string(r) + "x" +
                       std::to_string(c) + ", kernel " + std::to_string(kr) + "x" +
                       std::to_string(kc));
  switch (mode) {
    case ConvMode::Full:
      return {r + kr - 1, c + kc - 1};
    case ConvMode::Same:
      return {r, c};
    case ConvMode::Valid:
      if (kr <= r && kc <= c) return {r - kr + 1, c - kc + 1};
      if (r <= kr && c <= kc) return {kr - r + 1, kc - c + 1};
      throw InvalidInput(
          "convolve2d: valid mode needs one input at least as large as the other in "
          "both dimensions; found image " +
          std::to_string(r) + "x" + std::to_string(c) + " and kernel " + std::to_string(kr) + "x" +
          std::to_string(kc));
  }
  return {0, 0};
}

std::vector<Precision> conv_supported_precisions(ConvMethod method, DeviceKind device) {
  using P = Precision;
  const bool gpu = device == DeviceKind::Cuda;
  switch (method) {
    case ConvMethod::Auto:
      return gpu ? std::vector<P>{P::Double, P::Single, P::TF32, P::Half,
                                  P::Mixed,  P::BF16,   P::Split}
                 : std::vector<P>{P::Double, P::Single, P::Half, P::Mixed, P::BF16};
    case ConvMethod::Direct:
      return gpu ? std::vector<P>{}
                 : std::vector<P>{P::Double, P::Single, P::Half, P::Mixed, P::BF16};
    case ConvMethod::FFT:
      return {P::Double, P::Single, P::Half, P::Mixed, P::BF16};
    case ConvMethod::Naive:
      return gpu ? std::vector<P>{P::Double, P::Single, P::Half, P::Mixed, P::BF16}
                 : std::vector<P>{};
    case ConvMethod::Register:
      return gpu ? std::vector<P>{P::Single, P::Half, P::Mixed, P::BF16} : std::vector<P>{};
    case ConvMethod::Gemm:
      return gpu ? std::vector<P>{P::Double, P::Single, P::TF32, P::Half, P::Mixed, P::BF16}
                 : std::vector<P>{};
    case ConvMethod::Tensor:
      return gpu ? std::vector<P>{P::Mixed, P::BF16, P::Split} : std::vector<P>{};
    case ConvMethod::Separable:
      return gpu ? std::vector<P>{P::Double, P::Single, P::Half, P::Mixed, P::BF16}
                 : std::vector<P>{};
    case ConvMethod::Cudnn:
      // Only where cuDNN was found at configure time (HALFSCOPE_WITH_CUDNN).
      return gpu && HALFSCOPE_WITH_CUDNN ? std::vector<P>{P::Single, P::Half, P::Mixed}
                                         : std::vector<P>{};
  }
  return {};
}

namespace {

void check_supported(ConvMethod m, Precision p, DeviceKind d) {
  const auto ps = conv_supported_precisions(m, d);
  const std::string where = d == DeviceKind::Cuda ? "on the GPU" : "on the CPU";
  if (m == ConvMethod::Cudnn && !HALFSCOPE_WITH_CUDNN)
    throw Unsupported(
        "convolve2d: method cudnn is not built: this halfscope was configured without cuDNN "
        "(HALFSCOPE_WITH_CUDNN; set HALFSCOPE_CUDNN_ROOT to cuDNN's folder)");
  if (ps.empty())
    throw Unsupported("convolve2d: method " + std::string(conv_method_name(m)) + " does not run " +
                      where);
  if (std::find(ps.begin(), ps.end(), p) == ps.end())
    throw Unsupported("convolve2d: method " + std::string(conv_method_name(m)) + " " + where +
                      " does not support precision " + std::string(precision_name(p)) +
                      "; it supports " + precision_list(ps));
}

// An input whose every nonzero value underflowed to zero in the storage type (a kernel of 1e-10
// in FP16, whose smallest subnormal is 6e-8) has vanished: the convolution would be zeros,
// silently. Some values underflowing is the precision's rounding; all of them is an error.
void require_not_vanished(const ConversionReport& r, const Array& stored, const std::string& what) {
  if (r.underflow == 0) return;
  const Array h = stored.on_device() ? stored.to(Memory::host) : stored;
  const auto* bits = static_cast<const std::uint16_t*>(h.data());
  for (std::int64_t i = 0; i < h.size(); ++i)
    if ((bits[i] & 0x7fff) != 0) return;
  throw NumericalError(what + ": every nonzero value underflowed to zero (" +
                       std::to_string(r.underflow) +
                       " of them): scale the input up, or use a wider precision");
}

// The checks of one conversion of input `what` to p's storage, `stored`: no value beyond the
// format, and for FP16 / BF16 not every nonzero value underflowed.
void check_conversion(const ConversionReport& r, const Array& stored, Precision p,
                      const char* what) {
  const DType want = storage_dtype(p);
  const std::string where = std::string("convolve2d: ") + what + " in " +
                            std::string(precision_name(p)) + " storage (" +
                            std::string(dtype_name(want)) + ")";
  require_finite(r, where);
  if (want == DType::f16 || want == DType::bf16) require_not_vanished(r, stored, where);
}

// The input in the precision's storage type, C-contiguous, in `memory`: the array itself when it
// already is (no copy). A value that does not fit the storage type (FP16 overflow) is an error,
// never an inf, and so is an input that underflows to zero entirely.
Array to_storage(const Array& a, Precision p, Memory memory, const char* what) {
  const DType want = storage_dtype(p);
  const bool same_place = (memory == Memory::device) == a.on_device();
  if (a.dtype() == want && a.is_c_contiguous() && same_place) return a;
#if HALFSCOPE_WITH_CUDA
  // FP32 device input for FP16 / BF16 storage (CuPy / PyTorch float32 arrays with precision
  // mixed, half or bf16): converted on the device with the same rounding and overflow counts,
  // not through the host (which cost 240 ms for a 4096^2 image on an H200, 0.3 ms here).
  if (a.on_device() && memory == Memory::device && a.dtype() == DType::f32 && a.is_c_contiguous() &&
      (want == DType::f16 || want == DType::bf16)) {
    ConversionReport r;
    Array s = want == DType::f16 ? to_half_device(a, &r) : to_bf16_device(a, &r);
    check_conversion(r, s, p, what);
    return s;
  }
#endif
  Array host = a.on_device() ? a.to(Memory::host) : a;
  Array s;
  if (host.dtype() == want) {
    s = host.contiguous();
  } else {
    ConversionReport r;
    s = host.astype(want, &r);
    check_conversion(r, s, p, what);
  }
  return memory == Memory::device ? s.to(Memory::device) : s;
}

Array flipped(const Array& k) {
  const Array c = k.contiguous();
  Array f(c.dtype(), c.shape());
  const std::int64_t n = c.size(), item = c.itemsize();
  const auto* src = static_cast<const std::byte*>(c.data());
  auto* dst = static_cast<std::byte*>(f.data());
  for (std::int64_t i = 0; i < n; ++i) std::copy_n(src + (n - 1 - i) * item, item, dst + i * item);
  return f;
}

}  // namespace

ConvMethod conv_heuristic_method(std::int64_t krows, std::int64_t kcols, Precision precision,
                                 DeviceKind device) {
  const std::int64_t w = std::max(krows, kcols);
  if (device != DeviceKind::Cuda)
    return w <= conv::kCpuDirectMaxWidth ? ConvMethod::Direct : ConvMethod::FFT;
  switch (precision) {
    case Precision::Split:
      return ConvMethod::Tensor;
    case Precision::Mixed:
    case Precision::BF16:
      return w <= conv::kGpuRegisterMaxWidth ? ConvMethod::Register
             : w <= conv::kGpuTensorMaxWidth ? ConvMethod::Tensor
                                             : ConvMethod::FFT;
    case Precision::Half:
    case Precision::Single:
      return w <= conv::kGpuRegisterMaxWidth ? ConvMethod::Register : ConvMethod::FFT;
    case Precision::TF32:
      return ConvMethod::Gemm;  // the one GPU method with a TF32 path (cuBLAS FAST_TF32)
    default:
      return ConvMethod::FFT;
  }
}

namespace {

struct Prepared {
  conv::Geometry g;
  DeviceKind device = DeviceKind::Cpu;
  ConvMethod method = ConvMethod::Auto;
  Precision precision =
      Precision::Single;  // what the method runs in (Auto may run single as split)
  Array image, kernel;    // storage dtype, in the memory the method runs in
  std::optional<conv::SeparableFactors> own_factors;     // Auto on the GPU, for a low-rank kernel
  const conv::SeparableFactors* plan_factors = nullptr;  // a ConvPlan's (Auto or Separable)
  [[nodiscard]] const conv::SeparableFactors* factors() const {
    return plan_factors ? plan_factors : own_factors ? &*own_factors : nullptr;
  }
};

// Whether the kernel came from device memory: a plan's host copy remembers where it came from.
bool kernel_from_device(const Array& kernel, const conv::KernelPrep* prep) {
  return prep ? prep->from_device() : kernel.on_device();
}

Prepared prepare(const Array& image, const Array& kernel, const conv::KernelPrep* prep,
                 const ConvOptions& o) {
  if (image.empty() || kernel.empty()) throw InvalidInput("convolve2d: an input array is empty");
  if (image.ndim() != 2 || kernel.ndim() != 2)
    throw InvalidInput("convolve2d: expected 2-D image and kernel, found image " +
                       image.describe() + " and kernel " + kernel.describe());
  Prepared w;
  w.device = o.device;
  if (w.device == DeviceKind::Auto && (image.on_device() || kernel_from_device(kernel, prep)))
    w.device = DeviceKind::Cuda;
  w.device = resolve_device(w.device);
  const auto [out_rows, out_cols] =
      conv_output_shape(image.dim(0), image.dim(1), kernel.dim(0), kernel.dim(1), o.mode);
  const Memory mem = w.device == DeviceKind::Cuda ? Memory::device : Memory::host;
  Array img = to_storage(image, o.precision, mem, "image");
  // The kernel is small: flip it on the host for correlation (a plan has done both already).
  Array ker = prep ? prep->in(mem)
              : o.correlate
                  ? to_storage(flipped(to_storage(kernel, o.precision, Memory::host, "kernel")),
                               o.precision, mem, "kernel")
                  : to_storage(kernel, o.precision, mem, "kernel");
  conv::Geometry& g = w.g;
  g.boundary = o.boundary;
  g.out_rows = out_rows;
  g.out_cols = out_cols;
  if (o.mode == ConvMode::Same) {
    g.row0 = o.correlate ? ker.dim(0) / 2 : (ker.dim(0) - 1) / 2;
    g.col0 = o.correlate ? ker.dim(1) / 2 : (ker.dim(1) - 1) / 2;
  } else if (o.mode == ConvMode::Valid) {
    // SciPy swaps the inputs when the kernel is the larger (a convolution commutes).
    if (!(ker.dim(0) <= img.dim(0) && ker.dim(1) <= img.dim(1))) {
      std::swap(img, ker);
      prep = nullptr;  // its factors are the kernel's, not the image's
    }
    g.row0 = ker.dim(0) - 1;
    g.col0 = ker.dim(1) - 1;
  }
  g.rows = img.dim(0);
  g.cols = img.dim(1);
  g.krows = ker.dim(0);
  g.kcols = ker.dim(1);
  if (o.method == ConvMethod::Auto) {
    if (w.device == DeviceKind::Cuda && prep)
      w.plan_factors = prep->auto_factors();
    else if (w.device == DeviceKind::Cuda)
      w.own_factors = conv::auto_factors(g.krows, g.kcols, ker, o.precision);
    const conv::Plan plan =
        conv::plan_method(g, o.precision, w.device, o.plan_by_measuring, w.factors());
    w.method = plan.method;
    w.precision = plan.precision;
  } else {
    w.method = o.method;
    w.precision = o.precision;
    if (prep && w.method == ConvMethod::Separable) w.plan_factors = prep->separable_factors();
  }
  check_supported(w.method, w.precision, w.device);
  w.image = std::move(img);
  w.kernel = std::move(ker);
  return w;
}

}  // namespace

void conv_check_overflow() {
  conv::wait_deferred_overflow();
}

namespace conv {

Array host_storage_kernel(const Array& kernel, const ConvOptions& o) {
  if (kernel.empty() || kernel.ndim() != 2)
    throw InvalidInput("ConvPlan: expected a non-empty 2-D kernel, found " + kernel.describe());
  const Array k = to_storage(kernel, o.precision, Memory::host, "kernel");
  return o.correlate ? flipped(k) : k.clone(Memory::host);  // a copy of its own, always
}

std::optional<SeparableFactors> auto_factors(std::int64_t krows, std::int64_t kcols,
                                             const Array& kernel, Precision p,
                                             std::int64_t min_width) {
  const Precision run = separable_precision(p);
  const auto ps = conv_supported_precisions(ConvMethod::Separable, DeviceKind::Cuda);
  const int max_rank = separable_worthwhile_rank(krows, kcols);
  // Beyond 1024 taps a line the method's shared-memory tiles do not fit (and the valid-mode swap
  // can make the "kernel" a whole image, not worth reading back).
  if (std::max(krows, kcols) < min_width || krows > 1024 || kcols > 1024 || max_rank == 0 ||
      std::find(ps.begin(), ps.end(), run) == ps.end())
    return std::nullopt;
  return factor_separable(kernel, separable_tolerance(run), max_rank);
}

void convolve_into(const Array& image, const Array& kernel, const KernelPrep* prep, Array& out,
                   const ConvOptions& o) {
  Prepared w = prepare(image, kernel, prep, o);
  const Shape want{w.g.out_rows, w.g.out_cols};
  const Memory mem = w.device == DeviceKind::Cuda ? Memory::device : Memory::host;
  if (out.empty() || out.shape() != want || out.dtype() != storage_dtype(o.precision) ||
      !out.is_c_contiguous() || out.on_device() != (mem == Memory::device))
    throw InvalidInput("convolve2d_into: output must be a C-contiguous " +
                       std::string(dtype_name(storage_dtype(o.precision))) + shape_to_string(want) +
                       " " + std::string(memory_name(mem)) + " array, found " +
                       (out.empty() ? std::string("an empty array") : out.describe()));
  // A device output may leave the FP16 overflow check for later when the caller opts in
  // (overflow_check.hpp); otherwise the check completes before this call returns.
  const conv::OverflowDeferralScope defer(out.on_device() && o.defer_overflow_check);
  run_method(w.method, w.g, w.precision, w.image, w.kernel, out, w.factors());
  // Earlier deferred calls of this thread that have finished, checked without waiting; after the
  // launch, so this host work overlaps the GPU's.
  conv::poll_deferred_overflow();
}

Array convolve(const Array& image, const Array& kernel, const KernelPrep* prep,
               const ConvOptions& o) {
  Prepared w = prepare(image, kernel, prep, o);
  const Memory mem = w.device == DeviceKind::Cuda ? Memory::device : Memory::host;
  Array out(storage_dtype(o.precision), {w.g.out_rows, w.g.out_cols}, mem);
  const bool device_input = image.on_device() || kernel_from_device(kernel, prep);
  {
    // The result stays on the device only for device inputs: only then may the check wait, and
    // only when the caller opted in.
    const conv::OverflowDeferralScope defer(mem == Memory::device && device_input &&
                                            o.defer_overflow_check);
    conv::run_method(w.method, w.g, w.precision, w.image, w.kernel, out, w.factors());
  }
  conv::poll_deferred_overflow();
  return mem == Memory::device && !device_input ? out.to(Memory::host) : out;
}

ConvMethod resolve_method(const Array& image, const Array& kernel, const KernelPrep* prep,
                          const ConvOptions& o) {
  return prepare(image, kernel, prep, o).method;
}

}  // namespace conv

void convolve2d_into(const Array& image, const Array& kernel, Array& out, const ConvOptions& o) {
  conv::convolve_into(image, kernel, nullptr, out, o);
}

Array convolve2d(const Array& image, const Array& kernel, const ConvOptions& o) {
  return conv::convolve(image, kernel, nullptr, o);
}

ConvMethod conv_resolve_method(const Array& image, const Array& kernel, const ConvOptions& o) {
  return conv::resolve_method(image, kernel, nullptr, o);
}

}  // namespace halfscope
