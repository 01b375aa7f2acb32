"""Simulated inputs with ground truth: radio observations (study 000), seismic data with
planted events (study 001) and adaptive-optics systems (study 002)."""

from __future__ import annotations

import json
import numbers
import os
from dataclasses import dataclass, field

import numpy as np

from . import _arrays, _core

__all__ = ["psf", "sky", "observation", "seismic", "SeismicData", "ao_system"]


def _seed(seed) -> int:
    """A seed for the core's generators: an integer in [0, 2^64); InvalidInput naming ``seed``
    otherwise (the binding's unsigned argument would reject it with a bare signature list)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**64:
        raise _core.InvalidInput(f"seed: expected an integer in [0, 2**64), found {seed!r}")
    return int(seed)


def psf(rows=2048, cols=2048, antennas="meerkat", *, dec_deg=-30.0, ha_start_h=-4.0,
        ha_end_h=4.0, ha_step_s=60.0, freq_hz=1.4e9, bandwidth_hz=0.0, channels=1,
        latitude_deg=-30.7129, pixel_arcsec=0.0, weighting="natural", full_output=False):
    """The point spread function of an interferometer (float64, peak 1 at (rows//2, cols//2)).

    antennas: 'meerkat' (the 64 built-in antennas), a path to a CSV file (name,east,north,up in
    metres), or an (n, 3) array of east, north, up metres. The track and gridding options are
    those of ``halfscope simulate psf`` (docs/deconv.md); pixel_arcsec 0 picks a quarter of the
    synthesized beam. With full_output, returns (psf, info) where info has uv ((n, 2)
    wavelengths), pixel_arcsec, max_baseline_m, samples, dropped, occupied_cells, antennas.
    """
    if isinstance(antennas, (str, os.PathLike)):
        spec, positions = os.fspath(antennas), None
    else:
        spec, positions = "", np.asarray(_arrays.to_numpy(antennas), dtype=np.float64)
    r = _core.simulate_psf(spec, positions, int(rows), int(cols), float(dec_deg),
                           float(ha_start_h), float(ha_end_h), float(ha_step_s), float(freq_hz),
                           float(bandwidth_hz), int(channels), float(latitude_deg),
                           float(pixel_arcsec), str(weighting).lower())
    image = r.pop("psf")
    return (image, r) if full_output else image


def sky(rows=2048, cols=2048, *, sources=100, flux_index=-2.0, flux_min=0.01, flux_max=1.0,
        halo_ratio=1e-3, halo_correlation_px=16.0, seed=1, full_output=False):
    """A model sky: power-law point sources plus a faint Gaussian-random-field halo whose peak is
    ``halo_ratio`` of the brightest source; reproducible from ``seed``. With full_output,
    returns (sky, info) with points, halo, brightest, halo_peak."""
    r = _core.simulate_sky(int(rows), int(cols), int(sources), float(flux_index),
                           float(flux_min), float(flux_max), float(halo_ratio),
                           float(halo_correlation_px), _seed(seed))
    image = r.pop("sky")
    return (image, r) if full_output else image


def observation(sky, psf, *, snr_db=37.0, seed=1, boundary="circular",
                full_output=False):
    """The dirty image g = H f + n, white noise at SNR = 10 log10(||H f||^2 / (N sigma^2)) dB.
    Returns float64 of the sky's kind; with full_output, (dirty, info) with sigma and
    signal_power."""
    f = _arrays.prepare(sky, "sky")
    r = _core.simulate_observation(_arrays.to_numpy(f),
                                   _arrays.to_numpy(_arrays.prepare(psf, "psf")),
                                   float(snr_db), _seed(seed), str(boundary).lower())
    dirty = _arrays.like(r.pop("dirty"), f)
    return (dirty, r) if full_output else dirty


@dataclass
class SeismicData:
    """A simulated data set: data (C, L) float64, templates (T, C, K) float64 of unit energy per
    channel, moveouts (T, C) int64, weights (T, C) float64 (1 / C), and the planted events
    (dicts: template, sample, cc, expected_cc_sum, amplitude per channel), sorted by sample."""

    data: np.ndarray
    templates: np.ndarray
    moveouts: np.ndarray
    weights: np.ndarray
    events: list = field(default_factory=list)


def seismic(channels=3, samples=60_000, templates=2, template_length=200, events_per_template=3,
            event_cc=(0.8,), noise_colour=0.0, max_moveout=50, sample_rate=100.0,
            normalize="short", seed=1) -> SeismicData:
    """Multi-channel noise with scaled copies of templates planted at known times, each scaled
    so that its correlation with the template is exactly the asked CC (docs/mfilter.md)."""
    r = _core.simulate_seismic(int(channels), int(samples), int(templates), int(template_length),
                               int(events_per_template), [float(c) for c in event_cc],
                               float(noise_colour), int(max_moveout), float(sample_rate),
                               str(normalize).lower(), _seed(seed))
    return SeismicData(**r)


def ao_system(preset="check", layers=10) -> dict:
    """A built-in MOAO system ('check', 'mid' or 'eelt') with the 10- or 60-layer profile, as the
    JSON dict of docs/ao.md (edit it and pass it to the hs.ao functions)."""
    return json.loads(_core.ao_system("preset", str(preset), "", int(layers)))
