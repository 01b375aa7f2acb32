"""`halfscope ao evaluate` against NumPy, and the all-or-nothing outputs of `ao covariance` and
`ao evaluate`. The reconstructor is computed here in FP64 with NumPy from the matrices
`ao covariance` writes (R = Ctm Cmm^-1), never by halfscope's own solver."""
import json
import math
import re

import pytest

np = pytest.importorskip("numpy")
resource = pytest.importorskip("resource")  # RLIMIT_FSIZE: a write that fails half-way (POSIX)
# run(..., file_limit=bytes) makes a write beyond that size fail with EFBIG (see ao_helpers.run).
from ao_helpers import CLI, assert_bad_input, run  # noqa: E402

pytestmark = pytest.mark.skipif(not CLI, reason="HALFSCOPE_CLI is not set (run through ctest)")

SYSTEM = "preset:check"  # n = 912, m = 152: a whole evaluation takes well under a second
N, M = 912, 152
U64 = 2.0 ** -53


@pytest.fixture(scope="module")
def matrices(tmp_path_factory):
    out = tmp_path_factory.mktemp("cov")
    res = run("--device", "cpu", "ao", "covariance", SYSTEM, "-o", out / "cov", "--dtype", "f64")
    assert res.returncode == 0, res.stderr
    cmm, ctm = np.load(out / "cov" / "cmm.npy"), np.load(out / "cov" / "ctm.npy")
    assert cmm.shape == (N, N) and ctm.shape == (M, N)
    reconstructor = np.linalg.solve(cmm, ctm.T).T  # FP64 LU with partial pivoting (LAPACK gesv)
    return {"dir": out, "cmm": cmm, "ctm": ctm, "R": reconstructor}


def evaluate(tmp_path, reconstructor, name, *extra):
    src = tmp_path / f"{name}.npy"
    np.save(src, reconstructor)
    summary = tmp_path / f"{name}.json"
    res = run("--device", "cpu", "ao", "evaluate", SYSTEM, "--reconstructor", src, "--json", summary,
              *extra)
    assert res.returncode == 0, res.stderr
    return res, json.loads(summary.read_text())


def test_optimal_reconstructor_error_is_quadratic_in_its_scale(tmp_path, matrices):
    # The error variance sigma^2 is a linear functional of Cee (the phase projection and the mean
    # over points are linear), and Cee(a R) = Ctt - a (Ctm R^T + R Ctm^T) + a^2 R Cmm R^T. For
    # R = Ctm Cmm^-1, R Cmm R^T = Ctm R^T, so sigma^2(a) = sigma^2(1) + (a - 1)^2 c with
    # c = sigma^2(0) - sigma^2(1) > 0: R is the minimum and the parabola has no free parameter.
    # An evaluator that dropped or mis-signed a term of Cee, or projected nonlinearly, fails this.
    # Tolerance: NumPy's R carries a relative error ~ cond(Cmm) n u (backward stable solve), which
    # breaks R Cmm R^T = Ctm R^T by as much relative to sigma^2(0); the CLI's own FP64 arithmetic
    # adds a few n u. Measured: below 1e-8 of this bound (the bound is a worst case; any modelling
    # error above shows at the scale of c, about 1e6 times larger than it).
    r = matrices["R"]
    sigma2 = {}
    for a in (0.0, 0.5, 1.0, 1.5):
        _, s = evaluate(tmp_path, a * r, f"r{a}")
        assert s["truth_slopes"] == M and s["measurement_slopes"] == N
        sigma2[a] = s["tomographic_error_nm"] ** 2
    c = sigma2[0.0] - sigma2[1.0]
    assert c > 0.5 * sigma2[0.0]  # tomography removes most of the turbulence on this system
    tolerance = np.linalg.cond(matrices["cmm"]) * N * U64 * sigma2[0.0]
    for a in (0.5, 1.5):
        assert abs(sigma2[a] - sigma2[1.0] - (a - 1) ** 2 * c) <= tolerance, (a, sigma2, tolerance)


def test_marechal_matches_the_printed_error(tmp_path, matrices):
    for wavelength in (1.65e-6, 2.2e-6):
        res, s = evaluate(tmp_path, matrices["R"], f"w{wavelength}", "--wavelength", wavelength)
        assert s["wavelength_m"] == wavelength
        # Full precision (JSON): exp(-(2 pi sigma / lambda)^2), a few ulp of the exponent.
        phase = 2 * math.pi * s["tomographic_error_nm"] * 1e-9 / wavelength
        assert abs(s["strehl_marechal"] - math.exp(-phase**2)) <= 1e-14
        assert 0 < s["strehl_otf"] <= 1 and 0 < s["strehl_marechal"] < 1
        # Printed (stdout): sigma to 0.01 nm and S to 1e-4, so the two agree within half a unit
        # of S's last digit plus |dS/dsigma| x 0.005 nm, dS/dsigma = -2 S (2 pi / lambda)^2 sigma.
        sigma = float(re.search(r"tomographic error\s+([0-9.]+) nm rms", res.stdout).group(1))
        strehl = float(re.search(r"Marechal ([0-9.]+)", res.stdout).group(1))
        k = (2 * math.pi / wavelength) ** 2
        expected = math.exp(-k * (sigma * 1e-9) ** 2)
        slope = 2 * expected * k * sigma * 1e-9
        assert abs(strehl - expected) <= 0.5e-4 + slope * 0.005e-9 + 1e-12, (res.stdout, expected)
        assert f"{wavelength * 1e6:.3f} um" in res.stdout


def test_psf_peak_is_the_otf_strehl(tmp_path, matrices):
    # The PSF is normalised so that the diffraction-limited peak is 1: its own peak (on axis, where
    # the long-exposure PSF peaks) is the OTF Strehl ratio the summary reports.
    _, s = evaluate(tmp_path, matrices["R"], "r", "--psf", tmp_path / "psf.npy", "--psf-size", 128)
    psf = np.load(tmp_path / "psf.npy")
    assert psf.shape == (128, 128) and psf.dtype == np.float64
    assert abs(psf.max() - s["strehl_otf"]) <= 1e-12
    assert s["psf"] == str(tmp_path / "psf.npy") and s["psf_size"] == 128
    assert sorted(p.name for p in tmp_path.iterdir()) == ["psf.npy", "r.json", "r.npy"]


@pytest.mark.parametrize("shape", ["drop-column", "transposed", "vector"])
def test_wrong_reconstructor_shape_exits_2_and_writes_nothing(tmp_path, matrices, shape):
    r = {"drop-column": matrices["R"][:, :-1], "transposed": matrices["R"].T,
         "vector": matrices["R"][0]}[shape]
    src = tmp_path / "R.npy"
    np.save(src, r)
    summary, psf = tmp_path / "out.json", tmp_path / "psf.npy"
    summary.write_text("older summary")
    res = run("--device", "cpu", "ao", "evaluate", SYSTEM, "--reconstructor", src, "--json", summary,
              "--psf", psf)
    assert_bad_input(res, "R.npy", f"{M} x {N}")
    assert summary.read_text() == "older summary" and not psf.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["R.npy", "out.json"]
    assert res.stdout == ""


def test_evaluate_outputs_never_replace_inputs_or_each_other(tmp_path, matrices):
    """--psf and --json named like the system, the reconstructor or each other (however spelled),
    or --json named like an array file: refused before any work, every file as it was."""
    src = tmp_path / "R.npy"
    np.save(src, matrices["R"])
    system = tmp_path / "sys.json"
    res = run("simulate", "ao-system", "--preset", "check", "-o", system)
    assert res.returncode == 0, res.stderr
    before = {f: f.read_bytes() for f in (src, system)}
    same = tmp_path / "out.npy"
    cases = [
        (["--json", system], ["--json", "SYSTEM"]),
        (["--json", src], ["--json", "--reconstructor"]),
        (["--psf", tmp_path / "." / "R.npy"], ["--psf", "--reconstructor"]),
        (["--psf", same, "--json", same], ["the same file as --psf", "(another output)"]),
        (["--json", tmp_path / "summary.npy"], ["--json", "JSON", ".npy"]),
    ]
    for extra, words in cases:
        res = run("--device", "cpu", "ao", "evaluate", system, "--reconstructor", src, *extra)
        assert_bad_input(res, *words)
        assert res.stdout == ""
    # A parse error (CLI11's, with its hint to --help) says what a wavelength must be.
    res = run("--device", "cpu", "ao", "evaluate", system, "--reconstructor", src, "--wavelength",
              "0")
    assert res.returncode == 2, res.stderr
    assert "--wavelength: expected a wavelength in metres > 0, found '0'" in res.stderr, res.stderr
    for f, content in before.items():
        assert f.read_bytes() == content, f
    assert sorted(p.name for p in tmp_path.iterdir()) == ["R.npy", "sys.json"]


def test_evaluate_outputs_appear_together(tmp_path, matrices):
    # The summary (~400 bytes) is written first, the PSF (256 x 256 float64, 512 KiB) second; with
    # writes limited to 64 KiB the PSF fails half-way. Both older files must survive unchanged: a
    # command that renamed the summary into place before the PSF was written would replace it.
    src = tmp_path / "R.npy"
    np.save(src, matrices["R"])
    out = tmp_path / "out"
    out.mkdir()
    summary, psf = out / "s.json", out / "psf.npy"
    summary.write_text("older summary")
    psf.write_text("older psf")
    res = run("--device", "cpu", "ao", "evaluate", SYSTEM, "--reconstructor", src, "--json", summary,
              "--psf", psf, file_limit=64 * 1024)
    assert res.returncode == 2, res.stderr
    assert "File too large" in res.stderr or "write" in res.stderr, res.stderr
    assert summary.read_text() == "older summary" and psf.read_text() == "older psf"
    assert sorted(p.name for p in out.iterdir()) == ["psf.npy", "s.json"]  # no partial file left
    # Without the limit both are replaced together.
    res = run("--device", "cpu", "ao", "evaluate", SYSTEM, "--reconstructor", src, "--json", summary,
              "--psf", psf)
    assert res.returncode == 0, res.stderr
    assert json.loads(summary.read_text())["psf"] == str(psf) and np.load(psf).shape == (256, 256)
    assert sorted(p.name for p in out.iterdir()) == ["psf.npy", "s.json"]


def test_covariance_outputs_appear_together(tmp_path):
    # Ctt (152 x 152 float64, 185 KiB) is written before Cmm (912 x 912, 6.6 MiB); with writes
    # limited to 1 MiB Cmm fails half-way. The older run's three files must all survive: a command
    # that put each matrix in place as soon as it was written would leave this run's Ctt next to the
    # older Cmm and Ctm.
    out = tmp_path / "out"
    out.mkdir()
    for kind in ("cmm", "ctm", "ctt"):
        (out / f"{kind}.npy").write_text(f"older {kind}")
    res = run("--device", "cpu", "ao", "covariance", SYSTEM, "-o", out, "--kinds", "ctt,cmm",
              file_limit=1 << 20)
    assert res.returncode == 2, res.stderr
    assert sorted(p.name for p in out.iterdir()) == ["cmm.npy", "ctm.npy", "ctt.npy"]
    for kind in ("cmm", "ctm", "ctt"):
        assert (out / f"{kind}.npy").read_text() == f"older {kind}"
    # A failed run into a folder that did not exist leaves no folder (nor its new parents) behind.
    fresh = tmp_path / "new" / "deeper"
    res = run("--device", "cpu", "ao", "covariance", SYSTEM, "-o", fresh, "--kinds", "cmm",
              file_limit=1 << 20)
    assert res.returncode == 2, res.stderr
    assert not (tmp_path / "new").exists()
    # The same run without the limit writes both, and only them.
    res = run("--device", "cpu", "ao", "covariance", SYSTEM, "-o", out, "--kinds", "ctt,cmm")
    assert res.returncode == 0, res.stderr
    assert np.load(out / "ctt.npy").shape == (M, M) and np.load(out / "cmm.npy").shape == (N, N)
    assert (out / "ctm.npy").read_text() == "older ctm"
    assert sorted(p.name for p in out.iterdir()) == ["cmm.npy", "ctm.npy", "ctt.npy"]
