"""Shared set-up of the Python API tests (`import halfscope as hs` against NumPy / SciPy).

In CI (CI=true) every independent reference and the extension itself must import: a missing
module would otherwise turn into skipped tests that pass without checking anything. Outside CI a
missing piece skips the tests that need it (`pytest.importorskip` in each file).
"""
import importlib
import os
import sys
import zlib
from pathlib import Path

import pytest

REQUIRED = ["numpy", "scipy.signal", "halfscope._core"]

# pytest imports these rootdir-less test modules with their folder prepended to sys.path, but the
# shared reference (fmf_reference.py) is imported by name: make that explicit and independent of
# the import mode.
sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_sessionstart(session):
    """Fails the session in CI when the extension or a reference library does not import."""
    if not os.environ.get("CI"):
        return
    missing = []
    for name in REQUIRED:
        try:
            importlib.import_module(name)
        except ImportError as e:
            missing.append(f"{name} ({e})")
    if missing:
        pytest.exit("CI=true but missing: " + ", ".join(missing) +
                    "; run make deps and build the Python extension", returncode=3)


def stable_seed(text):
    """A seed derived from `text` that is the same in every process (Python's hash() of a string
    is salted per process), so a failure reproduces with the same data."""
    return zlib.crc32(text.encode())


@pytest.fixture
def rng(request):
    """A NumPy Generator seeded from the test's node id: each test (and parameter set) gets its
    own reproducible stream."""
    np = pytest.importorskip("numpy")
    return np.random.default_rng(stable_seed(request.node.nodeid))


@pytest.fixture
def image_and_kernel(rng):
    """A small non-square image and an even-sized kernel, uniform in [-1, 1] (float64): sizes that
    exercise SciPy's off-centre 'same' window."""
    return rng.uniform(-1, 1, (23, 18)), rng.uniform(-1, 1, (4, 5))


@pytest.fixture(scope="module")
def spd_matrix():
    """A random symmetric positive definite float64 matrix of order 300 with eigenvalues spread
    log-uniformly over [1, 1e3] (condition number 1e3), and that condition number. Built once
    per module (an O(n^3) QR); tests must not modify it."""
    np = pytest.importorskip("numpy")
    n, cond = 300, 1e3
    rng = np.random.default_rng(stable_seed("spd_matrix"))
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    a = (q * np.logspace(0, np.log10(cond), n)) @ q.T
    a = (a + a.T) / 2
    a.setflags(write=False)
    return a, cond
