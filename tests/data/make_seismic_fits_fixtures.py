#!/usr/bin/env python3
"""Writes the FITS, MiniSEED and SAC fixtures of the I/O tests with independent tools.

FITS files come from astropy, MiniSEED and SAC files from ObsPy; expected.json in each folder holds
what those tools read back (values, shapes, dtypes, header keywords, ids, times, rates), so the
C++ tests compare halfscope's readers against astropy and ObsPy, not against halfscope itself.

Run from anywhere:  python3 tests/data/make_seismic_fits_fixtures.py
The outputs are small (a few tens of KB) and are kept in the repository.
"""
import json
import os
import warnings

import numpy as np
from astropy.io import fits
import obspy
from obspy import Stream, Trace, UTCDateTime

HERE = os.path.dirname(os.path.abspath(__file__))
RNG = np.random.default_rng(20240611)


def out(*parts):
    path = os.path.join(HERE, *parts)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def values(a):
    """Flat list of an array's values as Python numbers (exact for every dtype used here)."""
    return [int(v) if a.dtype.kind in "iu" else float(v) for v in np.asarray(a).ravel()]


# ----------------------------------------------------------------------------------------------
# FITS (astropy)

def header_keywords(hdr):
    keep = {}
    for key in ("OBJECT", "BUNIT", "CDELT1", "CRVAL1", "CTYPE1"):
        if key in hdr:
            keep[key] = hdr[key]
    return keep


def add_keywords(hdr):
    hdr["OBJECT"] = ("M31", "target")
    hdr["BUNIT"] = "Jy/beam"
    hdr["CTYPE1"] = "RA---SIN"
    hdr["CRVAL1"] = 10.6847083
    hdr["CDELT1"] = -0.000277777777777778
    hdr.add_history("written by make_seismic_fits_fixtures.py")
    hdr.add_comment("halfscope test fixture")


def write_fits_fixtures():
    expected = {}
    images = {
        "bitpix8.fits": RNG.integers(0, 256, size=(4, 5)).astype(np.uint8),
        "bitpix16.fits": RNG.integers(-32768, 32768, size=(3, 4)).astype(np.int16),
        "bitpix32.fits": RNG.integers(-2**31, 2**31, size=(3, 4)).astype(np.int32),
        "bitpix64.fits": RNG.integers(-2**62, 2**62, size=(2, 3)).astype(np.int64),
        "bitpix-32.fits": RNG.standard_normal((3, 5)).astype(np.float32),
        "bitpix-64.fits": RNG.standard_normal((2, 3, 4)),
        "uint16.fits": RNG.integers(0, 65536, size=(3, 4)).astype(np.uint16),
        # int8 (BZERO -128) and uint32 (BZERO 2^31) are checked against astropy in the pytest
        # suite, which writes them on the fly.
        "uint64.fits": np.array([0, 1, 2**63, 2**64 - 1], dtype=np.uint64),
    }
    for name, data in images.items():
        hdu = fits.PrimaryHDU(data)
        add_keywords(hdu.header)
        hdu.writeto(out("fits", name), overwrite=True)

    # BITPIX 16 with BSCALE 0.5 / BZERO 100: stored k gives 100 + 0.5 k.
    stored = RNG.integers(-1000, 1000, size=(4, 3)).astype(np.int16)
    hdu = fits.PrimaryHDU(100.0 + 0.5 * stored.astype(np.float64))
    hdu.scale("int16", bscale=0.5, bzero=100)
    add_keywords(hdu.header)
    hdu.writeto(out("fits", "scaled.fits"), overwrite=True)

    # Image in the first extension behind an empty primary HDU.
    ext = fits.ImageHDU(RNG.standard_normal((2, 3)).astype(np.float32), name="SCI")
    add_keywords(ext.header)
    fits.HDUList([fits.PrimaryHDU(), ext]).writeto(out("fits", "extension.fits"), overwrite=True)

    for name in sorted(os.listdir(os.path.join(HERE, "fits"))):
        if not name.endswith(".fits"):
            continue
        with fits.open(out("fits", name)) as hdul:
            hdu = hdul[0] if hdul[0].header["NAXIS"] > 0 else hdul[1]
            hdr = hdu.header.copy()  # before .data: astropy rewrites BITPIX once it scales
            phys = hdu.data
        # The stored values, read without scaling by astropy itself.
        with fits.open(out("fits", name), do_not_scale_image_data=True) as hdul:
            raw = (hdul[0] if hdul[0].header["NAXIS"] > 0 else hdul[1]).data
        bitpix = hdr["BITPIX"]
        scaled_float = bitpix > 0 and "BSCALE" in hdr and (hdr["BSCALE"] != 1 or (
            hdr.get("BZERO", 0) not in (0, -128, 2**15, 2**31, 2**63)))
        expected[name] = {
            "shape": list(phys.shape),
            "bitpix": bitpix,
            # astropy scales BITPIX 16 to float32; halfscope gives float64 of the same numbers.
            "physical_dtype": "float64" if scaled_float else phys.dtype.name,
            "physical": values(phys),
            "raw_dtype": raw.dtype.name,
            "raw": values(raw),
            "bscale": hdr.get("BSCALE"),
            "bzero": hdr.get("BZERO"),
            "keywords": header_keywords(hdr),
            "history": [str(h) for h in hdr.get("HISTORY", [])],
        }
    return expected


# ----------------------------------------------------------------------------------------------
# MiniSEED and SAC (ObsPy)

T0 = UTCDateTime("2019-01-01T00:00:00.123456Z")


def trace(net, sta, loc, cha, data, rate, start):
    tr = Trace(data=data)
    tr.stats.network, tr.stats.station, tr.stats.location, tr.stats.channel = net, sta, loc, cha
    tr.stats.sampling_rate = rate
    tr.stats.starttime = start
    return tr


def describe_stream(st):
    return [{
        "id": tr.id,
        "start_ns": tr.stats.starttime.ns,
        "sample_rate": tr.stats.sampling_rate,
        "dtype": tr.data.dtype.name,
        "data": values(tr.data),
    } for tr in st]


def write_mseed_fixtures():
    expected = {}
    ints = np.cumsum(RNG.integers(-2000, 2000, size=300)).astype(np.int32)
    st = Stream([
        trace("XX", "STA1", "00", "HHZ", ints, 100.0, T0),
        trace("XX", "STA1", "00", "HHN", RNG.standard_normal(100).astype(np.float32), 50.0, T0),
        trace("XX", "STA2", "", "BHZ", RNG.standard_normal(60), 20.0, T0 + 0.5),
    ])
    encodings = ["STEIM2", "FLOAT32", "FLOAT64"]
    for tr, enc in zip(st, encodings):
        tr.stats.mseed = {"encoding": enc}
    st.write(out("mseed", "stream.mseed"), format="MSEED", reclen=512)

    # One channel with 50 samples missing between two segments.
    a = np.arange(300, dtype=np.int32) * 3 - 400
    b = np.arange(200, dtype=np.int32) * -2 + 77
    rate = 40.0
    st = Stream([trace("XX", "GAP", "00", "BHZ", a, rate, T0),
                 trace("XX", "GAP", "00", "BHZ", b, rate, T0 + (300 + 50) / rate)])
    st.write(out("mseed", "gap.mseed"), format="MSEED", reclen=512, encoding="STEIM2")
    gaps = obspy.read(out("mseed", "gap.mseed")).get_gaps()
    assert len(gaps) == 1 and gaps[0][-1] == 50, gaps

    # Other integer encodings, little-endian records.
    small = RNG.integers(-30000, 30000, size=120)
    st = Stream([
        trace("XX", "ENC", "10", "HH1", small.astype(np.int16), 100.0, T0),
        trace("XX", "ENC", "10", "HH2", small.astype(np.int32) * 1000, 100.0, T0),
        trace("XX", "ENC", "10", "HH3", small.astype(np.int32), 100.0, T0),
    ])
    for tr, enc in zip(st, ["INT16", "INT32", "STEIM1"]):
        tr.stats.mseed = {"encoding": enc}
    st.write(out("mseed", "encodings_le.mseed"), format="MSEED", reclen=256, byteorder="<")

    for name in ("stream.mseed", "gap.mseed", "encodings_le.mseed"):
        st = obspy.read(out("mseed", name))
        expected[name] = {"traces": describe_stream(st)}
        for tr in expected[name]["traces"]:
            if tr["dtype"] == "int16":
                tr["dtype"] = "int32"  # libmseed decodes INT16 into int32 samples
    first, second = obspy.read(out("mseed", "gap.mseed"))
    end_first = first.stats.starttime.ns + round(first.stats.npts * 1e9 / rate)
    expected["gap.mseed"]["gaps"] = [{"id": first.id, "start_ns": end_first,
                                      "end_ns": second.stats.starttime.ns, "missing_samples": 50}]
    return expected


def write_sac_fixtures():
    expected = {}
    data = RNG.standard_normal(120).astype(np.float32)
    tr = trace("XX", "SACST", "01", "HHZ", data, 100.0, T0)
    tr.stats.sac = {"evla": 45.5, "evlo": -120.25, "kevnm": "QUAKE2019", "user0": 3.5, "t1": 12.25}
    tr.write(out("sac", "little.sac"), format="SAC", byteorder="<")
    tr.write(out("sac", "big.sac"), format="SAC", byteorder=">")
    for name in ("little.sac", "big.sac"):
        got = obspy.read(out("sac", name))[0]
        h = got.stats.sac
        expected[name] = {
            "id": got.id,
            "start_ns": got.stats.starttime.ns,
            "sample_rate": got.stats.sampling_rate,
            "delta": float(h.delta),
            "npts": int(h.npts),
            "data": values(got.data),
            "header": {"evla": float(h.evla), "evlo": float(h.evlo), "user0": float(h.user0),
                       "t1": float(h.t1), "b": float(h.b), "kevnm": h.kevnm,
                       "nzyear": int(h.nzyear), "nzjday": int(h.nzjday), "nzhour": int(h.nzhour),
                       "nzmin": int(h.nzmin), "nzsec": int(h.nzsec), "nzmsec": int(h.nzmsec)},
        }
    return expected


def main():
    # ObsPy warns about files with several encodings (intended here) and, reading little-endian
    # records, checks their fractional seconds in the wrong byte order (its data and times are
    # right: libmseed does the real decoding).
    warnings.filterwarnings("ignore", message="File will be written with more than one")
    warnings.filterwarnings("ignore", message="Record contains a fractional seconds")
    for folder, make in (("fits", write_fits_fixtures), ("mseed", write_mseed_fixtures),
                         ("sac", write_sac_fixtures)):
        expected = make()
        with open(out(folder, "expected.json"), "w") as f:
            json.dump(expected, f, sort_keys=True, separators=(",", ":"))
            f.write("\n")


if __name__ == "__main__":
    main()
