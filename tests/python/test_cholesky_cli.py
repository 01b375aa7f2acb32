"""`halfscope cholesky` against numpy.linalg.cholesky (LAPACK in FP64).

Test matrix: the Kac-Murdock-Szego covariance A_ij = s rho^|i-j|, rho = e^-1/32, SPD with
kappa_2(A) <= (1 + rho) / (1 - rho) < 64 (the matrix of tests/linalg/test_cholesky.cpp).
Backward error bound (Higham Thm 10.3, first order): |L L^T - A| <= e |L||L^T|, e =
gamma_{n+1}(2^-24) for the FP32 POTRF / TRSM / SYRK plus the largest per-variant GEMM term in use
(2 u_in + u_c + u_out + gamma_n(u_acc)); || |L||L^T| ||_F <= ||L||_F^2 = trace(A), so
||L L^T - A||_F / ||A||_F <= e trace(A) / ||A||_F. A is the FP32 rounding of the input (what is
factored). Forward error ||L - L_64||_F / ||L_64||_F <= 2 kappa_2(A) (bound + u32) (first order
plus the input rounding, a factor 2 of slack for second-order terms)."""
import json
import re

import pytest

np = pytest.importorskip("numpy")
from ao_helpers import CLI, assert_bad_input, run  # noqa: E402

pytestmark = pytest.mark.skipif(not CLI, reason="HALFSCOPE_CLI is not set (run through ctest)")

U16, U32, U64 = 2.0 ** -11, 2.0 ** -24, 2.0 ** -53
VARIANTS = ["DP", "SP", "TF32", "HP1", "HP2", "HP3", "BF16"]


def gamma(n, u):
    return n * u / (1 - n * u)


def variant_term(v, n):
    return {"DP": U32 + gamma(n, U64), "SP": gamma(n, U32), "TF32": 2 * U16 + gamma(n, U32),
            "HP1": 2 * U16 + gamma(n, U32), "HP2": 4 * U16 + gamma(n, U32),
            "HP3": 3 * U16 + gamma(n, U16), "BF16": 2 * 2.0 ** -8 + gamma(n, U32)}[v]


def kms(n, scale=1.0, dtype=np.float64, length=32.0):
    """s rho^|i-j| with rho = e^(-1 / length): kappa_2 <= (1 + rho) / (1 - rho)."""
    i = np.arange(n)
    return (scale * np.exp(-np.abs(i[:, None] - i[None, :]) / length)).astype(dtype)


def cuda_devices():
    """How many CUDA devices halfscope itself can use (`halfscope info --json`)."""
    res = run("info", "--json")
    assert res.returncode == 0, res.stderr
    return len(json.loads(res.stdout)["devices"])


def factor(tmp_path, a, *args, name="A"):
    src, out, report = tmp_path / f"{name}.npy", tmp_path / f"{name}-L.npy", tmp_path / f"{name}.json"
    np.save(src, a)
    res = run("--device", "cpu", "cholesky", src, "-o", out, "--report", report, *args)
    return res, out, report


def band_counts(nt, steps, rest):
    """Off-diagonal tiles per variant of band:<steps>,<rest>=rest, counted by hand."""
    counts = dict.fromkeys(VARIANTS, 0)
    for j in range(nt):
        for i in range(j + 1, nt):
            d = i - j
            counts[next((v for v, dmax in steps if d <= dmax), rest)] += 1
    return counts


@pytest.mark.parametrize("policy,variants", [
    ("uniform:SP", ["SP"]), ("uniform:DP", ["DP"]), ("uniform:TF32", ["TF32"]),
    ("uniform:HP1", ["HP1"]), ("uniform:HP2", ["HP2"]), ("uniform:HP3", ["HP3"]),
    ("uniform:BF16", ["BF16"]), ("band:SP=1,HP1=rest", ["SP", "HP1"]),
    ("band:SP=1,HP3=rest", ["SP", "HP3"]), ("adaptive:tol=0.001", ["SP", "HP1", "BF16"]),
])
@pytest.mark.parametrize("n,nb", [(300, 64), (256, 64), (50, 64), (1, 8), (97, 7)])
def test_policies_against_numpy(tmp_path, policy, variants, n, nb):
    a = kms(n)
    res, out, report = factor(tmp_path, a, "--policy", policy, "--tile", nb, "--check")
    assert res.returncode == 0, res.stderr
    L = np.load(out)
    assert L.dtype == np.float32 and L.shape == (n, n)
    assert not np.triu(L, 1).any(), "the upper triangle must be zero"
    a32 = a.astype(np.float32).astype(np.float64)
    L64 = L.astype(np.float64)
    backward = np.linalg.norm(L64 @ L64.T - a32) / np.linalg.norm(a32)
    bound = (gamma(n + 1, U32) + max(variant_term(v, n) for v in variants)) * \
        np.trace(a32) / np.linalg.norm(a32)
    assert backward <= bound, (backward, bound)
    ref = np.linalg.cholesky(a)  # LAPACK dpotrf
    forward = np.linalg.norm(L64 - ref) / np.linalg.norm(ref)
    assert forward <= 2 * np.linalg.cond(a) * (bound + U32), forward
    # The printed backward error is the same quantity, computed by halfscope in FP64.
    printed = float(re.search(r"backward error .* = (\S+)", res.stdout).group(1))
    assert printed == pytest.approx(backward, rel=1e-6, abs=1e-3 * U32)
    r = json.loads(report.read_text())
    nt = -(-n // nb)
    assert sum(r["tiles"].values()) == nt * (nt - 1) // 2
    assert r["policy"] == policy and r["n"] == n and r["tile"] == nb and r["attempts"] == 1
    assert r["backward_error"] == pytest.approx(printed, rel=1e-8)
    if policy.startswith("uniform:"):
        assert r["tiles"][variants[0]] == nt * (nt - 1) // 2
    if policy == "band:SP=1,HP1=rest":
        assert r["tiles"] == band_counts(nt, [("SP", 1)], "HP1")


def test_float32_input_and_default_tile(tmp_path):
    a = kms(700, dtype=np.float32)  # 700 > 512: two tile rows with the CPU default tile
    res, out, report = factor(tmp_path, a)
    assert res.returncode == 0, res.stderr
    assert json.loads(report.read_text())["tile"] == 512
    L = np.load(out).astype(np.float64)
    ref = np.linalg.cholesky(a.astype(np.float64))
    bound = 2 * gamma(701, U32) * np.trace(a.astype(np.float64)) / np.linalg.norm(a)
    assert np.linalg.norm(L - ref) / np.linalg.norm(ref) <= 2 * np.linalg.cond(a) * (bound + U32)


def test_not_positive_definite_names_tile_and_policy(tmp_path):
    a = kms(300)
    a[200, 200] = -1.0  # the leading minor of order 201 is the first that fails: tile (3, 3)
    for extra in ([], ["--recover"]):
        res, out, _ = factor(tmp_path, a, "--tile", 64, "--policy", "uniform:HP1", *extra)
        assert res.returncode == 1, res.stderr
        assert "tile (3, 3)" in res.stderr and "uniform:HP1" in res.stderr, res.stderr
        assert not out.exists() and not (tmp_path / "A.json").exists()


def test_recover_finishes_a_failing_hp3_run(tmp_path):
    a = kms(300, scale=1e5)  # entries above 65504: HP3's FP16 C overflows (unscaled)
    res, out, _ = factor(tmp_path, a, "--tile", 64, "--policy", "uniform:HP3", "--no-scale")
    assert res.returncode == 1 and "HP3" in res.stderr, res.stderr
    assert not out.exists()
    res, out, report = factor(tmp_path, a, "--tile", 64, "--policy", "uniform:HP3", "--recover",
                              "--check", "--no-scale")
    assert res.returncode == 0, res.stderr
    r = json.loads(report.read_text())
    assert r["attempts"] > 1 and len(r["recoveries"]) == r["attempts"] - 1
    assert "recoveries %d" % len(r["recoveries"]) in res.stdout
    L = np.load(out).astype(np.float64)
    a32 = a.astype(np.float32).astype(np.float64)
    bound = (gamma(301, U32) + variant_term("HP3", 300)) * np.trace(a32) / np.linalg.norm(a32)
    assert np.linalg.norm(L @ L.T - a32) / np.linalg.norm(a32) <= bound


@pytest.mark.parametrize("scale,k", [(1e5, 8), (1e-20, -34)])
def test_matrices_far_from_one_are_scaled_for_fp16(tmp_path, scale, k):
    # 1e5: HP3's FP16 C would overflow; 1e-20: HP1's FP16 operands (L ~ 1e-10) would flush to
    # zero. Factored as 4^-k A (max diagonal in [1, 4)), both finish in one attempt within the
    # bound of the variant, the factor in the input's units.
    a = kms(300, scale=scale)
    for policy in ("uniform:HP3", "uniform:HP1"):
        res, out, report = factor(tmp_path, a, "--tile", 64, "--policy", policy, "--check")
        assert res.returncode == 0, res.stderr
        r = json.loads(report.read_text())
        assert r["scale"] is True and r["scaling_exponent"] == k and r["attempts"] == 1, r
        assert "factored 2^%d A" % (-2 * k) in res.stdout, res.stdout
        L = np.load(out).astype(np.float64)
        a32 = a.astype(np.float32).astype(np.float64)
        bound = (gamma(301, U32) + variant_term(policy[-3:], 300)) * np.trace(a32) / np.linalg.norm(a32)
        assert np.linalg.norm(L @ L.T - a32) / np.linalg.norm(a32) <= bound
    # Unscaled, HP1 at 1e-20 loses the factor to FP16 underflow (a pivot fails or the error
    # is far beyond the bound): the test above can fail.
    if scale < 1:
        res, out, report = factor(tmp_path, a, "--tile", 64, "--policy", "uniform:HP1", "--no-scale")
        if res.returncode == 0:
            L = np.load(out).astype(np.float64)
            a32 = a.astype(np.float32).astype(np.float64)
            assert np.linalg.norm(L @ L.T - a32) / np.linalg.norm(a32) > 1e-2
            assert json.loads(report.read_text())["scaling_exponent"] == 0
        else:
            assert "not positive definite" in res.stderr, res.stderr


@pytest.mark.parametrize("array,words", [
    (np.ones((3, 4)), ["A.npy", "square", "[3, 4]"]),
    (np.ones(5), ["A.npy", "square"]),
    (np.arange(9, dtype=np.int32).reshape(3, 3), ["A.npy", "float32 or float64", "int32"]),
])
def test_bad_matrix_shapes(tmp_path, array, words):
    res, out, _ = factor(tmp_path, array)
    assert_bad_input(res, *words)
    assert not out.exists()


def test_asymmetric_matrix_names_the_entry(tmp_path):
    a = kms(20)
    a[7, 3] *= 1 + 1e-4  # relative asymmetry 1e-4 > 1e-6
    res, out, _ = factor(tmp_path, a)
    assert_bad_input(res, "A.npy", "symmetric", "A(7, 3)", "A(3, 7)")
    assert not out.exists()
    a = kms(20)
    a[7, 3] *= 1 + 1e-8  # within 1e-6: accepted, the lower triangle is factored
    res, _, _ = factor(tmp_path, a)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("a,words", [
    (1e300 * np.eye(4), ["A.npy", "A(0, 0) = 1e+300", "overflows float32"]),
    (np.diag([1.0, 1.0, 1e39, 1.0]), ["A.npy", "A(2, 2) = 1e+39", "overflows float32"]),
    (1e-300 * np.eye(4), ["A.npy", "A(0, 0) = 1e-300", "underflows float32", "scale"]),
])
def test_float64_beyond_float32_names_the_entry(tmp_path, a, words):
    # The factorization stores A in float32: the input is finite, but 1e300 would reach the
    # library as inf and 1e-300 as a zero pivot ("not positive definite").
    res, out, report = factor(tmp_path, a)
    assert_bad_input(res, *words)
    assert "cholesky_tiles" not in res.stderr and "leading minor" not in res.stderr
    assert not out.exists() and not report.exists()


def test_off_diagonal_underflow_is_only_rounding(tmp_path):
    a = np.eye(4)
    a[2, 1] = a[1, 2] = 1e-60  # rounds to 0 in float32, harmless: accepted
    res, out, _ = factor(tmp_path, a)
    assert res.returncode == 0, res.stderr
    assert np.array_equal(np.load(out), np.eye(4, dtype=np.float32))


def test_bad_policy_and_output(tmp_path):
    res, _, _ = factor(tmp_path, kms(10), "--policy", "uniform:HP9")
    assert_bad_input(res, "HP9")
    np.save(tmp_path / "B.npy", kms(10))
    res = run("--device", "cpu", "cholesky", tmp_path / "B.npy", "-o", tmp_path / "L.txt")
    assert_bad_input(res, ".npy", "L.txt")
    res = run("--device", "cpu", "cholesky", tmp_path / "missing.npy", "-o", tmp_path / "L.npy")
    assert res.returncode == 2 and "missing.npy" in res.stderr


def test_bench_cholesky_json(tmp_path):
    """`bench cholesky` on the check Cmm (CPU): schema, tile counts, and its FP64 backward error
    within the bound above, with trace / ||A||_F taken from `ao covariance`'s own Cmm."""
    out = tmp_path / "chol.json"
    res = run("--device", "cpu", "bench", "cholesky", "--systems", "check", "--tile", 128,
              "--repeats", 1, "--error-tiles", 0, "--policies", "uniform:SP;band:SP=1,HP1=rest",
              "-o", out)
    assert res.returncode == 0, res.stderr
    r = json.loads(out.read_text())
    assert r["benchmark"] == "cholesky" and r["device"]["kind"] == "cpu"
    cov = run("--device", "cpu", "ao", "covariance", "preset:check", "-o", tmp_path / "cov",
              "--kinds", "cmm", "--dtype", "f32")
    assert cov.returncode == 0, cov.stderr
    a = np.load(tmp_path / "cov" / "cmm.npy").astype(np.float64)
    n = a.shape[0]
    assert [c["precision"] for c in r["cases"]] == ["uniform:SP", "band:SP=1,HP1=rest"]
    for c, variants in zip(r["cases"], (["SP"], ["SP", "HP1"])):
        p = c["params"]
        assert p["n"] == n == 912 and p["tile"] == 128 and c["repeats"] == 1
        assert p["error_tiles_checked"] == p["error_tiles_total"] == 36  # 8 tile rows: every tile
        assert sum(p["tiles_" + v] for v in VARIANTS) == 28
        bound = (gamma(n + 1, U32) + max(variant_term(v, n) for v in variants)) * \
            np.trace(a) / np.linalg.norm(a)
        assert 0 < c["error"]["backward"] <= bound
        assert c["TFLOPs"] == pytest.approx(n ** 3 / 3 / (c["median_ms"] * 1e-3) / 1e12, rel=1e-6)
    assert r["cases"][1]["params"]["tiles_SP"] == 7 and r["cases"][1]["params"]["tiles_HP1"] == 21
    res = run("bench", "cholesky", "--sizes", "12345", "--device", "cpu")
    assert_bad_input(res, "--sizes", "11152", "12345")


def test_report_has_the_copy_fields_on_the_cpu(tmp_path):
    """The report carries the device fields of every run: a CPU run lists no device, copies
    nothing and is never out of core."""
    res, _, report = factor(tmp_path, kms(100), "--tile", 32)
    assert res.returncode == 0, res.stderr
    r = json.loads(report.read_text())
    assert r["devices"] == [] and r["device_memory"] == 0 and r["out_of_core_slabs"] == 0
    assert r["host_to_device_bytes"] == r["device_to_host_bytes"] == 0
    assert r["device_to_device_bytes"] == 0


@pytest.mark.parametrize("args,words", [
    (["--device-memory", "12Q"], ["--device-memory", "K, M, G or T (powers of 1024", "'12Q'"]),
    (["--device-memory", "-1G"], ["--device-memory", "expected a size in bytes", "'-1G'"]),
    (["--device-memory", "1.5G"], ["--device-memory", "found '1.5G'"]),
    (["--device-memory", "99999999T"], ["--device-memory", "2^63 - 1 bytes", "'99999999T'"]),
    (["--devices", "0,1", "--device", "cpu"],
     ["--devices 0,1", "expected a GPU run", "found --device cpu"]),
    (["--device-memory", "1G", "--device", "cpu"],
     ["--device-memory 1G", "expected a GPU run", "found --device cpu"]),
    (["--devices", "0", "--grid", "1x1"], ["--devices 0", "expected no --grid", "--grid 1x1"]),
    (["--device-memory", "16G", "--grid", "1x1"], ["--device-memory 16G", "expected no --grid"]),
    (["--devices", "1,0,1"], ["--devices 1,0,1", "distinct", "found 1 twice"]),
    (["--devices", "-1"], ["--devices -1", "indices >= 0", "found -1"]),
])
def test_gpu_options_refused(tmp_path, args, words):
    """Bad --devices / --device-memory: exit 2, one line naming the option, what was expected and
    what was found, nothing written; all decided before any device is asked for."""
    src, out = tmp_path / "A.npy", tmp_path / "L.npy"
    np.save(src, kms(50))
    res = run("cholesky", src, "-o", out, *args)
    assert_bad_input(res, *words)
    assert not out.exists()


@pytest.mark.parametrize("args,words", [
    (["--devices", "0"], ["--devices 0", "expected a CUDA device, found none"]),
    (["--device-memory", "1G"], ["--device-memory 1G", "expected a GPU run", "no CUDA device"]),
])
def test_gpu_options_without_a_device(tmp_path, args, words):
    """Without a usable CUDA device a device list or a budget is refused, never ignored by a
    silent fall-back to the CPU."""
    if cuda_devices() > 0:
        pytest.skip("a CUDA device is present")
    src, out = tmp_path / "A.npy", tmp_path / "L.npy"
    np.save(src, kms(50))
    assert_bad_input(run("cholesky", src, "-o", out, *args), *words)
    assert not out.exists()


def test_bench_cholesky_device_memory_refused(tmp_path):
    res = run("bench", "cholesky", "--systems", "check", "--device-memory", "4X")
    assert_bad_input(res, "--device-memory", "K, M, G or T", "'4X'")
    res = run("bench", "cholesky", "--systems", "check", "--device", "cpu", "--device-memory",
              "1G")
    assert_bad_input(res, "--device-memory 1G", "expected a GPU run", "--device cpu")


# Out of core on one GPU (label gpu: skips without a device). n = 2000 in tiles of 128 (16 tile
# columns): the lower tile layout holds 136 tiles, 8.9 MB, and the in-core factorization needs
# about 14 MB with its scratch; the out-of-core one needs two slabs of one tile column (2 x 1 MB)
# plus its panel staging and scratch (about 7 MB). 12 MiB lies between: several slabs.
OOC_N, OOC_TILE, OOC_BUDGET = 2000, 128, "12M"
# Forward error tolerance. The matrix is dense_spd: I + G G^T / n with G n x n/4 standard normal,
# whose eigenvalues lie in [1, 1 + (1 + 1/2)^2 + O(n^-2/3)], so kappa_2 < 4, and whose factor is
# dense: every factored column streamed to a later slab changes it. The FP32 factorization's
# backward error is rigorously at most the bound of the module docstring (checked below), but
# that bound (n u) is 1e-3 here and would hide nothing; rounding errors of blocked FP32 sums grow
# like sqrt(n) u in practice (Higham & Mary, SISC 2019: probabilistic bound lambda sqrt(n) u with
# lambda of order 1), 2.7e-6 for n = 2000. First-order perturbation of the factor: ||dL||_F /
# ||L||_F <~ kappa_2 ||dA|| / ||A|| = 1.1e-5, plus the FP32 rounding of A (kappa u32 = 2.4e-7);
# a factor 8 of slack for lambda gives 1e-4. A wrong slab, a column not updated by its left
# neighbours or a stale copy makes errors of order 1e-2 or more (every column matters).
OOC_FORWARD_TOL = 1e-4


def dense_spd(n, seed=9):
    g = np.random.default_rng(seed).standard_normal((n, n // 4))
    return np.eye(n) + g @ g.T / n


def check_factor_against_numpy(a, out, res):
    L = np.load(out).astype(np.float64)
    assert not np.triu(L, 1).any()
    n = a.shape[0]
    a32 = a.astype(np.float32).astype(np.float64)
    backward = np.linalg.norm(L @ L.T - a32) / np.linalg.norm(a32)
    bound = 2 * gamma(n + 1, U32) * np.trace(a32) / np.linalg.norm(a32)
    assert backward <= bound, (backward, bound)
    printed = float(re.search(r"backward error .* = (\S+)", res.stdout).group(1))
    assert printed == pytest.approx(backward, rel=1e-6, abs=1e-3 * U32)
    ref = np.linalg.cholesky(a)
    forward = np.linalg.norm(L - ref) / np.linalg.norm(ref)
    assert forward <= OOC_FORWARD_TOL, forward


def test_out_of_core_on_one_gpu_matches_numpy(tmp_path):
    if cuda_devices() < 1:
        pytest.skip("no CUDA device")
    a = dense_spd(OOC_N)
    src, out, report = tmp_path / "A.npy", tmp_path / "L.npy", tmp_path / "r.json"
    np.save(src, a)
    res = run("cholesky", src, "-o", out, "--report", report, "--devices", 0, "--device-memory",
              OOC_BUDGET, "--tile", OOC_TILE, "--check")
    assert res.returncode == 0, res.stderr
    check_factor_against_numpy(a, out, res)
    r = json.loads(report.read_text())
    assert r["devices"] == [0] and r["device_memory"] == 12 << 20 and r["device"] == "cuda"
    assert r["out_of_core_slabs"] > 1, r
    # The matrix goes in and the factor comes out (at least the lower triangle each way); the
    # factored columns are streamed in again for the slabs to their right, never out again.
    lower = 4 * OOC_N * (OOC_N + 1) // 2
    assert r["host_to_device_bytes"] > r["device_to_host_bytes"] >= lower, r
    assert r["device_to_device_bytes"] == 0
    assert f"out of core, {r['out_of_core_slabs']} slabs" in res.stdout


def test_several_gpus_match_numpy(tmp_path):
    """--devices over every device of the host (2 or more): the input stays on the host, tile
    columns are dealt round-robin, L within the same tolerance."""
    count = cuda_devices()
    if count < 2:
        pytest.skip("fewer than 2 CUDA devices")
    a = dense_spd(OOC_N)
    src, out, report = tmp_path / "A.npy", tmp_path / "L.npy", tmp_path / "r.json"
    np.save(src, a)
    devices = ",".join(map(str, range(count)))
    res = run("cholesky", src, "-o", out, "--report", report, "--devices", devices, "--tile",
              OOC_TILE, "--check")
    assert res.returncode == 0, res.stderr
    check_factor_against_numpy(a, out, res)
    r = json.loads(report.read_text())
    assert r["devices"] == list(range(count)) and r["out_of_core_slabs"] == 0
    assert r["device_to_device_bytes"] > 0, r  # the panels go to every device
