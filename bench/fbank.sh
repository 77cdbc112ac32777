#!/usr/bin/env bash
# 80-bin Kaldi fbank of 10 s of 16 kHz audio: wavetrain against torchaudio's kaldi.fbank, same
# machine, same thread count, in this one run. Target: ratio <= 1.
#
# usage: bench/fbank.sh [THREADS] [REPEATS]   (needs Debian's python3-torchaudio for the baseline)
set -euo pipefail
threads=${1:-1}
repeats=${2:-20}
bin=build/bench/wavetrain_bench_fbank
# scripts/setup builds only the binary: a bench builds itself where its build directory exists.
[ ! -f "${bin%/bench/*}/CMakeCache.txt" ] || cmake --build "${bin%/bench/*}" --target "$(basename "$bin")" >/dev/null
[ -x "$bin" ] || { echo "fbank.sh: $bin not found; build it first (scripts/setup --target $(basename "$bin"))" >&2; exit 2; }
export OMP_WAIT_POLICY=PASSIVE
cpp=$("$bin" "$threads" "$repeats")
py=$(/usr/bin/python3 "$(dirname "$0")/fbank_baseline.py" "$threads" "$repeats")
printf "%-8s %12s %14s %8s\n" "threads" "wavetrain_ms" "torchaudio_ms" "ratio"
printf "%-8s %12s %14s %8s\n" "$threads" "$cpp" "$py" "$(awk -v a="$cpp" -v b="$py" 'BEGIN { printf "%.2f", a / b }')"
