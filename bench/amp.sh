#!/usr/bin/env bash
# NAM's standard WaveNet: one training step (batch 16 x 8192, NAM's loss, Adam) in wavetrain and in
# Python PyTorch (same model and loss, bench/amp_step_baseline.py), same machine and threads, in this
# one run; plus wavetrain's inference real-time factors. Target: at least 2x the Python throughput
# (issue 33: 4x for A2, which follows the standard model's lines).
# The anchor: the NAM trainer's own standard model and training step (neural-amp-modeler in the
# project's .venv, bench/nam_standard_step.py), timed in the same run when it is installed.
#
# usage: [ROUNDS=1] [BUILD_DIR=build] [PYTHON=/usr/bin/python3] bench/amp.sh [THREADS] [REPEATS]   (the baseline runs
#        on PYTHON's torch: Debian's python3-torch 1.13 by default, or .venv/bin/python for PyTorch
#        2.11; scripts/setup --test-deps for the anchor)
set -euo pipefail
python=${PYTHON:-/usr/bin/python3}
threads=${1:-2}
repeats=${2:-10}
bin=${BUILD_DIR:-build}/bench/wavetrain_bench_amp
# scripts/setup builds only the binary: a bench builds itself where its build directory exists.
[ ! -f "${bin%/bench/*}/CMakeCache.txt" ] || cmake --build "${bin%/bench/*}" --target "$(basename "$bin")" >/dev/null
[ -x "$bin" ] || { echo "amp.sh: $bin not found; build it first (scripts/setup --target $(basename "$bin"))" >&2; exit 2; }
export OMP_WAIT_POLICY=PASSIVE
read -r step libtorch offline stream <<<"$("$bin" "$threads" "$repeats")"
py=$("$python" "$(dirname "$0")/amp_step_baseline.py" "$threads" "$repeats")
echo "baseline: PyTorch $("$python" -c 'import torch; print(torch.__version__)') ($python)"
printf "training step, standard WaveNet, %s threads: wavetrain %s ms, Python %s ms: %s x the Python throughput\n" \
  "$threads" "$step" "$py" "$(awk -v a="$step" -v b="$py" 'BEGIN { printf "%.2f", b / a }')"
printf "  (wavetrain through LibTorch's conv1d instead of its CPU kernels: %s ms, %s x the Python throughput)\n" \
  "$libtorch" "$(awk -v a="$libtorch" -v b="$py" 'BEGIN { printf "%.2f", b / a }')"
if [ -x .venv/bin/python ] && .venv/bin/python -c 'import nam' 2>/dev/null; then
  nam=$(.venv/bin/python "$(dirname "$0")/nam_standard_step.py" "$threads" "$repeats")
  printf "  the NAM trainer's own standard step (neural-amp-modeler, LightningModule.training_step + Adam): %s ms: wavetrain is %s x its throughput\n" \
    "$nam" "$(awk -v a="$step" -v b="$nam" 'BEGIN { printf "%.2f", b / a }')"
else
  echo "  (the NAM trainer's own step not timed: neural-amp-modeler is not in .venv; scripts/setup --test-deps)"
fi
# Models beyond NAM's classic WaveNet, each against the same model in Python PyTorch (NAM's trainer
# has neither): A2 (8 channels, kernels 6 and 15, LeakyReLU, a 16-tap head) and the standard preset
# with blended SiLU layers. ROUNDS rounds (default 1), alternating which side runs first; with
# more than one, each model's ratio as min / median over the rounds.
for model in "a2:a2" "blended_silu:standard SiLU blended"; do
  name=${model%%:*}
  ratios=""
  for ((r = 0; r < ${ROUNDS:-1}; r++)); do
    run_wavetrain() { read -r step_p libtorch_p _ _ <<<"$("$bin" "$threads" "$repeats" ${model#*:})"; }
    run_python() { py_p=$("$python" "$(dirname "$0")/amp_step_baseline.py" "$threads" "$repeats" cpu 32 "$name"); }
    if ((r % 2 == 0)); then run_wavetrain; run_python; else run_python; run_wavetrain; fi
    ratio=$(awk -v a="$step_p" -v b="$py_p" 'BEGIN { printf "%.2f", b / a }')
    ratios="$ratios $ratio"
    printf "training step, %s, %s threads: wavetrain %s ms, Python %s ms: %s x the Python throughput (through LibTorch's ops: %s ms, %s x)\n" \
      "$name" "$threads" "$step_p" "$py_p" "$ratio" "$libtorch_p" "$(awk -v a="$libtorch_p" -v b="$py_p" 'BEGIN { printf "%.2f", b / a }')"
  done
  if ((${ROUNDS:-1} > 1)); then
    printf "  %s over %s rounds: min / median %s (load average %s)\n" "$name" "$ROUNDS" \
      "$(echo $ratios | tr ' ' '\n' | sort -n | awk '{ v[NR] = $1 } END { printf "%.2f / %.2f", v[1], v[int((NR + 1) / 2)] }')" \
      "$(cut -d' ' -f1-3 /proc/loadavg)"
  fi
done
printf "inference, standard WaveNet at 48 kHz: offline (65536-sample chunks, %s threads) %sx real time; 64-sample buffers (stream mode, 1 thread) %sx real time\n" \
  "$threads" "$offline" "$stream"
