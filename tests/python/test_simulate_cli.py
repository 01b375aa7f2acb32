"""`halfscope simulate gaussian-kernel|random-image|seismic`: typed values are checked (exit 2, a
one-line message naming the option, what was expected and what was found, nothing written);
defaults apply only to absent options; nothing non-finite reaches an output file."""
import pytest

np = pytest.importorskip("numpy")
# The CLI runner and the one-line exit-2 check are ao_helpers' (this folder is on sys.path).
from ao_helpers import CLI, assert_bad_input, run  # noqa: E402

pytestmark = pytest.mark.skipif(not CLI, reason="HALFSCOPE_CLI is not set (run through ctest)")

KINDS = ["gaussian-kernel", "random-image", "seismic", "ao-system", "psf", "sky", "observation"]


@pytest.mark.parametrize("args, words", [
    # float16 holds |x| <= 65504: the bounds alone decide, so the check comes before any draw.
    (["--low", 0, "--high", 1e6, "--dtype", "float16"], ["--high", "float16", "65504", "1e+06"]),
    (["--low", -7e4, "--dtype", "float16"], ["--low", "float16", "65504"]),
    (["--low", "nan"], ["--low", "finite", "nan"]),
    (["--low", "-inf"], ["--low", "finite", "-inf"]),
    (["--high", "inf"], ["--high", "finite", "inf"]),
    (["--low", -1e308, "--high", 1e308], ["--low", "float32", "3.4028234663852886e+38"]),
    (["--low", -1e308, "--high", 1e308, "--dtype", "float64"],
     ["--low/--high", "finite in float64", "--low -1e+308, --high 1e+308"]),
    (["--low", 1, "--high", 0], ["--low/--high", "--low < --high", "--low 1, --high 0"]),
    (["--low", 1, "--high", 1], ["--low/--high", "--low < --high", "--low 1, --high 1"]),
    (["--rows", 0], ["--rows", ">= 1", "found 0"]),
    (["--cols", -3], ["--cols", ">= 1", "found -3"]),
    (["--seed", -1], ["--seed", "[0, 18446744073709551615]", "'-1'"]),
    (["--seed", 2**64], ["--seed", "[0, 18446744073709551615]", f"'{2**64}'"]),
    (["--dtype", "int32"], ["--dtype", "float64, float32, float16 or bfloat16", '"int32"']),
])
def test_random_image_bad_options_exit_2_and_write_nothing(tmp_path, args, words):
    out = tmp_path / "r.npy"
    assert_bad_input(run("simulate", "random-image", *args, "-o", out),
                     "simulate random-image", *words)
    assert list(tmp_path.iterdir()) == []


def test_random_image_fills_the_float16_range_without_inf(tmp_path):
    out = tmp_path / "r.npy"
    r = run("simulate", "random-image", "--rows", 64, "--cols", 32, "--low", -65504, "--high",
            65504, "--dtype", "float16", "--seed", 2**64 - 1, "-o", out)
    assert r.returncode == 0, r.stderr
    a = np.load(out)
    assert a.dtype == np.float16 and a.shape == (64, 32)
    assert np.isfinite(a).all() and a.min() < -30000 and a.max() > 30000


@pytest.mark.parametrize("args, words", [
    (["--sigma", 0], ["--sigma", "> 0", "found 0"]),
    (["--sigma", -1], ["--sigma", "> 0", "found -1"]),
    (["--sigma", "nan"], ["--sigma", "finite", "found nan"]),
    (["--sigma", "inf"], ["--sigma", "finite", "found inf"]),
    # Every sample of an even width underflows: the normalisation would be 0 / 0.
    (["--width", 4, "--sigma", 1e-3], ["--sigma", "underflow", "--width 4", "found 0.001"]),
    (["--width", 0], ["--width", ">= 1", "found 0"]),
    (["--dtype", "int32"], ["--dtype", "float64, float32, float16 or bfloat16", '"int32"']),
    (["--dtype", "uint8"], ["--dtype", "float64, float32, float16 or bfloat16", '"uint8"']),
])
def test_gaussian_kernel_bad_options_exit_2_and_write_nothing(tmp_path, args, words):
    out = tmp_path / "k.npy"
    assert_bad_input(run("simulate", "gaussian-kernel", *args, "-o", out),
                     "simulate gaussian-kernel", *words)
    assert list(tmp_path.iterdir()) == []


def test_gaussian_kernel_default_sigma_only_when_absent(tmp_path):
    absent, typed = tmp_path / "absent.npy", tmp_path / "typed.npy"
    assert run("simulate", "gaussian-kernel", "--width", 15, "-o", absent).returncode == 0
    assert run("simulate", "gaussian-kernel", "--width", 15, "--sigma", 2.5, "-o",
               typed).returncode == 0
    np.testing.assert_array_equal(np.load(absent), np.load(typed))  # width / 6 = 2.5
    k = np.load(absent)
    assert k.dtype == np.float64 and abs(k.sum() - 1) < 1e-15 * k.size


@pytest.mark.parametrize("args, words", [
    (["--seed", -1], ["--seed", "[0, 18446744073709551615]", "'-1'"]),
    (["--sample-rate", "inf"], ["--sample-rate", "finite", "found inf"]),
])
def test_seismic_bad_options_exit_2_and_write_nothing(tmp_path, args, words):
    out = tmp_path / "sim"
    assert_bad_input(run("simulate", "seismic", *args, "-o", out), "simulate seismic", *words)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", KINDS)
def test_every_simulate_option_has_help_text(kind):
    """CLI11 puts an option's description at column 30, or on the next line when the name and
    type are wider; an option without one has neither."""
    r = run("simulate", kind, "--help")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    options = [i for i, line in enumerate(lines) if line.startswith("  -")]
    assert options, r.stdout
    for i in options:
        line, after = lines[i], (lines[i + 1] if i + 1 < len(lines) else "")
        same_line = len(line) > 30 and line[28:30] == "  " and line[30:].strip()
        next_line = after.startswith(" " * 30) and after.strip()
        assert same_line or next_line, f"{kind}: no help text: {line.strip()}"
