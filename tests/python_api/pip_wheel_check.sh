#!/usr/bin/env bash
# `pip install .` keeps working: builds the wheel from the source tree with scikit-build-core
# (CPU backend, offline: --no-build-isolation uses the scikit-build-core and nanobind that
# `make deps` installed), installs it into a scratch folder and imports it from there. A Debug
# build: what is checked is the packaging, and unoptimised code compiles in a fifth less time.
#
#   tests/python_api/pip_wheel_check.sh SOURCE_DIR PYTHON
set -euo pipefail
src="$1"
py="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$py" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w "$work/wheel" \
  --config-settings=cmake.define.HALFSCOPE_WITH_CUDA=OFF --config-settings=cmake.build-type=Debug \
  --config-settings=build-dir="$work/build" \
  "$src"
wheel="$(ls "$work"/wheel/halfscope-*.whl)"
"$py" -m pip install -q --disable-pip-version-check --no-deps --target "$work/site" "$wheel"
# The installed package, not the source tree: run from the scratch folder with only it on the path.
cd "$work"
PYTHONPATH="$work/site" "$py" - "$work/site" << 'PY'
import sys
import numpy as np
import halfscope as hs

assert hs.__file__.startswith(sys.argv[1]), hs.__file__
x = np.arange(12.0).reshape(3, 4)
k = np.ones((2, 2))
got = hs.convolve2d(x, k, precision="double")
# Each output sums the inputs under the 2 x 2 window (full mode): exact in FP64.
want = np.zeros((4, 5))
for i in range(2):
    for j in range(2):
        want[i:i + 3, j:j + 4] += x
assert np.array_equal(got, want), got
print(f"pip wheel installs and runs: halfscope {hs.__version__}")
PY
