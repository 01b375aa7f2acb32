"""Runs every script of examples/ with --quick in a subprocess (CPU, NumPy arrays) and checks that
it exits 0, writes its outputs, and that the accuracy it prints is within bounds derived here from
the precisions' unit roundoffs and the problem sizes (never from the script's own claims).

The scripts compare halfscope with independent references (SciPy / NumPy in FP64, astropy, ObsPy)
and print one `TAG key=value ...` line per measurement (examples/example_common.py: emit)."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

# Unit roundoffs: FP64 2^-53, FP32 2^-24, FP16 2^-11, BF16 2^-8. split keeps a hi + lo FP16 pair
# (2 x 11 significant bits): 2^-22, FP32-grade. (u_compute, u_storage) per precision.
U64, U32, U16, UBF = 2.0 ** -53, 2.0 ** -24, 2.0 ** -11, 2.0 ** -8
USPLIT = 2.0 ** -22
UNIT = {"double": (U64, U64), "single": (U32, U32), "split": (USPLIT, USPLIT),
        "mixed": (U32, U16), "bf16": (U32, UBF), "half": (U16, U16), "tf32": (U16, U32)}


def _halfscope_path():
    """The folder holding the importable halfscope package, for the subprocess's PYTHONPATH. In CI
    the package must be there (a missing one would turn every check into a skip)."""
    spec = importlib.util.find_spec("halfscope")
    if spec is None or spec.origin is None:
        if os.environ.get("CI"):
            pytest.fail("CI=true but halfscope is not importable (PYTHONPATH=build/<preset>/python)")
        pytest.skip("halfscope is not importable")
    return str(Path(spec.origin).resolve().parents[1])


def run_example(name, out):
    """Runs examples/<name> --quick --out OUT; returns {tag: [fields dict, ...]}."""
    env = dict(os.environ, MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_halfscope_path(), env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, str(EXAMPLES / name), "--quick", "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{name} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    lines = {}
    for line in proc.stdout.splitlines():
        tag, _, rest = line.partition(" ")
        if tag.isupper() and "=" in rest:
            lines.setdefault(tag, []).append(dict(f.split("=", 1) for f in rest.split()))
    assert "ACCURACY" in lines, f"{name} printed no ACCURACY line:\n{proc.stdout}"
    return lines


def have(module):
    """Whether `module` is importable (optional outputs: figures, FITS, MiniSEED)."""
    return importlib.util.find_spec(module) is not None


def assert_outputs(out, names):
    """Each named output exists in `out` and is not empty."""
    for n in names:
        assert (out / n).is_file() and (out / n).stat().st_size > 0, f"missing output {n}"


def test_study000_convolution(tmp_path):
    """MRE per precision and width within the direct-sum bound; dtypes; the precision ladder."""
    lines = run_example("study000_convolution.py", tmp_path)
    assert_outputs(tmp_path, ["results.json"] + (["mre_vs_width.png"] if have("matplotlib") else []))
    mre = {}
    for f in lines["ACCURACY"]:
        p, w, value = f["precision"], int(f["width"]), float(f["mre"])
        u_c, u_s = UNIT[p]
        # Direct sums (CPU auto picks direct up to width 31; --quick stops at 15): per pixel
        # |out - ref| <= (K u_c + 3 u_s) (|k| * |x|) to first order, K = w^2 taps, u_s rounding the
        # image, the kernel and the output (docs/conv.md). The picture and the Gaussian are
        # positive, so |k| * |x| = |ref| and the bound holds for the relative error of every pixel,
        # hence for their mean; factor 2 for second-order terms.
        assert value <= 2 * (w * w * u_c + 3 * u_s), f"{p} width {w}: MRE {value}"
        expected_dtype = {"double": "float64", "half": "float16", "mixed": "float16"}.get(p, "float32")
        assert f["dtype"] == expected_dtype, f"{p}: result dtype {f['dtype']}"
        mre[(p, w)] = value
    widths = sorted({w for _, w in mre})
    assert widths == [3, 7, 15]
    for w in widths:
        # Every CPU precision (docs/conv.md: direct and fft do double, single, half, mixed, bf16);
        # the GPU-only ones (tf32, split) may be SKIP lines.
        for p in ("double", "single", "half", "mixed", "bf16"):
            assert (p, w) in mre, f"no result for {p} width {w}"
        # The precision ladder: a binding that ignored `precision` would give equal errors.
        assert mre[("double", w)] < mre[("single", w)] < mre[("mixed", w)]
        assert mre[("single", w)] < mre[("half", w)]
        if w >= 7:  # half's K u16 term (K = w^2 >= 49 roundings) dominates mixed's 3 storage ones
            assert mre[("mixed", w)] < mre[("half", w)]
    assert len(lines["TIME"]) == len(lines["ACCURACY"])


def test_study000_deconvolution(tmp_path):
    """The exact solution against NumPy's; every solver below J*'s rounding, closer than the
    start, CG / Wiener within u kappa; the FITS round trip."""
    lines = run_example("study000_deconvolution.py", tmp_path)
    outputs = ["results.json"]
    outputs += ["criterion.png", "restored.png"] if have("matplotlib") else []
    outputs += ["restored.fits"] if have("astropy") else []
    assert_outputs(tmp_path, outputs)
    acc = lines["ACCURACY"]
    exact = next(f for f in acc if f.get("what") == "tikhonov_exact_vs_numpy")
    runs = {(f["solver"], f["precision"]): f for f in acc if "solver" in f}
    skips = {(f["solver"], f["precision"]) for f in lines.get("SKIP", [])}
    kappa = float(next(iter(runs.values()))["condition"])
    # The unit-norm PSF with lambda = 0.01: kappa(Q) = (1 + lambda) / (min|h^|^2 + lambda) <= 101.
    assert 1 < kappa <= 101 * (1 + 1e-9)
    # Two FP64 Wiener filters (FFTW / NumPy's pocketfft): rounding of the order u64 log2(N) per
    # transform, amplified at most by kappa; factor 10 for the constants.
    assert float(exact["rel"]) <= 10 * U64 * kappa * 2 * 14
    for solver in ("fixed", "optimal", "backtracking", "half-then-float", "cg", "wiener"):
        for prec in ("single", "mixed", "split"):
            assert (solver, prec) in runs or (solver, prec) in skips, f"{solver}/{prec} missing"
        assert (solver, "single") in runs, f"{solver} must run in single"
    for (solver, prec), f in runs.items():
        distance, gap = float(f["distance"]), float(f["criterion_gap"])
        # f* minimises J: no iterate has a lower J, up to the FP64 rounding of J itself.
        assert gap >= -1e-10, f"{solver}/{prec}: J below the minimum ({gap})"
        # Every solver starts from f = 0 (distance 1) and decreases J: it must end closer to f*.
        assert distance < 1.0, f"{solver}/{prec}: distance {distance}"
        u = U16 if prec == "mixed" else U32
        if solver in ("cg", "wiener"):
            # The attainable accuracy of a solve in unit roundoff u: ~ u kappa (the residual's
            # rounding u ||b|| mapped through Q^-1); factor 10 for the constants.
            assert distance <= 10 * u * kappa, f"{solver}/{prec}: distance {distance}"
    if have("astropy"):
        fits = lines["FITS"][0]
        # FITS keeps float64 or float32: at most one FP32 rounding of each pixel.
        assert float(fits["roundtrip_rel"]) <= U32


def test_study001_matched_filtering(tmp_path):
    """max |CC - CC_fp64| per precision within K u_c + 2 u_s; detections against the planted
    events; array_xcorr against NumPy; the ObsPy round trip."""
    lines = run_example("study001_matched_filtering.py", tmp_path)
    assert_outputs(tmp_path, ["results.json"] + (["detections.png"] if have("matplotlib") else [])
                   + (["data.mseed"] if have("obspy") else []))
    acc = {f.get("precision", f.get("what")): f for f in lines["ACCURACY"]
           if f.get("what") == "matched_filter"}
    others = {f["what"]: f for f in lines["ACCURACY"] if f.get("what") != "matched_filter"}
    K = 200  # template length of the script's simulation
    for p in ("double", "single", "split", "mixed", "bf16", "half"):
        assert p in acc, f"no matched_filter result in {p}"
        u_c, u_s = UNIT[p]
        # |CC_c - CC_c,fp64| <= K u_c + 2 u_s per channel (a K-term dot product of unit-energy
        # vectors; template and data rounded to storage), + u32 for the float32 output; the stack
        # is a mean (weights 1/C), so the same bound holds for it.
        assert float(acc[p]["max_abs"]) <= K * u_c + 2 * u_s + U32, f"{p}: {acc[p]['max_abs']}"
        assert acc[p]["dtype"] == "float32"
    assert float(acc["single"]["max_abs"]) < float(acc["half"]["max_abs"])
    # Planted events have per-channel CC exactly 0.8: the default precision on the CPU is single.
    assert float(others["planted_cc"]["max_abs"]) <= K * U32 + 3 * U32
    det, fused = lines["DETECTION"][0], lines["DETECTION"][1]
    assert int(det["planted"]) > 0
    # Every planted event found by its own template, nothing away from a planted event (a
    # detection of another template's event, `cross`, is a true event, correctly found).
    assert int(det["matched"]) == int(det["planted"]) and int(det["false"]) == 0, det
    assert int(det["found"]) == int(det["matched"]) + int(det["cross"])
    assert fused["same_as_detect"] == "True"
    # array_xcorr: FP32 inputs represented exactly in the FP64 reference; full normalization.
    assert float(others["eqcorrscan_array_xcorr"]["max_abs"]) <= K * U32 + 3 * U32
    if "eqcorrscan_registry" in others:
        assert float(others["eqcorrscan_registry"]["max_abs"]) <= K * U32 + 3 * U32
    if have("obspy"):
        rt = others["stream_roundtrip"]
        assert float(rt["max_abs"]) == 0.0 and rt["ids_match"] == "True" and int(rt["gaps"]) == 0
        # Data rounded to float32 (one u32 each) plus the single-precision bound, twice.
        assert float(others["stream_vs_array"]["max_abs"]) <= 2 * (K * U32 + 3 * U32)


def test_study002_tomography(tmp_path):
    """The FP64 reconstructor against SciPy; no policy beats FP64; SP more accurate than HP1."""
    lines = run_example("study002_tomography.py", tmp_path)
    assert_outputs(tmp_path, ["results.json"] + (["psf.png"] if have("matplotlib") else []))
    acc = lines["ACCURACY"]
    ref = next(f for f in acc if f.get("what") == "fp64_vs_scipy")
    n, kappa = int(ref["n"]), float(ref["condition"])
    # Two FP64 Cholesky solves: forward error each <= c n u64 kappa(Cmm) (Higham, Thm 10.4 +
    # the triangular solves; the script prints LAPACK's kappa_1 estimate, >= kappa_2 up to the
    # estimator's factor of a few); c = 2 for the two.
    assert float(ref["rel_frobenius"]) <= 2 * n * U64 * kappa
    base = next(f for f in acc if f.get("policy") == "fp64")
    err64, s64 = float(base["error_nm"]), float(base["strehl_marechal"])
    assert 0 < s64 <= 1
    rows = {f["policy"]: f for f in acc if f.get("policy") not in (None, "fp64")}
    assert set(rows) == {"uniform:SP", "band:SP=2,HP1=rest", "uniform:HP1", "adaptive:tol=1e-6"}
    for policy, f in rows.items():
        # Cee(R) = Cee(R*) + (R - R*) Cmm (R - R*)^T: the FP64 reconstructor is optimal, a policy
        # loses error budget (>= 0) up to the FP64 rounding of the evaluation.
        assert float(f["loss_nm2"]) >= -1e-9 * err64 ** 2, f"{policy}: {f['loss_nm2']}"
        assert float(f["strehl_marechal"]) <= s64 * (1 + 1e-9)
        assert float(f["rel_frobenius"]) < 1.0
    # FP32 tiles everywhere against FP16 GEMM inputs (u32 / u16 = 2^-13): the policy is applied.
    assert float(rows["uniform:SP"]["rel_frobenius"]) < float(rows["uniform:HP1"]["rel_frobenius"])
