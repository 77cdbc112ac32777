#!/usr/bin/env bash
# Time to quality of the amp recipe: wavetrain's default recipe (configs/experiment/amp.yaml, the
# standard WaveNet) and the NAM trainer (bench/nam_time_to_esr.py: neural-amp-modeler's own model,
# loss, data and Lightning loop with NAM's defaults) train on the same built-in capture (60 s, its
# train and valid splits) on this machine, one after the other; each prints its validation ESR per
# epoch with the seconds since its start. Reports when each first reached ESR <= TARGET, and the
# best ESR within its time. Target of issue 33: wavetrain <= 0.01 within 3 minutes.
#
# usage: [MINUTES=3] [NAM_MINUTES=10] [TARGET=0.01] [THREADS=2] [BUILD_DIR=build] bench/amp_time_to_esr.sh [OVERRIDE...]
#        OVERRIDEs go to wavetrain's train command (e.g. optimizer.lr=0.004 for NAM's learning rate).
#        NAM_MINUTES=0 skips the NAM trainer. Needs scripts/setup --test-deps (.venv, neural-amp-modeler).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
wt=$build/cli/wavetrain
python=${PYTHON:-.venv/bin/python}
minutes=${MINUTES:-3} nam_minutes=${NAM_MINUTES:-10} target=${TARGET:-0.01} threads=${THREADS:-2}
[ -x "$wt" ] || { echo "amp_time_to_esr.sh: $wt not found; run scripts/setup" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$wt" data amp-synth -o "$work" --seconds 60 >/dev/null 2>&1
"$wt" data amp --input "$work/dry.wav" --output "$work/amp.wav" -o "$work/capture.h5" >/dev/null 2>&1
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $threads threads; target ESR <= $target"

# wavetrain: the log's epoch lines carry wall-clock stamps (1 s resolution), from the run's first line.
"$wt" train +experiment=amp "amp.data=$work/capture.h5" "trainer.max_time=00:$(printf '%02d' "$minutes"):00" \
  "trainer.threads=$threads" "run.dir=$work/run" "$@" >"$work/train.log" 2>&1 || { cat "$work/train.log" >&2; exit 1; }
awk -v target="$target" '
  function secs(line) { gsub(/[^0-9]/, " ", line); split(line, f, " "); return f[4] * 3600 + f[5] * 60 + f[6] }
  NR == 1 { t0 = secs(substr($0, 1, 21)) }
  / epoch [0-9]+ step [0-9]+: val\/esr=/ {
    t = secs(substr($0, 1, 21)) - t0; if (t < 0) t += 86400
    split($0, a, "val/esr="); esr = a[2] + 0; epoch = $4; n++
    if (n == 1 || esr < best) best = esr
    if (!hit && esr <= target) { hit = 1; hit_t = t; hit_epoch = epoch }
    last_t = t; last_epoch = epoch
  }
  END {
    if (hit) printf "wavetrain:   ESR <= %s at epoch %d, %d s after the start", target, hit_epoch, hit_t
    else printf "wavetrain:   ESR <= %s not reached", target
    printf "; best ESR %.5f in %d epochs, %d s\n", best, last_epoch, last_t
  }' "$work/run/wavetrain.log"

[ "$nam_minutes" != 0 ] || exit 0
"$python" bench/nam_time_to_esr.py "$work/capture.h5" "$nam_minutes" "$target" "$threads" >"$work/nam.txt" 2>"$work/nam.err" ||
  { cat "$work/nam.err" >&2; exit 1; }
awk -v target="$target" '
  /^[0-9]+ [0-9.]+ [0-9.e-]+$/ {
    n++; if (n == 1 || $3 < best) best = $3
    if (!hit && $3 <= target) { hit = 1; hit_t = $2; hit_epoch = $1 }
    last_t = $2; last_epoch = $1
  }
  END {
    if (hit) printf "NAM trainer: ESR <= %s at epoch %d, %d s after the start", target, hit_epoch, hit_t
    else printf "NAM trainer: ESR <= %s not reached", target
    printf "; best ESR %.5f in %d epochs, %d s\n", best, last_epoch, last_t
  }' "$work/nam.txt"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
