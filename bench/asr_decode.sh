#!/usr/bin/env bash
# ASR decoding speed on the CPU: greedy search and modified beam search (beam 4) of a trained run
# on one split of its store, in wavetrain (experiments/asr/decode.h) and in Python PyTorch
# (bench/asr_decode_baseline.py: icefall's greedy_search_batch and modified_beam_search written from
# their algorithms), on the same encoder outputs and weights, same threads, in this one run; the
# Python side also checks that its hypotheses equal wavetrain's. Targets (issue 17): greedy >= 100x
# and beam >= 20x real time end to end (features, encoder, search), and each search >= 3x the
# Python throughput.
#
# usage: [ROUNDS=3] bench/asr_decode.sh RUN STORE [SPLIT] [THREADS] [REPEATS]
#   e.g. bench/asr_decode.sh runs/asr corpus/corpus.h5 test-unseen-voices
# Run it where the run was trained: the paths in a run's config are relative to that directory.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { sed -n '2,13p' "$0" >&2; exit 2; }
run=$1 store=$2 split=${3:-test-unseen-voices} threads=${4:-2} repeats=${5:-3}
build=${BUILD_DIR:-$([ -d "$root/build-pip" ] && echo "$root/build-pip" || echo "$root/build")}
bin=$build/bench/wavetrain_bench_asr_decode
python=${PYTHON:-$([ -x "$root/.venv/bin/python" ] && echo "$root/.venv/bin/python" || echo /usr/bin/python3)}
# scripts/setup builds only the binary: a bench builds itself where its build directory exists.
[ ! -f "${bin%/bench/*}/CMakeCache.txt" ] || cmake --build "${bin%/bench/*}" --target "$(basename "$bin")" >/dev/null
[ -x "$bin" ] || { echo "asr_decode.sh: $bin not found; build it first (scripts/setup --target $(basename "$bin"))" >&2; exit 2; }
export OMP_WAIT_POLICY=PASSIVE
work=$(mktemp -d /tmp/wavetrain-asr-decode.XXXXXX)
trap 'rm -rf "$work"' EXIT
rounds=${ROUNDS:-3}
ours=() pys=()
for ((r = 0; r < rounds; r++)); do
  ours+=("$("$bin" "$run" "$store" "$split" "$work/out" "$threads" "$repeats" 4)")
  pys+=("$("$python" "$root/bench/asr_decode_baseline.py" "$work/out" "$threads" "$repeats" 4)")
done
median() { sort -n | sed -n "$(((rounds + 1) / 2))p"; }
audio=$(printf '%s\n' "${ours[@]}" | awk '{print $1}' | median)
col() { printf '%s\n' "${@:2}" | awk -v c="$1" '{print $c}' | median; }
greedy=$(col 2 "${ours[@]}") beam=$(col 3 "${ours[@]}") greedy_e2e=$(col 4 "${ours[@]}") beam_e2e=$(col 5 "${ours[@]}")
py_greedy=$(col 1 "${pys[@]}") py_beam=$(col 2 "${pys[@]}")
mismatch=$(printf '%s\n' "${pys[@]}" | awk '{g += $3; b += $4} END {print g " " b}')
awk -v a="$audio" -v g="$greedy" -v b="$beam" -v ge="$greedy_e2e" -v be="$beam_e2e" -v pg="$py_greedy" -v pb="$py_beam" \
    -v t="$threads" -v n="$rounds" -v s="$split" -v m="$mismatch" -v bin="$bin" 'BEGIN {
  split(m, mm, " ")
  printf "ASR decoding, %s (%.1f s of audio), %s threads, median of %d rounds (%s):\n", s, a, t, n, bin
  printf "  greedy search:      search %.1f ms (%.0fx real time), end to end %.1f ms (%.0fx real time); Python %.1f ms: %.1f x\n", g, a * 1000 / g, ge, a * 1000 / ge, pg, pg / g
  printf "  modified beam (4):  search %.1f ms (%.0fx real time), end to end %.1f ms (%.0fx real time); Python %.1f ms: %.1f x\n", b, a * 1000 / b, be, a * 1000 / be, pb, pb / b
  printf "  hypotheses that differ from the Python decoders'\''s: greedy %d, beam %d (over all rounds)\n", mm[1], mm[2]
}'
