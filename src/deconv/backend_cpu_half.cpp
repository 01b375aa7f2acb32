// The emulated FP16 deconvolution backend (precision `half` on the CPU, backend.hpp).
//
// Every vector holds FP16 values, every element-wise operation rounds each product and sum to FP16
// (HalfRules), and the operator runs its FFTs in FP16 with the radix-2 transform of
// conv/fft_radix2.hpp on HalfInFloat (FP16 held in float, every operation rounded exactly as
// Half rounds), so power-of-two grids only. One filter y = crop(IFFT(S . FFT(x))), N = P Q = 2^(h1
// + h2) grid points, h1 = ceil(log2 N / 2), h2 = floor(log2 N / 2):
//  1. x' = x 2^-(h1 + cx), cx = ceil(log2 max|x|): max|x'| <= 2^-h1 ~ 1/sqrt(N) (study 000
//     section V's pre-scaling, plus the normalisation by max|x| so that the pixel values' units
//     do not matter). A power of two: exact unless x' falls into FP16's subnormals.
//  2. forward 2-D FFT, real input as complex: the rows that hold data (length Q), then every
//     column (length P). Partial sums stay below N 2^-h1 = 2^h2 ~ sqrt(N) (256 for 256x256).
//  3. Z = X' S' with the spectrum S' = S 2^-cs, cs = ceil(log2 max|S|), so |S'| <= 1 (computed
//     once per backend in FP64 by FFTW and rounded to FP16), then Z 2^-h2: the second
//     1/sqrt(N) before the unnormalised inverse. |Z| <= 1.
//  4. inverse 2-D FFT (columns, then the rows the output reads); its real part is
//     y' = y / 2^(cx + cs), of the order of one; y = y' 2^(cx + cs) rounded once to FP16.
// S is h^ for H (conj(h^) for H^T); for the circular boundary the normal operator is one filter
// with S = |h^|^2 + lambda. The zero boundary rounds H f to FP16 before H^T reads it, then adds
// lambda f in FP16. A result beyond FP16's range is a pending NumericalError (CpuVectors).
#include <algorithm>
#include <cmath>
#include <string>

#include "conv/cpu_common.hpp"
#include "conv/fft_radix2.hpp"
#include "deconv/backend_cpu.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::deconv::detail {

namespace {

using conv::cpu::kParallelWork;
using H = conv::cpu::HalfInFloat;
using CH = conv::cpu::Complex<H>;

class HalfBackend final : public CpuVectors<HalfRules> {
 public:
  explicit HalfBackend(const Problem& p);
  void rhs(Vec out) override {
    filter(dirty().data(), h_, ch_, true, t_);
    store_all(t_.data(), data(out), "H^T g");
  }
  void normal(Vec x, Vec out) override;
  double criterion(Vec x) override;

 private:
  /// out = crop(IFFT(S FFT(in))) (unrounded, float), S = spec 2^cs or its conjugate.
  void filter(const float* in, const std::vector<CH>& spec, int cs, bool conj,
              std::vector<float>& out);

  /// g in FP16, converted on first use (an overflow is reported where g is needed).
  const std::vector<float>& dirty() {
    if (g_.empty()) {
      g_.resize(static_cast<std::size_t>(n_));
      store_all(dirty_.data_as<double>(), g_.data(), "dirty image");
      throw_pending();
    }
    return g_;
  }

  Array dirty_;
  std::int64_t P_, Q_;
  int h1_, h2_;
  Boundary boundary_;
  conv::cpu::Radix2Fft<H> fp_, fq_;
  std::vector<CH> h_, q_;  // h^ 2^-ch; circular: (|h^|^2 + lambda) 2^-cq
  int ch_ = 0, cq_ = 0;
  float lambda_;
  std::vector<float> g_, t_, u_, r_;
  std::vector<CH> grid_;
};

std::int64_t checked_grid(std::int64_t n, Boundary b, const char* axis) {
  const std::int64_t g = grid_extent(n, b, true);
  if (!conv::cpu::is_pow2(g))
    throw InvalidInput(
        "deconvolve: precision half runs its FFTs on power-of-two grids; the image's " +
        std::string(axis) + " count " + std::to_string(n) +
        " is not a power of two (circular boundary); use mixed or split, or crop "
        "or pad the image to a power of two");
  return g;
}

/// The full P x Q spectrum from FFTW's r2c half, scaled by 2^-e and rounded to FP16.
std::vector<CH> to_half_grid(const std::vector<std::complex<double>>& half, std::int64_t P,
                             std::int64_t Q, int e) {
  const std::int64_t Qh = Q / 2 + 1;
  std::vector<CH> out(static_cast<std::size_t>(P * Q));
  for (std::int64_t r = 0; r < P; ++r)
    for (std::int64_t c = 0; c < Q; ++c) {
      const std::complex<double> v =
          c < Qh ? half[static_cast<std::size_t>(r * Qh + c)]
                 : std::conj(half[static_cast<std::size_t>(((P - r) % P) * Qh + (Q - c))]);
      out[static_cast<std::size_t>(r * Q + c)] = {H(std::ldexp(v.real(), -e)),
                                                  H(std::ldexp(v.imag(), -e))};
    }
  return out;
}

HalfBackend::HalfBackend(const Problem& p)
    : CpuVectors<HalfRules>(p.rows(), p.cols()),
      dirty_(p.dirty),
      P_(checked_grid(p.rows(), p.boundary, "row")),
      Q_(checked_grid(p.cols(), p.boundary, "column")),
      h1_((conv::cpu::log2_exact(P_) + conv::cpu::log2_exact(Q_) + 1) / 2),
      h2_((conv::cpu::log2_exact(P_) + conv::cpu::log2_exact(Q_)) / 2),
      boundary_(p.boundary),
      fp_(P_),
      fq_(Q_),
      lambda_(HalfRules::scalar(p.lambda)),
      t_(static_cast<std::size_t>(n_)),
      u_(static_cast<std::size_t>(n_)),
      r_(static_cast<std::size_t>(n_)),
      grid_(static_cast<std::size_t>(P_ * Q_)) {
  auto spectrum = psf_spectrum(p.psf, P_, Q_);
  double mh = 0;
  for (const auto& v : spectrum) mh = std::max(mh, std::abs(v));
  if (mh == 0) throw InvalidInput("deconvolve: the PSF's spectrum is zero");
  ch_ = ceil_log2(mh);
  h_ = to_half_grid(spectrum, P_, Q_, ch_);
  if (boundary_ == Boundary::Circular) {
    for (auto& v : spectrum) v = std::norm(v) + p.lambda;
    cq_ = ceil_log2(mh * mh + p.lambda);
    q_ = to_half_grid(spectrum, P_, Q_, cq_);
  }
}

void HalfBackend::filter(const float* in, const std::vector<CH>& spec, int cs, bool conj,
                         std::vector<float>& out) {
  double m = 0;
  for (std::int64_t i = 0; i < n_; ++i) m = std::max(m, static_cast<double>(std::fabs(in[i])));
  if (m == 0 || !std::isfinite(m)) {  // zero in, zero out; non-finite cannot be stored (pending)
    std::fill(out.begin(), out.end(), m == 0 ? 0.0f : static_cast<float>(m));
    return;
  }
  const int cx = ceil_log2(m);
  const float sx = std::ldexp(1.0f, -(h1_ + cx)), s2 = std::ldexp(1.0f, -h2_);
  // Threads from 256 x 256 grids on: below, waking the team costs more than the emulated FFT
  // (a 64 x 64 zero-boundary filter ran 15x slower threaded on a busy two-core machine).
  const bool parallel = static_cast<double>(P_ * Q_) >= kParallelWork;
  std::fill(grid_.begin(), grid_.end(), CH{});
  CH* g = grid_.data();
#pragma omp parallel if (parallel)
  {
    std::vector<CH> buf(static_cast<std::size_t>(P_));
    // Step 2: rows holding data, then all columns.
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < rows_; ++r) {
      for (std::int64_t c = 0; c < cols_; ++c)
        g[r * Q_ + c].re = H::rounded(in[r * cols_ + c] * sx);
      fq_.transform(g + r * Q_, false);
    }
#pragma omp for schedule(static)
    for (std::int64_t c = 0; c < Q_; ++c) {
      for (std::int64_t r = 0; r < P_; ++r) buf[static_cast<std::size_t>(r)] = g[r * Q_ + c];
      fp_.transform(buf.data(), false);
      // Step 3 on this column, then step 4's column transform.
      for (std::int64_t r = 0; r < P_; ++r) {
        CH s = spec[static_cast<std::size_t>(r * Q_ + c)];
        if (conj) s.im = -s.im;
        const CH z = buf[static_cast<std::size_t>(r)] * s;
        buf[static_cast<std::size_t>(r)] = {H::rounded(z.re.v * s2), H::rounded(z.im.v * s2)};
      }
      fp_.transform(buf.data(), true);
      for (std::int64_t r = 0; r < P_; ++r) g[r * Q_ + c] = buf[static_cast<std::size_t>(r)];
    }
    // Step 4: the rows the output reads.
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < rows_; ++r) {
      fq_.transform(g + r * Q_, true);
      for (std::int64_t c = 0; c < cols_; ++c)
        out[static_cast<std::size_t>(r * cols_ + c)] = std::ldexp(g[r * Q_ + c].re.v, cx + cs);
    }
  }
}

void HalfBackend::normal(Vec x, Vec out) {
  if (x == out) throw InvalidInput("deconv CPU backend: normal(x, out) needs x != out");
  const float* px = data(x);
  if (boundary_ == Boundary::Circular) {
    filter(px, q_, cq_, false, t_);
    store_all(t_.data(), data(out), "normal operator");
    return;
  }
  filter(px, h_, ch_, false, t_);
  store_all(t_.data(), r_.data(), "H f");
  filter(r_.data(), h_, ch_, true, u_);
  store_all(u_.data(), r_.data(), "H^T H f");
  for (std::int64_t i = 0; i < n_; ++i) {
    const auto k = static_cast<std::size_t>(i);
    t_[k] = HalfRules::lin(1.0f, r_[k], lambda_, px[i]);
  }
  store_all(t_.data(), data(out), "normal operator");
}

double HalfBackend::criterion(Vec x) {
  throw_pending();
  const std::vector<float>& g = dirty();
  const float* px = data(x);
  filter(px, h_, ch_, false, t_);
  store_all(t_.data(), r_.data(), "H f");
  for (std::int64_t i = 0; i < n_; ++i) {
    const auto k = static_cast<std::size_t>(i);
    t_[k] = g[k] - r_[k];  // FP16 values: the float difference is rounded once by store_all
  }
  store_all(t_.data(), r_.data(), "g - H f");
  const auto rr = static_cast<float>(dot_raw(r_.data(), r_.data()));
  const auto xx = static_cast<float>(dot_raw(px, px));
  return static_cast<double>(rr + lambda_ * xx);  // the two reductions combined in FP32
}

}  // namespace

std::unique_ptr<Backend> make_cpu_half_backend(const Problem& problem) {
  return std::make_unique<HalfBackend>(problem);
}

}  // namespace halfscope::deconv::detail
