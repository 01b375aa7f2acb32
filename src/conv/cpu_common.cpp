// Checks and messages shared by the CPU convolution backends.
#include "conv/cpu_common.hpp"

#include <cstdio>
#include <string>

#include "halfscope/core/error.hpp"

namespace halfscope::conv::cpu {

namespace {

std::string fmt_g(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

void check_one(std::string_view backend, std::string_view what, const Array& a, DType storage,
               std::int64_t rows, std::int64_t cols) {
  const auto fail = [&](const std::string& why) {
    throw InvalidInput(std::string(backend) + ": " + std::string(what) + " " + why);
  };
  if (a.empty() && rows * cols != 0) fail("is empty (no buffer)");
  if (a.on_device()) fail("is on the device; this backend takes host arrays");
  if (a.dtype() != storage)
    fail("has dtype " + std::string(dtype_name(a.dtype())) + ", expected " +
         std::string(dtype_name(storage)));
  if (a.ndim() != 2 || a.dim(0) != rows || a.dim(1) != cols)
    fail("has shape " + shape_to_string(a.shape()) + ", expected " +
         shape_to_string(Shape{rows, cols}));
  if (!a.is_c_contiguous()) fail("is not C-contiguous");
}

}  // namespace

void check_arrays(std::string_view backend, const Geometry& g, DType storage, const Array& image,
                  const Array& kernel, const Array& out) {
  if (g.rows < 1 || g.cols < 1 || g.krows < 1 || g.kcols < 1 || g.out_rows < 0 || g.out_cols < 0)
    throw InvalidInput(std::string(backend) + ": bad geometry: image " + std::to_string(g.rows) +
                       "x" + std::to_string(g.cols) + ", kernel " + std::to_string(g.krows) + "x" +
                       std::to_string(g.kcols) + ", output " + std::to_string(g.out_rows) + "x" +
                       std::to_string(g.out_cols));
  check_one(backend, "image", image, storage, g.rows, g.cols);
  check_one(backend, "kernel", kernel, storage, g.krows, g.kcols);
  check_one(backend, "output", out, storage, g.out_rows, g.out_cols);
}

void throw_unsupported(std::string_view backend, Precision p,
                       std::span<const Precision> supported) {
  throw Unsupported(std::string(backend) + " does not support precision " +
                    std::string(precision_name(p)) + "; it supports " + precision_list(supported));
}

void throw_fp16_overflow(std::string_view backend, Precision p, const OverflowStats& s,
                         std::int64_t pixels, double exact_largest) {
  std::string msg = std::string(backend) + " (" + std::string(precision_name(p)) +
                    "): " + std::to_string(s.overflowed) + " of " + std::to_string(pixels) +
                    (p == Precision::BF16 ? " output pixels overflow BF16 (|value| > 3.39e38)"
                                          : " output pixels overflow FP16 (|value| >= 65520)");
  if (exact_largest >= 0)
    msg += "; largest magnitude " + fmt_g(exact_largest);
  else if (s.largest > 0)
    msg += "; largest magnitude " + fmt_g(s.largest);
  if (s.nonfinite > 0)
    msg += " (" + std::to_string(s.nonfinite) + " overflowed inside the " +
           (p == Precision::Half ? "FP16" : "FP32") + " arithmetic)";
  msg += p == Precision::BF16 ? ". Scale the inputs down, or use precision double."
                              : ". Scale the inputs down, or use precision single or bf16.";
  throw NumericalError(msg);
}

}  // namespace halfscope::conv::cpu
