"""CuPy and PyTorch arrays in, the same kind of array out, on the same device, without copies, on
the caller's stream. Every test skips without the framework or without a CUDA device (CI has
none); none passes without checking.

Tolerance against SciPy (FP64 on the FP32-rounded inputs): per pixel (K u32 + 2 u32) (|k| * |x|)
(worst-case rounding of a K-term FP32 sum, as test_conv_api.py); results of the same method on the
same device are compared bit for bit whatever the array framework.
"""
import resource

import numpy as np
import pytest

signal = pytest.importorskip("scipy.signal")
hs = pytest.importorskip("halfscope")

U32 = 2.0 ** -24


def need_cuda():
    if not hs.cuda_available():
        pytest.skip("halfscope was built without CUDA or no CUDA device is present")


@pytest.fixture
def cupy():
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("CuPy sees no CUDA device")
    except cp.cuda.runtime.CUDARuntimeError:
        pytest.skip("CuPy sees no CUDA device")
    need_cuda()
    return cp


@pytest.fixture
def torch():
    th = pytest.importorskip("torch")
    return th


def assert_close_to_scipy(out, img, ker):
    x = img.astype(np.float32).astype(np.float64)
    k = ker.astype(np.float32).astype(np.float64)
    ref = signal.convolve2d(x, k, mode="same")
    bound = (k.size + 2) * U32 * signal.convolve2d(np.abs(x), np.abs(k), mode="same") + 1e-300
    assert np.all(np.abs(np.asarray(out, np.float64) - ref) <= 1.01 * bound)


def test_cupy_in_cupy_out_same_device_equal_to_numpy_path(cupy, rng):
    img = rng.uniform(-1, 1, (200, 150)).astype(np.float32)
    ker = rng.uniform(-1, 1, (5, 6)).astype(np.float32)
    d_img, d_ker = cupy.asarray(img), cupy.asarray(ker)
    in_ptr = d_img.data.ptr
    out = hs.convolve2d(d_img, d_ker, mode="same", method="naive")
    assert isinstance(out, cupy.ndarray) and out.dtype == cupy.float32
    assert out.device.id == d_img.device.id
    assert out.data.ptr not in (in_ptr, d_ker.data.ptr) and d_img.data.ptr == in_ptr
    host = hs.convolve2d(img, ker, mode="same", method="naive", device="cuda")
    assert isinstance(host, np.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(out), host)
    np.testing.assert_array_equal(cupy.asnumpy(d_img), img)  # input untouched
    assert_close_to_scipy(host, img, ker)


def test_cupy_conv_plan_equals_the_function_on_device_arrays(cupy, rng):
    """hs.ConvPlan on CuPy arrays: bit for bit what hs.convolve2d gives with the method the plan
    runs (separable: the kernel factored once; auto: whatever it measured fastest here), results
    on the device."""
    img = cupy.asarray(rng.uniform(0, 1, (256, 300)).astype(np.float16))
    g = np.exp(-0.5 * (np.arange(7) - 3.0) ** 2 / 1.5**2)
    ker = cupy.asarray((np.outer(g, g) / np.outer(g, g).sum()).astype(np.float16))  # rank one
    for method in ("separable", "auto"):
        plan = hs.ConvPlan(ker, mode="same", precision="mixed", method=method)
        ran = plan.resolve_method(img)
        assert ran != "auto" and (method == "auto" or ran == method)
        out = plan(img)
        assert isinstance(out, cupy.ndarray) and out.dtype == cupy.float16
        want = hs.convolve2d(img, ker, mode="same", precision="mixed", method=ran)
        np.testing.assert_array_equal(cupy.asnumpy(out), cupy.asnumpy(want))


def test_cupy_large_array_stays_on_the_device(cupy, rng):
    """A 256 MiB input: the call must neither stage it through host memory (the process's peak
    resident size would grow by about that much) nor keep a device copy of it (CuPy's pool would
    hold more than the result once the call returns)."""
    n = 8192
    d_img = cupy.random.default_rng(1).standard_normal((n, n), dtype=cupy.float32)
    d_ker = cupy.asarray(rng.uniform(-1, 1, (3, 3)).astype(np.float32))
    pool = cupy.get_default_memory_pool()
    cupy.cuda.Device().synchronize()
    used_before = pool.used_bytes()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    out = hs.convolve2d(d_img, d_ker, mode="same")
    cupy.cuda.Device().synchronize()
    rss_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss_before
    assert isinstance(out, cupy.ndarray) and out.shape == (n, n)
    assert rss_growth < d_img.nbytes // 2, rss_growth
    assert pool.used_bytes() - used_before <= out.nbytes + (1 << 20)
    # Spot-check the centre row against SciPy on the host.
    rows = cupy.asnumpy(d_img[n // 2 - 2:n // 2 + 3])
    want = signal.convolve2d(rows.astype(np.float64), cupy.asnumpy(d_ker).astype(np.float64),
                             mode="same")[2]
    got = cupy.asnumpy(out[n // 2]).astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=0, atol=11 * U32 * 9 * np.abs(rows).max())


def test_cupy_non_default_stream_is_honoured(cupy, rng):
    """The input is produced by kernels queued on a non-blocking stream and hs is called without a
    synchronisation: it must run on that stream (the current one), after the producer."""
    ker = rng.uniform(-1, 1, (7, 7)).astype(np.float32)
    d_ker = cupy.asarray(ker)
    cupy.cuda.Device().synchronize()  # only the input below is produced asynchronously
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        x = cupy.zeros((2048, 2048), cupy.float32)
        for i in range(200):  # a long chain of launches: the input is late on purpose
            x = x * 0.5 + cupy.float32(i % 7)
        out = hs.convolve2d(x, d_ker, mode="same", method="naive")
    stream.synchronize()
    host = cupy.asnumpy(x)
    np.testing.assert_array_equal(
        cupy.asnumpy(out), hs.convolve2d(host, ker, mode="same", method="naive", device="cuda"))
    explicit = cupy.cuda.Stream(non_blocking=True)
    with explicit:
        y = x * 2
    out2 = hs.convolve2d(y, d_ker, mode="same", method="naive", stream=explicit)
    explicit.synchronize()
    np.testing.assert_array_equal(cupy.asnumpy(out2), 2 * cupy.asnumpy(out))


def test_cupy_matched_filter_equals_numpy_path(cupy, rng):
    templates = rng.normal(0, 1, (2, 3, 64)).astype(np.float32)
    data = rng.normal(0, 1, (3, 5000)).astype(np.float32)
    moveouts = np.array([[0, 3, 9], [4, 0, 1]])
    weights = np.full((2, 3), 1 / 3, np.float32)
    args = [cupy.asarray(a) for a in (templates, moveouts, weights, data)]
    out = hs.matched_filter(*args, 1, arch="gpu", precision="single", method="naive")
    assert isinstance(out, cupy.ndarray) and out.dtype == cupy.float32
    host = hs.matched_filter(templates, moveouts, weights, data, 1, arch="gpu",
                             precision="single", method="naive")
    np.testing.assert_array_equal(cupy.asnumpy(out), host)


def test_detect_on_device_stacks_of_any_real_dtype(cupy, torch, rng):
    """detect on CuPy and CUDA torch stacks: float64 and float16 searched as float32 (the same
    detections as the NumPy float32 path), a NaN or an infinity named, never searched."""
    stack = rng.normal(0, 1, (3, 4000)).astype(np.float32)
    stack[1, 1234] = 25.0
    want = hs.detect(stack, 8.0, "MAD", 10)
    assert len(want) >= 1 and 1234 in want["index"][want["template"] == 1]
    tensors = [cupy.asarray(stack.astype(np.float64)), cupy.asarray(stack.astype(np.float16))]
    if torch.cuda.is_available():
        tensors.append(torch.from_numpy(stack.astype(np.float64)).cuda())
    for x in tensors:
        got = hs.detect(x, 8.0, "MAD", 10)
        if str(x.dtype).endswith("float16"):
            assert 1234 in got["index"][got["template"] == 1]
        else:
            np.testing.assert_array_equal(got, want)
    for bad, word in [(np.nan, "NaN"), (np.inf, "infinite")]:
        x = cupy.asarray(stack.astype(np.float64))
        x[2, 77] = bad
        with pytest.raises(hs.InvalidInput, match=f"{word}.*template 2, correlation 77"):
            hs.detect(x, 8.0, "MAD", 10)


def test_torch_cpu_in_torch_out(torch, rng):
    img = rng.uniform(-1, 1, (30, 20))
    ker = rng.uniform(-1, 1, (3, 4))
    out = hs.convolve2d(torch.from_numpy(img), torch.from_numpy(ker), precision="double",
                        device="cpu")
    assert isinstance(out, torch.Tensor) and out.device.type == "cpu"
    np.testing.assert_array_equal(out.numpy(), hs.convolve2d(img, ker, precision="double",
                                                             device="cpu"))


def test_torch_cuda_in_torch_out_on_its_stream(torch, rng):
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    need_cuda()
    img = rng.uniform(-1, 1, (300, 256)).astype(np.float32)
    ker = rng.uniform(-1, 1, (5, 5)).astype(np.float32)
    t_img = torch.from_numpy(img).cuda()
    t_ker = torch.from_numpy(ker).cuda()
    out = hs.convolve2d(t_img, t_ker, mode="same", method="naive")
    assert isinstance(out, torch.Tensor) and out.device == t_img.device
    assert out.data_ptr() != t_img.data_ptr()
    host = hs.convolve2d(img, ker, mode="same", method="naive", device="cuda")
    np.testing.assert_array_equal(out.cpu().numpy(), host)
    assert_close_to_scipy(host, img, ker)

    torch.cuda.synchronize()  # only the input below is produced asynchronously
    stream = torch.cuda.Stream()  # PyTorch streams do not synchronise with the default stream
    with torch.cuda.stream(stream):
        x = torch.zeros((2048, 2048), device="cuda")
        for i in range(200):
            x = x * 0.5 + float(i % 7)
        late = hs.convolve2d(x, t_ker, mode="same", method="naive")
    stream.synchronize()
    np.testing.assert_array_equal(
        late.cpu().numpy(),
        hs.convolve2d(x.cpu().numpy(), ker, mode="same", method="naive", device="cuda"))


def test_device_input_computed_on_the_cpu_comes_back_on_the_device(cupy, rng):
    """device='cpu' with a CuPy input runs the CPU backend; the result still goes back as CuPy on
    the input's device, equal to the NumPy path's result."""
    img = rng.uniform(-1, 1, (64, 48)).astype(np.float32)
    ker = rng.uniform(-1, 1, (5, 5)).astype(np.float32)
    out = hs.convolve2d(cupy.asarray(img), cupy.asarray(ker), mode="same", device="cpu")
    assert isinstance(out, cupy.ndarray) and out.device.id == cupy.cuda.Device().id
    np.testing.assert_array_equal(out.get(), hs.convolve2d(img, ker, mode="same", device="cpu"))


def test_cholesky_out_of_core_on_one_device():
    """hs.linalg.cholesky(devices=[0], device_memory=...) of a host matrix larger than the budget:
    factored in slabs, L as NumPy's within the tolerance derived in tests/python/
    test_cholesky_cli.py (OOC_FORWARD_TOL: I + G G^T / n with G n x n/4 standard normal, kappa_2
    < 4, a dense factor, n = 2000, FP32, sqrt(n) u32 kappa with a factor 8 of slack: 1e-4), on
    the same sizes (the 8.9 MB lower tile layout in tiles of 128 needs ~14 MB in core, ~9 MB out
    of core: 12 MiB forces slabs)."""
    need_cuda()
    n = 2000
    g = np.random.default_rng(9).standard_normal((n, n // 4))
    a = np.eye(n) + g @ g.T / n
    L, report = hs.linalg.cholesky(a, tile=128, devices=[0], device_memory=12 << 20,
                                   full_output=True)
    assert isinstance(L, np.ndarray) and L.dtype == np.float32 and not np.triu(L, 1).any()
    assert report["out_of_core_slabs"] > 1, report
    lower = 4 * n * (n + 1) // 2
    assert report["host_to_device_bytes"] > report["device_to_host_bytes"] >= lower, report
    assert report["device_to_device_bytes"] == 0
    ref = np.linalg.cholesky(a)
    forward = np.linalg.norm(L.astype(np.float64) - ref) / np.linalg.norm(ref)
    assert forward <= 1e-4, forward


def test_reconstructor_streamed_from_host_memory():
    """hs.ao.reconstructor(Cmm, Ctm, devices=[0], device_memory=...): Cmm tiled in host memory,
    factored out of core and solved with the factor streamed by slabs (the matrices of
    test_cholesky_out_of_core_on_one_device, whose 12 MiB forces slabs in both steps). R within
    the same tolerance of NumPy's solve (1e-4: the factor's, the two substitutions add as much
    again at kappa < 4, well inside it), and equal within it to the in-core GPU reconstructor."""
    need_cuda()
    n, m = 2000, 300
    rng = np.random.default_rng(9)
    g = rng.standard_normal((n, n // 4))
    cmm = np.eye(n) + g @ g.T / n
    ctm = rng.standard_normal((m, n))
    r, report = hs.ao.reconstructor(cmm, ctm, tile=128, devices=[0], device_memory=12 << 20,
                                    full_output=True)
    assert r.shape == (m, n) and r.dtype == np.float32
    assert report["out_of_core_slabs"] > 1, report
    assert report["solve_slabs"] > 1 and report["solve_row_blocks"] >= 1, report
    assert report["solve_host_to_device_bytes"] >= 4 * n * (n + 1) // 2, report
    ref = np.linalg.solve(cmm, ctm.T).T
    assert np.linalg.norm(r - ref) / np.linalg.norm(ref) <= 1e-4
    in_core = hs.ao.reconstructor(cmm, ctm, tile=128, device="cuda")
    assert np.linalg.norm(r - in_core) / np.linalg.norm(in_core) <= 1e-4
    with pytest.raises(hs.InvalidInput, match="device_memory"):
        hs.ao.reconstructor(cmm, ctm, tile=128, devices=[0], device_memory=-1)


def test_cholesky_of_a_cupy_matrix_stays_on_the_device(cupy):
    """A CuPy matrix is tiled, factored and made dense again on its device (no round trip through
    host memory): L comes back as CuPy on that device, equal bit for bit to the factor of the same
    matrix given as NumPy and factored on the GPU (the same tiles, the same kernels), with a zero
    upper triangle; only the lower triangle is read (NaN above it changes nothing). With
    devices=[0] too, within the tolerance of test_cholesky_out_of_core_on_one_device."""
    need_cuda()
    n = 700
    g = np.random.default_rng(3).standard_normal((n, n // 4))
    a = (np.eye(n) + g @ g.T / n).astype(np.float32)
    ref = hs.linalg.cholesky(a, tile=128, device="cuda")
    d = cupy.asarray(a)
    d[cupy.triu_indices(n, 1)] = cupy.nan
    L = hs.linalg.cholesky(d, tile=128, device="cuda")
    assert isinstance(L, cupy.ndarray) and L.dtype == cupy.float32
    assert L.device.id == d.device.id
    np.testing.assert_array_equal(cupy.asnumpy(L), ref)
    L0 = hs.linalg.cholesky(d, tile=128, devices=[0])
    assert isinstance(L0, cupy.ndarray)
    exact = np.linalg.cholesky(a.astype(np.float64))
    forward = np.linalg.norm(cupy.asnumpy(L0).astype(np.float64) - exact) / np.linalg.norm(exact)
    assert forward <= 1e-4, forward
