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
