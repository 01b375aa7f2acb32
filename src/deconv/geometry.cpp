// The FFT grid of the deconvolution operator and the FP64 forward model (backend.hpp, deconv.hpp).
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <string>

#include "conv/fft_cpu_internal.hpp"
#include "conv/fft_plan_cache.hpp"
#include "deconv/backend_cpu.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/deconv.hpp"

namespace halfscope::deconv {

namespace detail {

std::int64_t grid_extent(std::int64_t n, Boundary boundary, bool pow2) {
  if (boundary == Boundary::Circular) return n;
  // Outputs i in [0, n) read f at i - (k - c) for taps k in [0, n), c = n / 2: indices in
  // [c - n + 1, n - 1 + c]. On a grid of length P they must not alias into [0, n): negative ones
  // land at P - (n - 1 - c) and above (needs P >= 2n - 1 - c), large ones stay below P (needs
  // P >= n + c). The adjoint reads the mirrored range, so the same P serves it.
  const std::int64_t c = n / 2;
  const std::int64_t need = std::max({n, 2 * n - 1 - c, n + c});
  return pow2 ? conv::cpu::next_pow2(need) : conv::cpu::next_smooth(need);
}

Array psf_on_grid(const Array& psf, std::int64_t grid_rows, std::int64_t grid_cols) {
  const std::int64_t rows = psf.shape()[0], cols = psf.shape()[1];
  const Array h = psf.astype(DType::f64).contiguous();
  Array out = Array::zeros(DType::f64, {grid_rows, grid_cols});
  const double* src = h.data_as<double>();
  double* dst = out.data_as<double>();
  const std::int64_t cr = rows / 2, cc = cols / 2;
  for (std::int64_t i = 0; i < rows; ++i) {
    const std::int64_t r = ((i - cr) % grid_rows + grid_rows) % grid_rows;
    for (std::int64_t j = 0; j < cols; ++j) {
      const std::int64_t c = ((j - cc) % grid_cols + grid_cols) % grid_cols;
      dst[r * grid_cols + c] += src[i * cols + j];  // a grid smaller than the PSF folds it
    }
  }
  return out;
}

std::vector<std::complex<double>> real_spectrum(const Array& grid) {
  const std::int64_t rows = grid.shape()[0], cols = grid.shape()[1];
  const std::int64_t half = cols / 2 + 1;
  conv::cpu::FftwBuffer<double> in(rows * cols, false);
  conv::cpu::FftwBuffer<fftw_complex> out(rows * half, false);
  std::copy_n(grid.data_as<double>(), rows * cols, in.data());
  conv::cpu::execute_r2c(
      conv::cpu::plan_r2c<double>(rows, cols, conv::cpu::fft_threads(rows * cols)), in.data(),
      out.data());
  std::vector<std::complex<double>> s(static_cast<std::size_t>(rows * half));
  for (std::size_t k = 0; k < s.size(); ++k) s[k] = {out.data()[k][0], out.data()[k][1]};
  return s;
}

namespace {

/// IFFT (normalised) of a half spectrum back to a rows x cols real grid.
Array inverse(std::vector<std::complex<double>>& s, std::int64_t rows, std::int64_t cols) {
  const std::int64_t half = cols / 2 + 1;
  conv::cpu::FftwBuffer<fftw_complex> in(rows * half, false);
  for (std::size_t k = 0; k < s.size(); ++k) {
    in.data()[k][0] = s[k].real();
    in.data()[k][1] = s[k].imag();
  }
  Array out(DType::f64, {rows, cols});
  conv::cpu::FftwBuffer<double> buf(rows * cols, false);
  conv::cpu::execute_c2r(
      conv::cpu::plan_c2r<double>(rows, cols, conv::cpu::fft_threads(rows * cols)), in.data(),
      buf.data());
  const double scale = 1.0 / static_cast<double>(rows * cols);
  double* dst = out.data_as<double>();
  for (std::int64_t k = 0; k < rows * cols; ++k) dst[k] = buf.data()[k] * scale;
  return out;
}

void check_pair(const Array& image, const Array& psf, const char* what) {
  if (image.ndim() != 2 || psf.ndim() != 2)
    throw InvalidInput(std::string(what) + ": image and PSF must be 2-D, got " +
                       std::to_string(image.ndim()) + "-D and " + std::to_string(psf.ndim()) +
                       "-D");
  if (image.shape() != psf.shape() || image.size() == 0)
    throw InvalidInput(std::string(what) + ": the PSF must have the image's shape, got image " +
                       shape_to_string(image.shape()) + " and PSF " + shape_to_string(psf.shape()));
}

}  // namespace

std::pair<double, double> spectrum_range(const Problem& problem, bool pow2) {
  const std::int64_t gr = grid_extent(problem.rows(), problem.boundary, pow2);
  const std::int64_t gc = grid_extent(problem.cols(), problem.boundary, pow2);
  double mx = 0, mn = std::numeric_limits<double>::infinity();
  for (const auto& v : psf_spectrum(problem.psf, gr, gc)) {
    mx = std::max(mx, std::abs(v));
    mn = std::min(mn, std::abs(v));
  }
  return {mx, mn};
}

double max_abs_spectrum(const Problem& problem, bool pow2) {
  return spectrum_range(problem, pow2).first;
}

}  // namespace detail

Array apply_psf(const Array& image, const Array& psf, Boundary boundary) {
  detail::check_pair(image, psf, "apply_psf");
  const Array f = image.to(Memory::host).astype(DType::f64).contiguous();
  const Array h = psf.to(Memory::host).astype(DType::f64).contiguous();
  const std::int64_t rows = f.shape()[0], cols = f.shape()[1];
  const std::int64_t gr = detail::grid_extent(rows, boundary, false);
  const std::int64_t gc = detail::grid_extent(cols, boundary, false);
  Array fg = Array::zeros(DType::f64, {gr, gc});
  for (std::int64_t i = 0; i < rows; ++i)
    std::copy_n(f.data_as<double>() + i * cols, cols, fg.data_as<double>() + i * gc);
  auto sf = detail::real_spectrum(fg);
  const auto sh = detail::psf_spectrum(h, gr, gc);
  for (std::size_t k = 0; k < sf.size(); ++k) sf[k] *= sh[k];
  const Array full = detail::inverse(sf, gr, gc);
  Array out(DType::f64, {rows, cols});
  for (std::int64_t i = 0; i < rows; ++i)
    std::copy_n(full.data_as<double>() + i * gc, cols, out.data_as<double>() + i * cols);
  return out;
}

}  // namespace halfscope::deconv
