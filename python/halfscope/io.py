"""Conversions between ObsPy / astropy objects and the arrays halfscope's functions take.

ObsPy and astropy are optional: they are imported inside the functions that need them, and a
missing one raises ImportError naming the package and how to install it.

Seismic data: `from_stream` turns a `Stream` into one ``(N, L)`` array on a common time axis (the
layout of ``hs.matched_filter``'s ``(N, L)`` data), `templates_from_stream` cuts an ``(N, K)``
template from the same channels, `to_stream` and `cc_to_trace` go back to ObsPy.

Images: `to_fits_hdu` / `from_fits_hdu` move a 2-D image in and out of an astropy HDU with its
header (BUNIT, WCS, ...) and HISTORY cards.
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import numpy as np

from ._arrays import to_numpy
from ._core import InvalidInput

__all__ = ["SeismicArray", "from_stream", "templates_from_stream", "to_stream", "cc_to_trace",
           "to_fits_hdu", "from_fits_hdu"]

# Keywords that describe the data array itself: astropy writes them from the data, so a given
# header's values would be stale (BSCALE / BZERO would even rescale the written values).
_STRUCTURAL_KEYS = ("SIMPLE", "XTENSION", "BITPIX", "NAXIS", "EXTEND", "PCOUNT", "GCOUNT",
                    "BSCALE", "BZERO", "BLANK")


def _require(module: str, pip_name: str, caller: str):
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"halfscope.io.{caller} needs {pip_name}, which is not installed: "
                          f"pip install {pip_name}") from e


def _to_numpy(x: Any, name: str) -> np.ndarray:
    """A host NumPy array from NumPy, CuPy or torch input (device data are copied to the host,
    torch bfloat16 widened to float32: halfscope._arrays.to_numpy), checked to be real."""
    a = to_numpy(x)
    if a.dtype.kind == "c":
        raise InvalidInput(f"{name}: expected real values, found dtype {a.dtype}")
    if a.dtype.kind not in "fiub":
        raise InvalidInput(f"{name}: expected a numeric array, found dtype {a.dtype}")
    return a


@dataclasses.dataclass
class SeismicArray:
    """Channels of a Stream on one time axis (returned by `from_stream`).

    Attributes
    ----------
    data : numpy.ndarray
        ``(N, L)``: row i is channel ``ids[i]``, column j the time ``starttime + j / sampling_rate``.
    ids : list of str
        SEED ids ``NET.STA.LOC.CHA`` in ascending string order.
    sampling_rate : float
        Samples per second, common to every channel.
    starttime : obspy.UTCDateTime
        Time of column 0 (the earliest trace start).
    gaps : list of tuple
        ``(id, start_sample, n_samples)`` for every run of samples no trace covered (filled with
        ``fill_value``), leading and trailing ends included; ordered by channel, then start.
    """

    data: np.ndarray
    ids: list
    sampling_rate: float
    starttime: Any
    gaps: list

    @property
    def endtime(self):
        """Time of the last column, ``starttime + (L - 1) / sampling_rate``."""
        return self.starttime + (self.data.shape[1] - 1) / self.sampling_rate


def _traces(stream, caller: str) -> list:
    obspy = _require("obspy", "obspy", caller)
    if isinstance(stream, obspy.Trace):
        stream = [stream]
    traces = list(stream.traces if isinstance(stream, obspy.Stream) else stream)
    bad = [type(t).__name__ for t in traces if not isinstance(t, obspy.Trace)]
    if bad:
        raise InvalidInput(f"stream: expected an obspy Stream or Traces, found items of type {bad[0]}")
    if not traces:
        raise InvalidInput("stream: expected at least one Trace, found an empty stream")
    return traces


def _common_rate(traces) -> float:
    # Exact equality, as ObsPy's Stream.merge asks: resampling is the caller's decision.
    rates = {}
    for tr in traces:
        rates.setdefault(float(tr.stats.sampling_rate), set()).add(tr.id)
    if len(rates) > 1:
        found = "; ".join(f"{r:g} Hz: {', '.join(sorted(ids))}" for r, ids in sorted(rates.items()))
        raise InvalidInput(f"stream: expected one sampling rate for every trace, found {found} "
                         f"(resample first, e.g. Trace.resample or Stream.interpolate)")
    return next(iter(rates))


def _merge(traces, dtype, fill_value):
    """(ids, rate, start, data (N, L), covered (N, L) bool) on the common grid.

    Trace k starts at column round((start_k - start) * rate): a start off the grid by less than
    half a sample is snapped to the nearest sample, the convention ObsPy's merge uses.
    """
    rate = _common_rate(traces)
    ids = sorted({tr.id for tr in traces})
    row = {i: n for n, i in enumerate(ids)}
    start = min(tr.stats.starttime for tr in traces)
    offsets = [int(round((tr.stats.starttime - start) * rate)) for tr in traces]
    length = max(o + tr.stats.npts for o, tr in zip(offsets, traces))
    data = np.full((len(ids), length), fill_value, dtype=np.float64)
    covered = np.zeros((len(ids), length), dtype=bool)
    for o, tr in sorted(zip(offsets, traces), key=lambda p: (p[1].id, p[0])):
        r, n = row[tr.id], tr.stats.npts
        values = np.ma.getdata(tr.data).astype(np.float64, copy=False)
        valid = ~np.ma.getmaskarray(tr.data)  # masked samples (ObsPy's merged gaps) are gaps here
        seg, seen = data[r, o:o + n], covered[r, o:o + n]
        clash = seen & valid & (seg != values)
        if clash.any():
            j = o + int(np.argmax(clash))
            raise InvalidInput(f"stream: traces of {tr.id} overlap with different values at sample {j} "
                             f"({start + j / rate}); merge them first, e.g. Stream.merge(method=1)")
        seg[valid] = values[valid]
        seen |= valid
    return ids, rate, start, data.astype(dtype, copy=False), covered


def _runs(mask_row: np.ndarray):
    """(start, count) of each run of True in a 1-D bool array."""
    edges = np.diff(np.concatenate(([0], mask_row.view(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [(int(s), int(e - s)) for s, e in zip(starts, ends)]


def from_stream(stream, *, fill_value: float = 0.0, dtype="float32") -> SeismicArray:
    """Put every channel of a Stream on one time axis.

    Parameters
    ----------
    stream : obspy.Stream or iterable of obspy.Trace
        Several traces of one SEED id (a recording with gaps) are merged into one row.
    fill_value : float
        Value of the samples no trace covers (gaps, and the ends of channels that start later or
        stop sooner than others); each such run is reported in ``gaps``.
    dtype : str or numpy.dtype
        Dtype of ``data`` (float32 by default, what the GPU kernels read without conversion).

    Returns
    -------
    SeismicArray
        Rows in ascending SEED-id order (``NET.STA.LOC.CHA`` as strings). Column 0 is the earliest
        trace start; the last column the latest trace end. A trace starting off the common sample
        grid is placed at the nearest sample (at most half a sampling interval off).

    Raises
    ------
    halfscope.InvalidInput (a ValueError)
        Traces at different sampling rates (the message names the ids and rates), traces of one id
        overlapping with different values, an empty stream.
    ImportError
        ObsPy is not installed.
    """
    traces = _traces(stream, "from_stream")
    ids, rate, start, data, covered = _merge(traces, np.dtype(dtype), fill_value)
    gaps = [(i, s, n) for r, i in enumerate(ids) for s, n in _runs(~covered[r])]
    return SeismicArray(data=data, ids=ids, sampling_rate=rate, starttime=start, gaps=gaps)


def templates_from_stream(stream, starttime, length: int, *, ids=None, dtype="float32"):
    """Cut one multichannel template from a Stream.

    Parameters
    ----------
    stream : obspy.Stream or iterable of obspy.Trace
    starttime : obspy.UTCDateTime or str
        Time of the template's first sample, snapped to the nearest column of the channels'
        common grid (the grid `from_stream` builds from the traces of ``ids``).
    length : int
        Samples per channel (K).
    ids : list of str, optional
        Channels to cut, in this order; default every id of the stream in `from_stream`'s order.
    dtype : str or numpy.dtype

    Returns
    -------
    numpy.ndarray
        ``(N, K)``: rows ``j:j + K`` of ``from_stream(stream).data`` (ids None) where column j is
        ``starttime``; ``templates[None]`` is the ``(T, N, K)`` input of ``hs.matched_filter``
        against that data.

    Raises
    ------
    halfscope.InvalidInput (a ValueError)
        A channel missing from the stream, or one whose traces do not cover every one of the K
        samples; different sampling rates; ``length`` < 1.
    """
    obspy = _require("obspy", "obspy", "templates_from_stream")
    if not isinstance(length, (int, np.integer)) or length < 1:
        raise InvalidInput(f"length: expected a positive number of samples, found {length!r}")
    traces = _traces(stream, "templates_from_stream")
    present = sorted({tr.id for tr in traces})
    wanted = present if ids is None else [str(i) for i in ids]
    missing = [i for i in wanted if i not in present]
    if missing:
        raise InvalidInput(f"ids: {', '.join(missing)} not in the stream (it holds {', '.join(present)})")
    # One merge of every wanted channel: the same grid (and sample snapping) as from_stream.
    merged_ids, rate, start, data, covered = _merge([t for t in traces if t.id in wanted],
                                                    np.float64, 0.0)
    t0 = obspy.UTCDateTime(starttime)
    j = int(round((t0 - start) * rate))
    lo, hi = max(j, 0), min(j + int(length), data.shape[1])
    for cid in wanted:
        r = merged_ids.index(cid)
        if hi - lo < length or not covered[r, lo:hi].all():
            span = covered[r].nonzero()[0]
            held = "it holds no samples" if not span.size else (
                f"its data span {start + span[0] / rate} to {start + span[-1] / rate}"
                f"{', with gaps' if span.size != span[-1] - span[0] + 1 else ''}")
            raise InvalidInput(f"stream: {cid} does not cover the {length} samples from {t0} ({held})")
    return data[[merged_ids.index(cid) for cid in wanted], lo:hi].astype(dtype)


def _seed_stats(cid: str, name: str) -> dict:
    parts = str(cid).split(".")
    if len(parts) != 4:
        raise InvalidInput(f"{name}: expected SEED ids NET.STA.LOC.CHA, found {cid!r}")
    return dict(zip(("network", "station", "location", "channel"), parts))


def _trace_values(row: np.ndarray) -> np.ndarray:
    # ObsPy's writers handle float32/float64/int32; other dtypes (float16, int16, ...) widen.
    if row.dtype in (np.float32, np.float64, np.int32):
        return np.array(row, copy=True)
    return row.astype(np.float64 if row.dtype.kind == "f" else np.int32)


def to_stream(data, ids, sampling_rate: float, starttime, *, gaps=()):
    """Build a Stream from an ``(N, L)`` array.

    Parameters
    ----------
    data : array_like (NumPy, CuPy or torch)
        ``(N, L)``, or ``(L,)`` for one channel. Values are copied into the traces.
    ids : list of str
        N SEED ids ``NET.STA.LOC.CHA``.
    sampling_rate : float
    starttime : obspy.UTCDateTime or str
        Time of column 0.
    gaps : iterable of (id, start_sample, n_samples), optional
        Samples to mark as missing (``SeismicArray.gaps``): those traces hold masked arrays, and
        ``Stream.split()`` turns them back into the separate traces `from_stream` merged.

    Returns
    -------
    obspy.Stream
    """
    obspy = _require("obspy", "obspy", "to_stream")
    a = _to_numpy(data, "data")
    if a.ndim == 1:
        a = a[None]
    if a.ndim != 2:
        raise InvalidInput(f"data: expected (N, L) or (L,), found shape {a.shape}")
    ids = [ids] if isinstance(ids, str) else list(ids)
    if len(ids) != a.shape[0]:
        raise InvalidInput(f"ids: expected {a.shape[0]} ids (one per row of data), found {len(ids)}")
    if not float(sampling_rate) > 0:
        raise InvalidInput(f"sampling_rate: expected a positive rate, found {sampling_rate!r}")
    t0 = obspy.UTCDateTime(starttime)
    masks = {i: np.zeros(a.shape[1], dtype=bool) for i in ids}
    for gid, s, n in gaps:
        if gid not in masks or s < 0 or n < 0 or s + n > a.shape[1]:
            raise InvalidInput(f"gaps: ({gid!r}, {s}, {n}) is not a run of samples of a channel in ids "
                             f"(each has {a.shape[1]} samples)")
        masks[gid][s:s + n] = True
    traces = []
    for row, cid in zip(a, ids):
        values = _trace_values(row)
        if masks[cid].any():
            values = np.ma.masked_array(values, mask=masks[cid])
        traces.append(obspy.Trace(data=values, header=dict(
            _seed_stats(cid, "ids"), sampling_rate=float(sampling_rate), starttime=t0)))
    return obspy.Stream(traces)


def cc_to_trace(cc_row, sampling_rate: float, starttime, step: int = 1, id: str = "HS.CC..XCC"):
    """A correlation time series as a Trace.

    Parameters
    ----------
    cc_row : array_like (NumPy, CuPy or torch)
        1-D, one template's row of ``hs.matched_filter``'s output.
    sampling_rate : float
        Sampling rate of the correlated data.
    starttime : obspy.UTCDateTime or str
        Time of the data's first sample (``SeismicArray.starttime``).
    step : int
        The ``step`` given to ``hs.matched_filter``: correlation index i is the data sample
        ``i * step``, so the trace's rate is ``sampling_rate / step`` and sample i falls at
        ``starttime + i * step / sampling_rate`` (where the template's first sample aligns with a
        zero moveout).
    id : str
        SEED id of the trace.

    Returns
    -------
    obspy.Trace
    """
    obspy = _require("obspy", "obspy", "cc_to_trace")
    a = _to_numpy(cc_row, "cc_row")
    if a.ndim != 1:
        raise InvalidInput(f"cc_row: expected one row (n_corr,), found shape {a.shape}")
    if not isinstance(step, (int, np.integer)) or step < 1:
        raise InvalidInput(f"step: expected a positive integer, found {step!r}")
    if not float(sampling_rate) > 0:
        raise InvalidInput(f"sampling_rate: expected a positive rate, found {sampling_rate!r}")
    return obspy.Trace(data=_trace_values(a), header=dict(
        _seed_stats(id, "id"), sampling_rate=float(sampling_rate) / int(step),
        starttime=obspy.UTCDateTime(starttime)))


def to_fits_hdu(image, *, header=None, history=()):
    """A 2-D image as an astropy PrimaryHDU.

    Parameters
    ----------
    image : array_like (NumPy, CuPy or torch)
        2-D. Always copied: device arrays come to the host, and the HDU owns its data (astropy may
        byte-swap arrays it writes). float16 and bfloat16, which FITS cannot store, become float32
        (exactly); bool becomes uint8.
    header : astropy.io.fits.Header or mapping, optional
        Cards to carry over (BUNIT, WCS, OBJECT, ...); the structural keywords (BITPIX, NAXISn,
        BSCALE, BZERO, ...) are dropped since astropy writes them from the data.
    history : iterable of str
        One HISTORY card (or more, for long text) per entry, after the header's own.

    Returns
    -------
    astropy.io.fits.PrimaryHDU
    """
    fits = _require("astropy.io.fits", "astropy", "to_fits_hdu")
    a = _to_numpy(image, "image")
    if a.ndim != 2:
        raise InvalidInput(f"image: expected a 2-D image, found shape {a.shape}")
    if a.dtype == np.float16:
        a = a.astype(np.float32)
    elif a.dtype == np.bool_:
        a = a.astype(np.uint8)
    a = np.array(a, copy=True, order="C")
    hdr = fits.Header()
    if header is not None:
        cards = header.cards if isinstance(header, fits.Header) else \
            [fits.Card(k, v) for k, v in dict(header).items()]
        for card in cards:
            if card.keyword.rstrip("0123456789") not in _STRUCTURAL_KEYS:
                hdr.append(card, end=True)
    if isinstance(history, str):
        history = [history]
    for line in history:
        hdr.add_history(str(line))
    return fits.PrimaryHDU(data=a, header=hdr)


def from_fits_hdu(hdu) -> np.ndarray:
    """The image of a FITS HDU as a native-endian float array.

    Parameters
    ----------
    hdu : astropy.io.fits PrimaryHDU, ImageHDU, CompImageHDU or HDUList
        An HDUList gives its first HDU holding data.

    Returns
    -------
    numpy.ndarray
        2-D, a new array with BSCALE / BZERO applied, float32 where astropy gives float32 (FITS
        float32, and 8- or 16-bit integers scaled by BSCALE / BZERO), float64 otherwise.
        Leading axes of length 1 (radio images' frequency and Stokes axes) are dropped.

    Raises
    ------
    halfscope.InvalidInput (a ValueError)
        No data, or more than two axes longer than 1.
    """
    fits = _require("astropy.io.fits", "astropy", "from_fits_hdu")
    if isinstance(hdu, fits.HDUList):
        with_data = [h for h in hdu if getattr(h, "data", None) is not None]
        if not with_data:
            raise InvalidInput("hdu: expected an HDUList with an image, found no HDU holding data")
        hdu = with_data[0]
    if not hasattr(hdu, "data") or not hasattr(hdu, "header"):
        raise InvalidInput(f"hdu: expected an astropy HDU or HDUList, found {type(hdu).__name__}")
    data = hdu.data
    if data is None:
        raise InvalidInput("hdu: expected image data, found an HDU without data")
    a = np.asarray(data)
    while a.ndim > 2 and a.shape[0] == 1:
        a = a[0]
    if a.ndim != 2:
        raise InvalidInput(f"hdu: expected a 2-D image (leading axes of length 1 allowed), "
                         f"found shape {np.shape(data)}")
    out = np.float32 if a.dtype.kind == "f" and a.dtype.itemsize == 4 else np.float64
    return np.array(a, dtype=np.dtype(out).newbyteorder("="), copy=True)
