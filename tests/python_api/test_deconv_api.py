"""hs.deconvolve / hs.tikhonov_exact against an independent NumPy Wiener solution.

Problem: a Gaussian PSF (sigma 1.2 px, peak 1, origin at (rows//2, cols//2), the centre of an
fftshifted image: np.fft.ifftshift moves it to (0, 0)) on a non-square grid, a sky of a few point
sources on a faint background, and a little white noise; lambda = 1. Circular boundary: H is
circulant, so the Tikhonov minimiser of ||g - H f||^2 + lambda ||f||^2 is the Wiener filter
f* = IFFT(conj(h^) G / (|h^|^2 + lambda)).

Tolerances: kappa(Q) = (max|h^|^2 + lambda) / (min|h^|^2 + lambda) (computed below, ~82 here).
The FP64 Wiener solution carries ~c u64 log2(N) relative error per FFT, times kappa at most:
~82 * 5 * 1.1e-16 * 12 = 5e-13, tested at 1e-10. CG in single converges to a relative residual at
FP32 rounding, c u32 log2(N) ~ 5 * 6e-8 * 12 = 3.6e-6, and the forward error is at most kappa times
that: 3e-4, tested at 5e-4.
"""
import numpy as np
import pytest

hs = pytest.importorskip("halfscope")

LAMBDA = 1.0
TRACE_COLUMNS = {"iteration", "phase", "criterion", "criterion_solver", "step", "elapsed_ms",
                 "distance"}


def gaussian_psf(rows, cols, sigma=1.2):
    i = np.arange(rows)[:, None] - rows // 2
    j = np.arange(cols)[None, :] - cols // 2
    return np.exp(-(i ** 2 + j ** 2) / (2 * sigma ** 2))


def psf_spectrum(psf):
    return np.fft.fft2(np.fft.ifftshift(psf))


def wiener(dirty, psf, lam=LAMBDA):
    h = psf_spectrum(psf)
    return np.real(np.fft.ifft2(np.conj(h) * np.fft.fft2(dirty) / (np.abs(h) ** 2 + lam)))


@pytest.fixture
def problem(rng):
    rows, cols = 48, 40
    sky = np.full((rows, cols), 1e-3)
    for _ in range(6):
        sky[rng.integers(rows), rng.integers(cols)] += rng.uniform(0.2, 1.0)
    psf = gaussian_psf(rows, cols)
    dirty = np.real(np.fft.ifft2(psf_spectrum(psf) * np.fft.fft2(sky)))
    return dirty + rng.normal(0, 1e-3, dirty.shape), psf


def rel(x, ref):
    return np.linalg.norm(x - ref) / np.linalg.norm(ref)


def test_psf_origin_is_the_ifftshift_centre():
    """Guards the reference itself: for odd and even sizes ifftshift moves (n//2) to index 0."""
    for n in (6, 7):
        a = np.zeros(n)
        a[n // 2] = 1
        assert np.fft.ifftshift(a)[0] == 1


def test_wiener_equals_numpy(problem):
    dirty, psf = problem
    res = hs.deconvolve(dirty, psf, solver="wiener", precision="double", lam=LAMBDA,
                        device="cpu")
    assert isinstance(res.image, np.ndarray) and res.image.dtype == np.float64
    assert res.image.shape == dirty.shape
    assert rel(res.image, wiener(dirty, psf)) <= 1e-10
    assert res.device == "cpu"


def test_tikhonov_exact_equals_numpy(problem):
    dirty, psf = problem
    for lam in (LAMBDA, 0.05):
        f = hs.tikhonov_exact(dirty, psf, lam=lam, device="cpu")
        assert f.dtype == np.float64 and f.shape == dirty.shape
        assert rel(f, wiener(dirty, psf, lam)) <= 1e-10


def test_kappa_and_lipschitz_match_the_spectrum(problem):
    dirty, psf = problem
    p2 = np.abs(psf_spectrum(psf)) ** 2
    res = hs.deconvolve(dirty, psf, solver="cg", precision="double", lam=LAMBDA, iterations=5,
                        device="cpu")
    kappa = (p2.max() + LAMBDA) / (p2.min() + LAMBDA)
    assert res.condition == pytest.approx(kappa, rel=1e-9)
    assert res.lipschitz == pytest.approx(2 * (p2.max() + LAMBDA), rel=1e-9)


def test_cg_single_converges_to_the_exact_minimiser(problem):
    dirty, psf = problem
    exact = wiener(dirty, psf)
    res = hs.deconvolve(dirty, psf, solver="cg", precision="single", lam=LAMBDA, iterations=200,
                        device="cpu")
    assert res.image.dtype == np.float64  # FP32 iterates, returned widened
    assert rel(res.image, exact) <= 5e-4
    # The trace's distance column is the same measure, computed by the library.
    assert res.trace["distance"][-1] <= 5e-4
    assert abs(res.trace["distance"][-1] - rel(res.image, exact)) <= 1e-6
    assert res.stop in ("iterations", "converged", "target", "stalled")


def test_trace_columns_lengths_and_every(problem):
    dirty, psf = problem
    res = hs.deconvolve(dirty, psf, solver="fixed", precision="single", lam=LAMBDA,
                        iterations=30, trace_every=7, device="cpu")
    trace = res.trace
    assert set(trace) == TRACE_COLUMNS
    # Every 7th iteration, and always the first (0: the initial image) and the last.
    want = [0, 7, 14, 21, 28, 30]
    np.testing.assert_array_equal(trace["iteration"], want)
    assert trace["iteration"].dtype == np.int64
    for name in TRACE_COLUMNS - {"iteration", "phase"}:
        assert trace[name].dtype == np.float64 and len(trace[name]) == len(want), name
    assert list(trace["phase"]) == ["single"] * len(want)
    assert np.isnan(trace["step"][0])  # no step led to the initial image
    assert res.iterations == 30 and res.stop == "iterations"
    # A fixed step below 2 / L decreases J monotonically; the traced J is the FP64 criterion of
    # FP32 iterates, whose rounding (|delta f| <= u32 |f|) moves J by a few u32 J at most.
    assert np.all(np.diff(trace["criterion"]) <= 4 * 2.0**-24 * trace["criterion"][0])
    assert np.all(np.diff(trace["elapsed_ms"]) >= 0)
    full = hs.deconvolve(dirty, psf, solver="fixed", precision="single", lam=LAMBDA,
                         iterations=12, device="cpu").trace
    assert len(full["iteration"]) == 13  # trace_every=1 by default: 0..12


def test_result_unpacks_to_image_and_trace(problem):
    dirty, psf = problem
    res = hs.deconvolve(dirty, psf, solver="cg", lam=LAMBDA, iterations=10, device="cpu")
    image, trace = res
    assert image is res.image and trace is res.trace
    assert len(list(res)) == 2


def test_bad_solver_lists_the_names(problem):
    dirty, psf = problem
    with pytest.raises(hs.InvalidInput) as info:
        hs.deconvolve(dirty, psf, solver="newton", device="cpu")
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert "newton" in message
    for name in ("fixed", "optimal", "backtracking", "half-then-float", "cg", "wiener"):
        assert name in message, message


def test_negative_lambda_is_invalid(problem):
    dirty, psf = problem
    with pytest.raises(hs.InvalidInput) as info:
        hs.deconvolve(dirty, psf, solver="cg", lam=-0.5, device="cpu")
    assert "lambda" in str(info.value) or "lam" in str(info.value), str(info.value)
    with pytest.raises(hs.InvalidInput):
        hs.tikhonov_exact(dirty, psf, lam=-0.5, device="cpu")


def test_shape_mismatch_is_invalid(problem):
    dirty, psf = problem
    with pytest.raises(hs.InvalidInput) as info:
        hs.deconvolve(dirty, psf[:-1], solver="wiener", precision="double", device="cpu")
    message = str(info.value)
    assert str(dirty.shape[0]) in message and str(dirty.shape[0] - 1) in message, message
