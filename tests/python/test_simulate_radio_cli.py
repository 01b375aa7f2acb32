"""`halfscope simulate psf|sky|observation` against NumPy: the uv samples recomputed from the
antenna table, the PSF as a direct DFT of the gridded samples, the dirty image's noise against the
SNR.

Tolerances: the PSF is an FP64 FFT of small integer weights normalised to 1 (error O(eps log N),
eps = 2.2e-16); the NumPy DFT sums a few hundred cosines (O(n eps)): 1e-11 leaves a wide margin.
"""
import os
import subprocess

import pytest

np = pytest.importorskip("numpy")
fits = pytest.importorskip("astropy.io.fits")
signal = pytest.importorskip("scipy.signal")
CLI = os.environ.get("HALFSCOPE_CLI")
pytestmark = pytest.mark.skipif(not CLI, reason="HALFSCOPE_CLI is not set (run through ctest)")

C = 299792458.0
ARCSEC = np.pi / 180 / 3600
ANTENNAS = np.array([[0, 0, 0], [120.5, -40, 1.5], [-210, 95, -2], [35, 260, 0.5], [300, 180, 3]])


def run(*args):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=300)


def ok(*args):
    r = run(*args)
    assert r.returncode == 0, r.stderr
    return r


def assert_bad_input(result, *words):
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for w in words:
        assert w in lines[0], lines[0]


def antenna_csv(path):
    lines = ["# five antennas", "name,east_m,north_m,up_m"]
    lines += [f"a{k},{e!r},{n!r},{u!r}" for k, (e, n, u) in enumerate(ANTENNAS.tolist())]
    path.write_text("\n".join(lines) + "\n")
    return path


def numpy_uv(lat, dec, has_h, freqs):
    """u, v (wavelengths) ordered by channel, hour angle, baseline i < j: Thompson, Moran &
    Swenson eq. 4.1 with the ENU -> equatorial rotation at latitude `lat`."""
    lat, dec = np.radians(lat), np.radians(dec)
    i, j = np.triu_indices(len(ANTENNAS), 1)
    e, n, u = (ANTENNAS[j] - ANTENNAS[i]).T
    x, y, z = -np.sin(lat) * n + np.cos(lat) * u, e, np.cos(lat) * n + np.sin(lat) * u
    h = np.radians(15 * np.asarray(has_h))[None, :, None]
    inv = (np.asarray(freqs) / C)[:, None, None]
    uu = (np.sin(h) * x + np.cos(h) * y) * inv
    vv = (-np.sin(dec) * np.cos(h) * x + np.sin(dec) * np.sin(h) * y + np.cos(dec) * z) * inv
    return np.stack([uu.ravel(), vv.ravel()], axis=1)


def dft_psf(uv, rows, cols, pixel, uniform):
    """The gridded PSF by a direct DFT: nearest cell (round half away from zero), the mirrored
    cells, samples beyond (n - 1) // 2 cells dropped; the peak at (rows // 2, cols // 2)."""
    du, dv = 1 / (cols * pixel * ARCSEC), 1 / (rows * pixel * ARCSEC)
    iu = np.sign(uv[:, 0]) * np.floor(np.abs(uv[:, 0] / du) + 0.5)
    iv = np.sign(uv[:, 1]) * np.floor(np.abs(uv[:, 1] / dv) + 0.5)
    keep = (np.abs(iu) <= (cols - 1) // 2) & (np.abs(iv) <= (rows - 1) // 2)
    cells = np.concatenate([np.stack([iu[keep], iv[keep]], 1), -np.stack([iu[keep], iv[keep]], 1)])
    cells, counts = np.unique(cells, axis=0, return_counts=True)
    w = np.ones(len(cells)) if uniform else counts.astype(float)
    l = np.arange(cols) - cols // 2
    m = np.arange(rows) - rows // 2
    phase = 2 * np.pi * (cells[:, 0, None, None] * l[None, None, :] / cols
                         + cells[:, 1, None, None] * m[None, :, None] / rows)
    psf = np.tensordot(w, np.cos(phase), axes=1) / w.sum()
    return psf, int((~keep).sum())


@pytest.mark.parametrize("weighting", ["natural", "uniform"])
def test_psf_matches_a_numpy_dft_of_its_uv_samples(tmp_path, weighting):
    rows, cols, pixel = 40, 48, 45.0
    ants = antenna_csv(tmp_path / "ants.csv")
    psf_path, uv_path = tmp_path / "psf.fits", tmp_path / "uv.npy"
    ok("simulate", "psf", "--antennas", ants, "--rows", rows, "--cols", cols, "--dec", -45,
       "--ha-start", -2, "--ha-end", 2, "--ha-step", 900, "--freq", 1.4e9, "--bandwidth", 2e8,
       "--channels", 2, "--pixel", pixel, "--weighting", weighting, "-o", psf_path,
       "--uv-out", uv_path)
    uv = np.load(uv_path)
    ref_uv = numpy_uv(-30.7129, -45, np.arange(-2, 2.001, 0.25), [1.35e9, 1.45e9])
    np.testing.assert_allclose(uv, ref_uv, rtol=0, atol=1e-9 * np.abs(ref_uv).max())
    with fits.open(psf_path) as f:
        psf, hdr = f[0].data.astype(float), f[0].header
    ref, dropped = dft_psf(uv, rows, cols, pixel, weighting == "uniform")
    assert 0 < dropped < len(uv) // 2  # a 45" pixel on 48 columns misses the longest baselines
    assert hdr["NUVDROP"] == dropped and hdr["NUVSAMP"] == len(uv)
    assert hdr["NANT"] == 5 and hdr["WEIGHT"] == weighting and hdr["PIXSIZE"] == pixel
    np.testing.assert_allclose(psf, ref, rtol=0, atol=1e-11)
    assert psf[rows // 2, cols // 2] == 1.0


def test_meerkat_default_pixel_keeps_every_sample(tmp_path):
    out = tmp_path / "psf.npy"
    r = ok("simulate", "psf", "--size", 64, "--ha-start", -1, "--ha-end", 1, "--ha-step", 1800,
           "-o", out)
    assert "64 antennas" in r.stderr
    psf = np.load(out)
    assert psf.shape == (64, 64) and psf[32, 32] == 1.0 and psf.max() == 1.0
    # 2016 baselines x 5 hour angles, all on the grid.
    assert "10080 uv samples, 0 dropped" in r.stderr
    np.testing.assert_allclose(psf[1:, 1:], psf[1:, 1:][::-1, ::-1], atol=1e-13)


def test_sky_is_seeded_and_its_halo_peak_is_the_ratio(tmp_path):
    a, b, c = tmp_path / "a.npy", tmp_path / "b.npy", tmp_path / "c.fits"
    args = ["--size", 64, "--sources", 12, "--halo", 2e-3, "--halo-length", 3, "--seed", 9]
    ok("simulate", "sky", *args, "-o", a)
    ok("simulate", "sky", *args, "-o", b)
    ok("simulate", "sky", *args, "-o", c)
    assert a.read_bytes() == b.read_bytes()
    with fits.open(c) as f:
        np.testing.assert_array_equal(f[0].data, np.load(a))
        h = f[0].header
    assert h["HALOPEAK"] == pytest.approx(2e-3 * h["BRIGHT"], rel=1e-15)
    assert h["SEED"] == 9 and h["NSOURCES"] == 12


@pytest.mark.parametrize("boundary", ["circular", "zero"])
def test_observation_noise_matches_the_snr(tmp_path, boundary):
    n, snr = 96, 16.0
    sky, psf, dirty = tmp_path / "sky.npy", tmp_path / "psf.npy", tmp_path / "dirty.fits"
    ok("simulate", "sky", "--size", n, "--sources", 20, "-o", sky)
    ok("simulate", "psf", "--size", n, "--ha-step", 1800, "-o", psf)
    ok("simulate", "observation", sky, psf, "--snr-db", snr, "--boundary", boundary, "-o", dirty)
    f, h = np.load(sky), np.load(psf)
    if boundary == "circular":  # the PSF's origin (n // 2, n // 2) moved to (0, 0)
        clean = np.fft.irfft2(np.fft.rfft2(f) * np.fft.rfft2(np.fft.ifftshift(h)), s=f.shape)
    else:  # linear convolution, the window that puts the PSF origin on each pixel
        clean = signal.fftconvolve(f, h, mode="full")[n // 2:n // 2 + n, n // 2:n // 2 + n]
    with fits.open(dirty) as d:
        g, hdr = d[0].data.astype(float), d[0].header
    noise = g - clean
    sigma = np.sqrt(np.mean(clean**2) / 10 ** (snr / 10))
    assert hdr["NOISESIG"] == pytest.approx(sigma, rel=1e-9)
    assert hdr["SNRDB"] == snr and hdr["BOUNDARY"] == boundary
    # ||n||^2 / (N sigma^2) ~ chi^2_N / N: sd sqrt(2 / N); 5 sd in dB.
    realised = 10 * np.log10(np.sum(clean**2) / np.sum(noise**2))
    assert abs(realised - snr) < 5 * 10 / np.log(10) * np.sqrt(2 / n**2)


def test_bad_input_exits_2_and_writes_nothing(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("name,e,n,u\nA,0,0,0\nB,1,two,0\n")
    out = tmp_path / "psf.npy"
    assert_bad_input(run("simulate", "psf", "--antennas", bad, "--size", 16, "-o", out),
                     "bad.csv:3", "field 3", "\"two\"")
    assert_bad_input(run("simulate", "psf", "--weighting", "robust", "--size", 16, "-o", out),
                     "natural or uniform", "robust")
    assert_bad_input(run("simulate", "psf", "--size", 16, "-o", tmp_path / "psf.png"),
                     ".npy or .fits")
    assert_bad_input(run("simulate", "psf", "--size", 16, "--dec", 95, "-o", out), "declination")
    sky, psf = tmp_path / "sky.npy", tmp_path / "psf16.npy"
    ok("simulate", "sky", "--size", 32, "--sources", 3, "-o", sky)
    ok("simulate", "psf", "--size", 16, "-o", psf)
    assert_bad_input(run("simulate", "observation", sky, psf, "-o", out), "shape")
    assert_bad_input(run("simulate", "sky", "--size", 16, "--flux-min", 0, "-o", out), "flux min")
    # --uv-out into a missing folder: refused before anything is written.
    r = run("simulate", "psf", "--size", 16, "-o", out, "--uv-out", tmp_path / "no" / "uv.npy")
    assert r.returncode != 0
    # Outputs named like an input or like each other, however spelled: refused, inputs unchanged.
    before = {f: f.read_bytes() for f in (sky, psf, bad)}
    assert_bad_input(run("simulate", "observation", sky, psf, "-o", tmp_path / "." / "sky.npy"),
                     "-o", "the same file as sky", "(an input)")
    assert_bad_input(run("simulate", "psf", "--size", 16, "-o", out, "--uv-out",
                         tmp_path / "." / "psf.npy"), "--uv-out", "the same file as -o")
    assert all(f.read_bytes() == content for f, content in before.items())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv", "psf16.npy", "sky.npy"]


@pytest.mark.parametrize("kind", ["psf", "sky"])
@pytest.mark.parametrize("args, words", [
    # A typed 0 or negative size is refused, never replaced by --size's default.
    (["--rows", 64, "--cols", 0], ["--cols", ">= 1", "found 0"]),
    (["--rows", -3, "--cols", 5], ["--rows", ">= 1", "found -3"]),
    (["--size", 0], ["--size", ">= 1", "found 0"]),
])
def test_typed_sizes_are_checked_not_defaulted(tmp_path, kind, args, words):
    out = tmp_path / "out.npy"
    assert_bad_input(run("simulate", kind, *args, "-o", out), f"simulate {kind}", *words)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, words", [
    # A typed --pixel 0 is refused, never the default lambda_min / (4 B_max).
    (["psf", "--size", 16, "--pixel", 0], ["simulate psf --pixel", "arcsec > 0", "found 0"]),
    (["psf", "--size", 16, "--pixel", -1], ["simulate psf --pixel", "arcsec > 0", "found -1"]),
    (["psf", "--size", 16, "--pixel", "nan"], ["simulate psf --pixel", "finite", "found nan"]),
    (["psf", "--size", 16, "--pixel", "inf"], ["simulate psf --pixel", "finite", "found inf"]),
    (["sky", "--size", 16, "--seed", -1], ["--seed", "[0, 18446744073709551615]", "'-1'"]),
])
def test_typed_pixel_and_seed_are_checked(tmp_path, args, words):
    out = tmp_path / "out.npy"
    assert_bad_input(run("simulate", *args, "-o", out), *words)
    assert list(tmp_path.iterdir()) == []


def test_observation_refuses_a_negative_seed(tmp_path):
    sky, psf, out = tmp_path / "sky.npy", tmp_path / "psf.npy", tmp_path / "dirty.npy"
    ok("simulate", "sky", "--size", 32, "--sources", 3, "-o", sky)
    ok("simulate", "psf", "--size", 32, "--ha-step", 1800, "-o", psf)
    assert_bad_input(run("simulate", "observation", sky, psf, "--seed", -1, "-o", out),
                     "--seed", "[0, 18446744073709551615]", "'-1'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["psf.npy", "sky.npy"]


def test_rows_and_cols_give_the_shape(tmp_path):
    out = tmp_path / "sky.npy"
    ok("simulate", "sky", "--rows", 48, "--cols", 40, "--sources", 5, "-o", out)
    assert np.load(out).shape == (48, 40)
