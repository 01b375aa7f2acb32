#!/usr/bin/env bash
# Development runs of the GPU covariance generator on the device machine (helper aogpu): configure
# and build the library, test_ao_gpu and the CLI, run the GPU tests, then `halfscope bench
# covariance`. Everything is written under $OUT (logs, the JSON report). Each phase is bounded
# in time so that a slow build still leaves its logs; a warm machine keeps build-dev/ between runs.
#   tools/ao-gpu-dev.sh [BUILD_SECONDS] [BENCH_ARGS...]
# BENCH2="args ..." runs a second `bench covariance` afterwards (its JSON: covariance2.json), so
# the first, most important report is complete even when time runs out in the second.
set -u
OUT=${OUT:-/tmp/ao-gpu-out}
mkdir -p "$OUT"
BUILD_SECONDS=${1:-170}
shift || true
BENCH_ARGS=("$@")
[ ${#BENCH_ARGS[@]} -eq 0 ] && BENCH_ARGS=(--systems check,mid,eelt --layers 10,60 --dtype f32,f64)
start=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
if [ ! -f build-dev/build.ninja ]; then
  cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DHALFSCOPE_WITH_CUDA=ON \
    -DHALFSCOPE_CUDA_ARCHS=90 -DHALFSCOPE_DEPS_DIR="$PWD/.deps/root" -DHALFSCOPE_WITH_FITS=OFF \
    -DHALFSCOPE_WITH_MSEED=OFF > "$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; exit 1; }
fi
timeout "$BUILD_SECONDS" cmake --build build-dev -j16 --target test_ao_gpu halfscope_cli \
  > "$OUT/build.log" 2>&1
echo "build rc=$? after $(( $(date +%s) - start )) s"
grep -E "error|FAILED" "$OUT/build.log" | head -20
if [ -x build-dev/tests/test_ao_gpu ]; then
  timeout 60 build-dev/tests/test_ao_gpu --gtest_filter='AoVonKarman*:AoCovarianceGpu*' \
    > "$OUT/test_ao_gpu.log" 2>&1
  echo "tests rc=$?"; grep -E "^\[  (FAILED|PASSED) |OK \]|FAILED|max" "$OUT/test_ao_gpu.log" | head -30
fi
if [ -x build-dev/apps/halfscope/halfscope ]; then
  left=$(( 230 - ($(date +%s) - start) ))
  [ "$left" -gt 20 ] && timeout "$left" build-dev/apps/halfscope/halfscope bench covariance \
    "${BENCH_ARGS[@]}" --json "$OUT/covariance.json" > "$OUT/bench.log" 2>&1
  echo "bench rc=$?"; tail -30 "$OUT/bench.log"
  left=$(( 230 - ($(date +%s) - start) ))
  if [ -n "${BENCH2:-}" ] && [ "$left" -gt 20 ]; then
    # shellcheck disable=SC2086
    timeout "$left" build-dev/apps/halfscope/halfscope bench covariance $BENCH2 \
      --json "$OUT/covariance2.json" > "$OUT/bench2.log" 2>&1
    echo "bench2 rc=$?"; tail -80 "$OUT/bench2.log" | grep -v "^covariance:\|checking"
  fi
fi
echo "total $(( $(date +%s) - start )) s"
