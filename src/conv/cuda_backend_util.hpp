// Internal (CUDA builds only): the one argument check of every GPU convolution backend (naive,
// register, fft, gemm, tensor, cudnn). Scratch memory, the pinned mailbox and launch sizing are
// core's (halfscope/core/cuda_memory.hpp), used under their own names.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "conv/geometry.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/core/precision.hpp"

namespace halfscope::conv {

/// Checks what dispatch promises (backends.hpp): a precision the backend supports (when
/// `supported` is given: Unsupported, listing them), a non-empty geometry, and device arrays of
/// the storage dtype, C-contiguous, shaped as the geometry says (InvalidInput naming `method`,
/// the argument, what was expected and what was found).
inline void check_gpu_call(std::string_view method, const Geometry& g, Precision p,
                           const Array& image, const Array& kernel, const Array& out,
                           std::span<const Precision> supported = {}) {
  const std::string m(method);
  if (!supported.empty() && std::find(supported.begin(), supported.end(), p) == supported.end())
    throw Unsupported(m + ": precision " + std::string(precision_name(p)) +
                      " is not supported; supported: " + precision_list(supported));
  if (g.rows < 1 || g.cols < 1 || g.krows < 1 || g.kcols < 1 || g.out_rows < 1 || g.out_cols < 1)
    throw InvalidInput(m + ": empty geometry (image " + std::to_string(g.rows) + "x" +
                       std::to_string(g.cols) + ", kernel " + std::to_string(g.krows) + "x" +
                       std::to_string(g.kcols) + ", output " + std::to_string(g.out_rows) + "x" +
                       std::to_string(g.out_cols) + ")");
  const DType want = storage_dtype(p);
  const auto check = [&](const Array& a, const char* what, std::int64_t r, std::int64_t c) {
    if (a.empty() || !a.on_device() || a.dtype() != want || !a.is_c_contiguous() || a.ndim() != 2 ||
        a.dim(0) != r || a.dim(1) != c)
      throw InvalidInput(m + ": " + what + " must be a C-contiguous device " +
                         std::string(dtype_name(want)) + "[" + std::to_string(r) + ", " +
                         std::to_string(c) + "] array for precision " +
                         std::string(precision_name(p)) + ", found " +
                         (a.empty() ? std::string("an empty array") : a.describe()));
  };
  check(image, "image", g.rows, g.cols);
  check(kernel, "kernel", g.krows, g.kcols);
  check(out, "output", g.out_rows, g.out_cols);
}

}  // namespace halfscope::conv
