"""`halfscope ao structure-function` against SciPy's Bessel K (and a small-x series written here):
the FP64 von Karman structure function D(r) and phase covariance C(r), the Kolmogorov limit, the
--range grid, and the error exits (exit 2, the message names the argument, no output left)."""
import math

import pytest

np = pytest.importorskip("numpy")
special = pytest.importorskip("scipy.special")
from ao_helpers import CLI, G0, K1, NU, assert_bad_input, run  # noqa: E402

pytestmark = pytest.mark.skipif(not CLI, reason="HALFSCOPE_CLI is not set (run through ctest)")


# ----------------------------------------------------------------------------------------------
# (a) The structure function. D(r) = K1 (L0/r0)^(5/3) G(x), x = 2 pi r / L0, with
# G(x) = G0 - x^nu K_nu(x), nu = 5/6, G0 = Gamma(5/6) 2^(-1/6) (the value of x^nu K_nu at 0);
# the constants NU, K1, G0 are in ao_helpers.py.

KOLMOGOROV = 2 * (24 / 5 * math.gamma(6 / 5)) ** (5 / 6)  # 6.88388: D = KOLMOGOROV (r/r0)^(5/3)
# SciPy's kv (AMOS) is accurate to a few ulp; 1e-15 (4.5 ulp) bounds the relative error of
# x^nu K_nu(x) as computed by scipy (kv and the power) in the range used here.
EPS_SCIPY = 1e-15
TOL = 1e-10  # the figure; every reference below is shown to be 10x better than this


def bracket_series(x, terms=16):
    """G(x) from the ascending series of K_nu = pi / (2 sin nu pi) (I_-nu - I_nu), with the
    constant term (k = 0 of the I_-nu sum, equal to G0) cancelled by hand:
    G(x) = pi / (2 sin nu pi) [sum_k>=0 2^-nu x^2nu (x/2)^2k / (k! Gamma(k+1+nu))
                               - sum_k>=1 2^nu (x/2)^2k / (k! Gamma(k+1-nu))].
    For x <= 0.5 the terms fall by (x/2)^2 / k per step, so 16 terms leave < 1e-30 relative, and
    the two sums do not cancel (the first is ~x^(5/3), the second ~x^2): accurate to ~1e-15."""
    x = np.asarray(x, dtype=np.float64)
    s = np.zeros_like(x)
    for k in range(terms):
        s += 2 ** -NU * x ** (2 * NU) * (x / 2) ** (2 * k) / (math.gamma(k + 1) * math.gamma(k + 1 + NU))
        if k >= 1:
            s -= 2 ** NU * (x / 2) ** (2 * k) / (math.gamma(k + 1) * math.gamma(k + 1 - NU))
    return math.pi / (2 * math.sin(NU * math.pi)) * s


def cli_table(tmp_path, r, r0, L0, covariance=False):
    src, out = tmp_path / "r.npy", tmp_path / "d.npy"
    np.save(src, np.asarray(r, dtype=np.float64))
    args = ["ao", "structure-function", "--r0", r0, "--L0", L0, "--separations", src, "-o", out]
    res = run(*args, *(["--covariance"] if covariance else []))
    assert res.returncode == 0, res.stderr
    d = np.load(out)
    assert d.dtype == np.float64 and d.shape == np.shape(r)
    return d


def test_structure_function_matches_scipy_kv(tmp_path):
    r0, L0 = 0.15, 25.0
    x = np.logspace(-8, math.log10(600.0), 4001)  # K_nu(600) ~ 1e-262: still a normal double
    r = (x * L0 / (2 * math.pi)).reshape(4001, 1)  # a 2-D input: the shape must be kept
    d = cli_table(tmp_path, r, r0, L0)[:, 0]
    scale = K1 * (L0 / r0) ** (5 / 3)
    xk = x ** NU * special.kv(NU, x)
    g_scipy = G0 - xk
    # SciPy's route subtracts two numbers near G0 at small x: its relative error is about
    # EPS_SCIPY * (G0 + xk) / G. Use it only where that is below TOL / 10.
    accurate = EPS_SCIPY * (G0 + xk) / np.abs(g_scipy) <= TOL / 10
    assert accurate[x >= 0.05].all() and not accurate[x < 1e-3].any()  # the derivation holds
    rel = np.abs(d / (scale * g_scipy) - 1)
    assert rel[accurate].max() <= TOL, (x[accurate][rel[accurate].argmax()], rel[accurate].max())
    # Small x, where SciPy's route cannot tell: the series reference (x <= 0.5 overlaps SciPy).
    small = x <= 0.5
    rel_series = np.abs(d[small] / (scale * bracket_series(x[small])) - 1)
    assert rel_series.max() <= TOL, (x[small][rel_series.argmax()], rel_series.max())
    # And the two references agree where both are accurate (the series is not a copy of a bug).
    both = small & accurate
    assert both.sum() > 100
    assert np.abs(bracket_series(x[both]) / g_scipy[both] - 1).max() <= TOL / 10


def test_phase_covariance_matches_scipy_kv(tmp_path):
    # C(r) = K1/2 (L0/r0)^(5/3) x^nu K_nu(x): a product, no cancellation, so SciPy is accurate to
    # ~EPS_SCIPY everywhere, including r = 0 (C(0) = K1/2 (L0/r0)^(5/3) G0, the phase variance).
    r0, L0 = 0.1, 40.0
    x = np.concatenate([[0.0], np.logspace(-8, math.log10(600.0), 2001)])
    r = x * L0 / (2 * math.pi)
    c = cli_table(tmp_path, r, r0, L0, covariance=True)
    ref = K1 / 2 * (L0 / r0) ** (5 / 3) * np.where(x > 0, x ** NU * special.kv(NU, np.maximum(x, 1e-300)), G0)
    assert np.abs(c / ref - 1).max() <= TOL
    d = cli_table(tmp_path, r, r0, L0)  # and D = 2 (C(0) - C) where that difference is benign
    benign = x >= 1.0
    assert np.abs(d[benign] / (2 * (c[0] - c[benign])) - 1).max() <= TOL


def test_structure_function_kolmogorov_limit(tmp_path):
    r0 = 0.12
    r = np.logspace(-3, 1.5, 200)
    d_inf = cli_table(tmp_path, r, r0, "inf")
    kol = KOLMOGOROV * (r / r0) ** (5 / 3)
    assert abs(KOLMOGOROV - 6.88) < 4e-3
    assert np.abs(d_inf / kol - 1).max() <= 1e-13  # a power law: a few roundings only
    # Finite L0 -> infinity: from the series above, G(x) = A x^(5/3) - B x^2 + O(x^(11/3)), so
    # D / D_Kolmogorov - 1 = -(B/A) x^(1/3) + R with |R| <= x^2 (the next terms, B/A = 2^(-1/3)
    # Gamma(11/6) / Gamma(7/6) = 0.80477). The convergence is slow (x^(1/3)) and exactly that.
    b_over_a = 2 ** (-1 / 3) * math.gamma(11 / 6) / math.gamma(7 / 6)
    for L0 in (1e3, 1e5, 1e7):
        d = cli_table(tmp_path, r, r0, L0)
        x = 2 * math.pi * r / L0
        remainder = d / kol - 1 + b_over_a * x ** (1 / 3)
        assert (np.abs(remainder) <= x ** 2 + 1e-12).all(), (L0, np.abs(remainder / x**2).max())


def test_structure_function_range_is_linspace(tmp_path):
    out = tmp_path / "d.npy"
    res = run("ao", "structure-function", "--r0", 0.2, "--L0", 30, "--range", "0:10:11", "-o", out)
    assert res.returncode == 0, res.stderr
    d = np.load(out)
    r = np.linspace(0, 10, 11)
    assert d[0] == 0.0
    x = 2 * math.pi * r[1:] / 30
    ref = K1 * (30 / 0.2) ** (5 / 3) * (G0 - x ** NU * special.kv(NU, x))
    assert np.abs(d[1:] / ref - 1).max() <= TOL  # x >= 0.2: SciPy is accurate here (see above)


@pytest.mark.parametrize(
    "args, words",
    [
        (["--r0", -0.1, "--L0", 25, "--range", "0:1:5"], ["--r0", "-0.1"]),
        (["--r0", 0.1, "--L0", 0, "--range", "0:1:5"], ["--L0", "0"]),
        (["--r0", 0.1, "--L0", "inf", "--range", "0:1:5", "--covariance"], ["--L0", "finite"]),
        (["--r0", 0.1, "--L0", 25, "--range", "1:0:5"], ["--range", "START <= STOP"]),
        (["--r0", 0.1, "--L0", 25, "--range", "0:1"], ["--range", "START:STOP:COUNT"]),
        (["--r0", 0.1, "--L0", 25, "--range", "0:1:zero"], ["--range COUNT", "zero"]),
        (["--r0", 0.1, "--L0", 25], ["--separations", "--range", "neither"]),
    ],
)
def test_structure_function_bad_values(tmp_path, args, words):
    out = tmp_path / "d.npy"
    assert_bad_input(run("ao", "structure-function", *args, "-o", out), *words)
    assert not out.exists()


def test_structure_function_bad_separation_file(tmp_path):
    src, out = tmp_path / "r.npy", tmp_path / "d.npy"
    np.save(src, np.array([0.0, 1.0, -2.0]))
    assert_bad_input(
        run("ao", "structure-function", "--r0", 0.1, "--L0", 25, "--separations", src, "-o", out),
        "r.npy", "-2", "index 2")
    assert not out.exists()
