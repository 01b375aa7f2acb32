"""What every call promises about arrays and errors: typed exceptions that are also the matching
Python builtins, messages that name the argument, NumPy in -> NumPy out, inputs left untouched,
integer / float16 / read-only inputs accepted, and the GIL released while the library computes."""
import re
import threading
import time

import numpy as np
import pytest

signal = pytest.importorskip("scipy.signal")
hs = pytest.importorskip("halfscope")

HIERARCHY = [("InvalidInput", ValueError), ("IoError", OSError),
             ("Unsupported", NotImplementedError), ("CudaError", RuntimeError),
             ("NumericalError", ArithmeticError), ("NotPositiveDefinite", ArithmeticError)]


@pytest.mark.parametrize("name,builtin", HIERARCHY, ids=[b.__name__ for _, b in HIERARCHY])
def test_error_classes(name, builtin):
    cls = getattr(hs, name)
    assert issubclass(hs.Error, Exception)
    assert issubclass(cls, hs.Error) and issubclass(cls, builtin)
    if name == "NotPositiveDefinite":
        assert issubclass(cls, hs.NumericalError)


def test_bad_rank_message_names_the_argument_and_what_was_found(image_and_kernel):
    img, ker = image_and_kernel
    with pytest.raises(hs.InvalidInput) as info:
        hs.convolve2d(img[None], ker, device="cpu")
    message = str(info.value)
    # The library names the argument by its role (image), SciPy's signature by position (in1).
    assert "in1" in message or "image" in message, message
    assert "2-D" in message and re.search(r"\b1\D+23\D+18\b", message), message


def test_unknown_names_are_invalid_and_listed(image_and_kernel):
    img, ker = image_and_kernel
    with pytest.raises(hs.InvalidInput) as info:
        hs.convolve2d(img, ker, precision="quad", device="cpu")
    assert "quad" in str(info.value) and "single" in str(info.value), str(info.value)
    with pytest.raises(hs.InvalidInput) as info:
        hs.convolve2d(img, ker, mode="middle", device="cpu")
    assert "middle" in str(info.value) and "same" in str(info.value), str(info.value)


def test_results_are_numpy_and_inputs_unchanged(rng):
    img = rng.uniform(-1, 1, (20, 24))
    ker = rng.uniform(-1, 1, (3, 4))
    templates = rng.normal(0, 1, (2, 3, 16))
    data = rng.normal(0, 1, (3, 300))
    moveouts = np.array([[0, 2, 5], [1, 0, 3]])
    weights = np.full((2, 3), 1 / 3)
    a = rng.standard_normal((40, 40))
    spd = a @ a.T + 40 * np.eye(40)
    inputs = [img, ker, templates, data, moveouts, weights, spd]
    before = [x.copy() for x in inputs]
    results = [
        hs.convolve2d(img, ker, device="cpu"),
        hs.fftconvolve(img, ker, device="cpu"),
        hs.matched_filter(templates, moveouts, weights, data, 1, arch="cpu"),
        hs.deconvolve(img, np.pad(ker, ((8, 9), (10, 10))), solver="cg", iterations=3,
                      device="cpu").image,
        hs.linalg.cholesky(spd, tile=16, device="cpu"),
    ]
    for r in results:
        assert type(r) is np.ndarray
    for x, y in zip(inputs, before):
        np.testing.assert_array_equal(x, y)


def test_integer_and_float16_inputs(rng):
    img = rng.integers(-5, 6, (12, 15))
    ker = rng.integers(-3, 4, (3, 3)).astype(np.int32)
    ref = signal.convolve2d(img, ker)  # exact in integers; every value is exact in FP64 too
    np.testing.assert_array_equal(hs.convolve2d(img, ker, precision="double", device="cpu"), ref)
    h_img, h_ker = img.astype(np.float16) / 8, ker.astype(np.float16) / 4
    out = hs.convolve2d(h_img, h_ker, precision="double", device="cpu")
    # float16 inputs are exact in float64 and these products and sums are exact too.
    np.testing.assert_array_equal(out, signal.convolve2d(h_img.astype(np.float64),
                                                         h_ker.astype(np.float64)))


def test_read_only_input(image_and_kernel):
    img, ker = image_and_kernel
    ro_img, ro_ker = img.copy(), ker.copy()
    ro_img.setflags(write=False)
    ro_ker.setflags(write=False)
    np.testing.assert_array_equal(hs.convolve2d(ro_img, ro_ker, precision="double", device="cpu"),
                                  hs.convolve2d(img, ker, precision="double", device="cpu"))


def _ticks_during_call(fn):
    """Runs fn() while a ticker thread records timestamps; returns (stamps, t0, t1)."""
    stamps, stop = [], threading.Event()

    def ticker():
        while not stop.is_set():
            stamps.append(time.perf_counter())
            time.sleep(0.001)  # a Python-level wait: needs the GIL back to continue the loop

    thread = threading.Thread(target=ticker)
    thread.start()
    try:
        time.sleep(0.02)  # let the ticker start
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
    finally:
        stop.set()
        thread.join()
    return stamps, t0, t1


def test_gil_is_released_while_computing(rng):
    """A thread that only runs Python code keeps running while a CPU convolution runs in the main
    thread. If the call held the GIL, no Python bytecode could run in the middle of it: the
    ticker's timestamps would all fall before the call or after it returns. The image grows until
    the call lasts at least 50 ms, so a fast many-core machine tests as much as CI's 2 cores."""
    ker = rng.uniform(-1, 1, (61, 61))
    for size in (512, 1024, 2048, 4096):
        img = rng.uniform(-1, 1, (size, size))
        stamps, t0, t1 = _ticks_during_call(lambda: hs.convolve2d(
            img, ker, mode="same", method="direct", precision="double", device="cpu"))
        duration = t1 - t0
        if duration >= 0.05:
            break
    assert duration >= 0.05, f"even {size}^2 took only {duration * 1e3:.1f} ms: too short to tell"
    middle = [s for s in stamps if t0 + 0.25 * duration <= s <= t1 - 0.25 * duration]
    # With the GIL released the ticker wakes every ~1 ms (several per ms of a 2-core machine's
    # time share at worst): demand a handful over the middle half of the call.
    assert len(middle) >= 3, (len(middle), duration)


def test_info_and_cuda_available_agree():
    info = hs.info()
    assert {"version", "cuda_built", "status", "devices"} <= set(info)
    assert isinstance(info["version"], str) and info["version"]
    assert hs.cuda_available() is bool(info["devices"])
    if not info["cuda_built"]:
        assert info["devices"] == [] and not hs.cuda_available()
    for index, device in enumerate(info["devices"]):
        assert device["index"] == index and device["name"] and "cc" in device


def test_device_cuda_without_a_gpu_speaks_python(image_and_kernel):
    """device='cuda' without a usable GPU is Unsupported in the Python spelling (device='cuda',
    device='cpu'), not the CLI's --device."""
    if hs.cuda_available():
        pytest.skip("a CUDA device is present")
    img, ker = image_and_kernel
    for device in ("cuda", "gpu", "CUDA"):
        for call in (lambda: hs.convolve2d(img, ker, device=device),
                     lambda: hs.ConvPlan(ker, device=device),
                     lambda: hs.linalg.cholesky(np.eye(4), device=device)):
            with pytest.raises(hs.Unsupported) as info:
                call()
            message = str(info.value)
            assert f"device={device!r}" in message and "device='cpu'" in message, message
            assert "--device" not in message, message


def test_none_for_an_array_names_the_argument(image_and_kernel):
    img, ker = image_and_kernel
    for call, name in ((lambda: hs.convolve2d(img, None, device="cpu"), "in2"),
                       (lambda: hs.convolve2d(None, ker, device="cpu"), "in1"),
                       (lambda: hs.deconvolve(img, None, device="cpu"), "psf")):
        with pytest.raises(TypeError, match=rf"'{name}': expected an array.*found None"):
            call()
