"""`halfscope convert` for FITS, MiniSEED and SAC against astropy and ObsPy.

astropy and ObsPy write every input and read every output, so the readers and writers are checked
from outside: values bit for bit, FITS header keywords, waveform ids, start times and sample rates.
Needs HALFSCOPE_CLI (path of the halfscope binary); each part skips without its Python module.
"""
import os
import subprocess

import pytest

np = pytest.importorskip("numpy")

CLI = os.environ.get("HALFSCOPE_CLI")
pytestmark = pytest.mark.skipif(not CLI, reason="HALFSCOPE_CLI is not set")

T0 = "2019-01-01T00:00:00.123456Z"


def run(*args):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=300)


def convert(*args):
    r = run("convert", *args)
    assert r.returncode == 0, f"halfscope convert {args} failed ({r.returncode}): {r.stderr}"
    return r


def expect_input_error(tmp_path, src, dst):
    """Exit 2, one stderr line naming the input, and nothing left in the output folder."""
    before = set(os.listdir(tmp_path))
    r = run("convert", src, dst)
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert str(src) in lines[0], r.stderr
    assert not os.path.exists(dst)
    assert set(os.listdir(tmp_path)) == before, "a temporary file was left behind"


def same_bits(x, y):
    x = np.asarray(x)
    y = np.asarray(y)
    assert x.shape == y.shape
    xn = x.astype(x.dtype.newbyteorder("="))
    yn = y.astype(y.dtype.newbyteorder("="))
    assert xn.dtype == yn.dtype, (xn.dtype, yn.dtype)
    view = f"u{xn.dtype.itemsize}"
    return np.array_equal(np.ascontiguousarray(xn).view(view), np.ascontiguousarray(yn).view(view))


# ----------------------------------------------------------------------------------------------
# FITS (astropy)

FITS_DTYPES = ["uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
               "float32", "float64"]


def fits_image(dtype, shape=(5, 7)):
    rng = np.random.default_rng(FITS_DTYPES.index(dtype))
    dt = np.dtype(dtype)
    if dt.kind == "f":
        x = rng.standard_normal(shape).astype(dt)
        x.flat[0], x.flat[1], x.flat[2] = np.nan, np.inf, -0.0
    else:
        info = np.iinfo(dt)
        x = rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
        x.flat[0], x.flat[1] = info.min, info.max
    return x


def write_astropy(path, data, ext=False):
    fits = pytest.importorskip("astropy.io.fits")
    hdu = (fits.ImageHDU if ext else fits.PrimaryHDU)(data)
    hdu.header["OBJECT"] = "M31"
    hdu.header["BUNIT"] = "Jy/beam"
    hdu.header["CDELT1"] = -2.5e-4
    hdu.header["CTYPE1"] = "RA---SIN"
    hdu.header.add_history("made by astropy")
    (fits.HDUList([fits.PrimaryHDU(), hdu]) if ext else hdu).writeto(path)


def expect_keywords(hdr, source_name):
    assert hdr["OBJECT"] == "M31"
    assert hdr["BUNIT"] == "Jy/beam"
    assert hdr["CDELT1"] == -2.5e-4
    assert hdr["CTYPE1"] == "RA---SIN"
    history = [str(h) for h in hdr["HISTORY"]]
    assert "made by astropy" in history
    assert any("halfscope" in h and source_name in h for h in history), history


@pytest.mark.parametrize("dtype", FITS_DTYPES)
def test_fits_to_fits_is_bit_exact_and_keeps_keywords(tmp_path, dtype):
    fits = pytest.importorskip("astropy.io.fits")
    x = fits_image(dtype)
    write_astropy(tmp_path / "a.fits", x)
    convert(tmp_path / "a.fits", tmp_path / "b.fits")
    with fits.open(tmp_path / "b.fits") as hdul:
        hdul.verify("exception")
        assert same_bits(hdul[0].data, x)
        expect_keywords(hdul[0].header, "a.fits")


@pytest.mark.parametrize("dtype", FITS_DTYPES)
def test_fits_to_npy_gives_astropy_physical_values(tmp_path, dtype):
    fits = pytest.importorskip("astropy.io.fits")
    write_astropy(tmp_path / "a.fits", fits_image(dtype, (2, 3, 4)))
    convert(tmp_path / "a.fits", tmp_path / "b.npy")
    assert same_bits(np.load(tmp_path / "b.npy"), fits.getdata(tmp_path / "a.fits"))


def test_scaled_fits_keeps_physical_values(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    stored = np.random.default_rng(5).integers(-30000, 30000, size=(6, 4)).astype(np.int16)
    hdu = fits.PrimaryHDU(100.0 + 0.5 * stored)
    hdu.scale("int16", bscale=0.5, bzero=100)
    hdu.header["OBJECT"] = "M31"
    hdu.writeto(tmp_path / "a.fits")
    physical = fits.getdata(tmp_path / "a.fits").astype(np.float64)
    assert np.array_equal(physical, 100.0 + 0.5 * stored)

    convert(tmp_path / "a.fits", tmp_path / "b.npy")
    y = np.load(tmp_path / "b.npy")
    assert y.dtype == np.float64 and np.array_equal(y, physical)

    convert(tmp_path / "a.fits", tmp_path / "b.fits")
    with fits.open(tmp_path / "b.fits") as hdul:
        assert np.array_equal(hdul[0].data.astype(np.float64), physical)
        assert hdul[0].header["OBJECT"] == "M31"


def test_fits_image_extension_is_read(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    x = fits_image("float32", (3, 2))
    write_astropy(tmp_path / "a.fits", x, ext=True)
    convert(tmp_path / "a.fits", tmp_path / "b.npy")
    assert same_bits(np.load(tmp_path / "b.npy"), x)
    convert(tmp_path / "a.fits", tmp_path / "b.fits")
    with fits.open(tmp_path / "b.fits") as hdul:
        assert same_bits(hdul[0].data, x)
        expect_keywords(hdul[0].header, "a.fits")


def test_fits_image_after_a_table_is_read(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    x = fits_image("int32", (4, 3))
    table = fits.BinTableHDU.from_columns([fits.Column(name="a", format="J", array=np.arange(5))])
    fits.HDUList([fits.PrimaryHDU(), table, fits.ImageHDU(x)]).writeto(tmp_path / "a.fits")
    convert(tmp_path / "a.fits", tmp_path / "b.npy")
    assert same_bits(np.load(tmp_path / "b.npy"), x)


def test_tile_compressed_fits_is_refused_cleanly(tmp_path):
    fits = pytest.importorskip("astropy.io.fits")
    x = fits_image("int16", (16, 16))
    fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(x, compression_type="RICE_1")]).writeto(
        tmp_path / "a.fits")
    expect_input_error(tmp_path, tmp_path / "a.fits", tmp_path / "b.npy")


def corrupt_card(path, keyword, card):
    raw = bytearray(path.read_bytes())
    for pos in range(0, 2880, 80):
        if raw[pos:pos + 8].decode().rstrip() == keyword:
            raw[pos:pos + 80] = card.ljust(80).encode()
            path.write_bytes(bytes(raw))
            return
    raise AssertionError(f"no {keyword} card")


@pytest.mark.parametrize("keyword,card", [("BITPIX", "BITPIX  =                   17"),
                                          ("BITPIX", "BITPIX  = 'garbage'"),
                                          ("END", "XND")])
def test_corrupted_fits_header_fails_cleanly(tmp_path, keyword, card):
    pytest.importorskip("astropy.io.fits")
    write_astropy(tmp_path / "a.fits", fits_image("int16"))
    corrupt_card(tmp_path / "a.fits", keyword, card)
    expect_input_error(tmp_path, tmp_path / "a.fits", tmp_path / "b.fits")
    expect_input_error(tmp_path, tmp_path / "a.fits", tmp_path / "b.npy")


def test_truncated_fits_fails_cleanly(tmp_path):
    pytest.importorskip("astropy.io.fits")
    write_astropy(tmp_path / "full.fits", fits_image("float64", (40, 40)))
    (tmp_path / "a.fits").write_bytes((tmp_path / "full.fits").read_bytes()[:5000])
    expect_input_error(tmp_path, tmp_path / "a.fits", tmp_path / "b.npy")


def test_failed_fits_write_keeps_existing_output(tmp_path):
    pytest.importorskip("astropy.io.fits")
    write_astropy(tmp_path / "a.fits", fits_image("int16"))
    write_astropy(tmp_path / "bad.fits", fits_image("int16"))
    corrupt_card(tmp_path / "bad.fits", "BITPIX", "BITPIX  =                   17")
    convert(tmp_path / "a.fits", tmp_path / "b.fits")
    before = (tmp_path / "b.fits").read_bytes()
    assert run("convert", tmp_path / "bad.fits", tmp_path / "b.fits").returncode == 2
    assert (tmp_path / "b.fits").read_bytes() == before


# ----------------------------------------------------------------------------------------------
# MiniSEED and SAC (ObsPy)

def obspy_trace(net, sta, loc, cha, data, rate, start):
    obspy = pytest.importorskip("obspy")
    tr = obspy.Trace(data=data)
    tr.stats.network, tr.stats.station, tr.stats.location, tr.stats.channel = net, sta, loc, cha
    tr.stats.sampling_rate = rate
    tr.stats.starttime = obspy.UTCDateTime(start)
    return tr


def three_traces():
    obspy = pytest.importorskip("obspy")
    rng = np.random.default_rng(3)
    st = obspy.Stream([
        obspy_trace("XX", "STA1", "00", "HHZ", np.cumsum(rng.integers(-5000, 5000, 3000)).astype(np.int32),
                    100.0, T0),
        obspy_trace("XX", "STA1", "00", "HHN", rng.standard_normal(1200).astype(np.float32), 40.0, T0),
        obspy_trace("XY", "STA2", "", "BHZ", rng.standard_normal(500), 20.0, "2019-01-01T00:00:01.5Z"),
    ])
    for tr, enc in zip(st, ["STEIM2", "FLOAT32", "FLOAT64"]):
        tr.stats.mseed = {"encoding": enc}
    return st


def expect_same_stream(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.id == w.id
        assert g.stats.starttime.ns == w.stats.starttime.ns
        assert g.stats.sampling_rate == w.stats.sampling_rate
        assert same_bits(g.data, w.data)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("reclen,byteorder", [(512, ">"), (4096, ">"), (256, "<")])
def test_mseed_to_mseed_keeps_samples_ids_times_rates(tmp_path, reclen, byteorder):
    obspy = pytest.importorskip("obspy")
    st = three_traces()
    st.write(str(tmp_path / "a.mseed"), format="MSEED", reclen=reclen, byteorder=byteorder)
    convert(tmp_path / "a.mseed", tmp_path / "b.mseed")
    expect_same_stream(obspy.read(str(tmp_path / "b.mseed")), obspy.read(str(tmp_path / "a.mseed")))


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("encoding,dtype", [("STEIM1", np.int32), ("INT16", np.int16),
                                            ("INT32", np.int32)])
def test_mseed_integer_encodings(tmp_path, encoding, dtype):
    obspy = pytest.importorskip("obspy")
    x = np.random.default_rng(9).integers(-30000, 30000, 800).astype(dtype)
    tr = obspy_trace("XX", "ENC", "10", "HHZ", x, 200.0, T0)
    tr.write(str(tmp_path / "a.mseed"), format="MSEED", encoding=encoding, reclen=512)
    convert(tmp_path / "a.mseed", tmp_path / "b.mseed")
    got = obspy.read(str(tmp_path / "b.mseed"))[0]
    assert np.array_equal(got.data, x) and got.data.dtype == np.int32
    assert got.stats.starttime.ns == tr.stats.starttime.ns
    convert(tmp_path / "a.mseed", tmp_path / "b.npy")
    y = np.load(tmp_path / "b.npy")
    assert y.dtype == np.int32 and np.array_equal(y, x)


def gap_stream():
    obspy = pytest.importorskip("obspy")
    a = np.arange(700, dtype=np.int32) * 3 - 400
    b = np.arange(300, dtype=np.int32) * -2 + 77
    return obspy.Stream([obspy_trace("XX", "GAP", "00", "BHZ", a, 50.0, T0),
                         obspy_trace("XX", "GAP", "00", "BHZ", b, 50.0,
                                     obspy.UTCDateTime(T0) + (700 + 25) / 50.0)])


def test_mseed_gap_is_kept_or_zero_filled(tmp_path):
    obspy = pytest.importorskip("obspy")
    st = gap_stream()
    st.write(str(tmp_path / "a.mseed"), format="MSEED", reclen=512)
    r = convert(tmp_path / "a.mseed", tmp_path / "b.mseed")
    assert "gap of 25 samples" in r.stderr
    expect_same_stream(obspy.read(str(tmp_path / "b.mseed")), st)

    convert(tmp_path / "a.mseed", tmp_path / "c.mseed", "--fill-gaps")
    merged = obspy.read(str(tmp_path / "c.mseed"))
    want = st.copy().merge(method=0, fill_value=0)
    expect_same_stream(merged, want)

    convert(tmp_path / "a.mseed", tmp_path / "c.npy", "--fill-gaps")
    assert same_bits(np.load(tmp_path / "c.npy"), want[0].data)


def test_mseed_to_npy_gives_the_samples(tmp_path):
    obspy = pytest.importorskip("obspy")
    st = three_traces()
    st[2].write(str(tmp_path / "a.mseed"), format="MSEED", reclen=512)
    convert(tmp_path / "a.mseed", tmp_path / "b.npy")
    assert same_bits(np.load(tmp_path / "b.npy"), obspy.read(str(tmp_path / "a.mseed"))[0].data)


def test_mseed_channels_of_other_rates_or_starts_are_not_stacked(tmp_path):
    """Channels become the rows of one array only when they share its time axis."""
    obspy = pytest.importorskip("obspy")
    x = np.arange(1000, dtype=np.float32)
    for rate, start, words in [(50.0, T0, ["50.000000 Hz", "100.000000 Hz"]),
                               (100.0, "2019-01-01T00:00:00.129456Z", ["starts at"])]:
        st = obspy.Stream([obspy_trace("XX", "A", "00", "HHZ", x, 100.0, T0),
                           obspy_trace("XX", "B", "00", "HHZ", x.copy(), rate, start)])
        for tr in st:
            tr.stats.mseed = {"encoding": "FLOAT32"}
        st.write(str(tmp_path / "two.mseed"), format="MSEED")
        r = run("convert", tmp_path / "two.mseed", tmp_path / "two.npy")
        assert r.returncode == 2 and "one time axis" in r.stderr, r.stderr
        assert all(w in r.stderr for w in words), r.stderr
        assert not (tmp_path / "two.npy").exists()
    # Half a sample apart is refused, less is the same sample grid.
    st = obspy.Stream([obspy_trace("XX", "A", "00", "HHZ", x, 100.0, T0),
                       obspy_trace("XX", "B", "00", "HHZ", x.copy(), 100.0,
                                   "2019-01-01T00:00:00.127456Z")])
    for tr in st:
        tr.stats.mseed = {"encoding": "FLOAT32"}
    st.write(str(tmp_path / "near.mseed"), format="MSEED")
    convert(tmp_path / "near.mseed", tmp_path / "near.npy")
    assert np.load(tmp_path / "near.npy").shape == (2, 1000)


def sac_trace():
    x = np.random.default_rng(4).standard_normal(900).astype(np.float32)
    tr = obspy_trace("IU", "ANMO", "00", "BHZ", x, 40.0, "2021-03-04T05:06:07.890123Z")
    tr.stats.sac = {"evla": 34.9, "evlo": -106.5, "kevnm": "EVENT1", "t1": 3.25}
    return tr


@pytest.mark.parametrize("byteorder", ["<", ">"])
def test_sac_to_sac_keeps_samples_times_and_header(tmp_path, byteorder):
    obspy = pytest.importorskip("obspy")
    tr = sac_trace()
    tr.write(str(tmp_path / "a.sac"), format="SAC", byteorder=byteorder)
    convert(tmp_path / "a.sac", tmp_path / "b.sac")
    want = obspy.read(str(tmp_path / "a.sac"))[0]
    got = obspy.read(str(tmp_path / "b.sac"))[0]
    expect_same_stream([got], [want])
    for key in ("evla", "evlo", "kevnm", "t1", "b", "nzyear", "nzjday", "nzmsec", "delta"):
        assert got.stats.sac[key] == want.stats.sac[key], key


def test_sac_and_mseed_convert_into_each_other(tmp_path):
    obspy = pytest.importorskip("obspy")
    tr = sac_trace()
    tr.write(str(tmp_path / "a.sac"), format="SAC")
    convert(tmp_path / "a.sac", tmp_path / "b.mseed")
    want = obspy.read(str(tmp_path / "a.sac"))[0]
    expect_same_stream(obspy.read(str(tmp_path / "b.mseed")), [want])
    convert(tmp_path / "b.mseed", tmp_path / "c.sac")
    expect_same_stream(obspy.read(str(tmp_path / "c.sac")), [want])
    convert(tmp_path / "a.sac", tmp_path / "d.npy")
    assert same_bits(np.load(tmp_path / "d.npy"), want.data)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_corrupted_seismic_files_fail_cleanly(tmp_path):
    pytest.importorskip("obspy")
    tr = sac_trace()
    tr.write(str(tmp_path / "full.sac"), format="SAC")
    (tmp_path / "a.sac").write_bytes((tmp_path / "full.sac").read_bytes()[:-3])
    expect_input_error(tmp_path, tmp_path / "a.sac", tmp_path / "b.mseed")
    three_traces().write(str(tmp_path / "full.mseed"), format="MSEED", reclen=512)
    (tmp_path / "a.mseed").write_bytes((tmp_path / "full.mseed").read_bytes()[:-200])
    expect_input_error(tmp_path, tmp_path / "a.mseed", tmp_path / "b.mseed")
    (tmp_path / "junk.mseed").write_bytes(b"not a seed record at all" * 40)
    expect_input_error(tmp_path, tmp_path / "junk.mseed", tmp_path / "b.sac")
