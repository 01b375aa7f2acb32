"""`halfscope ao reconstructor` against NumPy: the FP64 matrices come from `ao covariance`, the
reference reconstructor is NumPy's solve (never halfscope's own solver).

Bound on the residual of the mixed-precision R (Higham Thm 10.4, first order, one row r of R at a
time: (A + dA) r^T = c^T with |dA| <= e |L||L^T| and || |L||L^T| ||_2 <= trace(A)):
||R Cmm - Ctm||_F <= e trace(Cmm) ||R||_F + u32 (||Cmm||_F ||R||_F + ||Ctm||_F), where
e = gamma_{3n+1}(2^-24) (FP32 POTRF and the two substitutions) plus the GEMM terms of the
factorization's and of the solves' variants (as in test_cholesky_cli.py), and the u32 terms are
the FP32 rounding of Cmm and Ctm."""
import json
import re

import pytest

np = pytest.importorskip("numpy")
from ao_helpers import CLI, assert_bad_input, run  # noqa: E402
from test_cholesky_cli import U32, band_counts, gamma, variant_term  # noqa: E402

pytestmark = pytest.mark.skipif(not CLI, reason="HALFSCOPE_CLI is not set (run through ctest)")

SYSTEM, N, M = "preset:check", 912, 152


@pytest.fixture(scope="module")
def matrices(tmp_path_factory):
    out = tmp_path_factory.mktemp("cov")
    res = run("--device", "cpu", "ao", "covariance", SYSTEM, "-o", out / "cov", "--dtype", "f64")
    assert res.returncode == 0, res.stderr
    cmm, ctm = np.load(out / "cov" / "cmm.npy"), np.load(out / "cov" / "ctm.npy")
    return {"cmm": cmm, "ctm": ctm, "R": np.linalg.solve(cmm, ctm.T).T}


def scores(text, label):
    m = re.search(label + r"\s+tomographic error (\S+) nm rms\s+Strehl Marechal (\S+)\s+OTF (\S+)",
                  text)
    assert m, text
    return [float(x) for x in m.groups()]


@pytest.mark.parametrize("policy,solve,variants", [
    ("uniform:SP", "uniform:SP", (["SP"], ["SP"])),
    ("band:SP=1,HP1=rest", "uniform:HP1", (["SP", "HP1"], ["HP1"])),
    ("uniform:TF32", "uniform:SP", (["TF32"], ["SP"])),
])
def test_residual_and_tiles(tmp_path, matrices, policy, solve, variants):
    out = tmp_path / "R.npy"
    res = run("--device", "cpu", "ao", "reconstructor", SYSTEM, "-o", out, "--policy", policy,
              "--solve-policy", solve, "--tile", 128)
    assert res.returncode == 0, res.stderr
    r = np.load(out)
    assert r.dtype == np.float32 and r.shape == (M, N)
    r64 = r.astype(np.float64)
    cmm, ctm = matrices["cmm"], matrices["ctm"]
    e = gamma(3 * N + 1, U32) + max(variant_term(v, N) for v in variants[0]) + \
        2 * max(variant_term(v, N) for v in variants[1])
    nr = np.linalg.norm(r64)
    bound = e * np.trace(cmm) * nr + U32 * (np.linalg.norm(cmm) * nr + np.linalg.norm(ctm))
    residual = np.linalg.norm(r64 @ cmm - ctm)
    assert residual <= bound, (residual, bound)
    nt = -(-N // 128)
    tiles = dict(re.findall(r"(\w+) (\d+)", re.search(r"factor tiles:(.*)", res.stdout).group(1)))
    if policy.startswith("band"):
        expected = {k: v for k, v in band_counts(nt, [("SP", 1)], "HP1").items() if v}
    else:
        expected = {policy.split(":")[1]: nt * (nt - 1) // 2}
    assert {k: int(v) for k, v in tiles.items()} == expected


def test_evaluate_matches_ao_evaluate(tmp_path, matrices):
    out = tmp_path / "R.npy"
    res = run("--device", "cpu", "ao", "reconstructor", SYSTEM, "-o", out, "--policy",
              "band:SP=1,HP1=rest", "--tile", 128, "--evaluate")
    assert res.returncode == 0, res.stderr
    mine, ref = scores(res.stdout, "this R"), scores(res.stdout, "FP64 R")
    # The same R scored by `ao evaluate` (FP64 covariances, same projection): equal to print
    # precision; the FP64 line against NumPy's reconstructor scored the same way (both FP64 solves
    # of an SPD system, kappa u64-close).
    np.save(tmp_path / "Rnp.npy", matrices["R"])
    for path, expected in ((out, mine), (tmp_path / "Rnp.npy", ref)):
        ev = run("--device", "cpu", "ao", "evaluate", SYSTEM, "--reconstructor", path)
        assert ev.returncode == 0, ev.stderr
        err = float(re.search(r"tomographic error\s+(\S+) nm", ev.stdout).group(1))
        m = re.search(r"Marechal (\S+)\s+OTF (\S+)", ev.stdout)
        assert err == pytest.approx(expected[0], abs=0.01)  # ao evaluate prints 2 decimals
        assert float(m.group(1)) == pytest.approx(expected[1], abs=1e-4)
        assert float(m.group(2)) == pytest.approx(expected[2], abs=1e-4)
    diff = re.search(r"difference\s+tomographic error (\S+) nm\s+Strehl Marechal (\S+)\s+OTF (\S+)",
                     res.stdout)
    # The two score lines are printed to 3 (nm) and 6 (Strehl) decimals, the difference exactly.
    for k, printed in enumerate((5e-4, 5e-7, 5e-7)):
        assert float(diff.group(k + 1)) == pytest.approx(mine[k] - ref[k], abs=2.2 * printed)


def test_bad_arguments(tmp_path):
    res = run("ao", "reconstructor", "preset:nope", "-o", tmp_path / "R.npy")
    assert_bad_input(res, "nope")
    res = run("ao", "reconstructor", SYSTEM, "-o", tmp_path / "R.npy", "--policy", "band:SP=x")
    assert_bad_input(res, "band:SP=x")
    res = run("ao", "reconstructor", SYSTEM, "-o", tmp_path / "R.fits")
    assert_bad_input(res, ".npy", "R.fits")
    assert not (tmp_path / "R.npy").exists()


@pytest.mark.parametrize("args,words", [
    (["--devices", "0,1", "--device", "cpu"],
     ["--devices 0,1", "expected a GPU run", "found --device cpu"]),
    (["--devices", "0", "--grid", "1x1"], ["--devices 0", "expected no --grid", "--grid 1x1"]),
    (["--devices", "0,0"], ["--devices 0,0", "distinct", "found 0 twice"]),
    (["--devices", "2,-1"], ["--devices 2,-1", "indices >= 0", "found -1"]),
])
def test_bad_devices(tmp_path, args, words):
    """--devices spreads the factorization and the solves over GPUs: refused on a CPU run, with a
    --grid (the MPI path's GPU ranks take --device cuda) and for bad indices, before any covariance is made."""
    res = run("ao", "reconstructor", SYSTEM, "-o", tmp_path / "R.npy", *args)
    assert_bad_input(res, *words)
    assert not (tmp_path / "R.npy").exists()


def test_devices_without_a_cuda_device(tmp_path):
    info = run("info", "--json")
    assert info.returncode == 0, info.stderr
    if json.loads(info.stdout)["devices"]:
        pytest.skip("a CUDA device is present")
    res = run("ao", "reconstructor", SYSTEM, "-o", tmp_path / "R.npy", "--devices", "0")
    assert_bad_input(res, "--devices 0", "expected a CUDA device, found none")


def test_devices_residual_within_the_bound(tmp_path, matrices):
    """--devices over every CUDA device of the host (label gpu: skips without one): R has the
    residual bound of the module docstring, as on the CPU."""
    info = run("info", "--json")
    assert info.returncode == 0, info.stderr
    count = len(json.loads(info.stdout)["devices"])
    if count < 1:
        pytest.skip("no CUDA device")
    out = tmp_path / "R.npy"
    devices = ",".join(map(str, range(count)))
    res = run("ao", "reconstructor", SYSTEM, "-o", out, "--devices", devices, "--tile", 128)
    assert res.returncode == 0, res.stderr
    assert f"devices {devices}:" in res.stdout, res.stdout
    r64 = np.load(out).astype(np.float64)
    cmm, ctm = matrices["cmm"], matrices["ctm"]
    e = gamma(3 * N + 1, U32) + 3 * variant_term("SP", N)
    nr = np.linalg.norm(r64)
    bound = e * np.trace(cmm) * nr + U32 * (np.linalg.norm(cmm) * nr + np.linalg.norm(ctm))
    assert np.linalg.norm(r64 @ cmm - ctm) <= bound


@pytest.mark.parametrize("args,words", [
    (["--device-memory", "0"], ["--device-memory", "above 0", "'0'"]),
    (["--device-memory", "12Q"], ["--device-memory", "12Q"]),
    (["--device-memory", "1G", "--device", "cpu"],
     ["--device-memory 1G", "expected a GPU run", "found --device cpu"]),
])
def test_bad_device_memory(tmp_path, args, words):
    """--device-memory streams Cmm through one GPU: a size above 0, a GPU run; nothing written."""
    res = run("ao", "reconstructor", SYSTEM, "-o", tmp_path / "R.npy", *args)
    assert_bad_input(res, *words)
    assert not (tmp_path / "R.npy").exists()


def test_device_memory_streams_cmm_within_the_bound(tmp_path, matrices):
    """--device-memory 5500K in tiles of 64 (label gpu: skips without a device): Cmm's 1.8 MB of
    tiles go to host memory, the factorization runs out of core (its scratch alone is 4.9 MB: 7
    slabs on an H100) and the solves stream the factor, with Ctm's 0.6 MB on the device beside
    them (tests/ao/gpu_reconstructor_mixed.cpp runs both placements); R has the residual bound of
    the module docstring, as in core."""
    info = run("info", "--json")
    assert info.returncode == 0, info.stderr
    if not json.loads(info.stdout)["devices"]:
        pytest.skip("no CUDA device")
    out = tmp_path / "R.npy"
    res = run("ao", "reconstructor", SYSTEM, "-o", out, "--device", "cuda", "--tile", 64,
              "--device-memory", "5500K")
    assert res.returncode == 0, res.stderr
    m = re.search(r"Cmm in host memory: factorization out of core in (\d+) slabs.*solves in (\d+) "
                  r"slabs x (\d+) blocks of rows \(right-hand sides on the device\)", res.stdout)
    assert m and int(m.group(1)) > 1 and m.group(3) == "1", res.stdout
    r64 = np.load(out).astype(np.float64)
    assert r64.shape == (M, N)
    cmm, ctm = matrices["cmm"], matrices["ctm"]
    e = gamma(3 * N + 1, U32) + 3 * variant_term("SP", N)
    nr = np.linalg.norm(r64)
    bound = e * np.trace(cmm) * nr + U32 * (np.linalg.norm(cmm) * nr + np.linalg.norm(ctm))
    assert np.linalg.norm(r64 @ cmm - ctm) <= bound
