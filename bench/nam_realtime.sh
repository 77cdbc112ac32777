#!/usr/bin/env bash
# Real-time factors of wavetrain's .nam engine as the NAM plugin runs a model: 64-sample buffers, one
# thread, 48 kHz. NAM's presets (standard, lite, feather, nano, the four LSTMs) and the core's nine
# example models (tests/data/reference/nam/models: A2 and its small submodel, the A2 test model,
# the LSTM, two standard WaveNets, a tiny one, a condition_dsp and two slimmable ones).
#
# usage: bench/nam_realtime.sh [SECONDS]   (default 10 s of audio per model, best of 3)
#
# Against NeuralAmpModelerCore (the plugin's engine): set NAM_CORE_DIR to a checkout of it. The
# script then compiles the core's sources together with our driver (bench/nam_core_bench.cpp) three
# times (four on an AVX-512 CPU), outside the source tree, in build/bench/nam-core-VARIANT/ (kept
# between runs; make recompiles only what is missing or older than its sources or flags):
#   sse2     as the plugin ships it: -O3 without -march (SSE2 on x86-64), the core's A2 fast path on
#            (NAM_ENABLE_A2_FAST, the core's CMake default)
#   avx2     the same with -mavx2 -mfma: the instruction set wavetrain's engine picks on an AVX2 CPU
#   avx512   the same with -march=x86-64-v4 (AVX-512 F, BW, CD, DQ, VL; Eigen then uses 16-lane
#            vectors): what wavetrain's engine picks on an AVX-512 CPU (only built on one)
#   generic  as sse2 but without NAM_ENABLE_A2_FAST: the core's generic WaveNet for A2 models
# All with -std=c++20 -DNDEBUG, fast tanh switched on before loading (the plugin always does) and
# double samples (the plugin leaves NAM_SAMPLE_FLOAT undefined). Then, for ROUNDS rounds, each model
# is played by wavetrain and by each core build in turn (the order rotates from round to round).
# wavetrain plays with exact tanh and with the core's fast tanh (the function the core computes), on
# an AVX-512 CPU also held to AVX2 (against the core's AVX2 build), and in its baseline-ISA variant,
# both ways (against the core's SSE2 build: the same 128-bit ISA; on ARM that variant is what runs,
# as NEON). The script prints two Markdown tables: each engine's median real-time factor (the range
# over the rounds in brackets), and the ratios (min / median of the rounds' ratios; each round's
# ratio compares runs made seconds apart).
# The load average is printed at the start and at the end: the machine may be shared.
#
# Getting the core (what the comparison was made with: commit daae2d0, August 2026):
#   git clone https://github.com/sdatkinson/NeuralAmpModelerCore nam-core
#   git -C nam-core checkout daae2d0
# It needs Eigen 3.4 and nlohmann/json. nlohmann/json comes with it (Dependencies/nlohmann); Eigen is
# a submodule (git -C nam-core submodule update --init Dependencies/eigen). Without the submodule the
# script uses the system's Eigen (Debian: apt-get install libeigen3-dev, /usr/include/eigen3). Nothing
# else of the core is needed (its AudioDSPTools submodule serves its own tools only).
#
# environment:
#   NAM_CORE_DIR  the core's checkout (the folder holding NAM/); unset: wavetrain's numbers only
#   ROUNDS        rounds of the comparison (default 3)
#   JOBS          compile jobs for the core (default: nproc)
#   EIGEN_DIR     Eigen's include folder when the core's submodule is empty (default /usr/include/eigen3)
#   CXX           the compiler (default g++; ccache is used when installed)
#
# e.g.  NAM_CORE_DIR=~/src/nam-core ROUNDS=5 bench/nam_realtime.sh 10
set -euo pipefail
shopt -s inherit_errexit  # a failing engine inside $(...) stops the script
seconds=${1:-10}
bin=build/bench/wavetrain_bench_nam
# scripts/setup builds only the binary: a bench builds itself where its build directory exists.
[ ! -f "${bin%/bench/*}/CMakeCache.txt" ] || cmake --build "${bin%/bench/*}" --target "$(basename "$bin")" >/dev/null
[ -x "$bin" ] || { echo "nam_realtime.sh: $bin not found; build it first (scripts/setup --target $(basename "$bin"))" >&2; exit 2; }
models=tests/data/reference/nam/models
export OMP_NUM_THREADS=1
if [ -z "${NAM_CORE_DIR:-}" ]; then
  echo "model                real-time factor (64-sample buffers, 1 thread, 48 kHz)"
  "$bin" "$seconds" "$models/A2.nam" "$models/wavenet_a2_max.nam" "$models/lstm.nam"
  exit 0
fi

# --- against the NAM core ---------------------------------------------------------------------------
rounds=${ROUNDS:-3}
# (nproc obeys OMP_NUM_THREADS, set to 1 above for the engines)
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
jobs=${JOBS:-$cores}
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "nam_realtime.sh: ROUNDS must be a positive integer, got '$rounds'" >&2; exit 2; }
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "nam_realtime.sh: JOBS must be a positive integer, got '$jobs'" >&2; exit 2; }
[ -f "$NAM_CORE_DIR/NAM/get_dsp.h" ] ||
  { echo "nam_realtime.sh: NAM_CORE_DIR=$NAM_CORE_DIR is not a NeuralAmpModelerCore checkout (no NAM/get_dsp.h); see the top of this script" >&2; exit 2; }
core=$(cd "$NAM_CORE_DIR" && pwd)
if [ -f "$core/Dependencies/eigen/Eigen/Dense" ]; then
  eigen=$core/Dependencies/eigen
else
  eigen=${EIGEN_DIR:-/usr/include/eigen3}
  [ -f "$eigen/Eigen/Dense" ] ||
    { echo "nam_realtime.sh: no Eigen: the core's Dependencies/eigen submodule is empty and $eigen/Eigen/Dense is missing (set EIGEN_DIR, or apt-get install libeigen3-dev)" >&2; exit 2; }
fi
case "$core$eigen$PWD" in *' '*) echo "nam_realtime.sh: the core's, Eigen's and this checkout's paths must not contain spaces (make)" >&2; exit 2 ;; esac
cxx=${CXX:-g++}
command -v ccache >/dev/null && cxx="ccache $cxx"
root=${bin%/bench/*}/bench
common="-std=c++20 -O3 -DNDEBUG -pthread -w"
declare -A flags=([sse2]="-DNAM_ENABLE_A2_FAST" [avx2]="-DNAM_ENABLE_A2_FAST -mavx2 -mfma"
                  [avx512]="-DNAM_ENABLE_A2_FAST -march=x86-64-v4" [generic]="")
variants=(sse2 avx2 generic)
# wavetrain's engine runs AVX-512 where the CPU has it (experiments/amp/dsp_kernels.h); the core is
# then built for it too.
avx512=0
grep -qw avx512f /proc/cpuinfo 2>/dev/null && avx512=1 && variants+=(avx512)
for v in "${variants[@]}"; do
  # What the objects were compiled with: a change recompiles everything of that build.
  mkdir -p "$root/nam-core-$v"
  stamp="core=$core eigen=$eigen cxx=$cxx flags=$common ${flags[$v]}"
  [ "$(cat "$root/nam-core-$v/flags" 2>/dev/null)" = "$stamp" ] || echo "$stamp" >"$root/nam-core-$v/flags"
done
echo "building NeuralAmpModelerCore ($core) ${#variants[@]} ways in $root/nam-core-{$(IFS=,; echo "${variants[*]}")}, $jobs jobs ..."
t0=$(date +%s)
log=$root/nam-core-build.log
# Dependencies from the compiler (-MMD): a changed header of the core recompiles what includes it.
if ! make -f - -j"$jobs" CORE="$core" EIGEN="$eigen" ROOT="$root" DRIVER="$PWD/bench/nam_core_bench.cpp" CXX="$cxx" \
     COMMON="$common" VARIANTS="${variants[*]}" FLAGS_sse2="${flags[sse2]}" FLAGS_avx2="${flags[avx2]}" \
     FLAGS_avx512="${flags[avx512]}" FLAGS_generic="${flags[generic]}" \
     >"$log" 2>&1 <<'MAKEFILE'
SRCS := $(wildcard $(CORE)/NAM/*.cpp $(CORE)/NAM/wavenet/*.cpp)
INCLUDES := -I$(CORE) -I$(CORE)/Dependencies/nlohmann -isystem $(EIGEN)
all: $(foreach v,$(VARIANTS),$(ROOT)/nam-core-$(v)/nam_core_bench)
define variant
OBJS_$(1) := $$(patsubst $$(CORE)/%.cpp,$$(ROOT)/nam-core-$(1)/obj/%.o,$$(SRCS)) $$(ROOT)/nam-core-$(1)/obj/nam_core_bench.o
$$(ROOT)/nam-core-$(1)/nam_core_bench: $$(OBJS_$(1))
	$$(CXX) $$(COMMON) $$(FLAGS_$(1)) -o $$@ $$^
$$(ROOT)/nam-core-$(1)/obj/%.o: $$(CORE)/%.cpp $$(ROOT)/nam-core-$(1)/flags
	@mkdir -p $$(@D)
	$$(CXX) $$(COMMON) $$(FLAGS_$(1)) $$(INCLUDES) -MMD -MP -c $$< -o $$@
$$(ROOT)/nam-core-$(1)/obj/nam_core_bench.o: $$(DRIVER) $$(ROOT)/nam-core-$(1)/flags
	@mkdir -p $$(@D)
	$$(CXX) $$(COMMON) $$(FLAGS_$(1)) $$(INCLUDES) -MMD -MP -c $$< -o $$@
-include $$(OBJS_$(1):.o=.d)
endef
$(foreach v,$(VARIANTS),$(eval $(call variant,$(v))))
MAKEFILE
then
  tail -n 30 "$log" >&2
  echo "nam_realtime.sh: building the core failed (the whole log: $log)" >&2
  exit 1
fi
if grep -q 'nam_core_bench' "$log"; then echo "built in $(($(date +%s) - t0)) s (log: $log)"; else echo "up to date"; fi

# The presets as .nam files for the core, with the weights wavetrain times them with (written again
# when the bench binary is newer), and a2_small: the small model of the core's A2 container.
presets=$root/nam-models
if [ ! -f "$presets/.written" ] || [ "$bin" -nt "$presets/.written" ]; then
  "$bin" --write-nam "$presets" "$models/A2.nam"
  touch "$presets/.written"
fi
files=("$presets/standard.nam" "$presets/lite.nam" "$presets/feather.nam" "$presets/nano.nam" "$presets/a2_small.nam"
       "$models/A2.nam" "$models/wavenet_a2_max.nam"
       "$presets/LSTM_1x24.nam" "$presets/LSTM_2x8.nam" "$presets/LSTM_1x16.nam" "$presets/LSTM_1x12.nam" "$models/lstm.nam"
       "$models/my_model.nam" "$models/wavenet_a1_standard.nam" "$models/wavenet.nam" "$models/wavenet_condition_dsp.nam"
       "$models/slimmable_wavenet.nam" "$models/slimmable_container.nam")
label() { local n; n=$(basename "$1" .nam); echo "${n/LSTM_/LSTM }"; }
is_a2() { case "$(basename "$1")" in *a2*|*A2*) return 0 ;; esac; return 1; }
# One engine on one model: its real-time factor.
rtf() {  # engine file
  local out
  case "$1" in
    wavetrain) out=$("$bin" --no-presets "$seconds" "$2") ;;
    wavetrain-avx2) out=$("$bin" --no-avx512 --no-presets "$seconds" "$2") ;;
    wavetrain-fast) out=$("$bin" --fast-tanh --no-presets "$seconds" "$2") ;;
    wavetrain-base) out=$("$bin" --baseline --no-presets "$seconds" "$2") ;;
    wavetrain-base-fast) out=$("$bin" --baseline --fast-tanh --no-presets "$seconds" "$2") ;;
    *) out=$("$root/nam-core-$1/nam_core_bench" "$seconds" "$2") ;;
  esac
  awk 'END { print $NF }' <<<"$out"
}

echo
echo "NAM core: $core ($(git -C "$core" log -1 --format='commit %h, %cs' 2>/dev/null || echo 'not a git checkout'))," \
     "Eigen: $eigen, $($cxx --version | head -n 1)"
echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $cores cores;" \
     "$seconds s of audio per run, best of 3 passes; $rounds rounds"
for f in "${files[@]}"; do
  if is_a2 "$f"; then
    echo "  the core's sse2 build plays $(label "$f") with $("$root/nam-core-sse2/nam_core_bench" --describe "$f" | awk '{ $1 = ""; print substr($0, 2) }')"
  fi
done
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A results  # "engine|label" -> real-time factors, one per round
for ((r = 0; r < rounds; r++)); do
  for f in "${files[@]}"; do
    engines=(wavetrain wavetrain-fast wavetrain-base wavetrain-base-fast sse2 avx2)
    ((avx512)) && engines+=(avx512 wavetrain-avx2)
    is_a2 "$f" && engines+=(generic)
    n=${#engines[@]}
    for ((i = 0; i < n; i++)); do
      e=${engines[(i + r) % n]}
      results["$e|$(label "$f")"]+="$(rtf "$e" "$f") "
    done
  done
  echo "round $((r + 1)) of $rounds done (load average $(cut -d' ' -f1-3 /proc/loadavg))"
done
# Median (upper, as bench/timing.h) of the values, with their range when there are several.
stat_rtf() { tr ' ' '\n' <<<"$1" | awk 'NF' | sort -g | awk '{ v[NR] = $1 } END { m = v[int(NR / 2) + 1]; if (NR > 1) printf "%.1fx (%.1f-%.1f)", m, v[1], v[NR]; else printf "%.1fx", m }'; }
# Round by round a / b: "min / median" (one value when there is one round).
stat_ratio() {
  paste -d' ' <(tr ' ' '\n' <<<"$1" | awk 'NF') <(tr ' ' '\n' <<<"$2" | awk 'NF') | awk '{ print $1 / $2 }' | sort -g |
    awk '{ v[NR] = $1 } END { m = v[int(NR / 2) + 1]; if (NR > 1) printf "%.2f / %.2f", v[1], m; else printf "%.2f", m }'
}
# A Markdown table's header line and the separator under it.
print_header() { echo "$1"; echo "$1" | sed 's/[^|]//g; s/|/|---/g; s/---$//'; }
# The core built for the instruction set wavetrain's engine picks on this CPU.
same=avx2 same_name="AVX2+FMA"
((avx512)) && same=avx512 same_name="AVX-512"
echo
echo "Real-time factors: median (range) over the rounds."
echo
header="| model | wavetrain | wavetrain, fast tanh |"
((avx512)) && header+=" wavetrain held to AVX2 |"
header+=" wavetrain, baseline ISA | baseline, fast tanh |"
header+=" core SSE2 (plugin build) | core AVX2+FMA |"
((avx512)) && header+=" core AVX-512 |"
header+=" core SSE2, generic A2 path |"
print_header "$header"
for f in "${files[@]}"; do
  l=$(label "$f")
  row="| $l | $(stat_rtf "${results["wavetrain|$l"]}") | $(stat_rtf "${results["wavetrain-fast|$l"]}") |"
  ((avx512)) && row+=" $(stat_rtf "${results["wavetrain-avx2|$l"]}") |"
  row+=" $(stat_rtf "${results["wavetrain-base|$l"]}") | $(stat_rtf "${results["wavetrain-base-fast|$l"]}") |"
  row+=" $(stat_rtf "${results["sse2|$l"]}") | $(stat_rtf "${results["avx2|$l"]}") |"
  ((avx512)) && row+=" $(stat_rtf "${results["avx512|$l"]}") |"
  if is_a2 "$f"; then row+=" $(stat_rtf "${results["generic|$l"]}") |"; else row+=" – |"; fi
  echo "$row"
done
echo
echo "Ratios, round by round: min / median. The core always plays its fast tanh (as the plugin does);"
echo "wavetrain plays exact tanh unless the column says fast tanh (then the same function as the core)."
echo
header="| model | wavetrain / core SSE2 | wavetrain / core $same_name (same ISA) | fast tanh / core $same_name |"
((avx512)) && header+=" held to AVX2 / core AVX2+FMA |"
header+=" baseline / core SSE2 (same ISA) | baseline, fast tanh / core SSE2 |"
header+=" core: A2 fast path / generic |"
print_header "$header"
for f in "${files[@]}"; do
  l=$(label "$f")
  w=${results["wavetrain|$l"]} wf=${results["wavetrain-fast|$l"]} s=${results["sse2|$l"]} x=${results["$same|$l"]}
  row="| $l | $(stat_ratio "$w" "$s") | $(stat_ratio "$w" "$x") | $(stat_ratio "$wf" "$x") |"
  ((avx512)) && row+=" $(stat_ratio "${results["wavetrain-avx2|$l"]}" "${results["avx2|$l"]}") |"
  row+=" $(stat_ratio "${results["wavetrain-base|$l"]}" "$s") | $(stat_ratio "${results["wavetrain-base-fast|$l"]}" "$s") |"
  if is_a2 "$f"; then row+=" $(stat_ratio "$s" "${results["generic|$l"]}") |"; else row+=" – |"; fi
  echo "$row"
done
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
