"""The CLI's contract (DESIGN.md section 4): JSON info, exit statuses 0/2/1, one-line messages that
name the problem, and outputs that are either complete or absent."""
import json
import os
import subprocess
from pathlib import Path

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


def test_info_json_is_valid_and_lists_devices():
    r = run("info", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert isinstance(info["devices"], list)
    assert info["version"]
    assert "cuda" in info["build"]["options"]
    if not info["devices"]:
        assert info["cuda"]["status"] != "ok"


def test_help_on_every_subcommand():
    for sub in ([], ["info"], ["convert"], ["bench"], ["bench", "ceilings"], ["demo"]):
        r = run(*sub, "--help")
        assert r.returncode == 0, (sub, r.stderr)
        assert "Usage" in r.stdout or "usage" in r.stdout.lower()


def test_bad_usage_exits_2():
    assert run("no-such-command").returncode == 2
    assert run("convert", "only-one-arg.npy").returncode == 2
    assert run("--device", "tpu", "info").returncode == 2


def test_truncated_npy(tmp_path):
    good = tmp_path / "good.npy"
    np.save(good, np.arange(1000, dtype=np.float32))
    bad = tmp_path / "bad.npy"
    bad.write_bytes(good.read_bytes()[:300])
    out = tmp_path / "out.npy"
    assert_bad_input(run("convert", bad, out), "bad.npy", "truncated")
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.npy", "good.npy"]


def test_missing_input(tmp_path):
    out = tmp_path / "out.npy"
    assert_bad_input(run("convert", tmp_path / "nope.npy", out), "nope.npy", "no such file")
    assert not out.exists()


def test_output_in_missing_folder(tmp_path):
    src = tmp_path / "a.npy"
    np.save(src, np.ones((3, 3)))
    out = tmp_path / "missing" / "b.npy"
    assert_bad_input(run("convert", src, out), "missing", "does not exist")
    assert not out.parent.exists()


def test_failure_never_destroys_an_existing_output(tmp_path):
    src = tmp_path / "big.npy"
    np.save(src, np.array([1.0, 7e4, 2.0]))  # 7e4 overflows float16
    out = tmp_path / "out.npy"
    out.write_bytes(b"precious")
    r = run("convert", src, out, "--dtype", "float16")
    assert r.returncode == 1, r.stderr  # a numerical failure, not bad input
    assert "overflow" in r.stderr
    assert out.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.npy", "out.npy"]


def test_float16_underflow_is_reported(tmp_path):
    src = tmp_path / "small.npy"
    np.save(src, np.array([1.0, 1e-9, 2.0], dtype=np.float32))
    out = tmp_path / "h.npy"
    r = run("convert", src, out, "--dtype", "float16")
    assert r.returncode == 0, r.stderr
    assert "underflowed" in r.stderr
    np.testing.assert_array_equal(np.load(out), np.array([1.0, 1e-9, 2.0], dtype=np.float32).astype(np.float16))


def test_unknown_extension(tmp_path):
    src = tmp_path / "a.npy"
    np.save(src, np.ones(3))
    assert_bad_input(run("convert", src, tmp_path / "a.xyz"), "a.xyz", ".npy")


def test_npz_needs_a_member_for_single_array_output(tmp_path):
    src = tmp_path / "two.npz"
    np.savez(src, a=np.arange(3.0), b=np.arange(4.0))
    assert_bad_input(run("convert", src, tmp_path / "x.npy"), "--member")
    r = run("convert", src, tmp_path / "b.npy", "--member", "b")
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "b.npy"), np.arange(4.0))


def test_png_output(tmp_path):
    src = tmp_path / "img.npy"
    np.save(src, np.outer(np.arange(64.0), np.arange(32.0)))
    for scale in ("linear", "log", "cbrt"):
        out = tmp_path / f"img-{scale}.png"
        r = run("convert", src, out, "--scale", scale, "--colormap", "perceptual")
        assert r.returncode == 0, r.stderr
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_writes_the_report(tmp_path):
    r = run("demo", "-o", tmp_path / "demo", "--no-measure")
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "demo" / "index.html").read_text()
    for section in ('id="machine"', 'id="ceilings"', 'id="conv"', 'id="mfilter"', 'id="ao"'):
        assert section in html
