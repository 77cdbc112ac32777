#!/usr/bin/env bash
# The losses and the features against their real anchors, in one run: the MI recursion, the simple,
# pruned and full RNN-T losses against k2's fast_rnnt 1.3, the multi-resolution STFT loss against
# auraloss 0.4, the 80-bin fbank against torchaudio's kaldi.fbank (all from .venv, PyTorch 2.11),
# at 1 and 2 threads, ROUNDS interleaved rounds (bench/loss_rounds.py). Forward and backward through
# autograd with the gradients cleared, as in training; peak memory for both sides.
#
# usage: [ROUNDS=5] [REPEATS=5] [BUILD_DIR=build-pip] bench/losses.sh [CASE...]
#        (scripts/setup --test-deps: the .venv with fast_rnnt, auraloss and torchaudio)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-$([ -d build-pip ] && echo build-pip || echo build)}
bin=$build/bench/wavetrain_bench_loss_case
python=${PYTHON:-.venv/bin/python}
# scripts/setup builds only the binary: a bench builds itself where its build directory exists.
[ ! -f "$build/CMakeCache.txt" ] || cmake --build "$build" --target "$(basename "$bin")" >/dev/null
[ -x "$bin" ] || { echo "losses.sh: $bin not found; build it first (scripts/setup --target $(basename "$bin"))" >&2; exit 2; }
[ -x "$python" ] || { echo "losses.sh: $python not found; run scripts/setup --test-deps" >&2; exit 2; }
echo "wavetrain: $bin ($(grep -m1 -o 'Torch_DIR:PATH=.*' "$build/CMakeCache.txt" 2>/dev/null | cut -d= -f2))"
exec "$python" bench/loss_rounds.py "$bin" "$python" "${ROUNDS:-5}" "${REPEATS:-5}" ${THREADS:-1 2} ${1:+-- "$@"}
