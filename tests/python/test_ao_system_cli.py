"""`halfscope simulate ao-system`: the presets as JSON that any JSON reader loads, with the sizes
MOAO's configurations are named by, counted here independently from the JSON's own geometry
(NumPy, positions in metres); bad presets exit 2 and leave no file, a failed write leaves the
older file. System files `ao covariance` refuses (exit 2 naming the field), and the note printed
for MOAO's short layout."""
import json
import os
import re

import pytest

np = pytest.importorskip("numpy")
from ao_helpers import CLI, assert_bad_input, valid_centres  # noqa: E402
from ao_helpers import run as run_cli  # noqa: E402

pytestmark = pytest.mark.skipif(not CLI, reason="HALFSCOPE_CLI is not set (run through ctest)")


def run(*args, cwd=None):
    return run_cli(*args, cwd=cwd, timeout=300)


def valid_subapertures(diameter, obstruction, n):
    """How many subapertures of an n x n grid of pitch D/n centred on the pupil are valid,
    (D obs / 2)^2 <= r^2 < (D / 2)^2 (ao_helpers.valid_centres)."""
    return len(valid_centres(diameter, obstruction, n))


@pytest.mark.parametrize(
    "preset,layers,sensors,per_sensor,n,m",
    [
        ("check", 10, 6, 76, 912, 152),
        ("mid", 60, 8, 640, 10240, 1280),
        ("eelt", 10, 9, 5576, 100368, 11152),
        ("eelt", 60, 9, 5576, 100368, 11152),
    ],
)
def test_presets_write_valid_json_with_the_right_sizes(
    tmp_path, preset, layers, sensors, per_sensor, n, m
):
    out = tmp_path / "system.json"
    r = run("simulate", "ao-system", "--preset", preset, "--layers", layers, "-o", out)
    assert r.returncode == 0, r.stderr
    with open(out) as f:
        system = json.load(f)
    assert system["format"] == "halfscope-ao-system"
    tel = system["telescope"]
    assert len(system["sensors"]) == sensors
    counts = [
        valid_subapertures(tel["diameter_m"], tel["obstruction"], s["subapertures"])
        for s in system["sensors"]
    ]
    assert counts == [per_sensor] * sensors
    assert 2 * sum(counts) == n
    truth = system["truth"]
    assert 2 * valid_subapertures(tel["diameter_m"], tel["obstruction"], truth["subapertures"]) == m
    assert truth["guide_star"] == "ngs" and truth["x_arcsec"] == 0 and truth["y_arcsec"] == 0
    layers_json = system["atmosphere"]["layers"]
    assert len(layers_json) == layers
    assert abs(sum(l["fraction"] for l in layers_json) - 1) < 1e-12
    # Every LGS above every layer, every pointing inside the field.
    top = max(l["altitude_m"] for l in layers_json)
    for s in system["sensors"]:
        assert np.hypot(s["x_arcsec"], s["y_arcsec"]) <= system["field_radius_arcsec"]
        if s["guide_star"] == "lgs":
            assert s["lgs_altitude_m"] > top
    assert str(n) in r.stderr and str(m) in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["system.json"]


def test_ten_layer_profile_is_the_public_one(tmp_path):
    out = tmp_path / "check.json"
    assert run("simulate", "ao-system", "--preset", "check", "-o", out).returncode == 0
    atmosphere = json.loads(out.read_text())["atmosphere"]
    heights = [l["altitude_m"] for l in atmosphere["layers"]]
    assert heights == [30, 200, 390, 1880, 4500, 7500, 10500, 13500, 16500, 19500]
    assert all(l["outer_scale_m"] == 25 for l in atmosphere["layers"])
    assert abs(atmosphere["r0_m"] - 0.128916) < 1e-6


def test_bad_preset_exits_2_listing_the_presets_and_writes_nothing(tmp_path):
    out = tmp_path / "system.json"
    r = run("simulate", "ao-system", "--preset", "vlt", "-o", out)
    assert_bad_input(r, "--preset", "check", "mid", "eelt", '"vlt"')
    r = run("simulate", "ao-system", "--preset", "eelt", "--layers", "35", "-o", out)
    assert_bad_input(r, "--layers", "10 or 60")
    assert list(tmp_path.iterdir()) == []


def test_output_is_not_replaced_on_failure(tmp_path):
    # A write that fails half-way: the preset's JSON (several KiB) against a 1000-byte file-size
    # limit (EFBIG, SIGXFSZ ignored so the writer sees the error). The target holds an earlier
    # system; a writer that truncated it before writing would leave 1000 bytes of the new one.
    pytest.importorskip("resource")
    out = tmp_path / "system.json"
    assert run("simulate", "ao-system", "--preset", "mid", "-o", out).returncode == 0
    before = out.read_bytes()
    assert len(before) > 1000
    r = run_cli("simulate", "ao-system", "--preset", "check", "-o", out, timeout=300, file_limit=1000)
    assert r.returncode == 2, r.stderr
    assert "system.json" in r.stderr
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["system.json"]  # no temporary left
    folder = tmp_path / "a-folder"
    folder.mkdir()
    r = run("simulate", "ao-system", "--preset", "check", "-o", folder)
    assert r.returncode == 2, r.stderr
    assert "a-folder" in r.stderr


# ----------------------------------------------------------------------------------------------
# System files the CLI refuses: exit 2, one line naming the file and the field, no output.

def check_json(tmp_path):
    out = tmp_path / "check.json"
    assert run("simulate", "ao-system", "--preset", "check", "-o", out).returncode == 0
    return json.loads(out.read_text())


def with_cn2(system):
    """The check system's atmosphere given as Cn2 strengths (no r0_m), fractions x r0^(-5/3)."""
    atmosphere = system["atmosphere"]
    total = atmosphere.pop("r0_m") ** (-5 / 3)
    for layer in atmosphere["layers"]:
        layer["cn2"] = layer.pop("fraction") * total
    return system


@pytest.mark.parametrize(
    "change, words",
    [
        # 10 across, obstruction 0.99: no centre satisfies (0.99 N)^2 <= k < N^2 (see test_system.cpp).
        (lambda s: s["telescope"].update(obstruction=0.99),
         ["sensors[0].subapertures", "at least one valid subaperture", "obstruction 0.99"]),
        # One subaperture across: its centre is on axis, inside the obstruction (0.2).
        (lambda s: s["truth"].update(subapertures=1),
         ["truth.subapertures", "at least one valid subaperture", "1 across"]),
        (lambda s: s["sensors"][1].update(subapertures=1), ["sensors[1].subapertures"]),
        # A negative strength is named as written (cn2, its raw value), not as a normalised fraction.
        (lambda s: with_cn2(s)["atmosphere"]["layers"][2].update(cn2=-0.05),
         ["atmosphere.layers[2].cn2", ">= 0", "found -0.05"]),
    ],
)
def test_bad_system_file_exits_2_naming_the_field(tmp_path, change, words):
    system = check_json(tmp_path)
    change(system)
    src = tmp_path / "bad.json"
    src.write_text(json.dumps(system))
    out = tmp_path / "out"
    r = run("ao", "covariance", src, "-o", out)
    assert_bad_input(r, "bad.json", *words)
    assert ".fraction" not in r.stderr
    assert not out.exists()


def test_number_overflow_in_json_exits_2_naming_the_file(tmp_path):
    # 1e400 is valid JSON syntax but overflows a double: nlohmann reports it as out_of_range, not as
    # a parse error; it is still the file's fault (exit 2, the file named), not an internal error.
    text = json.dumps(check_json(tmp_path))
    text, count = re.subn(r'"diameter_m": [0-9.e+]+', '"diameter_m": 1e400', text)
    assert count == 1
    src = tmp_path / "overflow.json"
    src.write_text(text)
    out = tmp_path / "out"
    assert_bad_input(run("ao", "covariance", src, "-o", out), str(src), "1e400")
    assert not out.exists()


def test_short_moao_layout_prints_a_note(tmp_path):
    data = os.path.join(os.environ.get("HALFSCOPE_SOURCE_DIR", os.getcwd()), "tests", "data", "ao")
    short = os.path.join(data, "short-sys-params.txt")
    full = os.path.join(data, "full-sys-params.txt")
    atmosphere = os.path.join(data, "prof-test-atmos-night0.txt")
    if not os.path.exists(short):
        pytest.skip("tests/data/ao not found (set HALFSCOPE_SOURCE_DIR)")
    r = run("--device", "cpu", "ao", "covariance", short, "-o", tmp_path / "short", "--kinds", "ctt")
    assert r.returncode == 0, r.stderr
    notes = [l for l in r.stderr.splitlines() if "short (benchmark) layout" in l]
    assert len(notes) == 1 and "short-sys-params.txt" in notes[0] and "noise_var" in notes[0]
    r = run("--device", "cpu", "ao", "covariance", full, "--atmosphere", atmosphere, "-o",
            tmp_path / "full", "--kinds", "ctt")
    assert r.returncode == 0, r.stderr
    assert "short (benchmark) layout" not in r.stderr
