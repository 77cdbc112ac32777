#!/usr/bin/env bash
# Data-parallel step time across simulated hosts (tests/multinode/hosts.sh): for the amp standard
# WaveNet and the ASR tiny transducer, one rank alone, then 2 hosts x 1 rank on links shaped to each
# RATE, with the gradient average after the backward and overlapped with it by each engine of
# trainer/gradient_sync.h (wavetrain's hooks; c10d's Reducer where the build has it), from
# bench/ddp_step_bench.cpp (one intra-op thread per rank, random inputs of a fixed shape). Prints
# each model's step times, the exposed communication and the scaling efficiency (1-rank step /
# 2-host step: the same per-rank batch, so 1.0 is perfect).
#
# Needs root (network namespaces). On a 2-core machine the two hosts share the two cores, so a
# 2-host step is slower than one rank alone even without communication; the exposed communication
# is therefore measured against two single ranks running at once ("2alone": the same contention,
# no collectives): exposed = 2-host step - 2alone step. Each host's rank (and the first "alone"
# rank) is pinned to core 0, the other to core 1, so that the two do not trade cores mid-step
# (PIN=0 leaves them to the scheduler).
#
# usage: [STEPS=10] [BUCKET_MB=25] [RATES="1gbit 10gbit 100gbit"] [MODELS="amp asr"] [PIN=1] bench/ddp_scaling.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-$([ -d build-pip ] && echo build-pip || echo build)}
bin=$(pwd)/$build/bench/wavetrain_bench_ddp
[ ! -f "$build/CMakeCache.txt" ] || cmake --build "$build" --target wavetrain_bench_ddp >/dev/null
[ -x "$bin" ] || { echo "ddp_scaling.sh: $bin not found (cmake --build $build --target wavetrain_bench_ddp)" >&2; exit 2; }
steps=${STEPS:-10}
rates=${RATES:-1gbit 10gbit 100gbit}
models=${MODELS:-amp asr}
hosts=tests/multinode/hosts.sh
name=db$(($$ % 100000))
trap '"$hosts" down "$name" >/dev/null 2>&1 || true' EXIT
export OMP_WAIT_POLICY=PASSIVE
pin() {  # core command...: the command on that core (threads it starts, Gloo's included, inherit it)
  local core=$1
  shift
  if [ "${PIN:-1}" = 1 ] && [ "$(nproc)" -ge 2 ]; then taskset -c "$core" "$@"; else "$@"; fi
}
engines=(hooks)
"$bin" reducer-built && engines+=(reducer)

# The contention baseline: two single ranks at once (no communication), as the two hosts share the
# machine's cores; prints the first's line.
two_alone() {  # model
  pin 1 "$bin" "$1" single "$steps" >/dev/null &
  local out
  out=$(pin 0 "$bin" "$1" single "$steps")
  wait
  echo "$out"
}

# Two ranks on two fresh hosts; prints rank 0's line.
two_hosts() {  # model mode rate [engine]
  "$hosts" down "$name"
  "$hosts" up "$name" 2 "$3"
  local port=$((29700 + RANDOM % 200)) out
  pin 1 "$hosts" exec "$name" 1 env RANK=1 WORLD_SIZE=2 MASTER_ADDR=10.231.0.1 MASTER_PORT=$port ENGINE="${4:-auto}" \
    "$bin" "$1" "$2" "$steps" >/dev/null &
  out=$(pin 0 "$hosts" exec "$name" 0 env RANK=0 WORLD_SIZE=2 MASTER_ADDR=10.231.0.1 MASTER_PORT=$port ENGINE="${4:-auto}" \
    "$bin" "$1" "$2" "$steps")
  wait
  echo "$out"
}

echo "# bench/ddp_scaling.sh: $steps steps (median), bucket ${BUCKET_MB:-25} MiB, engines: ${engines[*]}, pinned: ${PIN:-1}, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-5s %-8s %-8s %9s %9s %9s %10s %10s %10s %9s %9s %9s\n' model link engine 1rank_ms 2alone_ms after_ms overlap_ms exp_after exp_overlap ovl/after eff_after eff_ovl
for model in $models; do
  read -r single bytes _ _ <<<"$(pin 0 "$bin" "$model" single "$steps")"
  read -r alone _ _ _ <<<"$(two_alone "$model")"
  for rate in $rates; do
    read -r after _ _ _ <<<"$(two_hosts "$model" after "$rate")"
    for engine in "${engines[@]}"; do
      read -r overlap _ buckets early <<<"$(two_hosts "$model" overlap "$rate" "$engine")"
      [ -n "$after" ] && [ -n "$overlap" ] || { echo "ddp_scaling.sh: a 2-host run failed ($model, $rate, $engine)" >&2; exit 1; }
      awk -v m="$model" -v r="$rate" -v e="$engine" -v s="$single" -v c="$alone" -v a="$after" -v o="$overlap" 'BEGIN {
        ea = a - c; eo = o - c
        printf "%-5s %-8s %-8s %9.1f %9.1f %9.1f %10.1f %10.1f %10.1f %9s %9.2f %9.2f\n", m, r, e, s, c, a, o, ea, eo,
               (ea > 0 ? sprintf("%.2f", eo / ea) : "-"), s / a, s / o }'
      [ "$engine" = hooks ] && hooks_line="$buckets buckets, $early started during the backward"
    done
  done
  echo "#   $model: $bytes bytes of gradient a step; hooks engine: ${hooks_line:-}"
done
