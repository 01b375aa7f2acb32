"""In CI every independent reference must be present: a missing module or CLI would otherwise turn
into skipped tests that pass without checking anything."""
import importlib
import os

import pytest

REQUIRED = ["numpy", "scipy.signal", "astropy.io.fits", "obspy", "PIL.Image", "matplotlib"]


def pytest_sessionstart(session):
    if not os.environ.get("CI"):
        return
    missing = []
    for name in REQUIRED:
        try:
            importlib.import_module(name)
        except ImportError as e:
            missing.append(f"{name} ({e})")
    if not os.environ.get("HALFSCOPE_CLI"):
        missing.append("HALFSCOPE_CLI (the halfscope binary)")
    if missing:
        pytest.exit("CI=true but missing: " + ", ".join(missing) + "; run make deps", returncode=3)


def pytest_assertrepr_compare(op, left, right):
    """Two large byte strings that differ (files compared byte for byte): their sizes and the first
    differing offset. pytest's own explanation runs difflib over them, which for the half-megabyte
    .npy files of the MPI tests takes longer than CI allows."""
    if op != "==" or not isinstance(left, bytes) or not isinstance(right, bytes):
        return None
    if max(len(left), len(right)) <= 4096:
        return None
    shorter = min(len(left), len(right))
    first = next((i for i, (a, b) in enumerate(zip(left, right)) if a != b), shorter)
    return [f"byte strings differ: {len(left)} and {len(right)} bytes, first difference at {first}"]
