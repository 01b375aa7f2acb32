#!/usr/bin/env bash
# Kernel-alone times of `halfscope bench conv` cases, from Nsight Compute (ncu), on a GPU machine.
#
#   tools/conv-kernel-times.sh HALFSCOPE_BINARY SIZE CASE...
#
# CASE is METHOD:PRECISION:WIDTH[:ENV=VALUE], e.g. separable:half:7:HALFSCOPE_CONV_ROLL=0. For
# each case one process runs `halfscope bench conv --sizes SIZE --widths WIDTH --methods
# METHOD:PRECISION --repeats 8` under `ncu --metrics gpu__time_duration.sum --clock-control none`
# (the clocks left as they are), skips the first 3 launches of the register family's kernels
# (register_roll / register_stream / register_tile), profiles the next 5, and prints one line:
#   CASE median_us KERNEL
# The whole-call times of the same cases are the benchmark's own (bench/README.md); the difference
# is the call's host work (tap upload, the separable method's read-back of the kernel, ...).
set -uo pipefail

if [ $# -lt 3 ]; then
  echo "usage: $0 HALFSCOPE_BINARY SIZE METHOD:PRECISION:WIDTH[:ENV=VALUE]..." >&2
  exit 2
fi
cli="$1"
size="$2"
shift 2
log="$(mktemp)"
report="$(mktemp)"
trap 'rm -f "$log" "$report"' EXIT
status=0
for spec in "$@"; do
  IFS=: read -r method precision width setting <<< "$spec"
  if ! env ${setting:+"$setting"} timeout 300 ncu --clock-control none \
      --metrics gpu__time_duration.sum --kernel-name "regex:register_(roll|stream|tile)_kernel" \
      --launch-skip 3 --launch-count 5 "$cli" bench conv --sizes "$size" --widths "$width" \
      --methods "$method:$precision" --repeats 8 --json "$report" > "$log" 2>&1; then
    echo "$spec failed (ncu or the benchmark; last lines below)" >&2
    tail -5 "$log" >&2
    status=1
    continue
  fi
  # ncu prints each launch's metric in its own unit; converted to microseconds here.
  median=$(awk '/gpu__time_duration.sum/ {
      v = $NF; u = $(NF - 1)
      if (u == "nsecond") v /= 1000; else if (u == "msecond") v *= 1000; else if (u == "second") v *= 1e6
      print v }' "$log" | sort -g | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]}')
  kernel=$(grep -oE "register_(roll|stream|tile)_kernel<[^>]*>" "$log" | head -1)
  echo "$spec ${median:-none} ${kernel:-no-kernel-profiled}"
done
exit $status
