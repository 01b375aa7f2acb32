"""hs.linalg.cholesky / solve against NumPy, and hs.ao.* checked by properties that follow from the
model's definitions (symmetry, positive definiteness, sizes from the pupil geometry, which blocks
noise and pointing can change), by NumPy's FP64 solve, and by the optimality of R = Ctm Cmm^-1.

Tolerances (Higham, "Accuracy and Stability", Thm 10.3 and 10.4): a Cholesky factor computed with
unit roundoff u satisfies A + dA = L L^T with |dA| <= gamma_{n+1} |L| |L^T| elementwise (any
blocking, any summation order). FP32: u = 2^-24. With the GEMM updates in HP1 (FP16 operands, FP32
accumulation) each update product carries 2 u16 + u16^2 more (u16 = 2^-11). Storing A in FP32 adds
u32 |A| <= u32 |L||L^T|. A solve adds gamma_{3n+1} normwise (two triangular solves), so the relative
residual ||A x - b|| / (||A|| ||x||) stays below 3 n u; the forward error is at most kappa times it.
"""
import copy
import math

import numpy as np
import pytest

hs = pytest.importorskip("halfscope")

U32, U16 = 2.0 ** -24, 2.0 ** -11


def gamma(k, u):
    return k * u / (1 - k * u)


def backward_ratio(a, lower):
    """max_ij |A - L L^T|_ij / (|L| |L^T|)_ij in FP64."""
    L = lower.astype(np.float64)
    return (np.abs(a - L @ L.T) / (np.abs(L) @ np.abs(L).T)).max()


def test_cholesky_matches_numpy(spd_matrix):
    a, cond = spd_matrix
    n = a.shape[0]
    L, report = hs.linalg.cholesky(a, tile=64, device="cpu", full_output=True)
    assert isinstance(L, np.ndarray) and L.dtype == np.float32 and L.shape == (n, n)
    assert np.all(np.triu(L, 1) == 0)
    assert backward_ratio(a, L) <= gamma(n + 1, U32) + U32
    # Forward error: perturbation theory gives ||dL|| / ||L|| <~ kappa(A) ||dA|| / ||A||.
    ref = np.linalg.cholesky(a)
    err = np.linalg.norm(L - ref) / np.linalg.norm(ref)
    assert err <= cond * gamma(n + 1, U32), err
    assert report["policy"] == "uniform:SP"
    # 300 / 64 -> 5 tile rows: 10 off-diagonal tiles, all updated in SP.
    assert sum(report["tiles"].values()) == 10 and report["tiles"].get("SP") == 10
    assert report["attempts"] == 1 and list(report["recoveries"]) == []


def test_cholesky_hp1_is_looser_but_bounded(spd_matrix):
    a, _ = spd_matrix
    n = a.shape[0]
    L, report = hs.linalg.cholesky(a, policy="uniform:HP1", tile=64, device="cpu",
                                   full_output=True)
    assert report["tiles"].get("HP1") == 10
    ratio = backward_ratio(a, L)
    assert ratio <= 2 * U16 + U16 ** 2 + gamma(n + 1, U32) + U32
    # FP16 operands really were used: the backward error is well above FP32's own.
    sp = backward_ratio(a, hs.linalg.cholesky(a, tile=64, device="cpu"))
    assert ratio > 4 * sp


def test_cholesky_scales_small_units_for_fp16(spd_matrix):
    # At 1e-24 the factor's entries (~1e-12) are below FP16's subnormals: unscaled, HP1 flushes
    # its operands to zero; scaled (4^-k A with the largest diagonal in [1, 4)) it keeps the bound.
    a, _ = spd_matrix
    n = a.shape[0]
    small = (a * 1e-24).astype(np.float32).astype(np.float64)
    L, report = hs.linalg.cholesky(small, policy="uniform:HP1", tile=64, device="cpu",
                                   full_output=True)
    d = small.diagonal().max()
    assert 1 <= d * 4.0 ** -report["scaling_exponent"] < 4, report
    assert backward_ratio(small, L) <= 2 * U16 + U16 ** 2 + gamma(n + 1, U32) + U32
    try:
        L0, r0 = hs.linalg.cholesky(small, policy="uniform:HP1", tile=64, device="cpu",
                                    scale=False, full_output=True)
        assert r0["scaling_exponent"] == 0
        assert backward_ratio(small, L0) > 100 * backward_ratio(small, L)
    except hs.NotPositiveDefinite:
        pass


def test_not_positive_definite_names_the_tile(spd_matrix):
    a, _ = spd_matrix
    a = a.copy()
    a[150, 150] = -1e3  # leading minors up to order 150 stay positive: tile (2, 2) fails
    with pytest.raises(hs.NotPositiveDefinite) as info:
        hs.linalg.cholesky(a, tile=64, device="cpu")
    assert isinstance(info.value, hs.NumericalError) and isinstance(info.value, ArithmeticError)
    assert "tile (2, 2)" in str(info.value), str(info.value)


def test_cholesky_report_has_the_copy_fields(spd_matrix):
    """A CPU factorization copies nothing and is never out of core; the fields are there."""
    _, report = hs.linalg.cholesky(spd_matrix[0], tile=64, device="cpu", full_output=True)
    assert report["out_of_core_slabs"] == 0
    for key in ("host_to_device_bytes", "device_to_host_bytes", "device_to_device_bytes"):
        assert report[key] == 0, key


@pytest.mark.parametrize("kwargs,words", [
    (dict(devices=[0], device="cpu"), ["devices=[0]", "expected a GPU run", "device='cpu'"]),
    (dict(devices=[0, 1, 0]), ["devices", "distinct", "found 0 twice"]),
    (dict(devices=[-1]), ["devices", "indices >= 0", "found -1"]),
    (dict(devices=[True]), ["devices", "indices >= 0", "found True"]),
    (dict(devices="0,1"), ["devices", "list of CUDA device indices", "'0,1'"]),
    (dict(devices=3), ["devices", "list of CUDA device indices", "found 3"]),
    (dict(device_memory=-1), ["device_memory", "size in bytes >= 0", "found -1"]),
    (dict(device_memory=1.5e9), ["device_memory", "an integer", "found 1500000000.0"]),
    (dict(device_memory=1 << 30), ["device_memory=1073741824", "device list", "devices=None"]),
])
def test_cholesky_bad_devices_and_budget(spd_matrix, kwargs, words):
    """Refused before any work, with the argument, what was expected and what was found."""
    with pytest.raises(hs.InvalidInput) as info:
        hs.linalg.cholesky(spd_matrix[0], tile=64, **kwargs)
    for w in words:
        assert w in str(info.value), str(info.value)


def test_devices_without_cuda_are_unsupported(spd_matrix, check):
    """A device list asks for the GPU: without one it raises rather than run on the CPU."""
    if hs.cuda_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(hs.Unsupported, match=r"devices=\[0\]: expected a CUDA device"):
        hs.linalg.cholesky(spd_matrix[0], tile=64, devices=[0], device_memory=1 << 20)
    with pytest.raises(hs.Unsupported, match=r"devices=\[0, 1\]: expected a CUDA device"):
        hs.ao.reconstructor(check[0], tile=128, devices=[0, 1])


def test_reconstructor_bad_devices(check):
    system, cov = check
    for source in ((system,), (cov["cmm"], cov["ctm"])):
        with pytest.raises(hs.InvalidInput, match=r"devices=\[0\]: expected a GPU run.*'cpu'"):
            hs.ao.reconstructor(*source, tile=128, device="cpu", devices=[0])
        with pytest.raises(hs.InvalidInput, match="found 1 twice"):
            hs.ao.reconstructor(*source, tile=128, devices=[1, 1])


def test_missing_arguments_and_bad_tiles_name_the_argument(spd_matrix):
    """None where an array belongs is a TypeError naming the argument (not an AttributeError from
    inside the wrapper), a tile size below 1 an InvalidInput naming tile (with a policy function
    it used to divide by zero first)."""
    a = spd_matrix[0]
    with pytest.raises(TypeError, match=r"'a': expected an array.*found None"):
        hs.linalg.cholesky(None)
    with pytest.raises(TypeError, match=r"'b': expected an array.*found None"):
        hs.linalg.solve(a, None)
    with pytest.raises(TypeError, match=r"'ctm': expected the \(m, n\) Ctm matrix.*found None"):
        hs.ao.reconstructor(a, None)
    with pytest.raises(TypeError, match=r"'system': expected a system.*found ndarray"):
        hs.ao.covariance(a)
    for tile in (0, -64, 2.5, True):
        for call in (lambda: hs.linalg.cholesky(a, tile=tile, policy=lambda *q: "SP"),
                     lambda: hs.linalg.cholesky(a, tile=tile),
                     lambda: hs.linalg.solve(a, a[:, 0], tile=tile),
                     lambda: hs.ao.reconstructor(a, a[:5], tile=tile, policy=lambda *q: "SP")):
            with pytest.raises(hs.InvalidInput) as info:
                call()
            assert "tile" in str(info.value) and repr(tile) in str(info.value), str(info.value)


@pytest.mark.parametrize("columns", [None, 3])
def test_solve_matches_numpy(spd_matrix, rng, columns):
    a, cond = spd_matrix
    n = a.shape[0]
    b = rng.standard_normal(n if columns is None else (n, columns))
    x = hs.linalg.solve(a, b, tile=64, device="cpu")
    assert x.dtype == np.float32 and x.shape == b.shape
    x64 = x.astype(np.float64)
    # ||A||_2 = its largest eigenvalue = cond (the fixture's spectrum is [1, cond]).
    residual = np.linalg.norm(a @ x64 - b) / (cond * np.linalg.norm(x64))
    assert residual <= gamma(3 * n + 1, U32) + U32
    ref = np.linalg.solve(a, b)
    assert np.linalg.norm(x64 - ref) / np.linalg.norm(ref) <= cond * gamma(3 * n + 1, U32)


def valid_subapertures(diameter, obstruction, nssp):
    """Subapertures of a Nssp x Nssp grid over the pupil whose centre lies in the annulus
    (D obs / 2)^2 <= r^2 < (D / 2)^2 (docs/ao.md's valid-subaperture rule)."""
    c = (np.arange(nssp) + 0.5) * diameter / nssp - diameter / 2
    r2 = c[:, None] ** 2 + c[None, :] ** 2
    return int((((diameter * obstruction / 2) ** 2 <= r2) & (r2 < (diameter / 2) ** 2)).sum())


@pytest.fixture(scope="module")
def check():
    """The check preset and its FP64 covariances (n = 912 measurements, m = 152 truth slopes)."""
    system = hs.ao.system("check")
    cov = {kind: hs.ao.covariance(system, kind, device="cpu") for kind in ("cmm", "ctm", "ctt")}
    cov["cmm_eigenvalues"] = np.linalg.eigvalsh(cov["cmm"])  # once: O(n^3)
    return system, cov


def sensor_slopes(system, sensor):
    tel = system["telescope"]
    return 2 * valid_subapertures(tel["diameter_m"], tel["obstruction"], sensor["subapertures"])


def test_system_dict(check):
    system, _ = check
    assert system["format"] == "halfscope-ao-system"
    assert len(system["sensors"]) == 6 and system["truth"]["guide_star"] == "ngs"
    assert sum(sensor_slopes(system, s) for s in system["sensors"]) == 912
    assert sensor_slopes(system, system["truth"]) == 152
    with pytest.raises(hs.InvalidInput):
        broken = copy.deepcopy(system)
        broken["atmosphere"]["r0_m"] = -1.0
        hs.ao.system(broken)


def test_covariance_shapes_symmetry_and_definiteness(check):
    _, cov = check
    cmm, ctm, ctt = cov["cmm"], cov["ctm"], cov["ctt"]
    assert cmm.shape == (912, 912) and ctm.shape == (152, 912) and ctt.shape == (152, 152)
    assert cmm.dtype == ctm.dtype == ctt.dtype == np.float64
    for c in (cmm, ctt):
        np.testing.assert_allclose(c, c.T, rtol=0, atol=1e-14 * np.abs(c).max())
    assert cov["cmm_eigenvalues"].min() > 0  # SPD with the noise model
    assert np.linalg.eigvalsh(ctt).min() > -1e-12 * np.abs(ctt).max()  # a covariance: PSD
    f32 = hs.ao.covariance(check[0], "cmm", dtype="float32", device="cpu")
    assert f32.dtype == np.float32
    np.testing.assert_array_equal(f32, cmm.astype(np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.dtype("float32"), "f4", "float32"])
def test_covariance_dtype_as_numpy_dtype_or_name(check, dtype):
    want = hs.ao.covariance(check[0], "ctm", dtype="float32", device="cpu")
    got = hs.ao.covariance(check[0], "ctm", dtype=dtype, device="cpu")
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    with pytest.raises(hs.InvalidInput, match="float16"):
        hs.ao.covariance(check[0], "ctm", dtype=np.float16, device="cpu")


def test_noise_enters_only_the_sensors_own_blocks(check):
    """Noise is per sensor (docs/ao.md): without it Cmm changes only in the diagonal sensor blocks,
    by a positive diagonal; Ctm and Ctt (the truth sensor is noise-free) do not change."""
    system, cov = check
    quiet = {k: hs.ao.covariance(system, k, noise=False, device="cpu") for k in ("cmm", "ctm")}
    np.testing.assert_array_equal(quiet["ctm"], cov["ctm"])
    diff = cov["cmm"] - quiet["cmm"]
    block = np.zeros_like(diff, dtype=bool)
    start = 0
    for sensor in system["sensors"]:
        size = sensor_slopes(system, sensor)
        block[start:start + size, start:start + size] = True
        start += size
    assert np.all(diff[~block] == 0)
    assert np.all(np.diag(diff) > 0)


def test_moving_one_sensor_changes_only_its_columns_of_ctm(check):
    system, cov = check
    moved = copy.deepcopy(system)
    k = 4
    moved["sensors"][k]["x_arcsec"] *= 0.9  # towards the axis: still inside the field
    moved["sensors"][k]["y_arcsec"] *= 0.9
    ctm = hs.ao.covariance(moved, "ctm", device="cpu")
    start = sum(sensor_slopes(system, s) for s in system["sensors"][:k])
    cols = np.zeros(912, bool)
    cols[start:start + sensor_slopes(system, system["sensors"][k])] = True
    scale = np.abs(cov["ctm"]).max()
    assert np.abs(ctm[:, ~cols] - cov["ctm"][:, ~cols]).max() <= 1e-12 * scale
    assert np.abs(ctm[:, cols] - cov["ctm"][:, cols]).max() > 1e-6 * scale


def test_reconstructor_from_matrices_matches_numpy(check):
    """R = Ctm Cmm^-1 by the FP32 tile Cholesky: backward stable (the relative residual is within
    gamma_{3n+1}(u32)). Its forward error is not tested here: kappa(Cmm) is ~5.5e6 on check (the
    LGS tip-tilt constants), so kappa n u32 > 1 and any forward bound would be vacuous (the next
    test checks it on a matrix of condition 1e3)."""
    _, cov = check
    cmm, ctm = cov["cmm"], cov["ctm"]
    n = cmm.shape[0]
    r = hs.ao.reconstructor(cmm, ctm, tile=128, device="cpu")
    assert r.dtype == np.float32 and r.shape == (152, 912)
    r64 = r.astype(np.float64)
    eig = cov["cmm_eigenvalues"]  # ||Cmm||_2 = the largest (SPD)
    residual = np.linalg.norm(r64 @ cmm - ctm) / (np.linalg.norm(r64) * eig.max())
    assert residual <= gamma(3 * n + 1, U32) + U32, residual
    ref = np.linalg.solve(cmm, ctm.T).T
    kappa = eig.max() / eig.min()
    fp64 = hs.ao.reconstructor_fp64(cmm, ctm, device="cpu")
    assert fp64.dtype == np.float64 and fp64.shape == (152, 912)
    # Both FP64 solves are within kappa gamma_{3n+1}(u64) (~1e-6 here) of the exact R (normwise).
    u64 = 2.0 ** -53
    assert np.linalg.norm(fp64 - ref) / np.linalg.norm(ref) <= 2 * kappa * gamma(3 * n + 1, u64)


@pytest.mark.parametrize("cmm_shape,ctm_shape,words", [
    ((0, 0), (0, 0), ["cmm", "non-empty", "[0, 0]"]),
    ((3, 3), (0, 3), ["ctm", "non-empty", "[0, 3]"]),
    ((3, 3), (2, 0), ["ctm", "non-empty", "[2, 0]"]),
    ((3, 3), (2, 4), ["ctm", "2 x 3", "[2, 4]"]),
    ((3, 4), (2, 4), ["cmm", "square", "[3, 4]"]),
    ((3,), (2, 3), ["cmm", "2-D", "[3]"]),
])
def test_reconstructor_fp64_checks_its_inputs_before_lapack(capfd, cmm_shape, ctm_shape, words):
    """Empty and mismatched matrices are InvalidInput naming the argument; LAPACK is never
    reached (it would print '** On entry to DPOSV ...' and fail with a bare hs.Error)."""
    cmm = np.eye(cmm_shape[0], *cmm_shape[1:]) if len(cmm_shape) == 2 else np.ones(cmm_shape)
    with pytest.raises(hs.InvalidInput) as info:
        hs.ao.reconstructor_fp64(cmm, np.ones(ctm_shape), device="cpu")
    for w in words:
        assert w in str(info.value), str(info.value)
    assert "DPOSV" not in capfd.readouterr().err


def test_reconstructor_fp64_and_evaluate_take_integer_arrays(check):
    """Any real dtype, as hs.ao.reconstructor: integers are converted to float64."""
    cmm = 4 * np.eye(6, dtype=np.int64) + 1
    ctm = np.arange(12, dtype=np.int32).reshape(2, 6)
    np.testing.assert_array_equal(hs.ao.reconstructor_fp64(cmm, ctm, device="cpu"),
                                  hs.ao.reconstructor_fp64(cmm.astype(float), ctm.astype(float),
                                                           device="cpu"))
    zero = np.zeros((152, 912), dtype=np.int16)  # R = 0: the error is Ctt's trace
    got = hs.ao.evaluate(check[0], zero, psf_size=64, device="cpu")
    want = hs.ao.evaluate(check[0], zero.astype(np.float64), psf_size=64, device="cpu")
    assert got["tomographic_error_nm"] == want["tomographic_error_nm"] > 0
    with pytest.raises(hs.InvalidInput, match="'reconstructor'.*complex"):
        hs.ao.evaluate(check[0], zero.astype(complex), psf_size=64, device="cpu")


def test_reconstructor_forward_error_within_kappa(spd_matrix, rng):
    a, cond = spd_matrix
    n = a.shape[0]
    ctm = rng.standard_normal((40, n))
    r = hs.ao.reconstructor(a, ctm, tile=64, device="cpu").astype(np.float64)
    ref = np.linalg.solve(a, ctm.T).T
    assert np.linalg.norm(r - ref) / np.linalg.norm(ref) <= cond * (gamma(3 * n + 1, U32) + U32)


def test_reconstructor_from_system_and_evaluate(check):
    system, cov = check
    r_sys = hs.ao.reconstructor(system, tile=128, device="cpu")
    assert r_sys.shape == (152, 912) and np.all(np.isfinite(r_sys))
    r_fp64 = hs.ao.reconstructor_fp64(cov["cmm"], cov["ctm"], device="cpu")
    r_hp1 = hs.ao.reconstructor(cov["cmm"], cov["ctm"], policy="uniform:HP1", tile=128,
                                device="cpu")
    # FP16 C tiles (HP2) lose positive definiteness on check; with recover the failing tiles are
    # promoted to safer variants and the factorization retried (one report line each). (HP3 does
    # the same in 7 attempts but its all-FP16 CPU emulation takes ~70 s at n = 912: too slow here.)
    r_hp2, report = hs.ao.reconstructor(cov["cmm"], cov["ctm"], policy="uniform:HP2",
                                        recover=True, tile=128, device="cpu", full_output=True)
    assert report["attempts"] == len(report["recoveries"]) + 1 >= 2
    best = hs.ao.evaluate(system, r_fp64, psf_size=64, device="cpu")
    for r in (r_sys, r_hp1, r_hp2):
        ev = hs.ao.evaluate(system, r, psf_size=64, device="cpu")
        for key in ("strehl_marechal", "strehl_otf"):
            assert 0 < ev[key] <= 1
        # Marechal's approximation from the reported error, recomputed here.
        sigma = ev["tomographic_error_nm"] * 1e-9
        assert ev["strehl_marechal"] == pytest.approx(
            math.exp(-(2 * math.pi * sigma / ev["wavelength_m"]) ** 2), rel=1e-12)
        # R* = Ctm Cmm^-1 minimises the error: any other R adds (R - R*) Cmm (R - R*)^T, PSD.
        # The margin 1e-9 is far above the FP64 rounding of sigma^2 (~n u64 ||Ctt|| / ||Cee||
        # ~ 1e-11) and far below what a reconstructor off by FP32 / FP16 rounding adds (~1e-5).
        assert ev["tomographic_error_nm"] >= best["tomographic_error_nm"] * (1 - 1e-9)
        assert ev["strehl_marechal"] <= best["strehl_marechal"] * (1 + 1e-9)
    assert best["error_covariance"].shape == (152, 152)
    assert best["psf"].shape == best["psf_diffraction"].shape == (64, 64)
