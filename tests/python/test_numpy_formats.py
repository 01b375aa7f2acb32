"""`halfscope convert` against NumPy (and Pillow / matplotlib for PNG) as independent references.

NumPy writes every input and reads every output, so the .npy/.npz/.csv readers and writers are
checked from outside. Needs HALFSCOPE_CLI (path of the halfscope binary); skips without it.
"""
import os
import subprocess

import pytest

np = pytest.importorskip("numpy")

CLI = os.environ.get("HALFSCOPE_CLI")
pytestmark = pytest.mark.skipif(not CLI, reason="HALFSCOPE_CLI is not set")

CODES = ["f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"]


def run(*args):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=300)


def convert(*args):
    r = run("convert", *args)
    assert r.returncode == 0, f"halfscope convert {args} failed ({r.returncode}): {r.stderr}"
    return r


def edge_values(code, shape):
    """Values covering each dtype's edges (NaN, inf, -0.0, min/max), in the requested shape."""
    dt = np.dtype(code)
    n = int(np.prod(shape))
    if dt.kind == "f":
        base = np.array([-1.5, 1 / 3, np.inf, -0.0, np.nan, 65504.0, -np.inf, 1e-3], dtype=dt)
    else:
        info = np.iinfo(dt)
        base = np.array([info.min, info.max, 0, 1, info.max // 3, info.min // 2 + 1], dtype=dt)
    return np.resize(base, n).reshape(shape)


def same_bits(x, y):
    """Equal shapes, and equal values bit for bit once both are in native byte order."""
    assert x.shape == y.shape
    xn = x.astype(x.dtype.newbyteorder("="))
    yn = y.astype(y.dtype.newbyteorder("="))
    assert xn.dtype == yn.dtype
    unsigned = f"u{xn.dtype.itemsize}"
    assert np.array_equal(np.ascontiguousarray(xn).view(unsigned), np.ascontiguousarray(yn).view(unsigned))


@pytest.mark.parametrize("code", CODES)
@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("layout", ["C", "F"])
def test_npy_to_npy_is_bit_exact(tmp_path, code, order, layout):
    x = edge_values(code, (3, 4, 2)).astype(order + code)
    if layout == "F":
        x = np.asfortranarray(x)
    np.save(tmp_path / "x.npy", x)
    convert(tmp_path / "x.npy", tmp_path / "y.npy")
    y = np.load(tmp_path / "y.npy")
    same_bits(x, y)
    assert y.dtype.byteorder in ("=", "|", "<")  # written native (little-endian)


@pytest.mark.parametrize("shape", [(), (0,), (2, 0), (7,)])
def test_npy_edge_shapes(tmp_path, shape):
    x = edge_values("f4", shape) if np.prod(shape) else np.zeros(shape, "<f4")
    np.save(tmp_path / "x.npy", x)
    convert(tmp_path / "x.npy", tmp_path / "y.npy")
    same_bits(x, np.load(tmp_path / "y.npy"))


def test_npz_member_to_npy(tmp_path):
    x = edge_values("f8", (4, 5))
    for saver, name in [(np.savez, "plain.npz"), (np.savez_compressed, "compressed.npz")]:
        saver(tmp_path / name, image=x)
        r = run("convert", tmp_path / name, tmp_path / "y.npy")
        assert r.returncode == 0, r.stderr
        same_bits(x, np.load(tmp_path / "y.npy"))


def test_float64_through_csv(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 3)) * 10.0 ** rng.integers(-300, 300, (6, 3))
    x[0, :] = [0.1, -0.0, 5e-324]
    x[1, :] = [np.finfo(float).max, 1 / 3, -np.inf]
    np.save(tmp_path / "x.npy", x)
    convert(tmp_path / "x.npy", tmp_path / "x.csv")
    # NumPy's own CSV reader agrees with what halfscope wrote ...
    assert np.array_equal(np.loadtxt(tmp_path / "x.csv", delimiter=",", ndmin=2), x)
    # ... and so does halfscope's reader.
    convert(tmp_path / "x.csv", tmp_path / "z.npy")
    same_bits(x, np.load(tmp_path / "z.npy"))


def test_csv_written_by_numpy(tmp_path):
    x = np.arange(12.0).reshape(4, 3) / 7
    np.savetxt(tmp_path / "x.csv", x, delimiter=",", header="a,b,c", fmt="%.17g")
    convert(tmp_path / "x.csv", tmp_path / "y.npy")
    assert np.array_equal(np.load(tmp_path / "y.npy"), x)


@pytest.mark.parametrize("target", ["float32", "float16"])
def test_dtype_conversion_matches_numpy_rounding(tmp_path, target):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 8)) * 1000
    np.save(tmp_path / "x.npy", x)
    convert(tmp_path / "x.npy", tmp_path / "y.npy", "--dtype", target)
    same_bits(x.astype(target), np.load(tmp_path / "y.npy"))


def test_bfloat16_npy_is_refused(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((2, 2), "<f4"))
    r = run("convert", tmp_path / "x.npy", tmp_path / "y.npy", "--dtype", "bfloat16")
    assert r.returncode == 2, r.stderr
    assert "float32" in r.stderr
    assert not (tmp_path / "y.npy").exists()


def test_truncated_input_is_exit_2_and_no_output(tmp_path):
    np.save(tmp_path / "x.npy", np.ones(100, "<f8"))
    data = (tmp_path / "x.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(data[:-10])
    r = run("convert", tmp_path / "cut.npy", tmp_path / "y.npy")
    assert r.returncode == 2
    assert "cut.npy" in r.stderr and "truncated" in r.stderr
    assert not (tmp_path / "y.npy").exists()


def test_png_gray_ramp_and_scales(tmp_path):
    image = pytest.importorskip("PIL.Image")
    ramp = np.tile(np.arange(256.0), (4, 1))
    np.save(tmp_path / "ramp.npy", ramp)
    convert(tmp_path / "ramp.npy", tmp_path / "ramp.png")
    got = np.asarray(image.open(tmp_path / "ramp.png"))
    assert got.dtype == np.uint8 and np.array_equal(got, ramp.astype(np.uint8))

    np.save(tmp_path / "c.npy", np.array([[-8.0, -1, 0, 1, 8]]))
    convert(tmp_path / "c.npy", tmp_path / "c.png", "--scale", "cbrt")
    assert np.asarray(image.open(tmp_path / "c.png")).tolist() == [[0, 64, 128, 191, 255]]


def test_png_perceptual_is_matplotlib_cubehelix(tmp_path):
    image = pytest.importorskip("PIL.Image")
    matplotlib = pytest.importorskip("matplotlib")
    np.save(tmp_path / "ramp.npy", np.tile(np.linspace(-1, 1, 256), (2, 1)))
    convert(tmp_path / "ramp.npy", tmp_path / "ramp.png", "--colormap", "perceptual")
    got = np.asarray(image.open(tmp_path / "ramp.png").convert("RGB")).astype(int)
    ref = np.round(matplotlib.colormaps["cubehelix"](np.arange(256) / 255.0)[:, :3] * 255)
    assert np.abs(got[0] - ref).max() <= 1


def test_png_written_by_pillow(tmp_path):
    image = pytest.importorskip("PIL.Image")
    gray16 = (np.arange(60, dtype=np.uint16).reshape(6, 10) * 1000).astype(np.uint16)
    image.fromarray(gray16).save(tmp_path / "g16.png")
    r = run("convert", tmp_path / "g16.png", tmp_path / "g16.npy")
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "g16.npy"), gray16)
    rgb = np.random.default_rng(1).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    image.fromarray(rgb).save(tmp_path / "rgb.png")
    convert(tmp_path / "rgb.png", tmp_path / "rgb.npy")
    expected = rgb.astype(np.float64) @ np.array([0.2126, 0.7152, 0.0722])
    assert np.allclose(np.load(tmp_path / "rgb.npy"), expected, atol=1e-3)


@pytest.mark.parametrize("text,words", [
    ("", ["no data rows", "empty file"]),
    ("# only a comment\n\n", ["no data rows", "only blank lines and comments"]),
    ("1,x\n", ["line 1, field 2", "expected a number", "'x'", "no data rows"]),
    ("a,b,c\n", ["line 1, field 1", "'a'", "no data rows"]),
    ("4e999,1\n", ["line 1, field 1", "float64", "'4e999'"]),
    ("x,y\n1,2\n3,-1e400\n", ["line 3, field 2", "float64", "'-1e400'"]),
])
def test_csv_without_data_or_out_of_range_is_refused(tmp_path, text, words):
    (tmp_path / "t.csv").write_text(text)
    r = run("convert", tmp_path / "t.csv", tmp_path / "y.npy")
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1 and "t.csv" in line, line
    for w in words:
        assert w in line, line
    assert not (tmp_path / "y.npy").exists()


def test_csv_header_with_one_data_row(tmp_path):
    (tmp_path / "t.csv").write_text("1,x\n3,4\n")
    convert(tmp_path / "t.csv", tmp_path / "y.npy")
    assert np.array_equal(np.load(tmp_path / "y.npy"), np.array([[3.0, 4.0]]))


def test_float16_to_fits_is_widened_as_other_commands_do(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    x = (np.arange(12).reshape(3, 4) / 7).astype(np.float16)
    np.save(tmp_path / "x.npy", x)
    r = convert(tmp_path / "x.npy", tmp_path / "x.fits")
    assert "float16 values written as float32 (exact)" in r.stderr
    data = fits.getdata(tmp_path / "x.fits")
    assert data.dtype == np.dtype(">f4") and np.array_equal(data, x.astype(np.float32))
    # float16 asked for explicitly cannot be kept: refused before reading, with the way out.
    r = run("convert", tmp_path / "x.npy", tmp_path / "y.fits", "--dtype", "float16")
    assert r.returncode == 2, r.stderr
    for w in ("--dtype float16", "y.fits", "FITS has no float16", "--dtype float32"):
        assert w in r.stderr, r.stderr
    assert not (tmp_path / "y.fits").exists()
