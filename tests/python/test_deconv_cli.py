"""`halfscope deconv` against NumPy / SciPy.

Problem: a Gaussian PSF (sigma 1 px, peak 1, origin at (rows//2, cols//2)) and a sky of a few
point sources on a faint smooth background, observed with a little white noise; lambda = 1.
Circular boundary: H is circulant, h^ = DFT of the PSF rolled so its origin is at (0, 0), and the
Tikhonov minimiser is the Wiener filter f* = IDFT(conj(h^) g^ / (|h^|^2 + lambda)) (NumPy, FP64).
Zero boundary: H f = the full linear convolution cropped to rows [r//2, r//2 + r) and columns
[c//2, c//2 + c) (scipy.signal.convolve2d), as a dense matrix; f* from numpy.linalg.solve of the
normal equations (H^T H + lambda I) f = H^T g.

Tolerances. kappa(Q) = (max|h^|^2 + lambda) / (min|h^|^2 + lambda) <= (2 pi sigma^2)^2 + 1 =
40.5 here (the Gaussian's spectrum peaks at its sum, 2 pi sigma^2 = 6.28). A relative forward error
of a converged solve is about kappa times the relative residual: FP64 FFTs leave c u64 log2(N)
(c ~ 5, log2(N) = 12, u64 = 1.1e-16) -> ~3e-13, tested at 1e-10 (the issue asks 1e-6 for CG);
converged CG in FP32 leaves kappa * c u32 log2(N) = 40.5 * 5 * 6e-8 * 12 = 1.5e-4, tested at
3e-4.
"""
import math
import re

import pytest

np = pytest.importorskip("numpy")
from ao_helpers import CLI, assert_bad_input, run  # noqa: E402

pytestmark = pytest.mark.skipif(not CLI, reason="HALFSCOPE_CLI is not set (run through ctest)")

U32 = 2.0 ** -24
LAMBDA = 1.0
TRACE_COLUMNS = ["iteration", "phase", "criterion", "criterion_solver", "step", "elapsed_ms",
                 "distance"]


def gaussian_psf(rows, cols, sigma=1.0):
    i = np.arange(rows)[:, None] - rows // 2
    j = np.arange(cols)[None, :] - cols // 2
    return np.exp(-(i ** 2 + j ** 2) / (2 * sigma ** 2))


def spectrum(psf):
    return np.fft.fft2(np.roll(psf, (-(psf.shape[0] // 2), -(psf.shape[1] // 2)), axis=(0, 1)))


def problem(rows=64, cols=64, seed=3):
    rng = np.random.default_rng(seed)
    sky = np.full((rows, cols), 1e-3)
    for _ in range(6):
        sky[rng.integers(rows), rng.integers(cols)] += rng.uniform(0.2, 1.0)
    psf = gaussian_psf(rows, cols)
    dirty = np.real(np.fft.ifft2(spectrum(psf) * np.fft.fft2(sky)))
    dirty += rng.normal(0, 1e-3, dirty.shape)
    return dirty, psf


def wiener(dirty, psf, lam=LAMBDA):
    h = spectrum(psf)
    return np.real(np.fft.ifft2(np.conj(h) * np.fft.fft2(dirty) / (np.abs(h) ** 2 + lam)))


def zero_boundary_exact(dirty, psf, lam=LAMBDA):
    signal = pytest.importorskip("scipy.signal")
    r, c = dirty.shape
    cols = []
    for k in range(r * c):
        e = np.zeros(r * c)
        e[k] = 1
        full = signal.convolve2d(e.reshape(r, c), psf)
        cols.append(full[r // 2:r // 2 + r, c // 2:c // 2 + c].ravel())
    h = np.array(cols).T
    return np.linalg.solve(h.T @ h + lam * np.eye(r * c), h.T @ dirty.ravel()).reshape(r, c)


def rel(x, ref):
    return np.linalg.norm(x - ref) / np.linalg.norm(ref)


def deconv(tmp_path, dirty, psf, *args, out="sky.npy"):
    d, p, o = tmp_path / "dirty.npy", tmp_path / "psf.npy", tmp_path / out
    np.save(d, dirty)
    np.save(p, psf)
    res = run("deconv", d, p, "-o", o, "--device", "cpu", "--lambda", LAMBDA, *args)
    return res, o


def read_trace(path):
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    rows = [dict(zip(header, line.split(","))) for line in lines[1:]]
    return header, rows


@pytest.mark.parametrize("args,tol", [
    (("--solver", "wiener", "--precision", "double"), 1e-10),
    (("--solver", "cg", "--precision", "double", "--iterations", "300"), 1e-10),
    (("--solver", "cg", "--precision", "single", "--iterations", "300"), 3e-4),
])
def test_circular_against_numpy_wiener(tmp_path, args, tol):
    dirty, psf = problem()
    res, out = deconv(tmp_path, dirty, psf, *args)
    assert res.returncode == 0, res.stderr
    assert rel(np.load(out), wiener(dirty, psf)) <= tol


@pytest.mark.parametrize("solver", ["wiener", "cg"])
def test_zero_boundary_against_dense_solve(tmp_path, solver):
    dirty, psf = problem(20, 24, seed=5)
    res, out = deconv(tmp_path, dirty, psf, "--solver", solver, "--precision", "double",
                      "--boundary", "zero", "--iterations", "400")
    assert res.returncode == 0, res.stderr
    assert rel(np.load(out), zero_boundary_exact(dirty, psf)) <= 1e-9


def test_trace_columns_and_monotone_optimal_step(tmp_path):
    dirty, psf = problem()
    trace = tmp_path / "trace.csv"
    res, out = deconv(tmp_path, dirty, psf, "--solver", "optimal", "--precision", "single",
                      "--iterations", "30", "--trace", trace)
    assert res.returncode == 0, res.stderr
    header, rows = read_trace(trace)
    assert header == TRACE_COLUMNS
    assert [int(r["iteration"]) for r in rows] == list(range(31))
    assert {r["phase"] for r in rows} == {"single"}
    j = np.array([float(r["criterion"]) for r in rows])
    # Far from convergence (steepest descent gains a factor ~((kappa-1)/(kappa+1))^2 per step), so
    # any increase beyond the FP64 evaluation's own rounding (N u64 ~ 5e-13) is a real one.
    assert np.all(j[1:] <= j[:-1] * (1 + 1e-12)), j
    assert j[-1] < j[0]
    elapsed = np.array([float(r["elapsed_ms"]) for r in rows])
    assert np.all(np.diff(elapsed) >= 0)
    assert math.isnan(float(rows[0]["step"])) and all(float(r["step"]) > 0 for r in rows[1:])
    # The distance column is to the exact solution: recompute it for the final iterate.
    final = np.load(out)
    assert float(rows[-1]["distance"]) == pytest.approx(rel(final, wiener(dirty, psf)), rel=1e-6)
    # J in FP64 of the final iterate, recomputed with NumPy.
    h = spectrum(psf)
    hf = np.real(np.fft.ifft2(h * np.fft.fft2(final)))
    j_ref = np.sum((dirty - hf) ** 2) + LAMBDA * np.sum(final ** 2)
    assert j[-1] == pytest.approx(j_ref, rel=1e-9)
    assert "stopped by iterations" in res.stdout and "J =" in res.stdout


def test_fits_history_png_and_plot(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    image = pytest.importorskip("PIL.Image")
    dirty, psf = problem()
    png, svg = tmp_path / "sky.png", tmp_path / "j.svg"
    res, out = deconv(tmp_path, dirty, psf, "--solver", "cg", "--precision", "double",
                      "--iterations", "12", "--png", png, "--plot", svg, out="sky.fits")
    assert res.returncode == 0, res.stderr
    with fits.open(out) as f:
        data = f[0].data.astype(np.float64)
        history = [str(h) for h in f[0].header["HISTORY"]]
    text = "\n".join(history)
    for expected in ("solver = cg", "precision = double", "lambda = 1", "iterations = 12",
                     "stop = iterations", "boundary = circular", "version = ", "commit = "):
        assert "halfscope deconv " + expected in text, text
    res2, npy = deconv(tmp_path, dirty, psf, "--solver", "cg", "--precision", "double",
                       "--iterations", "12")
    assert res2.returncode == 0, res2.stderr
    assert np.array_equal(data, np.load(npy))  # the same run, FITS float64 is exact
    # Cube-root scale on 8-bit gray: level = 255 (cbrt(x) - cbrt(min)) / (cbrt(max) - cbrt(min)).
    levels = np.asarray(image.open(png)).astype(np.float64)
    s = np.cbrt(data)
    expect = 255 * (s - s.min()) / (s.max() - s.min())
    assert levels.shape == data.shape and np.max(np.abs(levels - expect)) <= 1.0
    assert svg.read_text().startswith("<svg") and "iteration" in svg.read_text()


def test_ill_conditioning_warning_reads_cleanly(tmp_path):
    # sigma 2 and lambda 1e-6: kappa(Q) ~ 6e8, so single precision adds the warning to a stop
    # that has no detail of its own; it used to print as "stopped by iterations (; warning ...".
    fits = pytest.importorskip("astropy.io.fits")
    dirty, _ = problem(32, 32)
    i = np.arange(32)[:, None] - 16
    j = np.arange(32)[None, :] - 16
    psf = np.exp(-(i ** 2 + j ** 2) / (2 * 2.0 ** 2))
    d, p, out = tmp_path / "dirty.npy", tmp_path / "psf.npy", tmp_path / "sky.fits"
    np.save(d, dirty)
    np.save(p, psf)
    res = run("deconv", d, p, "-o", out, "--device", "cpu", "--lambda", 1e-6, "--solver", "fixed",
              "--iterations", 3)
    assert res.returncode == 0, res.stderr
    assert "stopped by iterations (warning: kappa(Q)" in res.stdout, res.stdout
    assert "(;" not in res.stdout and "( " not in res.stdout
    with fits.open(out) as f:
        history = [str(h) for h in f[0].header["HISTORY"]]
    assert any(h.startswith("halfscope deconv stop detail = warning: kappa(Q)") for h in history), history


def test_boundary_aliases(tmp_path):
    dirty, psf = problem(16, 16)
    skies = {}
    for b in ("circular", "wrap", "zero", "fill"):
        res, out = deconv(tmp_path, dirty, psf, "--solver", "wiener", "--precision", "double",
                          "--boundary", b, out=f"{b}.npy")
        assert res.returncode == 0, res.stderr
        skies[b] = np.load(out)
    assert np.array_equal(skies["circular"], skies["wrap"])
    assert np.array_equal(skies["zero"], skies["fill"])
    res, _ = deconv(tmp_path, dirty, psf, "--boundary", "periodic", out="bad.npy")
    assert_bad_input(res, "--boundary", "'periodic'", "circular", "wrap", "zero", "fill")
    assert not (tmp_path / "bad.npy").exists()


def no_outputs(tmp_path):
    return [p.name for p in tmp_path.iterdir() if p.name not in ("dirty.npy", "psf.npy")]


@pytest.mark.parametrize("case,words", [
    ("shapes", ["psf"]),
    ("zero-psf", ["psf"]),
    ("negative-lambda", ["lambda"]),
    ("nan", ["dirty"]),
])
def test_bad_inputs(tmp_path, case, words):
    dirty, psf = problem(32, 32)
    lam = LAMBDA
    if case == "shapes":
        psf = gaussian_psf(32, 30)
    elif case == "zero-psf":
        psf = np.zeros_like(psf)
    elif case == "negative-lambda":
        lam = -0.5
    elif case == "nan":
        dirty[3, 4] = np.nan
    d, p = tmp_path / "dirty.npy", tmp_path / "psf.npy"
    np.save(d, dirty)
    np.save(p, psf)
    res = run("deconv", d, p, "-o", tmp_path / "sky.fits", "--device", "cpu", "--lambda", lam,
              "--trace", tmp_path / "t.csv", "--png", tmp_path / "s.png")
    assert_bad_input(res)
    line = res.stderr.strip().lower()
    assert any(w in line for w in words), line
    assert no_outputs(tmp_path) == []


def test_missing_file_and_bad_output(tmp_path):
    dirty, psf = problem(16, 16)
    np.save(tmp_path / "psf.npy", psf)
    res = run("deconv", tmp_path / "nope.npy", tmp_path / "psf.npy", "-o", tmp_path / "sky.npy")
    assert_bad_input(res, "nope.npy")
    np.save(tmp_path / "dirty.npy", dirty)
    res = run("deconv", tmp_path / "dirty.npy", tmp_path / "psf.npy", "-o", tmp_path / "sky.png")
    assert_bad_input(res, "sky.png")
    res = run("deconv", tmp_path / "dirty.npy", tmp_path / "psf.npy", "-o", tmp_path / "s.npy",
              "--solver", "newton")
    assert_bad_input(res, "newton")
    assert no_outputs(tmp_path) == []
    assert re.search("cg", res.stderr)  # the message lists the solvers


def test_bench_json_and_scipy_peer(tmp_path):
    """`bench deconv` on a tiny case, then bench/peers/deconv_peers.py (SciPy only) on its dump:
    the peer runs the same FP32 CG, so after 40 iterations on kappa <= 1 + 1 / 0.1 = 11 both sit
    at the FP32 floor (distance ~ kappa u32 sqrt-ish, far below 1e-3) and agree to 1e-3."""
    import json
    import os
    import subprocess
    import sys

    report, dump = tmp_path / "deconv.json", tmp_path / "inputs"
    res = run("bench", "deconv", "--device", "cpu", "--size", 32, "--snr-db", 37,
              "--solvers", "cg", "--precisions", "single", "--iterations", 40, "--lambda", 0.1,
              "--target", 1e-2, "--dump", dump, "-o", report)
    assert res.returncode == 0, res.stderr
    data = json.loads(report.read_text())
    assert data["benchmark"] == "deconv" and len(data["headline"]) == 1
    cg = next(c for c in data["cases"] if c["method"] == "cg")
    assert len(cg["series"]["criterion"]) == cg["params"]["iterations_done"] + 1
    assert cg["params"]["reached_target"] is True
    peers = os.path.join(os.environ.get("HALFSCOPE_SOURCE_DIR", "."), "bench", "peers",
                         "deconv_peers.py")
    done = subprocess.run([sys.executable, peers, "--inputs", str(dump), "--report", str(report),
                           "--no-gpu"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = [c for c in json.loads(report.read_text())["cases"] if c["implementation"] == "scipy"]
    assert len(rows) == 1 and 1 <= rows[0]["repeats"] <= 40  # stops at FP32 rounding, as halfscope
    assert rows[0]["params"]["reached_target"] is True
    assert abs(rows[0]["error"]["final_distance"] - cg["error"]["final_distance"]) <= 1e-3


def test_bench_bad_options(tmp_path):
    res = run("bench", "deconv", "--device", "cpu", "--size", 32, "--snr-db", "37,x",
              "-o", tmp_path / "r.json")
    assert_bad_input(res, "--snr-db", "x")
    res = run("bench", "deconv", "--device", "cpu", "--size", 32, "--solvers", "newton",
              "-o", tmp_path / "r.json")
    assert_bad_input(res, "newton")
    assert not (tmp_path / "r.json").exists()


def test_fits_input_with_degenerate_axes_keeps_header(tmp_path):
    """A radio FITS image (NAXIS = 4 with NAXIS3 = NAXIS4 = 1) is read as its 2-D plane, and the
    restored FITS sky carries the dirty image's header cards (here OBJECT) over."""
    fits = pytest.importorskip("astropy.io.fits")
    dirty, psf = problem(32, 32)
    hdu = fits.PrimaryHDU(dirty[None, None].astype(np.float32))
    hdu.header["OBJECT"] = "TESTFIELD"
    hdu.writeto(tmp_path / "dirty.fits")
    np.save(tmp_path / "psf.npy", psf)
    out = tmp_path / "sky.fits"
    res = run("deconv", tmp_path / "dirty.fits", tmp_path / "psf.npy", "-o", out, "--device",
              "cpu", "--lambda", LAMBDA, "--solver", "wiener", "--precision", "double")
    assert res.returncode == 0, res.stderr
    with fits.open(out) as f:
        assert f[0].header["OBJECT"] == "TESTFIELD"
        sky = f[0].data.astype(np.float64)
    assert sky.shape == (32, 32)
    # The input was stored in float32: the reference filters the same float32 values.
    ref = wiener(dirty.astype(np.float32).astype(np.float64), psf)
    assert rel(sky, ref) <= 1e-10
