"""Matched filtering (study 001) with Fast Matched Filter's call signature and shapes, and
detection with EQcorrscan's semantics."""

from __future__ import annotations

import warnings

import numpy as np

from . import _arrays, _core

__all__ = ["matched_filter", "detect", "matched_filter_detect"]

_ARCH = {"gpu": ("cuda", None), "cpu": ("cpu", None), "precise": ("cpu", "double"),
         "auto": ("auto", None)}

# Every spelling of threshold_type, any case: EQcorrscan's 'MAD' / 'absolute', the CLI's mad / abs.
_THRESHOLD_TYPES = {"mad": "mad", "abs": "abs", "absolute": "abs"}

# Moveouts cross to the core as int64; floats beyond this are not whole sample counts there.
_INT64_LIMIT = 2.0 ** 63


def integer_samples(values, name):
    """`values` (array-like) as an int64 NumPy array of sample counts. Integer-valued floats are
    taken (FMF casts moveouts with np.int32, so callers pass rounded floats); a fraction, NaN,
    an infinity or a value beyond int64 is InvalidInput naming `name`, the index and the value,
    since truncating it would silently shift or drop the channel."""
    a = np.asarray(_arrays.to_numpy(values))
    kind = a.dtype.kind
    if kind == "b":
        a = a.astype(np.int64)
    elif kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~(np.isfinite(a) & (a == np.round(a)) & (np.abs(a) < _INT64_LIMIT))
        if bad.any():
            index = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), a.shape))
            raise _core.InvalidInput(
                f"Python argument '{name}': expected whole numbers of samples (integers, or "
                f"integer-valued floats), found {a[index].item()!r} at index {index}")
    elif kind == "u":
        too_large = a > np.iinfo(np.int64).max
        if too_large.any():
            index = tuple(int(i) for i in np.unravel_index(int(np.argmax(too_large)), a.shape))
            raise _core.InvalidInput(f"Python argument '{name}': expected sample counts that fit "
                                     f"int64, found {a[index].item()!r} at index {index}")
    elif kind != "i":
        raise _core.InvalidInput(f"Python argument '{name}': expected integer sample counts, "
                                 f"found dtype {a.dtype}")
    return a.astype(np.int64, copy=False)


def real_array(values, name):
    """`values` as a NumPy array of a real dtype; InvalidInput naming `name` otherwise (a complex
    weight cast to float64 would silently lose its imaginary part)."""
    a = np.asarray(_arrays.to_numpy(values))
    if a.dtype.kind not in "biuf":
        raise _core.InvalidInput(f"Python argument '{name}': expected real numbers, found dtype "
                                 f"{a.dtype}")
    return a


def _threshold_type(value) -> str:
    """The core's name of a threshold_type, any case; InvalidInput listing every spelling."""
    key = value.lower() if isinstance(value, str) else None
    if key not in _THRESHOLD_TYPES:
        raise _core.InvalidInput(f"threshold_type {value!r}: expected 'MAD' (or 'mad'), "
                                 f"'absolute' or 'abs', in any case")
    return _THRESHOLD_TYPES[key]


def _check_zeros(value):
    """FMF's check_zeros as 'first', 'all' or None (off), checked before any work is done."""
    if value is False or value is None:
        return None
    if isinstance(value, str) and value.lower() in ("first", "all"):
        return value.lower()
    raise _core.InvalidInput(f"check_zeros {value!r}: expected False, 'first' or 'all'")


def _network(values, name, n_templates, n_stations, n_components, dtype):
    """FMF's moveouts / weights -> (T, S * C) host arrays (None stays None), by FMF's size rule:
    T x S x C values in any shape are reshaped, T x S values (per station) are repeated over the
    components."""
    if values is None:
        return None
    a = integer_samples(values, name) if dtype == np.int64 else real_array(values, name)
    full = n_templates * n_stations * n_components
    if a.size == full:
        a = a.reshape(n_templates, n_stations * n_components)
    elif a.size == n_templates * n_stations and n_components > 1:
        a = np.repeat(a.reshape(n_templates, n_stations), n_components, axis=1)
    else:
        raise _core.InvalidInput(
            f"Python argument '{name}': expected {full} values, shaped "
            f"{(n_templates, n_stations, n_components)}, or {n_templates * n_stations} per "
            f"station {(n_templates, n_stations)}; found shape {tuple(a.shape)}")
    return np.ascontiguousarray(a, dtype=dtype)


def _shapes(templates, data):
    """(T, S, C, K), (S, C, L) in FMF's conventions; the 3-D templates / 2-D data form has C = 1
    and templates.ndim == data.ndim means one template."""
    t, d = templates, data
    single = t.ndim == d.ndim
    if single:
        t = t.reshape((1,) + tuple(t.shape))
    if t.ndim == 4 and d.ndim == 3:
        n_t, n_s, n_c, k = t.shape
        if tuple(d.shape[:2]) != (n_s, n_c):
            raise _core.InvalidInput(
                f"templates have {n_s} stations x {n_c} components but data have shape "
                f"{tuple(d.shape)} (expected ({n_s}, {n_c}, n_samples))")
    elif t.ndim == 3 and d.ndim == 2:
        n_t, n_s, k = t.shape
        n_c = 1
        if d.shape[0] != n_s:
            raise _core.InvalidInput(
                f"templates have {n_s} traces but data have {d.shape[0]} (shape {tuple(d.shape)})")
    else:
        raise _core.InvalidInput(
            f"templates of shape {tuple(templates.shape)} and data of shape {tuple(data.shape)}: "
            "expected (T, S, C, K) with (S, C, L), or (T, N, K) with (N, L)")
    return (n_t, n_s, n_c, k), t.reshape(n_t, n_s * n_c, k), d.reshape(n_s * n_c, d.shape[-1])


def _arch(arch):
    """(core device, default precision) of an FMF arch name; 'gpu' without a usable GPU is an
    error naming the argument (FMF would print and return None)."""
    key = str(arch).lower()
    if key not in _ARCH:
        raise _core.InvalidInput(f"arch '{arch}': expected 'gpu', 'cpu', 'precise' or 'auto'")
    if key == "gpu" and not _core.cuda_available():
        raise _core.Unsupported(f"arch='gpu': {_core.info()['status']}; use arch='cpu' or 'auto'")
    return _ARCH[key]


def _devices(devices) -> list:
    """The device list for the core: [] for None (the current device)."""
    return [] if devices is None else [int(i) for i in devices]


def _call_arguments(templates, moveouts, weights, data, arch, precision):
    """What matched_filter and matched_filter_detect hand to the core: (data, templates as
    (T, S x C, K), data as (S x C, L), moveouts, weights, device, precision name, FMF shape)."""
    d = _arrays.prepare(data, "data")
    t = _arrays.prepare(templates, "templates", like_array=d)
    shape, t3, d2 = _shapes(t, d)
    n_t, n_s, n_c, _ = shape
    device, default_precision = _arch(arch)
    chosen = precision if precision is not None else default_precision
    return (d, t3, d2, _network(moveouts, "moveouts", n_t, n_s, n_c, np.int64),
            _network(weights, "weights", n_t, n_s, n_c, np.float64), device,
            "" if chosen is None else str(chosen).lower(), shape)


def matched_filter(templates, moveouts, weights, data, step=1, arch="cpu", check_zeros="first",
                   normalize="short", network_sum=True, *, precision=None, method="auto",
                   devices=None, stream=None):
    """Normalized cross-correlation of templates against continuous data, stacked over the
    network: a drop-in for ``fast_matched_filter.matched_filter``.

    Parameters
    ----------
    templates : (T, S, C, K) or (T, N, K) array; (S, C, K) / (N, K) for one template
    moveouts : int array (T, S, C), (T, S) (repeated over components, as FMF) or (T, N), in
        samples (integer-valued floats are taken; a fraction or NaN is InvalidInput); None for
        zeros
    weights : float array of the moveouts' shape; None for ones. A weight of 0 skips a channel.
    data : (S, C, L) or (N, L) array (NumPy, CuPy or torch; device data stay on the device)
    step : samples between correlation times
    arch : 'cpu' (FMF's default), 'gpu' (Unsupported without a GPU), 'precise' (CPU, FP64) or
        'auto' (the GPU when there is one)
    check_zeros : 'first' (FMF's default), 'all' or False: warn (as FMF prints) when more than 10
        correlations of the first (every) template are 0
    normalize : 'short' (study 001, FMF's default) or 'full' (demeaned windows and templates;
        with precision 'half', 'mixed' or 'bf16', NumericalError where a window's level sits so
        far from its channel's mean that 16-bit rounding could move its CC by more than 0.1:
        level steps, docs/mfilter.md)
    network_sum : True: (T, n_corr); False: (T, S, C, n_corr) or (T, N, n_corr)
    precision : None (split on the GPU, single on the CPU, double for 'precise'), or a name
    method : 'auto', 'direct', 'naive', 'cublas1'..'cublas4', 'tensor' or 'fft'
    devices : list of CUDA device indices to spread the templates over (each takes a contiguous
        group of templates; the merged rows equal the same call on one listed device bit for bit
        when the data fit on the devices, FFT within rounding; docs/scaling.md); None: the
        current device

    Returns
    -------
    float32 array of the data's kind, n_corr = (L - K) // step + 1. CC is 0 where a window is
    flat or leaves the data, never NaN.
    """
    zeros = _check_zeros(check_zeros)
    d, t3, d2, mo, w, device, chosen, (n_t, n_s, n_c, _) = _call_arguments(
        templates, moveouts, weights, data, arch, precision)
    cc = _core.matched_filter(t3, d2, mo, w, str(normalize).lower(), str(method).lower(), chosen,
                              device, int(step), bool(network_sum), _devices(devices),
                              _arrays.framework_of(d), _arrays.stream_handle(stream, d))
    if not network_sum and d.ndim == 3:
        cc = cc.reshape(n_t, n_s, n_c, cc.shape[-1])
    if zeros:
        _warn_zeros(cc, mo, step, zeros)
    return cc


def _warn_zeros(cc, moveouts, step, check_zeros):
    """FMF's check_zeros: count exact zeros before the last max-moveout correlations. Only the
    rows checked are copied from a device stack."""
    rows = _arrays.to_numpy(cc[:1] if check_zeros == "first" else cc)
    span = rows.shape[-1] - (0 if moveouts is None else int(np.max(moveouts)) // int(step))
    for index, row in enumerate(rows.reshape(rows.shape[0], -1, rows.shape[-1])):
        zeros = int(np.sum(row[..., :max(span, 0)] == 0.0))
        if zeros > 10:
            warnings.warn(f"{zeros} correlations are 0 for template {index}: zeros or flat "
                          "stretches in the data, or windows outside it", stacklevel=3)


_DETECTION_FIELDS = [("template", np.int64), ("index", np.int64), ("sample", np.int64),
                     ("value", np.float64), ("threshold", np.float64)]


def _detections(columns: dict) -> np.ndarray:
    """The core's detection columns as a NumPy structured array."""
    fields = list(_DETECTION_FIELDS)
    if "channels_used" in columns:
        fields.append(("channels_used", np.int64))
    out = np.zeros(len(columns["template"]), dtype=fields)
    for name, _ in fields:
        out[name] = columns[name]
    return out


def _stack(cc_sum):
    """`cc_sum` as the float32 (T, n_corr) stack the core searches, of the caller's kind and
    device: any real dtype is converted (a copy unless it is float32 already); complex, a wrong
    rank, an empty stack and NaN or infinite values are InvalidInput naming cc_sum (a NaN would
    otherwise be skipped, shifting the MAD, and an infinity reported as a detection)."""
    cc = _arrays.prepare(cc_sum, "cc_sum")
    kind = _arrays.framework_of(cc)
    dtype = str(cc.dtype).replace("torch.", "")
    if "complex" in dtype:
        raise _core.InvalidInput(f"Python argument 'cc_sum': expected a real stack, found dtype "
                                 f"{dtype}")
    if cc.ndim != 2 or 0 in tuple(cc.shape):
        raise _core.InvalidInput(f"Python argument 'cc_sum': expected a non-empty 2-D (templates, "
                                 f"correlations) stack, found shape {tuple(cc.shape)}")
    bad = _arrays.first_non_finite(cc)
    if bad is not None:
        (t, i), value = bad
        what = "NaN" if value != value else "infinite value"
        raise _core.InvalidInput(f"Python argument 'cc_sum': {what} ({value}) at template {t}, "
                                 f"correlation {i}; expected finite values")
    if dtype == "float32":
        return cc
    if kind == "torch":
        import torch

        wide = cc.to(torch.float32)
    else:
        with np.errstate(over="ignore"):
            wide = cc.astype(np.float32)
    bad = _arrays.first_non_finite(wide)
    if bad is not None:
        (t, i), _ = bad
        raise _core.InvalidInput(f"Python argument 'cc_sum': {cc[t, i].item()} at template {t}, "
                                 f"correlation {i} is beyond float32, the stack's type")
    return wide


def detect(cc_sum, threshold=8.0, threshold_type="MAD", min_separation=1, step=1, stream=None):
    """Declustered peaks of a (T, n_corr) network stack (EQcorrscan's semantics).

    cc_sum: any real dtype (searched in float32, the matched filter's output type), finite.
    threshold_type 'MAD' / 'mad': threshold x median(|cc_sum|) per template; 'absolute' /
    'abs': the value itself (any case). Peaks are found on |cc_sum|, strongest first; weaker
    peaks within ``min_separation`` samples of the data (converted with ``step``) are dropped.

    Returns a NumPy structured array sorted by template then time, fields template, index
    (correlation index), sample (index x step), value (signed cc_sum), threshold.
    """
    kind = _threshold_type(threshold_type)
    cc = _stack(cc_sum)
    return _detections(_core.detect_peaks(cc, float(threshold), kind, int(min_separation),
                                          int(step), _arrays.stream_handle(stream, cc)))


def matched_filter_detect(templates, moveouts, weights, data, step=1, arch="cpu",
                          normalize="short", threshold=8.0, threshold_type="MAD",
                          min_separation=1, *, precision=None, method="auto", devices=None,
                          stream=None):
    """Correlation and detection in one call without keeping the whole stack (on the GPU each
    chunk's stack is searched on the device). Arguments as :func:`matched_filter` and
    :func:`detect`; the result also has the field channels_used."""
    kind = _threshold_type(threshold_type)
    d, t3, d2, mo, w, device, chosen, _ = _call_arguments(templates, moveouts, weights, data,
                                                          arch, precision)
    columns = _core.matched_filter_detect(
        t3, d2, mo, w, str(normalize).lower(), str(method).lower(), chosen, device, int(step),
        float(threshold), kind, int(min_separation), _devices(devices),
        _arrays.stream_handle(stream, d))
    return _detections(columns)
