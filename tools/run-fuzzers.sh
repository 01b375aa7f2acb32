#!/usr/bin/env bash
# Runs every libFuzzer target in FUZZ_DIR for SECONDS each, seeded from fuzz/corpus/<format>/.
# Fails on the first crash, leak, timeout or out-of-memory (the artifact is kept under build/fuzz/).
set -euo pipefail
fuzz_dir=${1:?usage: run-fuzzers.sh FUZZ_BUILD_DIR SECONDS}
seconds=${2:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
status=0
for bin in "$fuzz_dir"/fuzz_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  format=${name#fuzz_}
  work=$(mktemp -d)
  seeds=()
  [ -d "$root/fuzz/corpus/$format" ] && seeds=("$root/fuzz/corpus/$format")
  mkdir -p "$root/build/fuzz/artifacts"
  echo "fuzz: $name for ${seconds}s"
  if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix="$root/build/fuzz/artifacts/$name-" -print_final_stats=1 \
      "$work" "${seeds[@]}" >"$work.log" 2>&1; then
    echo "fuzz: $name FAILED"; tail -n 40 "$work.log"; status=1
  else
    grep -E 'stat::number_of_executed_units' "$work.log" || true
  fi
  rm -rf "$work" "$work.log"
done
exit $status
