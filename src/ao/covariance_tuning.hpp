// Tuning constants of the GPU covariance generator (covariance_cuda.cu, kernels/*.cuh), apart from
// the algorithm (STYLE.md habit 7). The accuracy measurements that chose the table are in
// covariance_cuda_table.cpp and /work/notes/ao-doc-aogpu.md.
#pragma once

namespace halfscope::ao::detail {

/// The bracket G(q) = Gamma(5/6) 2^(-1/6) - x^(5/6) K_{5/6}(x), q = x^2, is tabulated as one
/// polynomial per interval; the intervals split every binary octave of q into this many equal
/// parts, so the interval index comes from the exponent and leading mantissa bits of q (integer
/// operations, no log, no sqrt). Must be a power of two.
inline constexpr int kVkIntervalsPerOctaveLog2 = 4;
inline constexpr int kVkIntervalsPerOctave = 1 << kVkIntervalsPerOctaveLog2;

/// Polynomial degree per interval (in the interval's own variable s in [-1, 1]). With k intervals
/// per octave every interval sits 2k half-widths from the branch point q = 0 of G, so a Chebyshev
/// fit converges like rho^-n, rho = 2k + 1 + sqrt((2k + 1)^2 - 1). Measured worst relative error
/// of D over 200,000 log-spaced x in [1e-9, 60] against vonkarman_structure_function (k, degree):
/// (8, 8) 1.3e-15, (8, 9) 6.6e-16, (16, 6) 1.7e-14, (16, 7) 7.1e-16, (32, 5) 2.2e-14,
/// (32, 6) 6.5e-16. Every evaluation loads degree + 1 coefficients and runs degree FMA, and the
/// GPU's direct path is bound by those (E-ELT: 7.7e11 evaluations): (16, 7) has 8 loads and 7
/// FMA at 7e-16; (32, 6) saves one more of each but doubles the table (127 KB, beyond what stays
/// in L1 beside the kernel's other traffic).
inline constexpr int kVkDegree = 7;

/// Doubles per interval in the interval-major table: the kVkDegree + 1 coefficients, padded to an
/// even count so an interval is whole 16-byte double2 loads.
inline constexpr int kVkStride = ((kVkDegree + 1) + 1) / 2 * 2;

/// Binary exponents of q covered by the table: [2^kVkMinExponent, 2^(kVkMaxExponent + 1)).
/// Above, x >= 45 and x^(5/6) K_{5/6}(x) < 1e-19 (G is its limit to the last bit); below
/// (x < 1e-9, separations of nanometres), the two leading terms of the series, which are exact
/// there to 1e-18 relative.
inline constexpr int kVkMinExponent = -60;
inline constexpr int kVkMaxExponent = 10;
inline constexpr int kVkOctaves = kVkMaxExponent - kVkMinExponent + 1;
inline constexpr int kVkIntervals = kVkOctaves * kVkIntervalsPerOctave;

/// Element kernel: a CUDA block computes a kCovBlock x kCovBlock square of the matrix with
/// kCovThreads threads (the fast index along the storage's contiguous direction: columns of a
/// dense row-major matrix, rows inside a column-major tile).
inline constexpr int kCovBlock = 64;
inline constexpr int kCovThreads = 256;

/// Element kernel: elements a warp covers along the storage's contiguous direction (32: a warp
/// is 32 x 1 elements; 8: 8 x 4). Measured on the H200 (2026-11-21, E-ELT Cmm, 60 layers, lower
/// tiles of 1024, degree-major table): 8 x 4 1659 ms, 32 x 1 1930 ms (f32 and f64 alike: the
/// direct path's table loads, not the writes, are the bound).
inline constexpr int kCovWarpFastLanes = 8;

/// Offset-table kernel: threads per block (one table entry per thread).
inline constexpr int kCovTableThreads = 128;

}  // namespace halfscope::ao::detail
