"""halfscope.io against ObsPy and astropy: Stream <-> arrays, FITS HDU <-> images.

The references are ObsPy's own merge / trim / split (the common time axis, gaps, padding) and
astropy writing and reading an in-memory FITS file; values are compared exactly, since every
conversion here only moves or widens values (integers and float32 are exact in float64).
"""
import io
import sys

import numpy as np
import pytest

obspy = pytest.importorskip("obspy")
fits = pytest.importorskip("astropy.io.fits")
hsio = pytest.importorskip("halfscope.io")

T0 = obspy.UTCDateTime("2021-03-04T05:06:07.000000Z")
RATE = 100.0


def trace(cid, start_s, values, rate=RATE):
    net, sta, loc, cha = cid.split(".")
    return obspy.Trace(data=np.asarray(values), header=dict(
        network=net, station=sta, location=loc, channel=cha, sampling_rate=rate,
        starttime=T0 + start_s))


def ragged_stream(seed=3):
    """Three channels: one complete, one starting 0.5 s late with a 0.3 s gap, one ending early;
    integer counts as a digitiser writes them (exact in float32)."""
    rng = np.random.default_rng(seed)
    r = lambda n: rng.integers(-2**20, 2**20, n).astype(np.int32)
    return obspy.Stream([
        trace("XX.STA.00.HHZ", 0.0, r(1000)),
        trace("XX.STA.00.HHN", 0.5, r(200)),
        trace("XX.STA.00.HHN", 0.5 + 2.3, r(650)),     # 200 samples then a 30-sample gap
        trace("XX.STA.00.HHE", 0.0, r(900)),           # ends 100 samples before the others
    ])


def test_example_stream_round_trip():
    st = obspy.read()  # ObsPy's bundled 3-component example (BW.RJOB, 3000 samples at 100 Hz)
    arr = hsio.from_stream(st, dtype="float64")
    assert arr.ids == sorted(tr.id for tr in st)
    assert arr.data.shape == (3, 3000) and arr.data.dtype == np.float64
    assert arr.sampling_rate == 100.0 and arr.starttime == st[0].stats.starttime
    assert arr.endtime == st[0].stats.endtime and arr.gaps == []
    for row, cid in zip(arr.data, arr.ids):
        np.testing.assert_array_equal(row, st.select(id=cid)[0].data)
    # float32 by default: each value rounded once, as NumPy's cast does.
    np.testing.assert_array_equal(hsio.from_stream(st).data, arr.data.astype(np.float32))
    back = hsio.to_stream(arr.data, arr.ids, arr.sampling_rate, arr.starttime)
    for tr in back:
        ref = st.select(id=tr.id)[0]
        assert (tr.stats.starttime, tr.stats.sampling_rate, tr.stats.npts) == \
            (ref.stats.starttime, ref.stats.sampling_rate, ref.stats.npts)
        np.testing.assert_array_equal(tr.data, ref.data)


def test_gaps_and_different_starts_match_obspy_merge():
    st = ragged_stream()
    arr = hsio.from_stream(st, fill_value=-7.0, dtype="float64")
    start = min(tr.stats.starttime for tr in st)
    end = max(tr.stats.endtime for tr in st)
    # Reference: ObsPy merges each id onto its grid and pads to the common span.
    ref = st.copy().merge(method=0, fill_value=-7).trim(start, end, pad=True, fill_value=-7)
    assert arr.ids == sorted(tr.id for tr in ref)
    assert arr.starttime == start and arr.endtime == end
    for row, cid in zip(arr.data, arr.ids):
        np.testing.assert_array_equal(row, ref.select(id=cid)[0].data)
    assert arr.gaps == [("XX.STA.00.HHE", 900, 100), ("XX.STA.00.HHN", 0, 50),
                        ("XX.STA.00.HHN", 250, 30), ("XX.STA.00.HHN", 930, 70)]
    # Back to ObsPy with the gaps masked: split() gives the original traces again.
    back = hsio.to_stream(arr.data, arr.ids, arr.sampling_rate, arr.starttime, gaps=arr.gaps).split()
    key = lambda tr: (tr.id, tr.stats.starttime)
    assert [key(t) for t in sorted(back, key=key)] == [key(t) for t in sorted(st, key=key)]
    for a, b in zip(sorted(back, key=key), sorted(st, key=key)):
        np.testing.assert_array_equal(a.data, b.data)


def test_start_off_the_grid_snaps_to_the_nearest_sample():
    # 0.4 and 0.6 of a sample late: placed at column 0 and 1 (ObsPy's rounding convention).
    for late, column in ((0.004, 0), (0.006, 1)):
        st = obspy.Stream([trace("XX.A..HHZ", 0.0, np.ones(10)), trace("XX.B..HHZ", late, 2 * np.ones(10))])
        arr = hsio.from_stream(st)
        assert arr.data.shape == (2, 10 + column)
        assert np.flatnonzero(arr.data[1] == 2)[0] == column
        # templates are cut on the same grid, with the same snapping
        tpl = hsio.templates_from_stream(st, arr.starttime + 0.02, 5)
        np.testing.assert_array_equal(tpl, arr.data[:, 2:7])


def test_different_sampling_rates_are_refused_naming_ids_and_rates():
    st = obspy.Stream([trace("XX.A..HHZ", 0, np.zeros(10)), trace("XX.B..HHZ", 0, np.zeros(10), rate=50.0)])
    with pytest.raises(ValueError) as e:
        hsio.from_stream(st)
    for text in ("XX.A..HHZ", "XX.B..HHZ", "100 Hz", "50 Hz"):
        assert text in str(e.value)


def test_overlaps_must_agree():
    same = obspy.Stream([trace("XX.A..HHZ", 0, np.arange(10.0)), trace("XX.A..HHZ", 0.05, np.arange(5.0, 15.0))])
    np.testing.assert_array_equal(hsio.from_stream(same, dtype="float64").data[0], np.arange(15.0))
    clash = obspy.Stream([trace("XX.A..HHZ", 0, np.arange(10.0)), trace("XX.A..HHZ", 0.05, np.zeros(10))])
    with pytest.raises(ValueError, match="XX.A..HHZ overlap"):
        hsio.from_stream(clash)


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="empty"):
        hsio.from_stream(obspy.Stream())
    with pytest.raises(ValueError, match="ids: expected 2"):
        hsio.to_stream(np.zeros((2, 5)), ["XX.A..HHZ"], 100.0, T0)
    with pytest.raises(ValueError, match="NET.STA.LOC.CHA"):
        hsio.to_stream(np.zeros((1, 5)), ["XX.A.HHZ"], 100.0, T0)
    with pytest.raises(ValueError, match="complex"):
        hsio.to_fits_hdu(np.zeros((2, 2), np.complex64))


def test_templates_from_stream_cuts_the_merged_channels():
    st = ragged_stream()
    arr = hsio.from_stream(st, dtype="float64")
    t = arr.starttime + 3.0  # column 300: inside every channel and after HHN's gap
    tpl = hsio.templates_from_stream(st, t, 120, dtype="float64")
    np.testing.assert_array_equal(tpl, arr.data[:, 300:420])
    one = hsio.templates_from_stream(st, t, 120, ids=["XX.STA.00.HHZ", "XX.STA.00.HHE"])
    np.testing.assert_array_equal(one, arr.data[[2, 0], 300:420].astype(np.float32))
    with pytest.raises(ValueError, match="XX.STA.00.HHN does not cover"):
        hsio.templates_from_stream(st, arr.starttime + 2.4, 50)          # across HHN's gap
    with pytest.raises(ValueError, match="XX.STA.00.HHE does not cover"):
        hsio.templates_from_stream(st, arr.starttime + 8.5, 100)         # past HHE's end
    with pytest.raises(ValueError, match="XX.NOPE..HHZ not in the stream"):
        hsio.templates_from_stream(st, t, 10, ids=["XX.NOPE..HHZ"])


def test_cc_to_trace_times():
    cc = np.linspace(-1, 1, 50).astype(np.float32)
    tr = hsio.cc_to_trace(cc, RATE, T0, step=4)
    assert tr.id == "HS.CC..XCC" and tr.stats.sampling_rate == RATE / 4
    np.testing.assert_array_equal(tr.data, cc)
    # correlation index i is data sample i * step
    assert tr.stats.starttime + 10 * tr.stats.delta == T0 + 10 * 4 / RATE
    with pytest.raises(ValueError, match="step"):
        hsio.cc_to_trace(cc, RATE, T0, step=0)


def write_read(hdu):
    buf = io.BytesIO()
    hdu.writeto(buf)
    buf.seek(0)
    return fits.open(buf)


def test_fits_round_trip_with_header_and_history():
    img = np.random.default_rng(1).standard_normal((6, 9)).astype(np.float32)
    header = fits.Header([("BUNIT", "Jy/beam"), ("OBJECT", "sim"), ("CTYPE1", "RA---SIN"),
                          ("BZERO", 5.0), ("NAXIS1", 99)])
    hdu = hsio.to_fits_hdu(img, header=header, history=["halfscope deconvolve cg", "lam=0.01"])
    img[0, 0] = 42  # the HDU holds its own copy
    with write_read(hdu) as hl:
        h = hl[0].header
        assert (h["BUNIT"], h["OBJECT"], h["CTYPE1"], h["BITPIX"], h["NAXIS1"]) == \
            ("Jy/beam", "sim", "RA---SIN", -32, 9)
        assert "BZERO" not in h  # a stale scaling keyword would change the values read back
        assert list(h["HISTORY"]) == ["halfscope deconvolve cg", "lam=0.01"]
        out = hsio.from_fits_hdu(hl)
    assert out.dtype == np.float32 and out.dtype.isnative
    img[0, 0] = hdu.data[0, 0]
    np.testing.assert_array_equal(out, img)


def test_fits_scaled_integers_half_and_radio_axes():
    # int16 with BSCALE/BZERO: astropy applies them (in float32 for 16-bit integers); the values
    # 10 + 2 k are exact in float32. int32 data come back as float64.
    values = 10.0 + 2.0 * np.arange(12).reshape(3, 4)
    hdu = fits.PrimaryHDU(values.copy())
    hdu.scale("int16", bzero=10, bscale=2)
    with write_read(hdu) as hl:
        assert hl[0].header["BITPIX"] == 16
        out = hsio.from_fits_hdu(hl[0])
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, values)
    big = np.arange(-6, 6, dtype=np.int32).reshape(3, 4) * 2**20
    with write_read(hsio.to_fits_hdu(big)) as hl:
        out = hsio.from_fits_hdu(hl)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, big)
    half = np.arange(6, dtype=np.float16).reshape(2, 3) / 3
    with write_read(hsio.to_fits_hdu(half)) as hl:
        assert hl[0].header["BITPIX"] == -32
        np.testing.assert_array_equal(hsio.from_fits_hdu(hl), half.astype(np.float32))
    cube = fits.PrimaryHDU(np.arange(8.0).reshape(1, 1, 2, 4))  # (Stokes, freq, y, x)
    np.testing.assert_array_equal(hsio.from_fits_hdu(cube), np.arange(8.0).reshape(2, 4))
    with pytest.raises(ValueError, match="2-D"):
        hsio.from_fits_hdu(fits.PrimaryHDU(np.zeros((2, 2, 2))))


def test_missing_package_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "obspy", None)  # import obspy now raises ImportError
    with pytest.raises(ImportError, match="pip install obspy"):
        hsio.from_stream([])


def test_device_arrays_are_copied_to_the_host():
    cp = pytest.importorskip("cupy")
    if cp.cuda.runtime.getDeviceCount() == 0:
        pytest.skip("no CUDA device")
    img = cp.arange(12, dtype=cp.float32).reshape(3, 4)
    np.testing.assert_array_equal(hsio.to_fits_hdu(img).data, cp.asnumpy(img))
    tr = hsio.cc_to_trace(img[0], RATE, T0)
    np.testing.assert_array_equal(tr.data, cp.asnumpy(img[0]))


def test_matched_filter_finds_the_cut_template():
    hs = pytest.importorskip("halfscope")
    st = obspy.read()
    arr = hsio.from_stream(st)
    k, at = 200, 1234  # template: 2 s starting at sample 1234 of every channel
    tpl = hsio.templates_from_stream(st, arr.starttime + at / arr.sampling_rate, k)
    np.testing.assert_array_equal(tpl, arr.data[:, at:at + k])
    n = len(arr.ids)
    weights = np.full((1, n), 1.0 / n, dtype=np.float32)
    cc = hs.matched_filter(tpl[None], np.zeros((1, n), dtype=np.int32), weights, arr.data,
                           step=1, arch="cpu")
    assert cc.shape == (1, arr.data.shape[1] - k + 1)
    # At the cut each channel's CC is 1 up to FP32 rounding of K-term sums: |error| <= ~2 K u
    # (u = 2^-24) for the dot product and the norms; 4 K u leaves room for the normalisation.
    tol = 4 * k * 2.0**-24
    assert abs(cc[0, at] - 1.0) <= tol
    assert int(np.argmax(cc[0])) == at


def test_torch_bfloat16_becomes_float32():
    torch = pytest.importorskip("torch")
    img = torch.arange(12, dtype=torch.bfloat16).reshape(3, 4) / 3  # CPU tensor, no GPU needed
    hdu = hsio.to_fits_hdu(img)
    assert hdu.data.dtype == np.float32
    np.testing.assert_array_equal(hdu.data, img.float().numpy())  # bf16 -> f32 is exact
