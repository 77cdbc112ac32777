#!/usr/bin/env bash
# Measures the conv1d forward+backward step (bench/conv_threads.cpp) with 1 and 2 intra-op threads,
# with OMP_WAIT_POLICY unset and PASSIVE, on an idle machine and with busy processes beside it,
# and prints each time with its ratio against 1 thread in the same load. Results: docs/threads.md.
#
# usage: bench/threads.sh [BENCH_BINARY] [ITERATIONS]
set -euo pipefail
bin=${1:-build/bench/wavetrain_bench_conv_threads}
iterations=${2:-20}
# scripts/setup builds only the binary: a bench builds itself where its build directory exists.
[ ! -f "${bin%/bench/*}/CMakeCache.txt" ] || cmake --build "${bin%/bench/*}" --target "$(basename "$bin")" >/dev/null
[ -x "$bin" ] || { echo "threads.sh: benchmark binary '$bin' not found; build it first (scripts/setup --target $(basename "$bin"))" >&2; exit 2; }

busy_pids=()
start_load() {  # $1 busy processes, each spinning on a core as another job would
  for ((i = 0; i < $1; i++)); do
    (while :; do :; done) &
    busy_pids+=($!)
  done
}
stop_load() {
  for p in "${busy_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${busy_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  busy_pids=()
}
trap stop_load EXIT

median_ms() { sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p'; }

printf "%-8s %-8s %-10s %10s %10s\n" "load" "threads" "policy" "median_ms" "vs_1thr"
for load in 0 1 2; do
  start_load "$load"
  sleep 0.5
  for policy in unset PASSIVE; do
    base=""
    for threads in 1 2; do
      if [ "$policy" = unset ]; then
        ms=$(env -u OMP_WAIT_POLICY "$bin" "$threads" "$iterations" | median_ms)
      else
        ms=$(OMP_WAIT_POLICY=$policy "$bin" "$threads" "$iterations" | median_ms)
      fi
      [ -n "$base" ] || base=$ms
      ratio=$(awk -v a="$ms" -v b="$base" 'BEGIN { printf "%.2f", a / b }')
      printf "%-8s %-8s %-10s %10s %10s\n" "busy=$load" "$threads" "$policy" "$ms" "$ratio"
    done
  done
  stop_load
done
