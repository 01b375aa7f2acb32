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
    # Recorded runs with values they did not reach show "-", never NaN (the deconv table reads
    # bench/results, which holds such runs).
    import re
    assert not re.search(r">\s*-?nan", html, re.IGNORECASE), re.findall(r".{60}nan.{20}", html)


@pytest.mark.parametrize("args,words", [
    (["bogus"], ["unknown subcommand 'bogus'", "'halfscope'", "convert", "conv", "deconv"]),
    (["--bogus"], ["unknown option '--bogus'", "'halfscope'", "convert", "--version"]),
    (["-V"], ["unknown option '-V'", "info", "--version"]),
    ([], ["expected a subcommand of 'halfscope'", "info", "cholesky"]),
    (["simulate", "bogus"], ["unknown subcommand 'bogus'", "'halfscope simulate'", "gaussian-kernel",
                             "observation"]),
    (["simulate"], ["expected a subcommand of 'halfscope simulate'", "gaussian-kernel"]),
])
def test_unknown_or_missing_subcommand_names_the_token_and_the_choices(args, words):
    # CLI11 alone says only "A subcommand is required".
    assert_bad_input(run(*args), *words)


def test_folder_as_input_or_output(tmp_path):
    (tmp_path / "d").mkdir()
    np.save(tmp_path / "a.npy", np.ones((2, 2)))
    assert_bad_input(run("convert", tmp_path / "d", tmp_path / "o.npy"), "d: is a folder")
    assert_bad_input(run("convert", tmp_path / "a.npy", tmp_path / "d"), "d: is a folder")
    assert_bad_input(run("conv", tmp_path / "d", tmp_path / "a.npy", "-o", tmp_path / "o.npy"),
                     "d: is a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy", "d"]


def test_dtype_that_does_not_fit_names_both_files(tmp_path):
    np.save(tmp_path / "big.npy", np.array([[1e6, 2.0]]))
    r = run("convert", tmp_path / "big.npy", tmp_path / "o.npy", "--dtype", "int16")
    assert_bad_input(r, "big.npy", "o.npy", "int16", "1000000", "does not fit")
    assert "astype" not in r.stderr
    assert not (tmp_path / "o.npy").exists()


def test_outputs_never_replace_inputs_or_each_other(tmp_path):
    """Every command refuses, before any work, an output named like one of its inputs or like
    another of its outputs, however spelled; every file stays as it was."""
    rng = np.random.default_rng(3)
    img, ker = tmp_path / "img.npy", tmp_path / "k.npy"
    np.save(img, rng.uniform(size=(16, 16)).astype(np.float32))
    np.save(ker, np.ones((3, 3), np.float32))
    a = rng.uniform(size=(8, 8))
    spd = tmp_path / "a.npy"
    np.save(spd, a @ a.T + 8 * np.eye(8))
    report = tmp_path / "l.npy"
    report.write_text("precious")
    before = {f: f.read_bytes() for f in (img, ker, spd, report)}
    via_dot = tmp_path / "." / "img.npy"
    cases = [
        (["--device", "cpu", "conv", img, ker, "-o", via_dot], ["-o", "the same file as image"]),
        (["--device", "cpu", "conv", img, ker, "-o", ker], ["-o", "the same file as kernel"]),
        (["convert", img, via_dot], ["output", "the same file as input", "(an input)"]),
        (["--device", "cpu", "cholesky", spd, "-o", spd], ["-o", "the same file as A"]),
        (["--device", "cpu", "cholesky", spd, "-o", report, "--report", report],
         ["--report", "the same file as -o", "(another output)"]),
        (["--device", "cpu", "cholesky", spd, "-o", tmp_path / "L.npy", "--report",
          tmp_path / "r.npy"], ["--report", "JSON"]),
        (["--device", "cpu", "deconv", img, ker, "-o", via_dot], ["-o", "the same file as dirty"]),
    ]
    for args, words in cases:
        assert_bad_input(run(*args), *words)
    for f, content in before.items():
        assert f.read_bytes() == content, f
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy", "img.npy", "k.npy", "l.npy"]


def test_integer_options_are_decimal_and_in_range(tmp_path):
    """Integer options read decimal text only: CLI11 alone read "010" as octal 8, "0x10" as 16,
    clamped 99999999999999999999 to 2^63 - 1 and wrapped -1 into unsigned options."""
    out = tmp_path / "r.npy"
    r = run("simulate", "random-image", "--rows", "010", "--cols", "+8", "-o", out)
    assert r.returncode == 0, r.stderr
    assert np.load(out).shape == (10, 8)
    out.unlink()
    for value in ["0x10", "99999999999999999999", "1e3", "5x", "+-3"]:
        r = run("simulate", "random-image", "--rows", value, "--cols", 8, "-o", out)
        assert r.returncode == 2, (value, r.stderr)
        assert "--rows: expected a decimal integer" in r.stderr and f"'{value}'" in r.stderr, \
            r.stderr
        assert not out.exists()
    # Refused while parsing, on a GPU machine too (it would run the whole benchmark).
    r = run("bench", "conv", "--repeats", "-1", "-o", tmp_path / "b.json")
    assert r.returncode == 2 and "--repeats" in r.stderr, r.stderr
    assert not (tmp_path / "b.json").exists()
    # Sizes and widths too: each value range-checked, no width beyond the smallest image; all
    # refused before any GPU work, so a GPU machine runs no benchmark here either.
    for args, words in ((["--sizes", "512,0"], ["--sizes"]), (["--widths", "3,-5"], ["--widths"]),
                        (["--sizes", "64", "--widths", "3,65"], ["--widths", "64", "65"])):
        r = run("bench", "conv", *args, "-o", tmp_path / "b.json")
        assert_bad_input(r, *words)
        assert not (tmp_path / "b.json").exists()


def test_options_that_cannot_apply_are_refused(tmp_path):
    """An option meant for another format or solver is a mistake about the run: exit 2 naming
    it, never silently ignored."""
    img = tmp_path / "img.npy"
    np.save(img, np.ones((8, 8), np.float32))
    out = tmp_path / "o.npy"
    cases = [
        (["convert", img, out, "--vmin", 0], ["--vmin", "PNG outputs", "npy"]),
        (["convert", img, out, "--scale", "log", "--colormap", "gray"],
         ["--scale, --colormap", "PNG outputs"]),
        (["convert", img, out, "--member", "a"], ["--member a", ".npz input"]),
        (["convert", img, out, "--fill-gaps"], ["--fill-gaps", "MiniSEED"]),
        (["--device", "cpu", "deconv", img, img, "-o", out, "--half-iterations", 5],
         ["--half-iterations", "--solver half-then-float", "found --solver cg"]),
        (["--device", "cpu", "deconv", img, img, "-o", out, "--solver", "fixed",
          "--backtrack-retries", 3], ["--backtrack-retries", "--solver backtracking"]),
        (["-q", "-v", "info"], ["--quiet", "--verbose"]),
    ]
    for args, words in cases:
        assert_bad_input(run(*args), *words)
    assert not out.exists()
    r = run("convert", img, tmp_path / "o.png", "--vmin", 0.5, "--scale", "log")
    assert r.returncode == 0, r.stderr


def test_typed_demo_inputs_and_bench_values_are_checked(tmp_path):
    """A path typed for the demo must exist (the defaults may be absent outside the repository);
    bench values out of their range are refused before any work."""
    txt = tmp_path / "data.txt"
    txt.write_text("1 2 3\n")
    out = tmp_path / "demo"
    assert_bad_input(run("demo", "-o", out, "--no-measure", "--results", tmp_path / "none"),
                     "--results", "folder")
    assert_bad_input(run("demo", "-o", out, "--no-measure", "--seismic", txt), "--seismic",
                     ".npy")
    assert_bad_input(run("demo", "-o", out, "--no-measure", "--camera", tmp_path / "no.npy"),
                     "--camera", ".npy")
    assert not (out / "index.html").exists()
    assert_bad_input(run("bench", "cholesky", "--systems", "", "--json", tmp_path / "b.json"),
                     "--systems", "empty")
    r = run("bench", "tor", "--device", "cpu", "--max-fp64-n", "-1")
    assert r.returncode == 2 and "--max-fp64-n" in r.stderr, r.stderr
    assert_bad_input(run("bench", "covariance", "--kinds", ""), "--kinds", "none")
    for bench in ("conv", "mfilter"):  # GPU benchmarks: a CPU device is named as the mistake
        assert_bad_input(run("--device", "cpu", "bench", bench, "-o", tmp_path / "b.json"),
                         f"bench {bench} measures the GPU methods", "--device cpu")
    assert not (tmp_path / "b.json").exists()
