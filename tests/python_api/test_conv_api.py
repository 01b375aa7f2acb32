"""hs.convolve2d / hs.correlate2d / hs.fftconvolve against scipy.signal in float64.

Reference: SciPy in FP64 on the inputs rounded to the precision's storage type (what halfscope
actually computes on), so the comparison measures only halfscope's arithmetic and output rounding.

Tolerances (per pixel, direct summation; Higham, "Accuracy and Stability", sec. 3.1): a K-term sum
of products computed with unit roundoff u_c has |error| <= gamma_K (|k| * |x|) ~ K u_c (|k| * |x|)
in the worst case, and storing the result rounds once more: u_s |ref| (the inputs are already
rounded in the reference, so they add nothing). Random rounding errors grow like sqrt(K) u_c
instead (a random walk of K independent roundings), which is what one observes; the per-pixel test
uses the worst case (it must never fail for a correct implementation, whatever the summation
order) and a second, norm-wise test checks the typical sqrt(K) growth with a factor 2 (measured:
at most 0.57 of it), so a kernel that accumulates in its storage precision (mixed or bf16 summed
in FP16 / BF16) fails both.
  double: u = 2^-53, about 1e-14 relative at these sizes (well inside the ~1e-12 asked).
  single: u = 2^-24; half: every operation in FP16, u = 2^-11; mixed: FP16 storage (2^-11), FP32
  arithmetic; bf16: BF16 storage (2^-8), FP32 arithmetic.
FFT methods have a norm-wise error instead (each transform adds ~log2(N) roundings of values
bounded by ||k||_1 max|x|): 8 u log2(N) ||k||_1 max|x|, as tests/python/test_conv_scipy.py.
"""
import numpy as np
import pytest

signal = pytest.importorskip("scipy.signal")
hs = pytest.importorskip("halfscope")

U_STORAGE = {"double": 2.0**-53, "single": 2.0**-24, "half": 2.0**-11, "mixed": 2.0**-11,
             "bf16": 2.0**-8}
U_COMPUTE = {"double": 2.0**-53, "single": 2.0**-24, "half": 2.0**-11, "mixed": 2.0**-24,
             "bf16": 2.0**-24}
RESULT_DTYPE = {"double": np.float64, "single": np.float32, "half": np.float16,
                "mixed": np.float16, "bf16": np.float32}  # bf16 comes back as float32 on NumPy

# (image shape, kernel shape): odd and even kernels, non-square, 1 x N, and a kernel larger than
# the image in both dimensions (full / same only: SciPy's 'wrap' pads once, so it is periodic only
# for kernels within the image, and halfscope's 'wrap' is truly periodic).
SHAPES = [((17, 23), (3, 3)), ((16, 20), (4, 6)), ((9, 31), (7, 2)), ((1, 40), (1, 5)),
          ((6, 5), (9, 8))]


def storage_round(a, precision):
    """`a` rounded to the precision's storage type (round to nearest even), back in float64."""
    if precision == "bf16":  # the top 16 bits of float32, rounded to nearest even
        b = a.astype(np.float32).view(np.uint32).astype(np.uint64)
        b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
        return b.astype(np.uint32).view(np.float32).astype(np.float64)
    return a.astype(RESULT_DTYPE[precision]).astype(np.float64)


def assert_direct_accuracy(out, ref, absref, taps, precision):
    """Per-pixel worst-case bound and norm-wise sqrt(K) bound (module docstring)."""
    assert out.shape == ref.shape
    out = out.astype(np.float64)
    assert np.all(np.isfinite(out))
    us, uc = U_STORAGE[precision], U_COMPUTE[precision]
    err = np.abs(out - ref)
    bound = 1.01 * (taps * uc * absref + us * np.abs(ref))
    worst = np.unravel_index(np.argmax(err - bound), err.shape)
    assert np.all(err <= bound + 1e-300), \
        f"{precision}: pixel {worst} error {err[worst]:.3e} > bound {bound[worst]:.3e}"
    typical = 2 * np.linalg.norm(np.sqrt(taps) * uc * absref + us * np.abs(ref)) + 1e-300
    assert np.linalg.norm(err) <= typical, (precision, np.linalg.norm(err), typical)


def assert_fft_accuracy(out, ref, x, k, precision):
    """Norm-wise FFT bound (module docstring), plus the output's own rounding per pixel."""
    assert out.shape == ref.shape
    out = out.astype(np.float64)
    assert np.all(np.isfinite(out))
    us, uc = U_STORAGE[precision], U_COMPUTE[precision]
    n = (x.shape[0] + k.shape[0]) * (x.shape[1] + k.shape[1])
    bound = 8 * max(uc, us) * np.log2(n) * np.abs(k).sum() * np.abs(x).max() + 2 * us * np.abs(ref)
    err = np.abs(out - ref)
    worst = np.unravel_index(np.argmax(err - bound), err.shape)
    assert np.all(err <= bound + 1e-300), \
        f"{precision}: pixel {worst} error {err[worst]:.3e} > bound {bound[worst]:.3e}"


@pytest.mark.parametrize("method", ["direct", "fft"])
@pytest.mark.parametrize("precision", ["double", "single", "half", "mixed", "bf16"])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("boundary", ["fill", "wrap"])
@pytest.mark.parametrize("correlate", [False, True])
def test_matches_scipy(rng, method, precision, mode, boundary, correlate):
    ours = hs.correlate2d if correlate else hs.convolve2d
    theirs = signal.correlate2d if correlate else signal.convolve2d
    checked = 0
    for (r, c), (kr, kc) in SHAPES:
        larger = kr > r or kc > c
        if boundary == "wrap" and larger:
            continue
        if mode == "valid" and larger:
            continue  # the swapped-inputs case has its own test
        img, ker = rng.uniform(-1, 1, (r, c)), rng.uniform(-1, 1, (kr, kc))
        out = ours(img, ker, mode=mode, boundary=boundary, method=method, precision=precision,
                   device="cpu")
        assert isinstance(out, np.ndarray) and out.dtype == RESULT_DTYPE[precision]
        x, k = storage_round(img, precision), storage_round(ker, precision)
        ref = theirs(x, k, mode=mode, boundary=boundary)
        absref = theirs(np.abs(x), np.abs(k), mode=mode, boundary=boundary)
        if method == "fft":
            assert_fft_accuracy(out, ref, x, k, precision)
        else:
            assert_direct_accuracy(out, ref, absref, k.size, precision)
        checked += 1
    assert checked >= 4


@pytest.mark.parametrize("correlate", [False, True])
def test_valid_mode_swaps_inputs_like_scipy(rng, correlate):
    """SciPy's 'valid' with in2 larger than in1 in both dimensions swaps the roles."""
    ours = hs.correlate2d if correlate else hs.convolve2d
    theirs = signal.correlate2d if correlate else signal.convolve2d
    small, big = rng.uniform(-1, 1, (4, 3)), rng.uniform(-1, 1, (10, 9))
    ref = theirs(small, big, mode="valid")
    out = ours(small, big, mode="valid", precision="double", device="cpu")
    absref = theirs(np.abs(small), np.abs(big), mode="valid")
    assert out.shape == ref.shape == (7, 7)
    assert_direct_accuracy(out, ref, absref, small.size, "double")


def test_defaults_are_full_fill_single(image_and_kernel):
    img, ker = image_and_kernel
    out = hs.convolve2d(img, ker, device="cpu")
    ref = signal.convolve2d(img.astype(np.float32).astype(np.float64),
                            ker.astype(np.float32).astype(np.float64))
    assert out.dtype == np.float32 and out.shape == ref.shape == (26, 22)
    absref = signal.convolve2d(np.abs(img), np.abs(ker))
    assert_direct_accuracy(out, ref, absref, ker.size, "single")


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("precision", ["double", "single"])
def test_fftconvolve_matches_scipy(rng, mode, precision):
    img, ker = rng.uniform(-1, 1, (40, 33)), rng.uniform(-1, 1, (9, 12))
    ref = signal.fftconvolve(img, ker, mode=mode)
    out = hs.fftconvolve(img, ker, mode=mode, precision=precision, device="cpu")
    assert out.shape == ref.shape and out.dtype == RESULT_DTYPE[precision]
    n = (img.shape[0] + ker.shape[0]) * (img.shape[1] + ker.shape[1])
    u = U_STORAGE[precision]
    bound = 8 * u * np.log2(n) * np.abs(ker).sum() * np.abs(img).max()
    assert np.abs(out.astype(np.float64) - ref).max() <= bound


def test_fftconvolve_axes(image_and_kernel):
    img, ker = image_and_kernel
    base = hs.fftconvolve(img, ker, precision="double", device="cpu")
    for axes in ((0, 1), (-2, -1)):
        np.testing.assert_array_equal(
            hs.fftconvolve(img, ker, axes=axes, precision="double", device="cpu"), base)
    with pytest.raises(hs.Error):  # 2-D only: a single axis is not what we compute
        hs.fftconvolve(img, ker, axes=(0,), precision="double", device="cpu")


@pytest.mark.parametrize("kwargs", [{"boundary": "symm"}, {"fillvalue": 1.5}])
def test_unsupported_boundaries(image_and_kernel, kwargs):
    img, ker = image_and_kernel
    with pytest.raises(hs.Unsupported) as info:
        hs.convolve2d(img, ker, device="cpu", **kwargs)
    assert isinstance(info.value, NotImplementedError)
    word = "symm" if "boundary" in kwargs else "fillvalue"
    assert word in str(info.value), str(info.value)


def test_fillvalue_zero_is_accepted(image_and_kernel):
    img, ker = image_and_kernel
    a = hs.convolve2d(img, ker, fillvalue=0, precision="double", device="cpu")
    b = hs.convolve2d(img, ker, fillvalue=0.0, precision="double", device="cpu")
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("which", [0, 1])
def test_complex_input_is_invalid(image_and_kernel, which):
    args = list(image_and_kernel)
    args[which] = args[which] + 1j
    with pytest.raises(hs.InvalidInput) as info:
        hs.convolve2d(*args, device="cpu")
    assert "complex" in str(info.value).lower(), str(info.value)


def test_strided_views_equal_contiguous_copies(rng):
    """Non-contiguous, negative-stride and Fortran-order inputs are read through their strides:
    the result must equal the one from C-contiguous copies of the same values, bit for bit (same
    method, same arithmetic)."""
    base = rng.uniform(-1, 1, (40, 36))
    kbase = rng.uniform(-1, 1, (7, 10))
    views = [(base[::2, ::3], kbase), (base[::-1, :], kbase[:, ::-1]),
             (np.asfortranarray(base), np.asfortranarray(kbase)), (base[3:30, 5:], kbase[::2, 1:]),
             (base.T, kbase.T)]
    for img, ker in views:
        assert not (img.flags.c_contiguous and ker.flags.c_contiguous)
        got = hs.convolve2d(img, ker, mode="same", method="direct", precision="single",
                            device="cpu")
        want = hs.convolve2d(np.ascontiguousarray(img), np.ascontiguousarray(ker), mode="same",
                             method="direct", precision="single", device="cpu")
        np.testing.assert_array_equal(got, want)
        ref = signal.convolve2d(img, ker, mode="same")
        assert np.abs(got - ref).max() <= 1.01 * (ker.size + 2) * 2.0**-24 * \
            signal.convolve2d(np.abs(img), np.abs(ker), mode="same").max()


@pytest.mark.parametrize("correlate", [False, True])
@pytest.mark.parametrize("precision", ["double", "half", "bf16"])
def test_conv_plan_equals_the_function(rng, correlate, precision):
    """hs.ConvPlan(kernel, ...)(image) gives, bit for bit, what hs.convolve2d / correlate2d give
    with the same arguments (the same methods on the same storage-typed kernel)."""
    ker = rng.uniform(-1, 1, (5, 4))
    plan = hs.ConvPlan(ker, mode="same", boundary="wrap", correlate=correlate,
                       precision=precision, device="cpu")
    function = hs.correlate2d if correlate else hs.convolve2d
    for shape in [(17, 23), (9, 31)]:
        img = rng.uniform(-1, 1, shape)
        want = function(img, ker, mode="same", boundary="wrap", precision=precision, device="cpu")
        got = plan(img)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    assert plan.resolve_method(img) == "direct"


def test_conv_plan_keeps_its_kernel_and_reports_errors(rng):
    img, ker = rng.uniform(-1, 1, (12, 12)), rng.uniform(-1, 1, (3, 3))
    plan = hs.ConvPlan(ker, mode="valid", precision="double", device="cpu")
    want = signal.convolve2d(img, ker, mode="valid")
    ker[1, 1] += 5.0  # the caller's array changes after planning; the plan's copy does not
    np.testing.assert_allclose(plan(img), want, rtol=1e-12, atol=1e-12)
    with pytest.raises(hs.InvalidInput):
        hs.ConvPlan(np.ones(4), device="cpu")
    with pytest.raises(hs.NumericalError):
        hs.ConvPlan(np.full((3, 3), 1e6), precision="half", device="cpu")
    with pytest.raises(hs.Unsupported):
        hs.ConvPlan(ker, boundary="symm")


@pytest.mark.parametrize("kernel", [np.ones((0, 3)), np.ones((3, 0)), np.ones((2, 3, 3)),
                                    np.ones(4)])
def test_conv_plan_checks_its_kernel_when_made(kernel):
    """A plan that could never run is refused at construction, naming the kernel and its shape,
    not at its first call."""
    with pytest.raises(hs.InvalidInput) as info:
        hs.ConvPlan(kernel, device="cpu")
    message = str(info.value)
    assert "kernel" in message and str(kernel.shape) in message, message
