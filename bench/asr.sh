#!/usr/bin/env bash
# The ASR training step: the `tiny` transducer (forward, icefall's pruned RNN-T loss, backward,
# Adam; 16 utterances of ~3 s; the built-in corpus's 40-piece vocabulary unless VOCAB is given) in
# wavetrain and in Python PyTorch with k2's fast_rnnt (bench/asr_step_baseline.py: the same model,
# written from the same design, PyTorch's fused CPU Adam), same threads, in this one run. Two
# comparisons, each like with like:
#   one part: the whole batch in one forward and backward on both sides;
#   in parts: wavetrain's trainer.cpu_batch_parts=auto (the batch's parts train at once, one per
#             thread) against the Python side doing the same (the parts on Python threads at once,
#             one intra-op thread each; asr_step_baseline.py's PARTS).
# Target (issue 33): at least 3x the Python throughput in both. Both sides use the same LibTorch
# when run against the pip build (the default when build-pip/ exists) and the project's .venv.
#
# usage: [ROUNDS=3] bench/asr.sh [THREADS] [REPEATS] [VOCAB]   (scripts/setup --test-deps: .venv, fast_rnnt)
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
repeats=${2:-10}
vocab=${3:-40}
build=${BUILD_DIR:-$([ -d build-pip ] && echo build-pip || echo build)}
bin=$build/bench/wavetrain_bench_asr
python=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo /usr/bin/python3)}
# scripts/setup builds only the binary: a bench builds itself where its build directory exists.
[ ! -f "${bin%/bench/*}/CMakeCache.txt" ] || cmake --build "${bin%/bench/*}" --target "$(basename "$bin")" >/dev/null
[ -x "$bin" ] || { echo "asr.sh: $bin not found; build it first (scripts/setup --target $(basename "$bin"))" >&2; exit 2; }
export OMP_WAIT_POLICY=PASSIVE
# ROUNDS rounds, each running both sides one after the other, so that a slower minute of a shared
# machine falls on both; each side's figure is the median of its rounds' medians.
rounds=${ROUNDS:-3}
ours=() pys=() pys_parts=()
for ((r = 0; r < rounds; r++)); do
  ours+=("$("$bin" "$threads" "$repeats" "$vocab")")
  pys+=("$("$python" bench/asr_step_baseline.py "$threads" "$repeats" "$vocab" 1)")
  pys_parts+=("$("$python" bench/asr_step_baseline.py "$threads" "$repeats" "$vocab" "$threads")")
done
median_line() { sort -n -k1,1 | sed -n "$(((rounds + 1) / 2))p"; }
read -r ms one_ms params rss enc_ms loss_ms back_ms opt_ms <<<"$(printf '%s\n' "${ours[@]}" | median_line)"
read -r py_ms py_params py_rss py_loss <<<"$(printf '%s\n' "${pys[@]}" | median_line)"
read -r pyp_ms _ pyp_rss _ <<<"$(printf '%s\n' "${pys_parts[@]}" | median_line)"
[ "$params" = "$py_params" ] || echo "asr.sh: warning: the models differ ($params vs $py_params parameters)" >&2
echo "rounds (ms, wavetrain in parts / one part, Python in parts / one part): $(for ((r = 0; r < rounds; r++)); do read -r a b _ <<<"${ours[r]}"; read -r c _ <<<"${pys[r]}"; read -r d _ <<<"${pys_parts[r]}"; printf '%s/%s %s/%s  ' "$a" "$b" "$d" "$c"; done)"
awk -v e="$enc_ms" -v lf="$loss_ms" -v bw="$back_ms" -v op="$opt_ms" -v a="$ms" -v one="$one_ms" -v b="$py_ms" -v bp="$pyp_ms" -v t="$threads" -v p="$params" -v v="$vocab" -v r="$rss" -v pr="$py_rss" -v l="$py_loss" -v bin="$bin" -v n="$rounds" 'BEGIN {
  printf "ASR training step, tiny transducer (%d parameters, vocabulary %d), 16 x ~3 s, %s threads, median of %d rounds:\n", p, v, t, n
  printf "  wavetrain (%s), batch in %d parts at once: %.1f ms (%.1f utterances/s, peak RSS %d MB)\n", bin, t, a, 16000 / a, r
  printf "  wavetrain, batch as one part: %.1f ms (%.1f utterances/s)\n", one, 16000 / one
  printf "    (encoder forward %.1f ms, loss forward %.1f ms, backward %.1f ms, Adam %.1f ms)\n", e, lf, bw, op
  printf "  Python PyTorch + %s: %.1f ms (%.1f utterances/s, peak RSS %d MB); in %d parts at once: %.1f ms\n", l, b, 16000 / b, pr, t, bp
  printf "  wavetrain / Python throughput: in parts %.2f x, one part %.2f x (wavetrain in parts against Python in one part: %.2f x)\n", bp / a, b / one, b / a
}'
