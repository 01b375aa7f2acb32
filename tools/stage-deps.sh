#!/usr/bin/env bash
# Stages the build dependencies that a bare GPU machine lacks into .deps/root (git-ignored; the
# top-level CMakeLists.txt prepends .deps/root/usr to CMAKE_PREFIX_PATH). Run it here, on the
# Debian machine with apt; the GPU machine (Ubuntu 24.04) then builds without network access.
#
#   tools/stage-deps.sh            # (re)creates .deps/root, prints what it staged and the size
#
# Staged: CLI11 and nlohmann-json (headers + CMake configs), the GoogleTest *sources* (package
# googletest: tests/CMakeLists.txt builds them when no installed GTest is found; the prebuilt
# libgtest-dev archives are deliberately not staged so the GPU machine's compiler builds its own),
# cfitsio and libmseed (headers + shared libraries), and the real seismogram of
# `halfscope bench mfilter` (share/halfscope/mfilter-real.npy: ObsPy's bundled BW.KW1 EHZ trace,
# 936,001 samples at 100 Hz, as float32; read from ObsPy in this checkout's .venv, because the GPU
# machine has no ObsPy), and in .deps/py nanobind and pytest from PyPI. Documentation, man pages and static archives are pruned. Idempotent: every run rebuilds .deps/root from scratch and replaces it atomically.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
stage="$repo/.deps/root"
packages=(libcli11-dev nlohmann-json3-dev googletest libcfitsio-dev libcfitsio10 libmseed-dev libmseed2)
limit_mib=60

for tool in apt-get dpkg-deb du; do
  command -v "$tool" > /dev/null || { echo "stage-deps: $tool not found (run this on the Debian build machine)" >&2; exit 2; }
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$work/root" "$repo/.deps"

echo "stage-deps: downloading ${packages[*]}"
(cd "$work/debs" && apt-get download "${packages[@]}" > "$work/download.log" 2>&1) || {
  cat "$work/download.log" >&2
  echo "stage-deps: apt-get download failed (package names: apt-cache policy <name>)" >&2
  exit 1
}

manifest="$work/root/STAGED.txt"
{
  echo "# Staged by tools/stage-deps.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(grep -m1 "^PRETTY_NAME=" /etc/os-release | cut -d= -f2 | tr -d '"')"
} > "$manifest"
for deb in "$work"/debs/*.deb; do
  dpkg-deb -x "$deb" "$work/root"
  line="$(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)"
  echo "$line" >> "$manifest"
  echo "  staged $line"
done

# Prune what no build needs: documentation, man pages, lintian overrides, static archives and
# pkg-config files of the static libraries (the shared ones are linked), googletest docs.
rm -rf "$work/root/usr/share/doc" "$work/root/usr/share/man" "$work/root/usr/share/lintian" \
       "$work/root/usr/share/doc-base"
find "$work/root" -name '*.a' -delete
find "$work/root/usr/src/googletest" -type d \( -name docs -o -name test -o -name samples \) -prune \
  -exec rm -rf {} + 2> /dev/null || true

# The matched-filtering benchmark's real data (bench/README.md): the ASCII trace that ObsPy ships
# (one integer count per line) converted to float32 .npy, exactly (|counts| < 2^24), with a note
# of where it came from.
real_name="BW.KW1._.EHZ.D.2011.090_downsampled.asc.gz"
python="$repo/.venv/bin/python"
[ -x "$python" ] || python="$(command -v python3 || true)"
real_src=""
if [ -n "$python" ]; then
  real_src="$("$python" -c "import obspy, pathlib; print(pathlib.Path(obspy.__file__).parent / 'signal/tests/data/$real_name')" 2> /dev/null || true)"
fi
if [ -n "$real_src" ] && [ -f "$real_src" ]; then
  mkdir -p "$work/root/share/halfscope"
  "$python" - "$real_src" "$work/root/share/halfscope/mfilter-real.npy" << 'PY'
import gzip, sys
import numpy as np
src, dst = sys.argv[1], sys.argv[2]
with gzip.open(src, "rt") as f:
    counts = np.loadtxt(f, dtype=np.int64)
if counts.ndim != 1 or counts.size != 936001 or np.abs(counts).max() >= 2**24:
    sys.exit(f"stage-deps: {src}: expected 936001 integer counts below 2^24, found {counts.shape}")
np.save(dst, counts.astype(np.float32))
print(f"  staged mfilter-real.npy: {counts.size} samples, |x| <= {np.abs(counts).max()}")
PY
  echo "mfilter-real.npy $(sha256sum "$work/root/share/halfscope/mfilter-real.npy" | cut -d' ' -f1) from obspy/signal/tests/data/$real_name" >> "$manifest"
else
  echo "stage-deps: warning: ObsPy's $real_name not found (no .venv with obspy): bench mfilter will have no real-data errors" >&2
fi

# The Python extension's build dependency and the test runner, pure-Python wheels from PyPI, for
# the GPU machine's python3 (which has NumPy, CuPy and PyTorch but no package registry):
# tools/gpu-check.sh puts .deps/py on PYTHONPATH.
if [ -n "$python" ]; then
  rm -rf "$repo/.deps/py.new"
  "$python" -m pip install -q --disable-pip-version-check --no-compile --target "$repo/.deps/py.new" \
    nanobind pytest
  rm -rf "$repo/.deps/py" && mv "$repo/.deps/py.new" "$repo/.deps/py"
  echo "  staged .deps/py: $(ls "$repo/.deps/py" | grep -c dist-info) Python packages (nanobind, pytest)"
fi

rm -rf "$stage.old"
[ -d "$stage" ] && mv "$stage" "$stage.old"
mv "$work/root" "$stage"
rm -rf "$stage.old"

size_kib="$(du -sk "$stage" | cut -f1)"
echo "stage-deps: $stage holds $(find "$stage" -type f | wc -l) files, $((size_kib / 1024)) MiB ($size_kib KiB)"
if [ "$size_kib" -gt $((limit_mib * 1024)) ]; then
  echo "stage-deps: larger than ${limit_mib} MiB: prune more before carrying it to the GPU machine" >&2
  exit 1
fi
