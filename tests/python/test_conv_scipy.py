"""`halfscope conv` against scipy.signal.convolve2d / correlate2d (the semantics we promise), on
the CPU methods and, where a GPU is present, the GPU methods. The reference is SciPy in float64
on the inputs rounded to the precision's storage type; tolerances follow from the unit roundoff:
per pixel |out - ref| <= C (K u_compute + 2 u_storage) (|k| * |x|)(pixel) for direct methods, and a
norm-wise bound C u log2(N) ||k||_1 max|x| for FFT methods."""
import json
import os
import subprocess
import zlib

import pytest

np = pytest.importorskip("numpy")
signal = pytest.importorskip("scipy.signal")
CLI = os.environ.get("HALFSCOPE_CLI")
pytestmark = pytest.mark.skipif(not CLI, reason="HALFSCOPE_CLI is not set (run through ctest)")

U = {"double": 2.0**-53, "single": 2.0**-24, "half": 2.0**-11, "mixed": 2.0**-11, "bf16": 2.0**-8,
     "split": 2.0**-24}
U_COMPUTE = {"double": 2.0**-53, "single": 2.0**-24, "half": 2.0**-11, "mixed": 2.0**-24,
             "bf16": 2.0**-24, "split": 2.0**-24}
STORAGE = {"double": np.float64, "single": np.float32, "half": np.float16, "mixed": np.float16,
           "split": np.float32}


def run(*args):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=300)


def has_gpu():
    info = json.loads(run("info", "--json").stdout)
    return bool(info["devices"])


def rounded(a, precision):
    if precision == "bf16":  # round to nearest even on the top 16 bits of float32
        b = a.astype(np.float32).view(np.uint32).astype(np.uint64)
        b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
        return b.astype(np.uint32).view(np.float32).astype(np.float64)
    return a.astype(STORAGE[precision]).astype(np.float64)


def reference(img, ker, mode, boundary, correlate, precision):
    f = signal.correlate2d if correlate else signal.convolve2d
    bd = "wrap" if boundary == "circular" else "fill"
    x, k = rounded(img, precision), rounded(ker, precision)
    return f(x, k, mode=mode, boundary=bd), f(np.abs(x), np.abs(k), mode=mode, boundary=bd), x, k


def conv(tmp_path, img, ker, **opts):
    np.save(tmp_path / "img.npy", img)
    np.save(tmp_path / "ker.npy", ker)
    out = tmp_path / "out.npy"
    args = ["conv", tmp_path / "img.npy", tmp_path / "ker.npy", "-o", out]
    for key, value in opts.items():
        if value is True:
            args.append("--" + key)
        elif value is not False:
            args += ["--" + key, value]
    return run(*args), out


def check(out, ref, absref, x, k, method, precision):
    assert out.shape == ref.shape
    assert np.all(np.isfinite(out))
    us, uc, K = U[precision], U_COMPUTE[precision], k.size
    if method == "fft":
        n = (x.shape[0] + k.shape[0]) * (x.shape[1] + k.shape[1])
        # Each of the three transforms adds at most ~log2(n) roundings of the arithmetic's unit to
        # values bounded by ||k||_1 max|x| (half: every butterfly in FP16 after the sqrt(N) scaling).
        bound = 8 * max(uc, us) * np.log2(n) * np.abs(k).sum() * np.abs(x).max() + 2 * us * np.abs(ref)
    else:
        bound = 2 * (K * uc + 2 * us) * absref + us * np.abs(ref)
    err = np.abs(out.astype(np.float64) - ref)
    worst = np.argmax(err - bound)
    assert np.all(err <= bound + 1e-300), f"pixel {np.unravel_index(worst, err.shape)}: err {err.flat[worst]:.3e} > bound {bound.flat[worst]:.3e}"


SHAPES = [((17, 23), (3, 3)), ((16, 20), (4, 6)), ((9, 31), (7, 2)), ((1, 40), (1, 5)),
          ((6, 5), (9, 8))]


METHODS, PRECISIONS = ["direct", "fft"], ["double", "single", "half", "mixed", "bf16"]
MODES, BOUNDARIES = ["full", "same", "valid"], ["zero", "circular"]


def cli_case(method, precision, mode, boundary):
    """One (shapes, correlate) case for an option combination, from a stable hash of it (Python's
    hash() of strings changes per process, so failures would not reproduce), the first of SHAPES
    from a hashed start that the mode and boundary accept."""
    key = zlib.crc32(f"{method}/{precision}/{mode}/{boundary}".encode())
    for i in range(len(SHAPES)):
        (r, c), (kr, kc) = SHAPES[(key + i) % len(SHAPES)]
        if boundary == "circular" and (kr > r or kc > c):
            continue  # SciPy's wrap pads once: it is periodic only for kernels within the image
        if mode == "valid" and not ((kr <= r and kc <= c) or (kr >= r and kc >= c)):
            continue
        return key, (r, c), (kr, kc), bool(key & 8)
    raise AssertionError("no shape fits")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_cpu_methods_match_scipy(tmp_path, method, precision, mode, boundary):
    # Every option combination through the command line, one run each (cli_case); the full shape
    # x correlation grid runs in-process in tests/python_api/test_conv_api.py (test_matches_scipy):
    # a process per case made this test two minutes long.
    key, (r, c), (kr, kc), correlate = cli_case(method, precision, mode, boundary)
    rng = np.random.default_rng(key)
    img = rng.uniform(-1, 1, (r, c))
    ker = rng.uniform(-1, 1, (kr, kc))
    res, out = conv(tmp_path, img, ker, method=method, precision=precision, mode=mode,
                    boundary=boundary, correlate=correlate, device="cpu")
    assert res.returncode == 0, res.stderr
    ref, absref, x, k = reference(img, ker, mode, boundary, correlate, precision)
    check(np.load(out).astype(np.float64), ref, absref, x, k, method, precision)


def test_cpu_runs_cover_every_kernel_shape_and_flag():
    """The one run per combination above still meets every kernel of SHAPES with both flags."""
    seen = {cli_case(m, p, mode, b)[2:] for m in METHODS for p in PRECISIONS for mode in MODES
            for b in BOUNDARIES}
    assert seen == {(k, f) for _, k in SHAPES for f in (False, True)}, sorted(seen)


def test_gpu_methods_match_scipy(tmp_path):
    if not has_gpu():
        pytest.skip("no CUDA device")
    rng = np.random.default_rng(5)
    img = rng.uniform(0, 1, (61, 77))
    ker = rng.uniform(0, 1, (7, 5))
    pairs = [("naive", p) for p in ("double", "single", "half", "mixed", "bf16")] + \
            [("register", p) for p in ("single", "half", "mixed", "bf16")] + \
            [("fft", p) for p in ("double", "single", "mixed", "bf16")] + \
            [("tensor", p) for p in ("mixed", "bf16", "split")] + \
            [("gemm", p) for p in ("single", "mixed", "bf16")]
    for method, precision in pairs:
        for boundary in ("zero", "circular"):
            res, out = conv(tmp_path, img, ker, method=method, precision=precision, mode="same",
                            boundary=boundary, device="cuda")
            assert res.returncode == 0, (method, precision, res.stderr)
            ref, absref, x, k = reference(img, ker, "same", boundary, False, precision)
            check(np.load(out).astype(np.float64), ref, absref, x, k,
                  "fft" if method == "fft" else "direct", precision)


def test_check_flag_reports_errors(tmp_path):
    img = np.random.default_rng(1).uniform(0, 1, (32, 32))
    res, _ = conv(tmp_path, img, np.ones((3, 3)) / 9, method="direct", precision="half", check=True, device="cpu")
    assert res.returncode == 0, res.stderr
    assert "MRE" in res.stdout and "max abs" in res.stdout


def test_bad_inputs_are_clear(tmp_path):
    res, out = conv(tmp_path, np.ones((4, 4, 2)), np.ones((3, 3)), device="cpu")
    assert res.returncode == 2 and "2-D" in res.stderr and not out.exists()
    res, out = conv(tmp_path, np.ones((4, 9)), np.ones((6, 3)), mode="valid", device="cpu")
    assert res.returncode == 2 and "valid" in res.stderr and not out.exists()
    res, out = conv(tmp_path, np.ones((8, 8)), np.ones((3, 3)), method="register", device="cpu")
    assert res.returncode == 2 and "register" in res.stderr and not out.exists()
    res, out = conv(tmp_path, np.ones((8, 8)), np.ones((3, 3)), method="direct", precision="split", device="cpu")
    assert res.returncode == 2 and "supports" in res.stderr and not out.exists()
    res, out = conv(tmp_path, np.full((8, 8), 1e5), np.ones((3, 3)), precision="half", device="cpu")
    assert res.returncode == 1 and "overflow" in res.stderr and not out.exists()


def test_half_output_overflow_is_reported(tmp_path):
    # Each input fits FP16 (60000) but the sum of 9 of them does not: an error, never an inf.
    res, out = conv(tmp_path, np.full((8, 8), 6e4), np.ones((3, 3)), method="direct", precision="mixed", device="cpu")
    assert res.returncode == 1 and "overflow" in res.stderr and not out.exists()


def test_simulate_gaussian_kernel(tmp_path):
    out = tmp_path / "k.npy"
    res = run("simulate", "gaussian-kernel", "--width", "15", "-o", out)
    assert res.returncode == 0, res.stderr
    k = np.load(out)
    y, x = np.mgrid[-7:8, -7:8]
    want = np.exp(-(x**2 + y**2) / (2 * 2.5**2))
    np.testing.assert_allclose(k, want / want.sum(), rtol=1e-13)


def one_line_exit_2(res, out, *words):
    assert res.returncode == 2, res.stderr
    line = res.stderr.strip()
    assert len(line.splitlines()) == 1, line
    for w in words:
        assert w in line, line
    assert not out.exists()


@pytest.mark.parametrize("where", ["img", "ker"])
@pytest.mark.parametrize("value,text", [(np.nan, "nan"), (np.inf, "inf"), (-np.inf, "-inf")])
@pytest.mark.parametrize("method", ["direct", "fft"])
def test_non_finite_inputs_are_refused(tmp_path, where, value, text, method):
    img = np.random.default_rng(2).uniform(0, 1, (64, 64)).astype(np.float32)
    ker = np.ones((5, 5), np.float32) / 25
    (img if where == "img" else ker)[3, 2] = value
    res, out = conv(tmp_path, img, ker, method=method, device="cpu")
    what = "image" if where == "img" else "kernel"
    one_line_exit_2(res, out, f"{where}.npy", f"finite {what} values", f"found {text} at row 3, column 2")


def test_input_messages_name_the_file(tmp_path):
    res, out = conv(tmp_path, np.ones(8, np.float32), np.ones((3, 3)), device="cpu")
    one_line_exit_2(res, out, "img.npy", "2-D image", "float32[8]")
    res, out = conv(tmp_path, np.ones((8, 8)), np.ones((0, 4)), device="cpu")
    one_line_exit_2(res, out, "ker.npy", "non-empty kernel", "[0, 4]")
    np.savez(tmp_path / "two.npz", a=np.ones((3, 3)), b=np.ones((3, 3)))
    np.save(tmp_path / "ker.npy", np.ones((3, 3)))
    out = tmp_path / "o.npy"
    res = run("conv", tmp_path / "two.npz", tmp_path / "ker.npy", "-o", out)
    one_line_exit_2(res, out, "two.npz", "one 2-D image array", "found 2 arrays (a, b)")


def test_boundary_aliases_and_every_value_listed(tmp_path):
    img = np.random.default_rng(4).uniform(0, 1, (16, 16))
    ker = np.random.default_rng(5).uniform(0, 1, (3, 3))
    results = {}
    for b in ("zero", "fill", "circular", "wrap"):
        res, out = conv(tmp_path, img, ker, boundary=b, method="direct", precision="double", device="cpu")
        assert res.returncode == 0, res.stderr
        results[b] = np.load(out)
    assert np.array_equal(results["zero"], results["fill"])
    assert np.array_equal(results["circular"], results["wrap"])
    assert not np.array_equal(results["zero"], results["circular"])
    (tmp_path / "out.npy").unlink()
    res, out = conv(tmp_path, img, ker, boundary="periodic", device="cpu")
    one_line_exit_2(res, out, "--boundary", "'periodic'", "zero", "fill", "circular", "wrap")
    help_text = run("conv", "--help").stdout
    assert all(w in help_text for w in ("fill", "wrap", "separable"))


@pytest.mark.parametrize("precision, method, scale", [("single", "direct", 1e38),
                                                      ("single", "fft", 1e38),
                                                      ("double", "direct", 1e308)])
def test_overflow_of_finite_inputs_exits_1_without_output(tmp_path, precision, method, scale):
    """Finite inputs whose sums pass the precision's largest value: a numerical error naming the
    precision and the first output pixel, never an output of inf and NaN."""
    img, ker, out = tmp_path / "img.npy", tmp_path / "k.npy", tmp_path / "o.npy"
    np.save(img, np.full((16, 16), scale, np.float32 if precision == "single" else np.float64))
    np.save(ker, np.ones((5, 5), np.float32 if precision == "single" else np.float64))
    r = run("--device", "cpu", "conv", img, ker, "-o", out, "--precision", precision, "--method",
            method)
    assert r.returncode == 1, r.stderr
    assert f"the {precision} {method} convolution of finite inputs overflowed" in r.stderr, r.stderr
    assert not out.exists()


@pytest.mark.parametrize("precision", ["half", "mixed", "bf16"])
def test_input_vanishing_in_its_storage_exits_1(tmp_path, precision):
    """An input whose every nonzero value underflows to zero in FP16 / BF16 storage would give an
    all-zero convolution: a numerical error instead. Some values underflowing is rounding."""
    img, ker, out = tmp_path / "img.npy", tmp_path / "k.npy", tmp_path / "o.npy"
    np.save(img, np.random.default_rng(2).uniform(0.5, 1, (16, 16)).astype(np.float32))
    tiny = 1e-10 if precision != "bf16" else 1e-45  # below each format's smallest subnormal
    np.save(ker, np.full((3, 3), tiny, np.float32))
    r = run("--device", "cpu", "conv", img, ker, "-o", out, "--precision", precision)
    assert r.returncode == 1, r.stderr
    assert "kernel" in r.stderr and "every nonzero value underflowed to zero" in r.stderr, r.stderr
    assert not out.exists()
    mixed = np.full((3, 3), 1.0, np.float32)
    mixed[0, 0] = tiny  # one value underflows: the precision's rounding, not an error
    np.save(ker, mixed)
    r = run("--device", "cpu", "conv", img, ker, "-o", out, "--precision", precision)
    assert r.returncode == 0, r.stderr
