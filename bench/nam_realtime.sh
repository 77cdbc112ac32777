#!/usr/bin/env bash
# Real-time factors of wavetrain's .nam engine as the NAM plugin runs a model: 64-sample buffers, one
# thread, 48 kHz. NAM's presets (standard, lite, feather, nano, the four LSTMs) and the core's A2 and
# A2 test models (tests/data/reference/nam/models). Builds nothing from outside: the comparison with
# NeuralAmpModelerCore is run by hand and recorded in docs/amp.md.
#
# usage: bench/nam_realtime.sh [SECONDS]   (default 10 s of audio per model, best of 3)
set -euo pipefail
seconds=${1:-10}
bin=build/bench/wavetrain_bench_nam
# scripts/setup builds only the binary: a bench builds itself where its build directory exists.
[ ! -f "${bin%/bench/*}/CMakeCache.txt" ] || cmake --build "${bin%/bench/*}" --target "$(basename "$bin")" >/dev/null
[ -x "$bin" ] || { echo "nam_realtime.sh: $bin not found; build it first (scripts/setup --target $(basename "$bin"))" >&2; exit 2; }
models=tests/data/reference/nam/models
export OMP_NUM_THREADS=1
echo "model                real-time factor (64-sample buffers, 1 thread, 48 kHz)"
"$bin" "$seconds" "$models/A2.nam" "$models/wavenet_a2_max.nam" "$models/lstm.nam"
