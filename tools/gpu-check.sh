#!/usr/bin/env bash
# Builds and checks halfscope on a GPU machine and records the machine's ceilings.
#
#   tools/gpu-check.sh RESULTS_DIR
#
# Prints the GPU and toolkit, configures a Release build with CUDA for sm_90 and -Werror into
# build-gpu-check (with the dependencies staged by tools/stage-deps.sh in .deps/root), builds,
# runs the GPU tests (ctest -L gpu), then the whole suite, `halfscope info --json` and
# `halfscope bench ceilings`. RESULTS_DIR stays flat and small:
#   summary.txt                  each step's exit status and seconds, test totals, ceilings table
#   gpu-check.log                machine, toolkit, configure and build output, benchmark progress
#   ctest-gpu.log, ctest-all.log ctest -L gpu, and the whole ctest, --output-on-failure
#   info.json                    halfscope info --json
#   <date>-<gpu>-ceilings.json   the ceilings in the benchmark schema (bench/README.md)
#   <date>-<gpu>-mfilter.json    matched filtering (HALFSCOPE_BENCH_MFILTER=full|quick|off, default
#                                full) with its PyTorch peers; mfilter-summary.md, its tables
#   <date>-<gpu>-covariance.json AO covariance generation on the GPU (HALFSCOPE_BENCH_AO=full|
#                                quick|off, default full), -covariance-cpu.json the CPU backend on
#                                the same machine; covariance-summary.txt, their tables
#   <date>-<gpu>-cholesky.json   tile Cholesky per policy vs cuSOLVER spotrf / dpotrf, and
#   <date>-<gpu>-cholesky-out-of-core.json  the factorization out of core within a device budget
#   <date>-<gpu>-panel-trsm.json the panel solve's alternatives (bench/peers/panel_trsm_bench.py)
#   <date>-<gpu>-tor.json        the reconstructor per policy (HALFSCOPE_BENCH_CHOL=full|quick|
#                                off, default full); cholesky-summary.txt, their tables
#   <date>-<gpu>-deconv.json     Tikhonov deconvolution per solver x precision at 37 and 16 dB
#                                with the CuPy / SciPy CG peers (HALFSCOPE_BENCH_DECONV=full|quick|
#                                off, default full); deconv-summary.txt, its tables
#   <date>-<gpu>-python.json     the Python package against CuPy / PyTorch / SciPy
#                                (HALFSCOPE_BENCH_PYTHON=full|quick|off, default full)
#   <date>-<gpu>-xN-mfilter-devices.json  matched filtering over the N GPUs of the host
#   <date>-<gpu>-xN-{cholesky,tor}-eelt-devicesK.json  the E-ELT factorization and reconstructor
#                                on K = 1, 2, 4 ... of them
#                                (HALFSCOPE_BENCH_DEVICES=full|off; only with 2 GPUs or more)
# Knobs (environment): HALFSCOPE_CHECK_ALL=0 runs only the GPU tests; HALFSCOPE_BENCH_CEILINGS=0
# reuses the recorded ceilings; HALFSCOPE_BENCH_CONV / HALFSCOPE_BENCH_MFILTER / HALFSCOPE_BENCH_AO /
# HALFSCOPE_BENCH_CHOL / HALFSCOPE_BENCH_DECONV / HALFSCOPE_BENCH_PYTHON
# pick the sweeps (below); HALFSCOPE_CHECK_TARGETS builds only the named targets and
# HALFSCOPE_CHECK_TESTS (a ctest -R regex) runs only the matching GPU tests, for short sessions;
# HALFSCOPE_COMMIT names the commit where the copy has no .git.
# Exit status: 0 when everything passed; 1 when a GPU test failed (the benchmarks still run
# first); 2 for any other failure (configure, build, other tests, benchmark).
set -uo pipefail  # not -e: a failed step is recorded and the later steps still run

if [ $# -ne 1 ]; then
  echo "usage: $0 RESULTS_DIR" >&2
  exit 2
fi
mkdir -p "$1"
results="$(cd "$1" && pwd)"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$repo/build-gpu-check"
log="$results/gpu-check.log"
summary="$results/summary.txt"
: > "$log"
: > "$summary"
gpu_failed=0
other_failed=0

note() { echo "$*" | tee -a "$summary"; }

# A misspelt knob must not silently run the full (hour-long) sweep: rejected before any work.
for knob in HALFSCOPE_BENCH_MFILTER HALFSCOPE_BENCH_AO HALFSCOPE_BENCH_CHOL HALFSCOPE_BENCH_DECONV \
  HALFSCOPE_BENCH_PYTHON HALFSCOPE_BENCH_DEVICES; do
  case "${!knob:-full}" in
    full | quick | off) ;;
    *)
      note "$knob='${!knob}': expected full, quick or off"
      exit 2
      ;;
  esac
done

# step NAME OUTFILE COMMAND...: runs COMMAND with stdout and stderr appended to OUTFILE and
# records its exit status and duration in summary.txt. Returns the command's status.
step() {
  local name="$1" out="$2"
  shift 2
  local t0 t1 rc
  t0="$(date +%s%N)"
  echo "=== $name: $*" >> "$out"
  "$@" >> "$out" 2>&1
  rc=$?
  t1="$(date +%s%N)"
  note "$(printf '%-22s exit %-3s %7d s' "$name" "$rc" $(((t1 - t0) / 1000000000)))"
  return $rc
}

note "halfscope gpu-check, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(hostname)"

# The staged shared libraries (cfitsio, libmseed) must load for the tests and the CLI.
staged_lib="$repo/.deps/root/usr/lib/x86_64-linux-gnu"
[ -d "$staged_lib" ] && export LD_LIBRARY_PATH="$staged_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ -z "${HALFSCOPE_COMMIT:-}" ] && command -v git > /dev/null; then
  HALFSCOPE_COMMIT="$(git -C "$repo" rev-parse --short HEAD 2> /dev/null || true)"
  [ -n "$HALFSCOPE_COMMIT" ] && export HALFSCOPE_COMMIT
fi

{
  echo "=== machine"
  nvidia-smi || echo "nvidia-smi failed"
  nvcc --version || echo "nvcc not found"
  cmake --version | head -1
  "${CXX:-g++}" --version | head -1
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  echo "HALFSCOPE_COMMIT=${HALFSCOPE_COMMIT:-}"
} >> "$log" 2>&1
gpu_name="$(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -1)"
note "GPU: ${gpu_name:-none}; CUDA $(nvcc --version 2> /dev/null | grep -o 'release [0-9.]*' || echo 'compiler not found')"

cmake_args=(-S "$repo" -B "$build" -DHALFSCOPE_WITH_CUDA=ON -DHALFSCOPE_CUDA_ARCHS=90
            -DHALFSCOPE_WERROR=ON -DCMAKE_BUILD_TYPE=Release)
command -v ninja > /dev/null && cmake_args+=(-G Ninja)
[ -d "$repo/.deps/root/usr" ] && cmake_args+=(-DHALFSCOPE_DEPS_DIR="$repo/.deps/root")
# cuDNN from the Python environment's nvidia-cudnn wheel when there is one (a namespace package:
# no __file__), else what CMake finds in the toolkit or the system.
cudnn_root="$(python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])' 2> /dev/null || true)"
if [ -n "$cudnn_root" ] && [ -d "$cudnn_root/include" ]; then
  cmake_args+=(-DHALFSCOPE_CUDNN_ROOT="$cudnn_root")
  export LD_LIBRARY_PATH="$cudnn_root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# A staged libcfitsio whose own dependencies (libcurl-gnutls, libbz2) are missing here cannot
# load: build without FITS rather than have every test binary fail at start-up.
if [ -e "$staged_lib/libcfitsio.so" ] && ldd "$staged_lib/libcfitsio.so" 2>&1 | grep -q "not found"; then
  cmake_args+=(-DHALFSCOPE_WITH_FITS=OFF)
  note "FITS disabled: the staged libcfitsio lacks $(ldd "$staged_lib/libcfitsio.so" | awk '/not found/ {print $1}' | paste -sd' ')"
fi

# The Python extension is built for the machine's python3 (NumPy, CuPy, PyTorch live there), with
# nanobind from .deps/py when the machine has none (tools/stage-deps.sh stages it).
if [ -d "$repo/.deps/py" ]; then
  export PYTHONPATH="$repo/.deps/py${PYTHONPATH:+:$PYTHONPATH}"
fi
cmake_args+=(-DHALFSCOPE_PYTHON="$(command -v python3)")

jobs="$(nproc 2> /dev/null || echo 8)"
if step configure "$log" cmake "${cmake_args[@]}"; then
  # Keep going past a failing target so that everything else still gets built and tested.
  keep_going=-k
  [ -f "$build/build.ninja" ] && keep_going="-k 0"
  # shellcheck disable=SC2086
  # HALFSCOPE_CHECK_TARGETS (space-separated) builds only those targets, for a short session.
  targets=()
  for t in ${HALFSCOPE_CHECK_TARGETS:-}; do targets+=(--target "$t"); done
  # shellcheck disable=SC2086
  step build "$log" cmake --build "$build" -j "$jobs" "${targets[@]}" -- $keep_going || other_failed=1
else
  other_failed=1
fi

if [ -f "$build/CTestTestfile.cmake" ]; then
  (cd "$build" && step "ctest -L gpu" "$results/ctest-gpu.log" ctest -L gpu -R "${HALFSCOPE_CHECK_TESTS:-.}" --output-on-failure --timeout 300) ||
    gpu_failed=1
  # HALFSCOPE_CHECK_ALL=0 skips the CPU suite (CI runs it) to leave the time to the benchmarks.
  if [ "${HALFSCOPE_CHECK_ALL:-1}" != 0 ]; then
    (cd "$build" && step "ctest (all)" "$results/ctest-all.log" ctest --output-on-failure --timeout 300 -j 4) ||
      other_failed=1
  else
    echo "skipped (HALFSCOPE_CHECK_ALL=0)" > "$results/ctest-all.log"
  fi
  for f in ctest-gpu.log ctest-all.log; do
    note "  $f: $(grep -E 'tests passed|No tests were found' "$results/$f" | tail -1)"
    grep -E '^\s+[0-9]+ - .*\((Failed|SEGFAULT|Timeout|Subprocess|Child|Exception|Not Run)' "$results/$f" |
      sed 's/^/    /' | tee -a "$summary"
  done
  grep -h -E '^\[  SKIPPED \] [A-Za-z]' "$results/ctest-gpu.log" | sort -u | head -20 | sed 's/^/    /' | tee -a "$summary"
else
  other_failed=1
  note "no test tree: configure failed"
fi

cli="$build/apps/halfscope/halfscope"
if [ -x "$cli" ]; then
  step "halfscope info" "$log" sh -c "\"$cli\" info --json > \"$results/info.json\"" || other_failed=1
  slug="$(echo "${gpu_name:-cpu}" | tr '[:upper:]' '[:lower:]' | sed -E 's/[^a-z0-9]+/-/g; s/^-+//; s/-+$//')"
  json="$results/$(date -u +%Y-%m-%d)-${slug:-device}-ceilings.json"
  # HALFSCOPE_BENCH_CEILINGS=0 reuses the ceilings recorded in bench/results instead of measuring.
  ceilings_dir="$results"
  if [ "${HALFSCOPE_BENCH_CEILINGS:-1}" != 0 ]; then
    table="$(mktemp)"
    if step "bench ceilings" "$log" sh -c "\"$cli\" bench ceilings --json \"$json\" > \"$table\""; then
      tee -a "$summary" < "$table"
    else
      other_failed=1
      tail -5 "$log" | tee -a "$summary"
    fi
    rm -f "$table"
  else
    ceilings_dir="$repo/bench/results"
    note "ceilings: recorded ones from bench/results (HALFSCOPE_BENCH_CEILINGS=0)"
  fi

  # Convolution (study 000): HALFSCOPE_BENCH_CONV=full (default) | 4096 | quick | off. One JSON per
  # run: the halfscope sweeps merged, then cuDNN (PyTorch) and CuPy appended on the same inputs.
  conv_level="${HALFSCOPE_BENCH_CONV:-full}"
  if [ "$conv_level" != off ]; then
    conv_json="$results/$(date -u +%Y-%m-%d)-${slug:-device}-conv.json"
    inputs="$(mktemp -d)"
    parts=()
    run_conv() {  # run_conv NAME ARGS...: one sweep into $inputs/NAME.json
      local name="$1"
      shift
      step "bench conv $name" "$log" "$cli" bench conv --json "$inputs/$name.json" \
        --export-inputs "$inputs" --image512 "$repo/data/camera.npy" --results "$ceilings_dir" "$@" &&
        parts+=("$inputs/$name.json")
    }
    if [ "$conv_level" = quick ]; then
      run_conv 512 --sizes 512 --widths 3,7,15,31,65,115 --repeats 10
    elif [ "$conv_level" = 4096 ]; then  # the 4096^2 targets (register, separable, cuDNN, auto) and 8192^2 widths 3-7
      run_conv 4096 --sizes 4096 --widths 3,5,7,11,15,21,31,51,75,115 --methods register:single,register:half,register:mixed,separable:single,separable:mixed,cudnn:single,cudnn:mixed,fft:single,tensor:split,auto:single,auto:split
      run_conv 8192small --sizes 8192 --widths 3,5,7 --methods register:single,register:half,register:mixed,auto:single
    else
      run_conv 512 --sizes 512
      run_conv 4096 --sizes 4096 --methods naive:single,naive:mixed,register:single,register:half,register:mixed,register:bf16,separable:single,separable:mixed,fft:single,fft:mixed,fft:half,tensor:mixed,tensor:bf16,tensor:split,auto:single,auto:mixed,auto:split
      run_conv 8192 --sizes 8192 --widths 3,7,15,31,65,115 --methods register:single,register:mixed,separable:single,fft:single,tensor:split,auto:single,auto:split
    fi
    if ((${#parts[@]})); then
      python3 "$repo/bench/peers/merge_reports.py" "$conv_json" "${parts[@]}" &&
        step "conv peers" "$log" python3 "$repo/bench/peers/conv_peers.py" --inputs "$inputs" --report "$conv_json" ||
        other_failed=1
      step "conv table" "$log" python3 "$repo/tools/perf_tables.py" conv "$conv_json" --out "$results/conv-summary.md" &&
        tail -n 40 "$results/conv-summary.md" | tee -a "$summary"
    else
      other_failed=1
    fi
    rm -rf "$inputs"
  fi

  # Matched filtering (study 001): HALFSCOPE_BENCH_MFILTER=full (default) | quick | off. One JSON:
  # halfscope's cases (a) and (b), then cuDNN conv1d and an FP16 Hankel GEMM through PyTorch
  # appended on case (a)'s exported inputs; the real trace is the one tools/stage-deps.sh staged.
  mf_level="${HALFSCOPE_BENCH_MFILTER:-full}"
  if [ "$mf_level" != off ]; then
    mf_json="$results/$(date -u +%Y-%m-%d)-${slug:-device}-mfilter.json"
    mf_inputs="$(mktemp -d)"
    mf_args=(--json "$mf_json" --export-inputs "$mf_inputs" --results "$ceilings_dir")
    mf_real="$repo/.deps/root/share/halfscope/mfilter-real.npy"
    if [ -f "$mf_real" ]; then
      mf_args+=(--real-data "$mf_real")
    else
      note "bench mfilter: $mf_real not staged (tools/stage-deps.sh): no real-data errors"
    fi
    [ "$mf_level" = quick ] && mf_args+=(--quick --repeats 10)
    if step "bench mfilter" "$log" "$cli" bench mfilter "${mf_args[@]}"; then
      step "mfilter peers" "$log" python3 "$repo/bench/peers/mfilter_peers.py" --inputs "$mf_inputs" \
        --report "$mf_json" || other_failed=1
      if step "mfilter table" "$log" python3 "$repo/tools/perf_tables.py" mfilter "$mf_json" \
        --out "$results/mfilter-summary.md"; then
        tail -n 40 "$results/mfilter-summary.md" | tee -a "$summary"
      else
        other_failed=1
      fi
    else
      other_failed=1
      tail -5 "$log" | tee -a "$summary"
    fi
    rm -rf "$mf_inputs"
  fi

  # Adaptive optics (study 002): covariance generation, HALFSCOPE_BENCH_AO=full (default) | quick |
  # off. full: every built-in system, both profiles, Cmm / Ctm / Ctt in FP32 and FP64 lower tiles
  # on the GPU (the E-ELT Cmm target among them), then the CPU backend (OpenMP, this machine's
  # cores) on check and mid in FP64 for the GPU / CPU ratio; quick: check and mid only.
  ao_level="${HALFSCOPE_BENCH_AO:-full}"
  if [ "$ao_level" != off ]; then
    ao_json="$results/$(date -u +%Y-%m-%d)-${slug:-device}-covariance"
    ao_systems=check,mid,eelt
    [ "$ao_level" = quick ] && ao_systems=check,mid
    bench_covariance() {  # bench_covariance SUFFIX ARGS...: one JSON, its table appended
      local suffix="$1"
      shift
      "$cli" bench covariance --json "$ao_json$suffix.json" "$@" >> "$results/covariance-summary.txt"
    }
    : > "$results/covariance-summary.txt"
    if step "bench covariance gpu" "$log" bench_covariance "" --systems "$ao_systems" \
      --layers 10,60 --kinds cmm,ctm,ctt --device cuda --dtype f32,f64 --repeats 3 --samples 300 &&
      step "bench covariance cpu" "$log" bench_covariance "-cpu" --systems check,mid --layers 10 \
        --kinds cmm,ctm,ctt --device cpu --dtype f64 --repeats 1 --samples 200; then
      tee -a "$summary" < "$results/covariance-summary.txt"
    else
      other_failed=1
      tail -5 "$log" | tee -a "$summary"
    fi
  fi

  # Tile Cholesky and reconstructor (issue 6): HALFSCOPE_BENCH_CHOL=full (default) | quick | off.
  # full: POTRF on the E-ELT Cmm of its first k sensors (n = 11,152 k up to 100,368) per policy
  # with cuSOLVER spotrf / dpotrf on the same matrix, then the reconstructor on check, mid and
  # eelt (Strehl against FP64 where the dense FP64 Cmm fits), and the out-of-core factorization
  # beside the in-core one; quick: n <= 44,608, check and mid.
  chol_level="${HALFSCOPE_BENCH_CHOL:-full}"
  if [ "$chol_level" != off ]; then
    chol_json="$results/$(date -u +%Y-%m-%d)-${slug:-device}"
    chol_sizes=11152,22304,44608,66912,78064,100368
    tor_systems=check,mid,eelt
    # Out of core: the matrix about 2.4 times the device budget (20 GB in 8 GiB; 4 GB in 1.6 GiB).
    ooc_size=100368
    ooc_budget=8G
    if [ "$chol_level" = quick ]; then
      chol_sizes=11152,22304,44608
      tor_systems=check,mid
      ooc_size=44608
      ooc_budget=1600M
    fi
    : > "$results/cholesky-summary.txt"
    if step "bench cholesky" "$log" sh -c '"$0" bench cholesky --device cuda --sizes "$1" --repeats 3 \
        --json "$2-cholesky.json" >> "$3"' "$cli" "$chol_sizes" "$chol_json" \
        "$results/cholesky-summary.txt" &&
      step "bench tor" "$log" sh -c '"$0" bench tor --device cuda --systems "$1" --repeats 3 \
        --json "$2-tor.json" >> "$3"' "$cli" "$tor_systems" "$chol_json" \
        "$results/cholesky-summary.txt" &&
      step "bench cholesky out of core" "$log" sh -c '"$0" bench cholesky --device cuda \
        --sizes "$1" --device-memory "$2" --policies "uniform:SP;band:SP=1,HP1=rest" \
        --repeats 3 --no-cusolver --json "$3-cholesky-out-of-core.json" >> "$4"' "$cli" \
        "$ooc_size" "$ooc_budget" "$chol_json" "$results/cholesky-summary.txt" &&
      step "panel trsm peers" "$log" sh -c 'python3 "$0" --json "$1-panel-trsm.json" >> "$2"' \
        "$repo/bench/peers/panel_trsm_bench.py" "$chol_json" "$results/cholesky-summary.txt"; then
      tee -a "$summary" < "$results/cholesky-summary.txt"
    else
      other_failed=1
      tail -5 "$log" | tee -a "$summary"
    fi
  fi

  # Radio deconvolution (issue 7): HALFSCOPE_BENCH_DECONV=full (default) | quick | off. full: the
  # study's 2048 x 2048 MeerKAT observation at 37 and 16 dB, every solver x precision, 500
  # iterations, then the CuPy and SciPy CG peers on the dumped inputs; quick: 512 x 512, 400
  # iterations.
  deconv_level="${HALFSCOPE_BENCH_DECONV:-full}"
  if [ "$deconv_level" != off ]; then
    deconv_json="$results/$(date -u +%Y-%m-%d)-${slug:-device}-deconv.json"
    deconv_inputs="$build/deconv-inputs"
    deconv_size=2048
    deconv_iterations=500
    if [ "$deconv_level" = quick ]; then
      deconv_size=512
      deconv_iterations=400
    fi
    : > "$results/deconv-summary.txt"
    if step "bench deconv" "$log" sh -c '"$0" bench deconv --device cuda --size "$1" \
        --iterations "$2" --dump "$3" -o "$4" >> "$5"' "$cli" "$deconv_size" \
        "$deconv_iterations" "$deconv_inputs" "$deconv_json" "$results/deconv-summary.txt" &&
      step "deconv peers" "$log" python3 "$repo/bench/peers/deconv_peers.py" \
        --inputs "$deconv_inputs" --report "$deconv_json"; then
      tee -a "$summary" < "$results/deconv-summary.txt"
    else
      other_failed=1
      tail -5 "$log" | tee -a "$summary"
    fi
  fi

  # Matched filtering over the host's GPUs (issue 9): HALFSCOPE_BENCH_DEVICES=full (default) |
  # off; only where nvidia-smi lists two GPUs or more.
  gpu_count="$(nvidia-smi -L 2> /dev/null | wc -l)"
  if [ "${HALFSCOPE_BENCH_DEVICES:-full}" != off ] && [ "$gpu_count" -ge 2 ]; then
    dev_json="$results/$(date -u +%Y-%m-%d)-${slug:-device}-x${gpu_count}-mfilter-devices.json"
    if step "bench devices" "$log" env PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" \
        python3 "$repo/bench/peers/mfilter_devices_bench.py" --json "$dev_json"; then
      note "devices bench: $dev_json"
    else
      other_failed=1
      tail -5 "$log" | tee -a "$summary"
    fi
    # The E-ELT factorization and reconstructor on 1, 2, 4 ... of the host's GPUs.
    for n in 1 2 4 8; do
      [ "$n" -le "$gpu_count" ] || break
      list="$(seq -s, 0 $((n - 1)))"
      base="$results/$(date -u +%Y-%m-%d)-${slug:-device}-x${gpu_count}"
      if step "bench cholesky devices $n" "$log" "$cli" bench cholesky --sizes 100368 --repeats 5 \
          --policies "uniform:SP;band:SP=1,HP1=rest" --no-cusolver --devices "$list" \
          -o "$base-cholesky-eelt-devices$n.json" &&
        step "bench tor devices $n" "$log" "$cli" bench tor --systems eelt --repeats 2 \
          --policies "band:SP=1,HP1=rest" --no-cusolver --devices "$list" \
          -o "$base-tor-eelt-devices$n.json"; then
        note "devices bench: $base-{cholesky,tor}-eelt-devices$n.json"
      else
        other_failed=1
        tail -5 "$log" | tee -a "$summary"
      fi
    done
  fi

  # The Python package (issue 8): HALFSCOPE_BENCH_PYTHON=full (default) | quick (5 repeats) |
  # off. Python-layer
  # overhead and zero-copy evidence against CuPy, PyTorch and SciPy on the same inputs.
  if [ "${HALFSCOPE_BENCH_PYTHON:-full}" != off ]; then
    py_json="$results/$(date -u +%Y-%m-%d)-${slug:-device}-python.json"
    py_repeats=20
    [ "${HALFSCOPE_BENCH_PYTHON:-full}" = quick ] && py_repeats=5
    if step "bench python" "$log" env PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" \
        python3 "$repo/bench/peers/python_api_bench.py" --repeats "$py_repeats" --json "$py_json"; then
      note "python bench: $py_json"
    else
      other_failed=1
      tail -5 "$log" | tee -a "$summary"
    fi
  fi
else
  other_failed=1
  note "no halfscope binary: build failed (see gpu-check.log)"
fi

status=0
[ $other_failed -eq 1 ] && status=2
[ $gpu_failed -eq 1 ] && status=1
note "result: $([ $status -eq 0 ] && echo PASS || echo FAIL) (gpu tests failed: $gpu_failed, other failures: $other_failed)"
exit $status
