#!/usr/bin/env bash
# What the Slurm launcher adds per job, measured on a local single-node cluster
# (tests/slurm/local_cluster.sh): the same N short toy_regression jobs, one at a time, through
# launcher=slurm and through the local launcher. Per job: (the sweep's wall time - the jobs' own run
# time) / N, where a job's own run time is how long its `wavetrain train` process ran
# (jobs/N.status.json under Slurm, summary.json's seconds locally). Target: <= 2 s per job.
#
# usage: bench/sweep_launcher.sh [BUILD_DIR] [JOBS]      (needs root and Slurm's packages:
#        scripts/setup --test-deps installs them)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
n=${2:-8}
bin=$PWD/$build/cli/wavetrain
[ -x "$bin" ] || { echo "sweep_launcher.sh: no $bin (build first)" >&2; exit 1; }
cluster_script=$PWD/tests/slurm/local_cluster.sh  # absolute: the measurement runs in another directory
work=$(mktemp -d /tmp/wt-bench-sweep.XXXXXX)
cluster=/tmp/wt-bench-slurm-$$
trap '"$cluster_script" stop "$cluster" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$cluster_script" start "$cluster" >/dev/null
# shellcheck disable=SC1091
. "$cluster/env.sh"
sleep 4  # slurmctld's first scheduling pass comes a few seconds after its start

lrs=$(python3 -c "print(','.join(str(round(0.001 * (i + 1), 6)) for i in range($n)))")
sweep=(train -m task=toy_regression trainer.max_epochs=3 trainer.threads=1 "optimizer.lr=$lrs")
cd "$work"
t0=$(date +%s.%N)
"$bin" "${sweep[@]}" launcher=slurm launcher.array_parallelism=1 run.multirun_dir=slurm >slurm.log
t1=$(date +%s.%N)
"$bin" "${sweep[@]}" -j 1 run.multirun_dir=local >local.log
t2=$(date +%s.%N)
python3 - "$t0" "$t1" "$t2" "$n" <<'PY'
import glob, json, sys
t0, t1, t2 = map(float, sys.argv[1:4])
n = int(sys.argv[4])
slurm_run = sum(json.load(open(f))["seconds"] for f in glob.glob("slurm/jobs/*.status.json"))
local_run = sum(j["seconds"] for j in json.load(open("local/summary.json"))["jobs"])
slurm_over = (t1 - t0 - slurm_run) / n
local_over = (t2 - t1 - local_run) / n
print(f"{n} jobs, one at a time: slurm launcher {t1 - t0:.1f} s in all ({slurm_run:.1f} s in the jobs), "
      f"local launcher {t2 - t1:.1f} s in all ({local_run:.1f} s in the jobs)")
print(f"per job: slurm launcher adds {slurm_over:.2f} s, local launcher {local_over:.2f} s "
      f"(slurm - local: {slurm_over - local_over:+.2f} s; target <= 2 s)")
PY
