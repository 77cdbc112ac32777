#!/usr/bin/env bash
# MRSTFT loss forward+backward: wavetrain (C++) against a Python PyTorch baseline from the same
# definition, same machine, same thread count, in this one run. Target: ratio <= 0.5.
#
# usage: bench/mrstft.sh [THREADS] [REPEATS]   (needs Debian's python3-torch for the baseline)
set -euo pipefail
threads=${1:-2}
repeats=${2:-10}
bin=build/bench/wavetrain_bench_mrstft
# scripts/setup builds only the binary: a bench builds itself where its build directory exists.
[ ! -f "${bin%/bench/*}/CMakeCache.txt" ] || cmake --build "${bin%/bench/*}" --target "$(basename "$bin")" >/dev/null
[ -x "$bin" ] || { echo "mrstft.sh: $bin not found; build it first (scripts/setup --target $(basename "$bin"))" >&2; exit 2; }
export OMP_WAIT_POLICY=PASSIVE
cpp=$("$bin" "$threads" "$repeats")
py=$(/usr/bin/python3 "$(dirname "$0")/mrstft_baseline.py" "$threads" "$repeats")
printf "%-14s %12s %12s %8s\n" "shape" "wavetrain_ms" "python_ms" "ratio"
paste <(echo "$cpp") <(echo "$py") | while read -r b s c _ _ p; do
  printf "%-14s %12s %12s %8s\n" "${b}x${s}" "$c" "$p" "$(awk -v a="$c" -v b="$p" 'BEGIN { printf "%.2f", a / b }')"
done
