// Internal: the exact Tikhonov solution and the FP64 criterion (exact.cpp), shared by the driver
// (deconv.cpp) and the tests.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "deconv/backend.hpp"

namespace halfscope::deconv::detail {

/// Makes a backend of the problem in a backend precision on the resolved device.
using BackendFactory = std::function<std::unique_ptr<Backend>(Precision)>;

/// The zero-boundary reference stops at ||b - Q f|| <= this times ||b|| (FP64 CG) ...
inline constexpr double kExactTolerance = 1e-12;
/// ... or fails (NumericalError) after this many iterations.
inline constexpr std::int64_t kExactMaxIterations = 20000;

/// f* in float64 on the host: circular by the Wiener filter (FFTW, or wiener_cuda on Cuda),
/// zero by FP64 CG through make(Precision::Double).
Array exact_solution(const Problem& problem, DeviceKind device, const BackendFactory& make);

/// J(image) = ||g - H image||^2 + lambda ||image||^2 in FP64 on the CPU.
double criterion_fp64(const Problem& problem, const Array& image);

}  // namespace halfscope::deconv::detail
