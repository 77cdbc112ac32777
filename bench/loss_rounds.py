# The driver of bench/losses.sh: for each case and thread count, ROUNDS interleaved rounds, each
# running wavetrain's side (wavetrain_bench_loss_case) and the anchor's (bench/loss_anchor.py) in
# fresh processes, one after the other, the order alternating between rounds so that neither side
# always runs on the warmer machine. Prints each side's min and median over the rounds (of each
# round's median of REPEATS runs), the speed-up (anchor's median / wavetrain's), the target, and the
# peak memory each side added.
#
# usage: python3 bench/loss_rounds.py BIN ANCHOR_PYTHON ROUNDS REPEATS THREADS... [-- CASE...]
import os
import statistics
import subprocess
import sys

# case: (label, the speed-up the issue asks for, None where it sets none)
CASES = {
    "mi_small": ("MI recursion (8, 50, 300)", None),
    "mi_large": ("MI recursion (32, 100, 500)", 10.0),
    "simple": ("rnnt_loss_simple (8, 50, 300, 500)", 4.0),
    "pruned": ("smoothed + prune + pruned, s_range 5", 4.0),
    "full": ("full rnnt_loss (8, 50, 300, 500)", 1.0),
    "mrstft_16x8192": ("MRSTFT 16 x 8192", 4.0),
    "mrstft_4x65536": ("MRSTFT 4 x 65536", 4.0),
    "fbank_10s": ("fbank 80 bins, 10 s", 4.0),
}
ANCHOR = {"mi_small": "fast_rnnt", "mi_large": "fast_rnnt", "simple": "fast_rnnt", "pruned": "fast_rnnt",
          "full": "fast_rnnt", "mrstft_16x8192": "auraloss", "mrstft_4x65536": "auraloss",
          "fbank_10s": "torchaudio"}


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
    median_ms, min_ms, peak_mb = (float(v) for v in out.stdout.split())
    return median_ms, peak_mb


def main():
    args = sys.argv[1:]
    cases = list(CASES)
    if "--" in args:
        cases = args[args.index("--") + 1:]
        args = args[:args.index("--")]
        for c in cases:
            if c not in CASES:
                sys.exit(f"loss_rounds.py: unknown case '{c}' (expected one of {', '.join(CASES)})")
    binary, python, rounds, repeats, threads = args[0], args[1], int(args[2]), args[3], [int(t) for t in args[4:]]
    here = os.path.dirname(os.path.abspath(__file__))
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {rounds} interleaved rounds, "
          f"each side's median of {repeats} runs per round; forward + backward, gradients cleared; ms")
    print(f"{'case':38s} {'thr':>3s} {'wavetrain min/med':>18s} {'anchor min/med':>18s} {'anchor':>10s} "
          f"{'speed-up':>8s} {'target':>6s} {'peak MB ours/anchor':>20s}")
    failed = []
    for case in cases:
        label, target = CASES[case]
        for t in threads:
            ours, theirs, ours_mb, theirs_mb = [], [], [], []
            for r in range(rounds):
                sides = [("ours", [binary, case, str(t), repeats]),
                         ("anchor", [python, os.path.join(here, "loss_anchor.py"), case, str(t), repeats])]
                for side, cmd in (sides if r % 2 == 0 else sides[::-1]):
                    ms, mb = run(cmd)
                    (ours if side == "ours" else theirs).append(ms)
                    (ours_mb if side == "ours" else theirs_mb).append(mb)
            speedup = statistics.median(theirs) / statistics.median(ours)
            met = target is None or speedup >= target
            if not met:
                failed.append(f"{case}@{t}")
            print(f"{label:38s} {t:3d} {min(ours):8.2f}/{statistics.median(ours):8.2f} "
                  f"{min(theirs):8.2f}/{statistics.median(theirs):8.2f} {ANCHOR[case]:>10s} {speedup:7.2f}x "
                  f"{'' if target is None else f'{target:g}x':>6s}{'' if met else '!'} "
                  f"{max(ours_mb):9.0f}/{max(theirs_mb):.0f}", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("below target: " + (", ".join(failed) if failed else "none"))


main()
