"""`halfscope simulate ao-system`: the presets as JSON that any JSON reader loads, with the sizes
MOAO's configurations are named by, counted here independently from the JSON's own geometry
(NumPy, positions in metres); bad presets exit 2 and leave no file."""
import json
import os
import subprocess

import pytest

np = pytest.importorskip("numpy")
CLI = os.environ.get("HALFSCOPE_CLI")
pytestmark = pytest.mark.skipif(not CLI, reason="HALFSCOPE_CLI is not set (run through ctest)")


def run(*args, cwd=None):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


def assert_bad_input(result, *words):
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for w in words:
        assert w in lines[0], lines[0]


def valid_subapertures(diameter, obstruction, n):
    """Centres of an n x n grid of pitch D/n centred on the pupil, valid when
    (D obs / 2)^2 <= r^2 < (D / 2)^2."""
    c = -diameter / 2 + diameter / n * (np.arange(n) + 0.5)
    x, y = np.meshgrid(c, c)
    r2 = x * x + y * y
    return int(np.count_nonzero((r2 >= (diameter * obstruction / 2) ** 2) & (r2 < diameter**2 / 4)))


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
    out = tmp_path / "system.json"
    out.write_text("previous content")
    r = run("simulate", "ao-system", "--preset", "nope", "-o", out)
    assert r.returncode == 2
    assert out.read_text() == "previous content"
    folder = tmp_path / "a-folder"
    folder.mkdir()
    r = run("simulate", "ao-system", "--preset", "check", "-o", folder)
    assert r.returncode == 2, r.stderr
    assert "a-folder" in r.stderr
