// Emulated FP16 FFT convolution (precision `half` of the CPU FFT method), the way study 000
// section V runs cuFFT in FP16: power-of-two transform sizes, inputs pre-scaled by about
// 1/sqrt(N) so that nothing overflows, the scaling undone at the end.
//
// What is rounded where (N = P * Q grid points, P = 2^p, Q = 2^q, h1 = ceil((p+q)/2),
// h2 = floor((p+q)/2), so 2^h1 * 2^h2 = N):
//  1. image x' = x * 2^-(h1 + cx), cx = ceil(log2 max|x|), so max|x'| <= 2^-h1 ~ 1/sqrt(N). A
//     power of two: exact unless x' falls into FP16's subnormal range. Normalising by max|x|
//     first makes the relative result independent of the image's units.
//  2. kernel k' = k * 2^-ck, ck = ceil(log2 sum|k|), so sum|k'| <= 1 and |FFT(k')| <= 1. Also a
//     power of two. (Pre-scaling the kernel by 1/sqrt(N) too would push the small taps of a
//     wide kernel into subnormals for no gain in range.) A kernel larger than a circular image
//     is folded with FP16 additions, in row-major tap order.
//  3. forward 2-D FFTs of x' and k' in FP16 arithmetic: the rows (length Q) that hold data, then
//     the Q/2 + 1 columns (length P) a real input needs; every product and sum rounded
//     (fft_radix2.hpp), twiddles rounded to FP16 once. Every partial sum is bounded by
//     sum|x'| <= N 2^-h1 = 2^h2 ~ sqrt(N): no overflow for N < 2^32.
//  4. Z = X' * K' (complex product, each operation rounded), then Z * 2^-h2 (the second
//     1/sqrt(N), exact unless subnormal).
//  5. inverse 2-D FFT in FP16 arithmetic: the Q/2 + 1 columns, then each row the output reads,
//     completed by Hermitian symmetry (conjugation, exact; the imaginary parts of the DC and
//     Nyquist bins are dropped, as a complex-to-real transform ignores them) and inverted. Its
//     real part is y' = conv / 2^(cx + ck), |y'| <= 1. With the two 1/sqrt(N) the transforms are
//     unitary, so the stages of the inverse stay near the size of y' in the 2-norm.
//  6. out = Half(y' * 2^(cx + ck)): the power of two applied in double, then one rounding.
// "FP16 arithmetic" is Radix2Fft<HalfInFloat>: FP16 values held in float, every operation rounded
// to FP16 exactly as Half's operators round (the tests check Radix2Fft<HalfInFloat> against
// Radix2Fft<Half> bit for bit); Half itself costs a libgcc call per conversion, ~15x slower here.
// Any output that is not finite or reaches 65520 from finite inputs (a result beyond FP16's
// range, or an overflow inside the transforms) is a NumericalError, never an inf.
#include <cmath>
#include <vector>

#include "conv/fft_cpu_internal.hpp"
#include "conv/fft_radix2.hpp"

namespace halfscope::conv::cpu {

namespace {

// The arithmetic type: FP16 held in float, every operation rounded to FP16, bit for bit what
// Half's operators give (tested), ~15x faster.
using H = HalfInFloat;
using CHalf = Complex<H>;

/// ceil(log2 v) for v > 0 finite.
int ceil_log2(double v) {
  int e = 0;
  const double m = std::frexp(v, &e);  // v = m * 2^e, m in [0.5, 1)
  return m == 0.5 ? e - 1 : e;
}

/// x * 2^e rounded once to FP16 (exact unless the result is subnormal).
H scaled(H x, int e) {
  return H(std::ldexp(static_cast<double>(x), e));
}

/// Forward 2-D transform of a real grid given as `rows` nonzero rows of length Q (row-major,
/// rest zero) into P x (Q/2 + 1) spectrum `spec`.
void forward_2d(const Radix2Fft<H>& fp, const Radix2Fft<H>& fq, const std::vector<H>& grid,
                std::int64_t rows, std::vector<CHalf>& spec) {
  const std::int64_t P = fp.size(), Q = fq.size(), Qh = Q / 2 + 1;
  const bool parallel = static_cast<double>(P) * static_cast<double>(Q) >= kParallelWork / 16;
  spec.assign(static_cast<std::size_t>(P * Qh), CHalf{});
#pragma omp parallel if (parallel)
  {
    std::vector<CHalf> buf(static_cast<std::size_t>(std::max(P, Q)));
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < Q; ++c)
        buf[static_cast<std::size_t>(c)] = {grid[static_cast<std::size_t>(r * Q + c)], H()};
      fq.transform(buf.data(), false);
      std::copy(buf.begin(), buf.begin() + Qh, spec.begin() + r * Qh);
    }
#pragma omp for schedule(static)
    for (std::int64_t c = 0; c < Qh; ++c) {
      for (std::int64_t r = 0; r < P; ++r) buf[static_cast<std::size_t>(r)] = spec[r * Qh + c];
      fp.transform(buf.data(), false);
      for (std::int64_t r = 0; r < P; ++r) spec[r * Qh + c] = buf[static_cast<std::size_t>(r)];
    }
  }
}

}  // namespace

void half_fft_conv(const Geometry& g, const Axis& ar, const Axis& ac, const Half* image,
                   const Half* kernel, Half* out) {
  const std::int64_t P = ar.n, Q = ac.n, Qh = Q / 2 + 1;
  const int pq = log2_exact(P) + log2_exact(Q), h1 = (pq + 1) / 2, h2 = pq / 2;
  // FP16 emulation costs ~100x a float FFT per point: worth the threads from small grids on.
  const bool parallel = static_cast<double>(P) * static_cast<double>(Q) >= kParallelWork / 16;

  double max_x = 0, l1_k = 0;
  bool finite = true;
  for (std::int64_t t = 0; t < g.rows * g.cols; ++t) {
    const double v = std::fabs(static_cast<double>(image[t]));
    finite &= std::isfinite(v);
    max_x = std::max(max_x, v);
  }
  for (std::int64_t t = 0; t < g.krows * g.kcols; ++t) {
    const double v = std::fabs(static_cast<double>(kernel[t]));
    finite &= std::isfinite(v);
    l1_k += v;
  }
  // A zero input gives an exact zero result; a non-finite one skips the scaling (the transforms
  // then carry the inf / NaN into the result, which is what the input asks for).
  const int cx = (finite && max_x > 0) ? ceil_log2(max_x) : 0;
  const int ck = (finite && l1_k > 0) ? ceil_log2(l1_k) : 0;

  // Steps 1 and 2: the scaled image (possibly periodically extended) and folded kernel grids.
  std::vector<H> a(static_cast<std::size_t>(P * Q)), b(static_cast<std::size_t>(P * Q));
  const auto a_rows = static_cast<std::int64_t>(ar.a_src.size());
  const auto a_cols = static_cast<std::int64_t>(ac.a_src.size());
  for (std::int64_t t = 0; t < a_rows; ++t)
    for (std::int64_t c = 0; c < a_cols; ++c)
      a[static_cast<std::size_t>(t * Q + c)] =
          scaled(H(image[ar.a_src[static_cast<std::size_t>(t)] * g.cols +
                         ac.a_src[static_cast<std::size_t>(c)]]),
                 -(h1 + cx));
  for (std::int64_t u = 0; u < g.krows; ++u)
    for (std::int64_t v = 0; v < g.kcols; ++v) {
      H& dst = b[static_cast<std::size_t>((u % ar.k_mod) * Q + (v % ac.k_mod))];
      dst = dst + scaled(H(kernel[u * g.kcols + v]), -ck);  // FP16 sum when the kernel folds
    }

  // Step 3.
  const Radix2Fft<H> fp(P), fq(Q);
  std::vector<CHalf> za, zb;
  forward_2d(fp, fq, a, a_rows, za);
  forward_2d(fp, fq, b, ar.k_len, zb);

  // Step 4.
  for (std::size_t t = 0; t < za.size(); ++t) {
    const CHalf z = za[t] * zb[t];
    za[t] = {scaled(z.re, -h2), scaled(z.im, -h2)};
  }

  // Step 5: columns, then the rows that the output reads.
  std::vector<char> needed(static_cast<std::size_t>(P), 0);
  for (std::int64_t r : ar.out)
    if (r >= 0) needed[static_cast<std::size_t>(r)] = 1;
  std::vector<float> y(static_cast<std::size_t>(P * Q));
#pragma omp parallel if (parallel)
  {
    std::vector<CHalf> buf(static_cast<std::size_t>(std::max(P, Q)));
#pragma omp for schedule(static)
    for (std::int64_t c = 0; c < Qh; ++c) {
      for (std::int64_t r = 0; r < P; ++r) buf[static_cast<std::size_t>(r)] = za[r * Qh + c];
      fp.transform(buf.data(), true);
      for (std::int64_t r = 0; r < P; ++r) za[r * Qh + c] = buf[static_cast<std::size_t>(r)];
    }
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < P; ++r) {
      if (!needed[static_cast<std::size_t>(r)]) continue;
      const CHalf* row = za.data() + r * Qh;
      for (std::int64_t k = 0; k < Qh; ++k) buf[static_cast<std::size_t>(k)] = row[k];
      for (std::int64_t k = Qh; k < Q; ++k)
        buf[static_cast<std::size_t>(k)] = {row[Q - k].re, -row[Q - k].im};
      buf[0].im = H();
      if (Q > 1) buf[static_cast<std::size_t>(Q / 2)].im = H();
      fq.transform(buf.data(), true);
      for (std::int64_t c = 0; c < Q; ++c)
        y[static_cast<std::size_t>(r * Q + c)] =
            static_cast<float>(buf[static_cast<std::size_t>(c)].re);
    }
  }

  // Step 6.
  const int post = cx + ck;
  const OverflowStats s = write_output(ar, ac, out, [&](std::int64_t r, std::int64_t c) {
    return std::ldexp(static_cast<double>(y[static_cast<std::size_t>(r * Q + c)]), post);
  });
  if (s.overflowed > 0 && finite)
    throw_fp16_overflow("conv fft (CPU)", Precision::Half, s, g.out_rows * g.out_cols, -1);
}

}  // namespace halfscope::conv::cpu
