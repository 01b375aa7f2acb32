"""hs.simulate.* : shapes, seeds, the PSF's definition (a NumPy DFT of its own uv samples), the
observation's SNR, antenna input forms, and the seismic ground truth (checked with the independent
NumPy matched filter of fmf_reference.py)."""
import math

import numpy as np
import pytest

import fmf_reference as ref

hs = pytest.importorskip("halfscope")

ARCSEC = math.pi / (180 * 3600)  # radians
# A compact 6-antenna array (east, north, up metres): short baselines keep every sample on the
# small grids below, and the sizes stay fast.
ANTENNAS = np.array([[0.0, 0.0, 0.0], [40.0, 5.0, 0.5], [-25.0, 60.0, 1.0], [90.0, -30.0, 0.0],
                     [-70.0, -45.0, 2.0], [15.0, 110.0, 0.0]])
PSF_ARGS = dict(ha_start_h=-2, ha_end_h=2, ha_step_s=1800, dec_deg=-45)


def dft_psf(uv, rows, cols, pixel_arcsec):
    """The naturally weighted gridded PSF by a direct DFT: each sample and its mirror to the
    nearest uv cell (cell 1 / (n pixel), round half away from zero), samples beyond (n - 1) // 2
    cells dropped, the origin at (rows // 2, cols // 2), normalised to 1 there."""
    du, dv = 1 / (cols * pixel_arcsec * ARCSEC), 1 / (rows * pixel_arcsec * ARCSEC)
    iu = np.sign(uv[:, 0]) * np.floor(np.abs(uv[:, 0] / du) + 0.5)
    iv = np.sign(uv[:, 1]) * np.floor(np.abs(uv[:, 1] / dv) + 0.5)
    keep = (np.abs(iu) <= (cols - 1) // 2) & (np.abs(iv) <= (rows - 1) // 2)
    cu = np.concatenate([iu[keep], -iu[keep]])
    cv = np.concatenate([iv[keep], -iv[keep]])
    l = np.arange(cols) - cols // 2
    m = np.arange(rows) - rows // 2
    psf = np.cos(2 * np.pi * (cu[:, None, None] * l[None, None, :] / cols
                              + cv[:, None, None] * m[None, :, None] / rows)).sum(axis=0)
    return psf / psf[rows // 2, cols // 2], int((~keep).sum())


def test_psf_shape_peak_and_symmetry():
    rows, cols = 40, 48
    psf = hs.simulate.psf(rows, cols, antennas=ANTENNAS, **PSF_ARGS)
    assert isinstance(psf, np.ndarray) and psf.dtype == np.float64 and psf.shape == (rows, cols)
    assert psf[rows // 2, cols // 2] == pytest.approx(1.0, abs=1e-14)
    assert np.abs(psf).max() <= 1.0 + 1e-12
    # Real and even about its origin (the grid is Hermitian): p(x) = p(-x) with indices modulo n.
    centred = np.fft.ifftshift(psf)
    mirrored = np.roll(centred[::-1, ::-1], (1, 1), axis=(0, 1))
    np.testing.assert_allclose(centred, mirrored, rtol=0, atol=1e-12)


def test_psf_is_the_dft_of_its_uv_samples():
    rows, cols = 40, 48
    psf, info = hs.simulate.psf(rows, cols, antennas=ANTENNAS, pixel_arcsec=60.0,
                                full_output=True, **PSF_ARGS)
    uv = np.asarray(info["uv"])
    n_baselines, n_hour_angles = 6 * 5 // 2, 9
    assert uv.shape == (n_baselines * n_hour_angles, 2)
    assert info["samples"] == len(uv) and info["pixel_arcsec"] == 60.0
    want, dropped = dft_psf(uv, rows, cols, 60.0)
    assert info["dropped"] == dropped
    np.testing.assert_allclose(psf, want, rtol=0, atol=1e-11)
    # The longest baseline of this array: between the antennas at (-25, 60) and (90, -30)...
    lengths = np.linalg.norm(ANTENNAS[:, None] - ANTENNAS[None], axis=2)
    assert info["max_baseline_m"] == pytest.approx(lengths.max(), rel=1e-12)


def test_antennas_from_array_and_from_csv_agree(tmp_path):
    path = tmp_path / "ants.csv"
    lines = ["name,east_m,north_m,up_m"]
    lines += [f"a{i},{e!r},{n!r},{u!r}" for i, (e, n, u) in enumerate(ANTENNAS.tolist())]
    path.write_text("\n".join(lines) + "\n")
    from_array = hs.simulate.psf(32, 32, antennas=ANTENNAS, **PSF_ARGS)
    for spec in (path, str(path)):
        np.testing.assert_array_equal(hs.simulate.psf(32, 32, antennas=spec, **PSF_ARGS),
                                      from_array)


def test_bad_antenna_array_is_invalid():
    with pytest.raises(hs.InvalidInput) as info:
        hs.simulate.psf(32, 32, antennas=ANTENNAS[:, :2], **PSF_ARGS)
    assert "antennas" in str(info.value), str(info.value)


def test_sky_is_seeded():
    a = hs.simulate.sky(48, 40, sources=12, seed=9)
    b = hs.simulate.sky(48, 40, sources=12, seed=9)
    c = hs.simulate.sky(48, 40, sources=12, seed=10)
    assert a.shape == (48, 40) and a.dtype == np.float64
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    sky, info = hs.simulate.sky(48, 40, sources=12, seed=9, halo_ratio=2e-3, full_output=True)
    assert info["halo_peak"] == pytest.approx(2e-3 * info["brightest"], rel=1e-12)
    assert np.all(sky >= 0)


@pytest.mark.parametrize("seed", [-1, 2**64, 1.5, "7", None])
def test_bad_seeds_name_the_argument(seed):
    """Seeds are integers in [0, 2^64) (the generators' unsigned state): anything else is an
    InvalidInput naming seed, not the binding's bare signature list."""
    sky = hs.simulate.sky(16, 16, sources=3)
    for call in (lambda: hs.simulate.sky(16, 16, seed=seed),
                 lambda: hs.simulate.observation(sky, np.ones((16, 16)), seed=seed),
                 lambda: hs.simulate.seismic(samples=2000, seed=seed)):
        with pytest.raises(hs.InvalidInput) as info:
            call()
        assert "seed" in str(info.value) and repr(seed) in str(info.value), str(info.value)


@pytest.mark.parametrize("snr_db", [37.0, 16.0])
def test_dirty_image_noise_matches_the_snr(snr_db):
    n = 96
    sky = hs.simulate.sky(n, n, sources=20, seed=3)
    psf = hs.simulate.psf(n, n, antennas=ANTENNAS, **PSF_ARGS)
    dirty, info = hs.simulate.observation(sky, psf, snr_db=snr_db, seed=4, full_output=True)
    # H f in FP64 with NumPy: circular convolution with the PSF's origin moved to (0, 0).
    clean = np.real(np.fft.ifft2(np.fft.fft2(np.fft.ifftshift(psf)) * np.fft.fft2(sky)))
    sigma = info["sigma"]
    assert 10 * np.log10(np.sum(clean ** 2) / (n * n * sigma ** 2)) == pytest.approx(snr_db,
                                                                                    abs=1e-9)
    assert info["signal_power"] == pytest.approx(np.mean(clean ** 2), rel=1e-9)
    noise = dirty - clean
    # ||noise||^2 / (N sigma^2) ~ chi^2_N / N: standard deviation sqrt(2 / N); 5 of them.
    assert abs(np.mean(noise ** 2) / sigma ** 2 - 1) <= 5 * np.sqrt(2 / n ** 2)
    again = hs.simulate.observation(sky, psf, snr_db=snr_db, seed=4)
    np.testing.assert_array_equal(again, dirty)
    assert not np.array_equal(hs.simulate.observation(sky, psf, snr_db=snr_db, seed=5), dirty)


def test_seismic_shapes_seed_and_planted_cc():
    sim = hs.simulate.seismic(channels=3, samples=12000, templates=2, template_length=150,
                              events_per_template=2, event_cc=(0.6, 0.85), max_moveout=40, seed=5)
    assert sim.data.shape == (3, 12000) and sim.data.dtype == np.float64
    assert sim.templates.shape == (2, 3, 150)
    assert sim.moveouts.shape == (2, 3) and sim.moveouts.dtype == np.int64
    assert sim.weights.shape == (2, 3)
    np.testing.assert_allclose(sim.weights, 1 / 3)
    assert np.all((sim.moveouts >= 0) & (sim.moveouts <= 40)) and np.all(sim.moveouts.min(1) == 0)
    np.testing.assert_allclose((sim.templates ** 2).sum(axis=2), 1.0, rtol=1e-12)  # unit energy
    assert len(sim.events) == 4
    assert [e["sample"] for e in sim.events] == sorted(e["sample"] for e in sim.events)
    assert sorted(e["cc"] for e in sim.events) == [0.6, 0.6, 0.85, 0.85]
    for e in sim.events:
        t, p = e["template"], e["sample"]
        for c in range(3):
            start = np.array([p + sim.moveouts[t, c]])
            cc = ref.channel_cc(sim.templates[t, c], sim.data[c], start)[0]
            assert cc == pytest.approx(e["cc"], abs=1e-9), (e, c)
        stack = ref.matched_filter(sim.templates[t:t + 1], sim.moveouts[t:t + 1],
                                   sim.weights[t:t + 1], sim.data[:, p:p + 150 + 41])[0, 0]
        assert stack == pytest.approx(e["expected_cc_sum"], abs=1e-9)
        assert e["expected_cc_sum"] == pytest.approx(e["cc"], abs=1e-12)  # weights 1/C
        assert len(e["amplitude"]) == 3
    again = hs.simulate.seismic(channels=3, samples=12000, templates=2, template_length=150,
                                events_per_template=2, event_cc=(0.6, 0.85), max_moveout=40,
                                seed=5)
    np.testing.assert_array_equal(again.data, sim.data)


def test_ao_system_preset():
    system = hs.simulate.ao_system("check")
    assert isinstance(system, dict)
    assert system["format"] == "halfscope-ao-system" and system["version"] == 1
    assert len(system["sensors"]) == 6 and len(system["atmosphere"]["layers"]) == 10
    assert sum(layer["fraction"] for layer in system["atmosphere"]["layers"]) == \
        pytest.approx(1.0, abs=1e-6)
