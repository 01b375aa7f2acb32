"""hs.matched_filter / hs.detect / hs.matched_filter_detect / hs.eqcorrscan.array_xcorr against
the independent NumPy references in fmf_reference.py.

Tolerances. The output is float32 in every precision. `double` (the CPU FP64 reference) agrees with
NumPy's FP64 to ~2 K u64 per channel, then one rounding to float32: u32 |value| <= u32 sum|w|.
`single`: each channel's CC carries about 2 K u32 (gamma_K on the dot product and, through the
square root, half of it on each energy), and the stack adds sum_c |w_c| of them; plus the output
rounding u32 sum|w|.
"""
import warnings

import numpy as np
import pytest

import fmf_reference as ref

hs = pytest.importorskip("halfscope")

U32 = 2.0 ** -24
U64 = 2.0 ** -53


def tolerance(precision, K, weight_sum):
    """Largest |hs - reference| allowed (module docstring)."""
    per_channel = {"double": 2 * K * U64, "single": 2 * K * U32}[precision]
    return (per_channel + U32) * max(weight_sum, 1.0)


def network_problem(rng, T=2, S=3, C=2, K=32, L=2000):
    """FMF's 4-D case: moveouts that push some windows off either end of the data (those channels
    must contribute 0) and a zero weight (the channel is skipped)."""
    templates = rng.uniform(-1, 1, (T, S, C, K))
    data = rng.uniform(-50, 50, (S, C, L))
    moveouts = rng.integers(-40, 80, (T, S, C)).astype(np.int64)
    weights = rng.uniform(0.1, 1, (T, S, C))
    weights[0, 1, 0] = 0.0
    weights[1, 2, :] = 0.0
    return templates, moveouts, weights, data


@pytest.mark.parametrize("precision", ["double", "single"])
@pytest.mark.parametrize("normalize", ["short", "full"])
@pytest.mark.parametrize("step", [1, 3])
def test_network_stack_matches_numpy(rng, precision, normalize, step):
    templates, moveouts, weights, data = network_problem(rng)
    want = ref.matched_filter(templates, moveouts, weights, data, step, normalize)
    got = hs.matched_filter(templates, moveouts, weights, data, step, arch="cpu",
                            normalize=normalize, precision=precision)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32
    assert got.shape == want.shape == (2, (2000 - 32) // step + 1)
    tol = tolerance(precision, 32, np.abs(weights).sum(axis=(1, 2)).max())
    assert np.abs(got - want).max() <= tol, np.abs(got - want).max()


@pytest.mark.parametrize("precision", ["double", "single"])
def test_per_channel_layout_matches_numpy(rng, precision):
    templates, moveouts, weights, data = network_problem(rng)
    want = ref.matched_filter(templates, moveouts, weights, data, 2, network_sum=False)
    got = hs.matched_filter(templates, moveouts, weights, data, 2, arch="cpu",
                            network_sum=False, precision=precision)
    assert got.dtype == np.float32 and got.shape == want.shape == (2, 3, 2, (2000 - 32) // 2 + 1)
    assert np.abs(got - want).max() <= tolerance(precision, 32, 1.0)
    assert (want == 0).any()  # some windows really ran off the data


def test_three_d_traces_and_repeated_moveouts(rng):
    """(T, N, K) templates with (N, L) data and (T, N) moveouts; and 4-D templates with (T, S)
    moveouts / weights, which FMF repeats over the components."""
    templates, moveouts, weights, data = network_problem(rng)
    flat_t = templates.reshape(2, 6, 32)
    flat_d = data.reshape(6, 2000)
    flat_m, flat_w = moveouts.reshape(2, 6), weights.reshape(2, 6)
    want = ref.matched_filter(flat_t, flat_m, flat_w, flat_d, 1)
    got = hs.matched_filter(flat_t, flat_m, flat_w, flat_d, 1, arch="cpu", precision="double")
    assert got.shape == want.shape and np.abs(got - want).max() <= tolerance("double", 32, 6)
    per = hs.matched_filter(flat_t, flat_m, flat_w, flat_d, 1, arch="cpu", precision="double",
                            network_sum=False)
    assert per.shape == (2, 6, 1969)

    station_m, station_w = moveouts[:, :, 0], weights[:, :, 1]
    want = ref.matched_filter(templates, station_m, station_w, data, 1)
    got = hs.matched_filter(templates, station_m, station_w, data, 1, arch="cpu",
                            precision="double")
    assert np.abs(got - want).max() <= tolerance("double", 32, 6)


def test_single_template_and_default_moveouts_weights(rng):
    """templates.ndim == data.ndim is one template (FMF: n_templates = 1, output (1, n_corr));
    moveouts / weights None mean 0 / 1."""
    templates, _, _, data = network_problem(rng)
    one = templates[1]
    want = ref.matched_filter(one, None, None, data, 1)
    got = hs.matched_filter(one, None, None, data, 1, arch="cpu", precision="double")
    assert got.shape == want.shape == (1, 1969)
    assert np.abs(got - want).max() <= tolerance("double", 32, 6)


def test_single_template_with_fmf_shaped_moveouts_and_per_channel_output(rng):
    """One (S, C, K) template with (S, C) moveouts and weights, and with flattened ones: FMF
    reshapes any array of T S C values (its size rule); per-channel output keeps FMF's
    (T, S, C, n_corr) layout with the template axis added."""
    templates, moveouts, weights, data = network_problem(rng)
    one, mo, w = templates[0], moveouts[0], weights[0]
    want = ref.matched_filter(one, mo, w, data, 2)
    for m_arg, w_arg in ((mo, w), (mo.ravel(), w.ravel())):
        got = hs.matched_filter(one, m_arg, w_arg, data, 2, arch="cpu", precision="double")
        assert got.shape == want.shape
        assert np.abs(got - want).max() <= tolerance("double", 32, w.sum())
    per_channel = hs.matched_filter(one, mo, w, data, 2, arch="cpu", precision="double",
                                    network_sum=False)
    want_pc = ref.matched_filter(one, mo, w, data, 2, network_sum=False)
    assert per_channel.shape == want_pc.shape == (1, 3, 2, (2000 - 32) // 2 + 1)
    assert np.abs(per_channel - want_pc).max() <= tolerance("double", 32, 1.0)


@pytest.mark.parametrize("normalize", ["short", "full"])
def test_flat_windows_give_zero_not_nan(rng, normalize):
    K = 32
    data = rng.normal(0, 1, (1, 1500))
    data[0, 300:600] = 0.0  # a zero-filled gap: flat in both normalizations
    data[0, 900:1200] = 3.0  # a constant: flat only once demeaned
    templates = rng.normal(0, 1, (2, 1, K))
    templates[1, 0] = 0.0  # a flat template channel contributes 0 everywhere
    want = ref.matched_filter(templates, None, None, data, 1, normalize)
    got = hs.matched_filter(templates, None, None, data, 1, arch="cpu", normalize=normalize,
                            precision="single")
    assert np.all(np.isfinite(got))
    assert np.abs(got - want).max() <= tolerance("single", K, 1.0)
    flat = want == 0
    assert flat[0, 310:560].all() and flat[1].all()
    assert flat[0, 910:1160].all() == (normalize == "full")
    np.testing.assert_array_equal(got[flat], 0.0)


def test_level_steps_in_sixteen_bit_full_normalization_raise_numerical_error(rng):
    # Data that step by 3e4 noise levels: FP16 / BF16 operands of full normalization round to
    # the level, so the call raises (never returns CC clamped to +-1); single runs.
    templates = rng.standard_normal((2, 3, 40))
    data = rng.standard_normal((3, 3000))
    data[2, 1200:] += 3e4
    for precision in ("half", "mixed", "bf16"):
        with pytest.raises(hs.NumericalError, match="channel 2, the window of 40 samples"):
            hs.matched_filter(templates, None, None, data, normalize="full", precision=precision,
                              check_zeros=False)
    cc = hs.matched_filter(templates, None, None, data, normalize="full", precision="single",
                           check_zeros=False)
    want = ref.matched_filter(templates, None, None, data.astype(np.float32).astype(np.float64),
                              normalize="full")
    assert np.abs(cc - want).max() < 1e-2


def test_shape_errors_name_the_argument(rng):
    templates, moveouts, weights, data = network_problem(rng)
    with pytest.raises(hs.InvalidInput) as info:
        hs.matched_filter(templates[:, :2], moveouts, weights, data, 1, arch="cpu")
    assert "templates" in str(info.value), str(info.value)
    with pytest.raises(hs.InvalidInput) as info:
        hs.matched_filter(templates, moveouts[:, :, :1].repeat(3, axis=2), weights, data, 1,
                          arch="cpu")
    assert "moveouts" in str(info.value), str(info.value)


def test_gpu_arch_without_a_gpu_is_unsupported(rng):
    if hs.cuda_available():
        pytest.skip("a GPU is present: arch='gpu' runs")
    templates, moveouts, weights, data = network_problem(rng)
    with pytest.raises(hs.Unsupported):
        hs.matched_filter(templates, moveouts, weights, data, 1, arch="gpu")


def test_defaults_are_fast_matched_filters(rng):
    """FMF's defaults (arch='cpu', check_zeros='first'), so the one-line import swap keeps a
    default call's meaning and runs without a GPU: the same stack as arch='cpu', and a warning,
    as FMF prints, when the first template's stack holds more than 10 zeros."""
    import inspect

    for function in (hs.matched_filter, hs.matched_filter_detect):
        assert inspect.signature(function).parameters["arch"].default == "cpu"
    assert inspect.signature(hs.matched_filter).parameters["check_zeros"].default == "first"
    templates, moveouts, weights, data = network_problem(rng)
    moveouts = np.abs(moveouts)  # inside the data: no zero comes from windows leaving it
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        default = hs.matched_filter(templates, moveouts, weights, data)
    np.testing.assert_array_equal(
        default, hs.matched_filter(templates, moveouts, weights, data, 1, arch="cpu"))
    data[:, :, 500:700] = 0.0  # a zero-filled gap: flat windows give 0 on every channel
    with pytest.warns(UserWarning, match=r"correlations are 0 for template 0"):
        hs.matched_filter(templates, moveouts, weights, data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hs.matched_filter(templates, moveouts, weights, data, check_zeros=False)
    with pytest.raises(hs.InvalidInput, match=r"check_zeros 'some'.*'first' or 'all'"):
        hs.matched_filter(templates, moveouts, weights, data, check_zeros="some")


@pytest.mark.parametrize("bad,shown", [(2.7, "2.7"), (np.nan, "nan"), (np.inf, "inf"),
                                       (1e19, "1e+19")])
def test_moveouts_must_be_whole_finite_sample_counts(rng, bad, shown):
    """A fraction would be truncated and a NaN cast to INT64_MIN (its channel silently dropped):
    InvalidInput naming moveouts, the index and the value. Integer-valued floats are taken."""
    templates, moveouts, weights, data = network_problem(rng)
    moveouts = np.abs(moveouts)
    as_float = moveouts.astype(np.float64)
    np.testing.assert_array_equal(
        hs.matched_filter(templates, as_float, weights, data, 1, arch="cpu", check_zeros=False),
        hs.matched_filter(templates, moveouts, weights, data, 1, arch="cpu", check_zeros=False))
    as_float[1, 2, 0] = bad
    for function in (hs.matched_filter, hs.matched_filter_detect):
        with pytest.raises(hs.InvalidInput) as info:
            function(templates, as_float, weights, data, 1, arch="cpu")
        message = str(info.value)
        assert "moveouts" in message and "(1, 2, 0)" in message and shown in message, message


def test_missing_and_complex_arguments_name_the_argument(rng):
    templates, moveouts, weights, data = network_problem(rng)
    for function in (hs.matched_filter, hs.matched_filter_detect):
        with pytest.raises(TypeError, match=r"'data': expected an array.*found None"):
            function(templates, moveouts, weights, None, 1, arch="cpu")
        with pytest.raises(TypeError, match=r"'templates': expected an array.*found None"):
            function(None, moveouts, weights, data, 1, arch="cpu")
    with pytest.raises(hs.InvalidInput, match=r"'weights': expected real numbers.*complex"):
        hs.matched_filter(templates, moveouts, weights + 1j, data, 1, arch="cpu")


@pytest.fixture(scope="module")
def planted():
    """Seismic data with planted events (per-channel CC exactly 0.75 or 0.9, weights 1/C)."""
    return hs.simulate.seismic(channels=3, samples=20000, templates=2, template_length=200,
                               events_per_template=3, event_cc=(0.75, 0.9), seed=11)


def planted_stack(sim):
    return hs.matched_filter(sim.templates, sim.moveouts, sim.weights, sim.data, 1, arch="cpu",
                             precision="single")


def test_detect_finds_every_planted_event(planted):
    sim = planted
    cc = planted_stack(sim)
    events = {(e["template"], e["sample"]): e["expected_cc_sum"] for e in sim.events}
    assert len(events) == 6
    # Absolute threshold 0.5: noise CC of 200 white samples has std 1/sqrt(200) = 0.07 per
    # channel, 0.04 for the mean of 3; over 2e4 times the largest is ~4.5 sigma = 0.2. So exactly
    # the planted events are above it.
    det = hs.detect(cc, threshold=0.5, threshold_type="abs", min_separation=250)
    assert det.dtype.names[:5] == ("template", "index", "sample", "value", "threshold")
    found = {(int(d["template"]), int(d["sample"])): float(d["value"]) for d in det}
    assert set(found) == set(events)
    for key, expected in events.items():
        assert abs(found[key] - expected) <= tolerance("single", 200, 1.0), key
    np.testing.assert_array_equal(det["index"], det["sample"])  # step 1
    assert list(map(tuple, ref.detect(cc, 0.5, 250))) == \
        [(int(d["template"]), int(d["index"])) for d in det]
    # EQcorrscan's default MAD threshold (8 x median |cc_sum| ~ 0.2) finds them all too.
    mad = hs.detect(cc, threshold=8.0, min_separation=250)
    assert set(events) <= {(int(d["template"]), int(d["sample"])) for d in mad}
    for t in range(2):
        rows = mad[mad["template"] == t]
        assert np.allclose(rows["threshold"], 8 * np.median(np.abs(cc[t].astype(np.float64))),
                           rtol=1e-6)


@pytest.mark.parametrize("convert", [
    lambda cc: cc.astype(np.float64), lambda cc: cc.astype(np.float16).astype(np.float64),
    lambda cc: cc.tolist(), lambda cc: cc.astype(np.float16)], ids=["f64", "f64-of-f16", "list",
                                                                     "f16"])
def test_detect_takes_any_real_dtype(planted, convert):
    """Any real dtype is searched as the float32 stack it holds (docs/python.md): detections equal
    those of that float32 stack."""
    cc = convert(planted_stack(planted))
    want = hs.detect(np.asarray(cc, dtype=np.float32), threshold=0.5, threshold_type="abs",
                     min_separation=250)
    got = hs.detect(cc, threshold=0.5, threshold_type="abs", min_separation=250)
    assert len(got) > 0
    np.testing.assert_array_equal(got, want)
    scaled = (planted_stack(planted) * 1000).astype(np.int32)  # integers too
    np.testing.assert_array_equal(hs.detect(scaled, 500, "abs", 250),
                                  hs.detect(scaled.astype(np.float32), 500, "abs", 250))


@pytest.mark.parametrize("value,word", [(np.nan, "NaN"), (np.inf, "infinite"),
                                        (-np.inf, "infinite")])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_detect_rejects_non_finite_stacks(planted, value, word, dtype):
    """A NaN would be skipped (shifting the MAD) and an infinity returned as a detection:
    InvalidInput naming cc_sum and the first bad element."""
    cc = planted_stack(planted).astype(dtype)
    cc[1, 70] = value
    cc[1, 90] = np.nan
    with pytest.raises(hs.InvalidInput) as info:
        hs.detect(cc)
    message = str(info.value)
    assert "cc_sum" in message and word in message and "template 1, correlation 70" in message
    with pytest.raises(hs.InvalidInput, match=r"cc_sum.*beyond float32"):
        hs.detect(np.array([[0.0, 1e39, 0.0]]))


def test_detect_bad_stacks_name_cc_sum():
    for bad, words in ((np.ones(5), "shape (5,)"), (np.ones((2, 0)), "shape (2, 0)"),
                       (np.ones((2, 5), complex), "complex")):
        with pytest.raises(hs.InvalidInput) as info:
            hs.detect(bad)
        assert "cc_sum" in str(info.value) and words in str(info.value), str(info.value)


def test_threshold_type_is_case_insensitive_and_lists_every_spelling(planted):
    cc = planted_stack(planted)
    mad = hs.detect(cc, min_separation=250)
    absolute = hs.detect(cc, 0.5, "abs", 250)
    for spelling in ("MAD", "mad", "Mad", "mAd"):
        np.testing.assert_array_equal(hs.detect(cc, 8.0, spelling, 250), mad)
    for spelling in ("abs", "ABS", "Abs", "absolute", "Absolute", "ABSOLUTE"):
        np.testing.assert_array_equal(hs.detect(cc, 0.5, spelling, 250), absolute)
    for function, args in ((hs.detect, (cc, 0.5)), (hs.matched_filter_detect, (
            planted.templates, planted.moveouts, planted.weights, planted.data, 1, "cpu",
            "short", 0.5))):
        with pytest.raises(hs.InvalidInput) as info:
            function(*args, threshold_type="median")
        message = str(info.value)
        assert "median" in message, message
        for spelling in ("'MAD'", "'mad'", "'absolute'", "'abs'"):
            assert spelling in message, message


def test_matched_filter_detect_agrees_with_the_two_steps(planted):
    sim = planted
    both = hs.matched_filter_detect(sim.templates, sim.moveouts, sim.weights, sim.data, 1,
                                    arch="cpu", threshold=0.5, threshold_type="abs",
                                    min_separation=250, precision="single")
    two = hs.detect(planted_stack(sim), threshold=0.5, threshold_type="abs", min_separation=250)
    assert len(both) == len(two) == 6
    for name in ("template", "index", "sample"):
        np.testing.assert_array_equal(both[name], two[name])
    np.testing.assert_allclose(both["value"], two["value"], rtol=0, atol=1e-6)
    np.testing.assert_array_equal(both["channels_used"], 3)  # every window inside, none flat


def xcorr_problem(rng, n_t=4, K=48, L=1500):
    templates = rng.normal(0, 1, (n_t, K))
    stream = rng.normal(0, 1, L) + 5.0  # an offset: full normalization removes it
    stream[700:760] = 5.0  # flat stretch -> 0
    templates[2, 10] = np.nan  # an unused template
    stream[200:200 + K] += 4 * templates[0]  # a strong match for template 0 at 200
    pads = [0, 3, 7, 1]
    return templates, stream, pads


def test_array_xcorr_matches_numpy_normxcorr(rng):
    templates, stream, pads = xcorr_problem(rng)
    ccc, used = hs.eqcorrscan.array_xcorr(templates, stream, pads)
    want, want_used = ref.normxcorr(templates, stream, pads)
    assert ccc.dtype == np.float32 and ccc.shape == want.shape == (4, 1500 - 48 + 1)
    np.testing.assert_array_equal(used, want_used)
    assert used.dtype == bool and not used[2]
    np.testing.assert_array_equal(ccc[2], 0.0)
    assert np.abs(ccc - want).max() <= tolerance("single", 48, 1.0)
    assert np.argmax(ccc[0]) == 200 and ccc[0, 200] > 0.9
    np.testing.assert_array_equal(ccc[1, -3:], 0.0)  # the shift by pad fills with zeros


def test_array_xcorr_matches_eqcorrscan_numpy_backend(rng):
    correlate = pytest.importorskip("eqcorrscan.utils.correlate")
    templates, stream, pads = xcorr_problem(rng)
    templates[2, 10] = 0.5  # EQcorrscan's numpy backend needs finite templates
    theirs, their_used = correlate.numpy_normxcorr(templates, stream, pads)
    ours, used = hs.eqcorrscan.array_xcorr(templates, stream, pads)
    np.testing.assert_array_equal(used, their_used)
    # Their FFT and moving-window statistics (float64, returned as float32) carry ~u32 + the
    # cancellation of the 5.0 offset in the moving std: 2 K u32 covers both here.
    assert np.abs(ours - theirs).max() <= tolerance("single", 48, 1.0) + 1e-5


def test_array_xcorr_rejects_complex_and_fractional_pads(rng):
    """A cast to float64 would drop the imaginary part and one to int64 truncate a pad:
    InvalidInput naming the argument, as everywhere else."""
    templates, stream, pads = xcorr_problem(rng)
    with pytest.raises(hs.InvalidInput, match=r"'templates': expected real numbers.*complex"):
        hs.eqcorrscan.array_xcorr(templates.astype(complex), stream, pads)
    with pytest.raises(hs.InvalidInput, match=r"'stream': expected real numbers.*complex"):
        hs.eqcorrscan.array_xcorr(templates, stream.astype(complex), pads)
    with pytest.raises(hs.InvalidInput, match=r"'pads'.*found 2.5 at index \(1,\)"):
        hs.eqcorrscan.array_xcorr(templates, stream, [0, 2.5, 7, 1])
