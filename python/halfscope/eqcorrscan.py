"""halfscope as an EQcorrscan correlation backend.

EQcorrscan's array correlation functions take ``(templates, stream, pads, *args, **kwargs)``:
templates (n_templates, K) of one channel, the continuous data of that channel (N,), and per
template a pad (its moveout on this channel) and return ``(ccc, used_chans)``: float32
(n_templates, N - K + 1) normalized cross-correlations (demeaned, EQcorrscan's normxcorr), each
row shifted left by its pad with zeros at the end, and a boolean per template saying whether it
has data on this channel (a template of NaN does not). :func:`register` makes it selectable::

    import halfscope.eqcorrscan
    halfscope.eqcorrscan.register()            # name 'halfscope'
    party = tribe.detect(stream, threshold=8, threshold_type="MAD", trig_int=6,
                         xcorr_func="halfscope")
"""

from __future__ import annotations

import numpy as np

from . import _arrays
from ._core import InvalidInput
from .mfilter import integer_samples, matched_filter, real_array

__all__ = ["array_xcorr", "register"]


def array_xcorr(templates, stream, pads, cc_squared=False, *args, arch="auto", precision=None,
                **kwargs):
    """EQcorrscan's array_xcorr contract on halfscope's matched filter (full normalization).

    ``arch`` 'auto' runs on the GPU when one is present; ``precision`` None is the method's
    default (split on the GPU). Flat windows give 0, as EQcorrscan's backends do.
    """
    t = real_array(templates, "templates").astype(np.float64)
    if t.ndim != 2:
        raise InvalidInput(f"templates: expected (n_templates, K), found shape {t.shape}")
    data = real_array(stream, "stream")
    if data.ndim != 1:
        raise InvalidInput(f"stream: expected a 1-D array, found shape {data.shape}")
    used = ~np.isnan(t).any(axis=1)
    t = np.where(used[:, None], t, 0.0)
    pads = integer_samples(pads, "pads").reshape(-1)
    if pads.shape[0] != t.shape[0]:
        raise InvalidInput(f"pads: {pads.shape[0]} values for {t.shape[0]} templates")
    # check_zeros off: flat stretches are expected here and EQcorrscan reports its own way.
    ccc = matched_filter(t[:, None, :], pads[:, None], used.astype(np.float64)[:, None],
                         data[None, :], 1, arch=arch, check_zeros=False, normalize="full",
                         precision=precision)
    ccc = np.asarray(ccc, dtype=np.float32)
    if cc_squared:
        ccc = ccc * np.abs(ccc)
    return ccc, used


def register(name="halfscope"):
    """Registers :func:`array_xcorr` with EQcorrscan under ``name`` (its multithread / concurrent
    stream variants come from EQcorrscan's generic wrappers) and returns the registered function.
    Raises ImportError when EQcorrscan is not installed."""
    try:
        from eqcorrscan.utils.correlate import register_array_xcorr
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("halfscope.eqcorrscan.register needs EQcorrscan (pip install eqcorrscan)"
                          ) from e

    def halfscope_xcorr(templates, stream, pads, *args, **kwargs):
        return array_xcorr(templates, stream, pads, *args, **kwargs)

    return register_array_xcorr(name, func=halfscope_xcorr)
