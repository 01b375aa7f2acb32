"""`halfscope ao covariance` against independent references: the slope covariances of a small system
against aotools' slope-covariance model, the symmetry and positive definiteness of the Cmm the CLI
writes, and the error exits for bad systems (exit 2, the message names the field, no output left).
The structure function is in test_ao_structure_function_cli.py, `ao evaluate` in
test_ao_evaluate_cli.py."""
import json
import math
import os

import pytest

np = pytest.importorskip("numpy")
# The von Karman constants K1, G0 (ao_helpers; the structure function itself is checked against
# SciPy in test_ao_structure_function_cli.py) and the subaperture geometry valid_centres.
from ao_helpers import CLI, G0, K1, assert_bad_input, run, valid_centres  # noqa: E402

pytestmark = pytest.mark.skipif(not CLI, reason="HALFSCOPE_CLI is not set (run through ctest)")


# ----------------------------------------------------------------------------------------------
# Systems written here by hand (halfscope's JSON format), so that the geometry below is known
# independently of halfscope's presets.

# Radians per arcsec in the MOAO model's convention, 1 / 206265 (the exact 1 / 206264.806 moves a
# 40" pointing by 1e-6 relative, which shows at 1e-6 in the covariances of high layers).
ARCSEC = 1 / 206265


def sensor(name, star, x, y, nssp=8):
    s = {"name": name, "guide_star": star, "x_arcsec": x, "y_arcsec": y, "subapertures": nssp,
         "pupil_shift_x_m": 0.0, "pupil_shift_y_m": 0.0, "rotation_deg": 0.0,
         "wavelength_m": 0.65e-6 if star == "ngs" else 0.589e-6, "pixel_arcsec": 0.3,
         "readout_noise_e": 0.2, "throughput": 0.3}
    if star == "ngs":
        s["magnitude"] = 11.0
    else:
        s.update({"lgs_altitude_m": 90e3, "lgs_depth_m": 10e3, "lgs_flux": 7e6,
                  "spot_fwhm_arcsec": 1.0, "lgs_tiptilt_arcsec2": 0.0})
    return s


def small_system(layers, lgs=True, noise=False, r0=0.15):
    """D = 10 m, obstruction 0.15, 8 subapertures across: 3 LGS (or NGS) on a 40" ring, 2 NGS,
    an on-axis-ish truth sensor. `layers`: (altitude m, fraction, L0 m) triples."""
    ring = [(40 * math.cos(a), 40 * math.sin(a)) for a in (0.3, 0.3 + 2 * math.pi / 3, 0.3 + 4 * math.pi / 3)]
    star = "lgs" if lgs else "ngs"
    sensors = [sensor(f"GS{i}", star, x, y) for i, (x, y) in enumerate(ring)]
    sensors += [sensor("NGS1", "ngs", -25.0, 35.0), sensor("NGS2", "ngs", 30.0, -20.0)]
    return {"name": "test-small", "telescope": {"diameter_m": 10.0, "obstruction": 0.15},
            "field_radius_arcsec": 60.0, "sensors": sensors, "truth": sensor("truth", "ngs", 5.0, -3.0),
            "atmosphere": {"r0_m": r0, "layers": [
                {"altitude_m": h, "fraction": f, "outer_scale_m": L0} for h, f, L0 in layers]},
            "noise": {"enabled": noise, "frame_time_s": 0.004, "bandwidth_m": 3e-7,
                      "atmosphere_throughput": 0.84}}


def covariance_files(tmp_path, system, *extra, name="sys"):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(system))
    out = tmp_path / f"{name}-out"
    res = run("--device", "cpu", "ao", "covariance", path, "-o", out, "--dtype", "f64", *extra)
    assert res.returncode == 0, res.stderr
    return {k: np.load(out / f"{k}.npy") for k in ("cmm", "ctm", "ctt")}


# ----------------------------------------------------------------------------------------------
# (b) The covariances against aotools (Martin et al., SPIE 2012), layer by layer.
#
# What aotools computes and how it maps to halfscope (read from aotools/turbulence/
# slopecovariance.py, version 1.0.8):
#  - wfs_covariance(n1, n2, pos1, pos2, s1, s2, r0, L0) returns, for two WFS with subaperture
#    centres pos (metres on the layer, columns = the two axes) and subaperture sizes s on the layer,
#    three n1 x n2 arrays built from its own structure_function_vk with separations pos2 - pos1:
#    xx = -2 D(sep_x + (s2-s1)/2) + D(sep_x - (s1+s2)/2) + D(sep_x + (s1+s2)/2) (at sep_y), yy alike,
#    xy = 4 D terms. With Cov(a-b, c-d) = [D(a-d) + D(b-c) - D(a-c) - D(b-d)] / 2 these are
#    2 Cov(dphi_x,i, dphi_x,j) etc. of phase differences across the subapertures when s1 = s2; for
#    s1 != s2 (LGS against NGS on a layer above the ground) its 3-term xx / yy is a different model
#    from the exact 4-term one halfscope uses. There the test evaluates the exact bracket itself
#    with aotools' own structure_function_vk (four_term_bracket below), so every entry is compared.
#    xy(i, j) is Cov(x-slope of i, y-slope of j) (halfscope's xy block); yx(i, j) = xy(j, i).
#  - Its structure_function_vk uses the rounded constant 0.17253 for k1 Gamma(5/6) 2^(-1/6)
#    = 0.172628...: its values are rescaled by the exact constant / 0.17253 (a 5.7e-4 change).
#  - Its r0 is the layer's own: r0_l = (fraction r0^(-5/3))^(-3/5), at 500 nm.
#  - Units: a slope is the optical path difference across the PUPIL subaperture d divided by d
#    (the layer-projected size s only sets where the phase is sampled), in arcsec. With the phase
#    at lambda = 500 nm, Cov(slopes) = (206265 lambda / 2 pi)^2 / (d_i d_j) x Cov(dphi_i, dphi_j)
#    and aotools' bracket is 2 Cov(dphi_i, dphi_j), so halfscope = 206265^2 lambda^2 /
#    (8 pi^2 d_i d_j) x aotools' bracket. (CovarianceMatrix itself
#    divides by the projected s_i s_j instead, puts subaperture centres at idx d - D/2 - d/2, and
#    mirrors its float32 matrix with a bitwise OR of the two triangles, so its assembly is not used;
#    its per-pair engine wfs_covariance is the independent part.)
#  - The geometry (valid subapertures, cone effect s = d (1 - h/H), shift h alpha) is written in
#    this test (valid_centres and below) from the model's definition, not taken from halfscope.

LAMBDA = 0.5e-6
K_EXACT = K1 * G0  # what aotools rounds to 0.17253


def aotools_slopecovariance():
    """aotools' module; in CI it must be there (requirements.txt), elsewhere the test skips."""
    if os.environ.get("CI"):
        import aotools.turbulence.slopecovariance as sc
        return sc
    return pytest.importorskip("aotools.turbulence.slopecovariance")


def four_term_bracket(sc, pos1, pos2, s1, s2, r0, L0, axis):
    """2 Cov(dphi_i, dphi_j) of the phase differences along `axis` (0: x, 1: y) across two
    subapertures of sizes s1 and s2, from Cov(a - b, c - d) = [D(a-d) + D(b-c) - D(a-c) - D(b-d)] / 2
    with a, b = p_i +- s1/2 and c, d = p_j +- s2/2 on the axis: with sep = p_j - p_i,
    D(sep - S) + D(sep + S) - D(sep + Delta) - D(sep - Delta), S = (s1 + s2) / 2,
    Delta = (s2 - s1) / 2 (aotools' compute_covariance_xx has -2 D(sep + Delta), equal for
    s1 = s2). D is aotools' structure_function_vk, on aotools' separations."""
    sep = sc.calculate_wfs_seperations(len(pos1), len(pos2), pos1, pos2)
    other = sep[..., 1 - axis]

    def d(shift):
        along = sep[..., axis] + shift
        return sc.structure_function_vk(np.sqrt(along ** 2 + other ** 2), r0, L0)

    big, small = (s1 + s2) / 2, (s2 - s1) / 2
    return d(-big) + d(big) - d(small) - d(-small)


def aotools_reference(system):
    sc = aotools_slopecovariance()
    (layer,) = system["atmosphere"]["layers"]
    h, fraction, L0 = layer["altitude_m"], layer["fraction"], layer["outer_scale_m"]
    r0_layer = (fraction * system["atmosphere"]["r0_m"] ** (-5 / 3)) ** (-3 / 5)
    diameter = system["telescope"]["diameter_m"]
    sensors = system["sensors"] + [system["truth"]]
    pos, size, pitch = [], [], []
    for s in sensors:
        d = diameter / s["subapertures"]
        scale = 1 - h / s["lgs_altitude_m"] if s["guide_star"] == "lgs" else 1.0
        centres = valid_centres(diameter, system["telescope"]["obstruction"], s["subapertures"])
        pos.append(scale * centres + h * ARCSEC * np.array([s["x_arcsec"], s["y_arcsec"]]))
        size.append(d * scale)
        pitch.append(d)
    rows, unequal = [], 0
    for a in range(len(sensors)):
        row = []
        for b in range(len(sensors)):
            na, nb = len(pos[a]), len(pos[b])
            xx, yy, xy = sc.wfs_covariance(na, nb, pos[a], pos[b], size[a], size[b], r0_layer, L0)
            _, _, xy_ba = sc.wfs_covariance(nb, na, pos[b], pos[a], size[b], size[a], r0_layer, L0)
            if not math.isclose(size[a], size[b], rel_tol=1e-15):  # aotools' 3-term xx / yy
                xx = four_term_bracket(sc, pos[a], pos[b], size[a], size[b], r0_layer, L0, 0)
                yy = four_term_bracket(sc, pos[a], pos[b], size[a], size[b], r0_layer, L0, 1)
                unequal += 1
            factor = (206265 * LAMBDA) ** 2 / (8 * math.pi ** 2 * pitch[a] * pitch[b]) * K_EXACT / 0.17253
            row.append(factor * np.block([[xx, xy], [xy_ba.T, yy]]))
        rows.append(row)
    full = np.block(rows)  # every entry is compared

    # Error budget: an entry is factor x (a signed sum of 4 values of D), each at most D_sat =
    # K_EXACT (L0/r0_l)^(5/3) (the saturation of D). Allow each side an absolute error of
    # 1e-14 D_sat per D value (~45 ulp: halfscope's D is good to ~3e-16, aotools' goes through
    # SciPy's kv, two powers and 1 - c x^(5/6) K(x)); both sides, 4 terms: 8e-14 D_sat x factor.
    # Measured: about half of that at most (0.04 to 0.53 of it over the six layers tested).
    factor = (206265 * LAMBDA) ** 2 / (8 * math.pi ** 2 * min(pitch) ** 2)
    tolerance = 8e-14 * K_EXACT * (L0 / r0_layer) ** (5 / 3) * factor
    # `unequal`: the sensor pairs (LGS x NGS above the ground) whose xx / yy are four_term_bracket.
    return full, tolerance, sum(len(p) for p in pos[:-1]) * 2, unequal


def compare_with_aotools(tmp_path, system, name):
    ours = covariance_files(tmp_path, system, "--no-noise", name=name)
    ref, tolerance, n, unequal = aotools_reference(system)
    assert ours["cmm"].shape == (n, n) and ours["ctt"].shape[0] == ref.shape[0] - n
    whole = np.block([[ours["cmm"], ours["ctm"].T], [ours["ctm"], ours["ctt"]]])
    diff = np.abs(whole - ref)
    assert diff.max() <= tolerance, (name, diff.max(), tolerance, np.abs(ref).max())
    return unequal
    # The comparison is not vacuous: entries are far above the tolerance.
    assert np.abs(ref).max() > 1e6 * tolerance


@pytest.mark.parametrize("altitude, L0", [(0.0, 25.0), (4500.0, 30.0), (12000.0, 50.0)])
def test_covariance_ngs_layer_matches_aotools(tmp_path, altitude, L0):
    system = small_system([(altitude, 1.0, L0)], lgs=False)
    compare_with_aotools(tmp_path, system, f"ngs-{int(altitude)}")


@pytest.mark.parametrize("altitude, L0", [(0.0, 25.0), (4500.0, 30.0), (12000.0, 50.0)])
def test_covariance_lgs_layer_matches_aotools(tmp_path, altitude, L0):
    system = small_system([(altitude, 1.0, L0)], lgs=True)
    unequal = compare_with_aotools(tmp_path, system, f"lgs-{int(altitude)}")
    # Above the ground the 3 LGS (cone-shrunk subapertures) against the 2 NGS and the truth sensor
    # both ways: 3 x 3 x 2 = 18 pairs go through the exact 4-term bracket.
    assert unequal == (18 if altitude > 0 else 0)


def test_covariance_sums_layers(tmp_path):
    # Two layers at once = the sum of the two single-layer systems with their fractions (the model
    # is linear in Cn2): ties the per-layer comparisons above to multi-layer profiles.
    two = covariance_files(tmp_path, small_system([(0.0, 0.7, 25.0), (9000.0, 0.3, 40.0)]), "--no-noise",
                           name="two")
    r0 = 0.15
    # A layer with fraction f alone in a system of r0' = f^(-3/5) r0 has the same cn2.
    a = covariance_files(tmp_path, small_system([(0.0, 1.0, 25.0)], r0=0.7 ** (-3 / 5) * r0), "--no-noise",
                         name="a")
    b = covariance_files(tmp_path, small_system([(9000.0, 1.0, 40.0)], r0=0.3 ** (-3 / 5) * r0), "--no-noise",
                         name="b")
    for k in ("cmm", "ctm", "ctt"):
        scale = np.abs(two[k]).max()
        assert np.abs(two[k] - a[k] - b[k]).max() <= 1e-13 * scale, k


# ----------------------------------------------------------------------------------------------
# (c) Cmm as written: symmetric, positive definite with noise; FITS carries units and names.

def test_cmm_symmetric_positive_definite(tmp_path):
    system = small_system([(0.0, 0.6, 25.0), (6000.0, 0.25, 25.0), (14000.0, 0.15, 25.0)], noise=True)
    for dtype, eps in (("f64", 2.0 ** -53), ("f32", 2.0 ** -24)):
        path = tmp_path / "sys.json"
        path.write_text(json.dumps(system))
        out = tmp_path / f"out-{dtype}"
        res = run("--device", "cpu", "ao", "covariance", path, "-o", out, "--kinds", "cmm", "--dtype", dtype)
        assert res.returncode == 0, res.stderr
        n = 2 * len(system["sensors"]) * len(valid_centres(10.0, 0.15, 8))  # 2 x 5 x 52 = 520
        assert f"n = {n} " in res.stdout and f"cmm: {n} x {n}" in res.stdout
        assert sorted(p.name for p in out.iterdir()) == ["cmm.npy"]
        cmm = np.load(out / "cmm.npy").astype(np.float64)
        # Each element is computed in FP64 with the terms in a different order in the two triangles
        # (a few ulp of the largest term, <= 1e-13 of max|C| here), then rounded once to dtype.
        assert np.abs(cmm - cmm.T).max() <= (1e-13 + 2 * eps) * np.abs(cmm).max()
        lower = np.linalg.cholesky(cmm)  # raises LinAlgError unless positive definite
        assert np.all(np.diag(lower) > 0)
        assert np.linalg.eigvalsh((cmm + cmm.T) / 2).min() > 0


def test_covariance_fits_has_units_and_names(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    path = tmp_path / "sys.json"
    path.write_text(json.dumps(small_system([(0.0, 1.0, 25.0)], noise=True)))
    out = tmp_path / "out"
    res = run("--device", "cpu", "ao", "covariance", path, "-o", out, "--format", "fits", "--dtype", "f32")
    if res.returncode == 2 and "FITS" in res.stderr:
        pytest.skip("built without FITS support")
    assert res.returncode == 0, res.stderr
    npy = tmp_path / "npy"
    assert run("--device", "cpu", "ao", "covariance", path, "-o", npy, "--dtype", "f32").returncode == 0
    for kind in ("cmm", "ctm", "ctt"):
        with fits.open(out / f"{kind}.fits") as hdul:
            header, data = hdul[0].header, hdul[0].data
            assert header["BUNIT"] == "arcsec**2" and header["AOKIND"] == kind
            assert header["AOSYSTEM"] == "sys.json" and header["AONOISE"] is True
            assert np.array_equal(data, np.load(npy / f"{kind}.npy"))


# ----------------------------------------------------------------------------------------------
# (d) Bad systems: exit 2, one line naming the field, nothing written.

def edit(system, path, value):
    node = system
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return system


@pytest.mark.parametrize(
    "path, value, words",
    [
        (("atmosphere", "r0_m"), -0.15, ["atmosphere.r0_m", "-0.15"]),
        (("sensors", 1, "subapertures"), 0, ["sensors[1].subapertures", "0"]),
        # 1 across: the single centre is on axis, behind the 0.15 obstruction: no slope at all.
        (("sensors", 1, "subapertures"), 1, ["sensors[1].subapertures", "at least one valid"]),
        # 8 across, obstruction 0.99: (0.99 x 8)^2 = 62.7 <= k < 64 has no sum of two odd squares.
        (("telescope", "obstruction"), 0.99, ["sensors[0].subapertures", "obstruction 0.99"]),
        (("sensors", 0, "lgs_altitude_m"), 8000.0, ["sensors[0].lgs_altitude_m", "8000"]),
        (("sensors", 3, "x_arcsec"), 200.0, ["sensors[3]", "field"]),
    ],
)
def test_bad_system_exits_2_naming_the_field(tmp_path, path, value, words):
    system = edit(small_system([(0.0, 0.8, 25.0), (12000.0, 0.2, 25.0)]), path, value)
    src = tmp_path / "bad.json"
    src.write_text(json.dumps(system))
    out = tmp_path / "out"
    assert_bad_input(run("ao", "covariance", src, "-o", out), "bad.json", *words)
    assert not out.exists()


def test_bad_arguments_exit_2(tmp_path):
    src = tmp_path / "sys.json"
    src.write_text(json.dumps(small_system([(0.0, 1.0, 25.0)])))
    out = tmp_path / "out"
    assert_bad_input(run("ao", "covariance", src, "-o", out, "--kinds", "cmm,cxx"), "--kinds", "cxx")
    assert_bad_input(run("ao", "covariance", src, "-o", out, "--dtype", "f16"), "--dtype", "f16")
    assert_bad_input(run("ao", "covariance", src, "-o", out, "--format", "csv"), "--format", "csv")
    assert_bad_input(run("ao", "covariance", "preset:nosuch", "-o", out), "nosuch")
    assert_bad_input(run("ao", "covariance", "preset:check:7", "-o", out), "7")
    assert_bad_input(run("ao", "covariance", src, "--atmosphere", src, "-o", out), "--atmosphere")
    assert not out.exists()


def test_preset_check_sizes(tmp_path):
    out = tmp_path / "out"
    res = run("ao", "covariance", "preset:check", "-o", out, "--kinds", "ctt,ctm", "--dtype", "f32")
    assert res.returncode == 0, res.stderr
    assert "n = 912" in res.stdout and "m = 152" in res.stdout
    assert np.load(out / "ctm.npy").shape == (152, 912)
    assert np.load(out / "ctt.npy").shape == (152, 152)
    assert not (out / "cmm.npy").exists()


def test_moao_text_system_with_atmosphere_file(tmp_path):
    data = os.path.join(os.environ.get("HALFSCOPE_SOURCE_DIR", os.getcwd()), "tests", "data", "ao")
    system = os.path.join(data, "full-sys-params.txt")
    atmosphere = os.path.join(data, "prof-test-atmos-night0.txt")
    if not os.path.exists(system):
        pytest.skip("tests/data/ao not found (set HALFSCOPE_SOURCE_DIR)")
    out = tmp_path / "out"
    res = run("--device", "cpu", "ao", "covariance", system, "--atmosphere", atmosphere, "-o", out)
    assert res.returncode == 0, res.stderr
    cmm, ctm, ctt = (np.load(out / f"{k}.npy") for k in ("cmm", "ctm", "ctt"))
    n, m = cmm.shape[0], ctt.shape[0]
    assert f"n = {n} " in res.stdout and f"m = {m} " in res.stdout and ctm.shape == (m, n)
    np.linalg.cholesky(cmm)  # with noise: positive definite
    # The full MOAO layout has no atmosphere of its own: without the file, exit 2 naming the file.
    missing = tmp_path / "missing"
    assert_bad_input(run("ao", "covariance", system, "-o", missing), "full-sys-params.txt", "atmosphere")
    assert not missing.exists()
