#!/usr/bin/env bash
# examples/custom_task as a user builds and runs it: wavetrain installed into a fresh prefix
# (cmake --install), the example configured and built against that prefix only (find_package), then
# the installed binary trains its task with its callback through plugins=[...], resumes, evaluates
# from another directory and sweeps. Checks the numbers along the way: a run resumed from epoch 2
# evaluates exactly as one trained straight through, the callback's state is in the checkpoint,
# the task's groups and the callback's metric are in metrics.csv.
#
# usage: tests/example_project.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
work=$(mktemp -d /tmp/wavetrain-example-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "example_project: FAILED: $*" >&2; exit 1; }
step() { echo "== $*"; }

step "install into $work/prefix"
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
wt=$work/prefix/bin/wavetrain
[ -x "$wt" ] || fail "no installed binary"
[ -f "$work/prefix/include/wavetrain/trainer/task.h" ] || fail "no installed trainer/task.h"
[ -f "$work/prefix/lib/cmake/wavetrain/wavetrainConfig.cmake" ] || fail "no CMake package"
[ -d "$work/prefix/share/wavetrain/configs" ] || fail "no installed configs"

step "configure and build the example against the prefix"
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# Torch_DIR is left to the package (it records the LibTorch wavetrain was built with).
cmake -S "$src/examples/custom_task" -B "$work/example" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" "${launcher[@]}" \
  > "$work/configure.log" || { cat "$work/configure.log"; fail "configure"; }
# Nothing of wavetrain's tree (its headers, its build) is on the example's compile or link lines; the
# project's .venv (the PyPI LibTorch of the second build) is where that LibTorch lives, not wavetrain.
if grep -o "$src/[^ ;\"]*" "$work/example/build.ninja" | grep -v -e "^$src/examples/custom_task" -e "^$src/.venv/" | grep -q .; then
  grep -o "$src/[^ ;\"]*" "$work/example/build.ninja" | grep -v -e "^$src/examples/custom_task" -e "^$src/.venv/" | sort -u | head >&2
  fail "the example's build refers to wavetrain's source tree"
fi
cmake --build "$work/example" > "$work/build.log" || { cat "$work/build.log"; fail "build"; }
plugin=$work/example/libcustom_task.so
[ -f "$plugin" ] || fail "no plugin built"

# Everything below runs the installed binary from a directory of its own.
mkdir "$work/cwd" && cd "$work/cwd"
common=(--config-dir "$src/examples/custom_task/configs" +experiment=sine "plugins=[$plugin]")

step "train 3 epochs straight"
"$wt" train "${common[@]}" trainer.max_epochs=3 run.dir="$work/straight" > "$work/straight.log" 2>&1 \
  || { cat "$work/straight.log"; fail "train"; }
header=$(head -n 1 "$work/straight/metrics.csv")
for column in lr-body lr-head weight_norm train/epoch_loss val/loss val/max_error; do
  [[ ",$header," == *",$column,"* ]] || fail "metrics.csv has no $column column: $header"
done

step "train 2 epochs, then resume to 3"
"$wt" train "${common[@]}" trainer.max_epochs=2 run.dir="$work/resumed" > "$work/first.log" 2>&1 || { cat "$work/first.log"; fail "train"; }
"$wt" train "${common[@]}" trainer.max_epochs=3 trainer.resume=last run.dir="$work/resumed" > "$work/second.log" 2>&1 \
  || { cat "$work/second.log"; fail "resume"; }
grep -q "resumed from" "$work/second.log" || fail "no resume line"
"$wt" ckpt info "$work/resumed/checkpoints/last.ckpt" > "$work/info.txt"
grep -q "weight_norm" "$work/info.txt" || { cat "$work/info.txt"; fail "the callback's state is not in the checkpoint"; }

step "evaluate both from another directory"
mkdir "$work/elsewhere" && cd "$work/elsewhere"
"$wt" eval "$work/straight" > "$work/eval-straight.txt" || fail "eval"
"$wt" eval "$work/resumed" > "$work/eval-resumed.txt" || fail "eval"
python3 - "$work/straight/eval-1.json" "$work/resumed/eval-1.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["global_step"] == b["global_step"] == 24, (a["global_step"], b["global_step"])
assert a["metrics"] == b["metrics"], ("a resumed run differs from a straight one", a["metrics"], b["metrics"])
assert a["metrics"]["val/loss"] < 0.1, a["metrics"]  # sin(x) learnt, roughly, in 24 steps
print("eval: resumed == straight:", a["metrics"])
PY

step "sweep two widths, the plugin named in a config file of the user's"
cd "$work/cwd"
mkdir -p "$work/mine/experiment"
printf '# @package _global_\ndefaults:\n  - sine\nplugins: [%s]\n' "$plugin" > "$work/mine/experiment/sine_here.yaml"
"$wt" train -m --config-dir "$work/mine" --config-dir "$src/examples/custom_task/configs" +experiment=sine_here \
  trainer.max_epochs=1 sine_fit.hidden=4,8 run.multirun_dir="$work/sweep" > "$work/sweep.log" 2>&1 \
  || { cat "$work/sweep.log"; fail "sweep"; }
for job in 0 1; do [ -f "$work/sweep/$job/result.json" ] || fail "sweep job $job has no result.json"; done
"$wt" report "$work/sweep" > /dev/null || fail "report"

step "the plugin's errors"
expect_error() {  # text, then the command
  local text=$1; shift
  if "$@" > "$work/err.log" 2>&1; then fail "expected an error: $*"; fi
  grep -qF -- "$text" "$work/err.log" || { cat "$work/err.log"; fail "expected '$text'"; }
}
expect_error "unknown callback 'weight_norm'" "$wt" train "${common[@]}" "plugins=[]" run.dir="$work/none"
expect_error "plugin $work/missing.so: no such file" "$wt" train "${common[@]}" "plugins=[$work/missing.so]" run.dir="$work/none"
# A misspelt key of the plugin's task in a config file (the plugin lists its keys one by one).
mkdir -p "$work/typo/experiment"
printf '# @package _global_\ndefaults:\n  - sine\nsine_fit:\n  hiden: 3\n' > "$work/typo/experiment/sine_typo.yaml"
expect_error "Key 'sine_fit.hiden' ($work/typo/experiment/sine_typo.yaml:5) is not a key that wavetrain reads" \
  "$wt" train --config-dir "$work/typo" --config-dir "$src/examples/custom_task/configs" +experiment=sine_typo \
  "plugins=[$plugin]" run.dir="$work/none"
[ ! -e "$work/none" ] || fail "a refused run wrote $work/none"
echo "example_project: all checks passed"
