#!/usr/bin/env bash
# The ASR training step: the `tiny` transducer (forward, icefall's pruned RNN-T loss, backward,
# Adam; 16 utterances of ~3 s) in wavetrain and in Python PyTorch with k2's fast_rnnt
# (bench/asr_step_baseline.py: the same model, written from the same design), same threads, in
# this one run. Target: at least 2x the Python throughput. Both sides use the same LibTorch when
# run against the pip build (the default when build-pip/ exists) and the project's .venv.
#
# usage: bench/asr.sh [THREADS] [REPEATS]   (scripts/setup --test-deps for .venv and fast_rnnt)
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
repeats=${2:-10}
build=${BUILD_DIR:-$([ -d build-pip ] && echo build-pip || echo build)}
bin=$build/bench/wavetrain_bench_asr
python=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo /usr/bin/python3)}
[ -x "$bin" ] || { echo "asr.sh: $bin not found; build first (scripts/setup)" >&2; exit 2; }
export OMP_WAIT_POLICY=PASSIVE
read -r ms params rss enc_ms loss_ms back_ms opt_ms <<<"$("$bin" "$threads" "$repeats")"
read -r py_ms py_params py_rss py_loss <<<"$("$python" bench/asr_step_baseline.py "$threads" "$repeats")"
[ "$params" = "$py_params" ] || echo "asr.sh: warning: the models differ ($params vs $py_params parameters)" >&2
awk -v e="$enc_ms" -v lf="$loss_ms" -v bw="$back_ms" -v op="$opt_ms" -v a="$ms" -v b="$py_ms" -v t="$threads" -v p="$params" -v r="$rss" -v pr="$py_rss" -v l="$py_loss" -v bin="$bin" 'BEGIN {
  printf "ASR training step, tiny transducer (%d parameters), 16 x ~3 s, %s threads:\n", p, t
  printf "  wavetrain (%s): %.1f ms (%.1f utterances/s, peak RSS %d MB)\n", bin, a, 16000 / a, r
  printf "    (encoder forward %.1f ms, loss forward %.1f ms, backward %.1f ms, Adam %.1f ms)\n", e, lf, bw, op
  printf "  Python PyTorch + %s: %.1f ms (%.1f utterances/s, peak RSS %d MB)\n", l, b, 16000 / b, pr
  printf "  wavetrain: %.2f x the Python throughput\n", b / a
}'
