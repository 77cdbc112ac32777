# One case of bench/losses.sh on the anchor's side, the same work as wavetrain_bench_loss_case:
# k2's fast_rnnt 1.3 for the transducer losses, auraloss 0.4 for the multi-resolution STFT loss and
# torchaudio's kaldi.fbank, all from the project's .venv (PyTorch 2.11). Forward, backward through
# autograd, gradients cleared; subnormals flushed, as on wavetrain's side.
#
# usage: .venv/bin/python bench/loss_anchor.py CASE THREADS REPEATS   prints "median_ms min_ms peak_mb"
import sys
import time


def status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def full_boundary(torch, b, s, t):
    boundary = torch.zeros(b, 4, dtype=torch.int64)
    boundary[:, 2] = s
    boundary[:, 3] = t
    return boundary


def make_case(name, torch):
    B, S, T, C = 8, 50, 300, 500
    if name in ("mi_small", "mi_large"):
        import fast_rnnt

        b, s, t = (32, 100, 500) if name == "mi_large" else (8, 50, 300)
        px = torch.randn(b, s, t + 1).requires_grad_(True)
        py = torch.randn(b, s + 1, t).requires_grad_(True)
        boundary = full_boundary(torch, b, s, t)

        def step():
            fast_rnnt.mutual_information_recursion(px, py, boundary).sum().backward()
            px.grad = None
            py.grad = None

        return step
    if name in ("simple", "pruned", "full"):
        import fast_rnnt

        lm = torch.randn(B, S + 1, C).requires_grad_(True)
        am = torch.randn(B, T, C).requires_grad_(True)
        symbols = torch.randint(1, C, (B, S), dtype=torch.int64)
        boundary = full_boundary(torch, B, S, T)
        if name == "simple":

            def step():
                fast_rnnt.rnnt_loss_simple(lm, am, symbols, 0, boundary, reduction="sum").backward()
                lm.grad = None
                am.grad = None

            return step
        if name == "pruned":

            def step():
                simple, (px_grad, py_grad) = fast_rnnt.rnnt_loss_smoothed(
                    lm, am, symbols, 0, lm_only_scale=0.25, am_only_scale=0.0, boundary=boundary,
                    reduction="sum", return_grad=True)
                ranges = fast_rnnt.get_rnnt_prune_ranges(px_grad, py_grad, boundary, 5)
                am_pruned, lm_pruned = fast_rnnt.do_rnnt_pruning(am, lm, ranges)
                pruned = fast_rnnt.rnnt_loss_pruned(am_pruned + lm_pruned, symbols, ranges, 0, boundary,
                                                    reduction="sum")
                (0.5 * simple + pruned).backward()
                lm.grad = None
                am.grad = None

            return step
        logits = (am.detach().unsqueeze(2) + lm.detach().unsqueeze(1)).requires_grad_(True)

        def step():
            fast_rnnt.rnnt_loss(logits, symbols, 0, boundary, reduction="sum").backward()
            logits.grad = None

        return step
    if name in ("mrstft_16x8192", "mrstft_4x65536"):
        import auraloss

        batch, samples = (4, 65536) if name == "mrstft_4x65536" else (16, 8192)
        target = torch.randn(batch, 1, samples)
        pred = (target + 0.1 * torch.randn(batch, 1, samples)).requires_grad_(True)
        loss = auraloss.freq.MultiResolutionSTFTLoss()

        def step():
            loss(pred, target).backward()
            pred.grad = None

        return step
    if name == "fbank_10s":
        import torchaudio.compliance.kaldi as kaldi

        waveform = torch.randn(1, 160000) * 3000

        def step():
            kaldi.fbank(waveform, num_mel_bins=80)

        return step
    sys.exit(f"loss_anchor.py: unknown case '{name}'")


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: loss_anchor.py CASE THREADS REPEATS")
    name, threads, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    import torch

    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)
    torch.manual_seed(0)
    # The anchors are imported before the baseline is read: their import is not the case's.
    import auraloss  # noqa: F401
    import fast_rnnt  # noqa: F401
    import torchaudio.compliance.kaldi  # noqa: F401

    before = status_kb("VmRSS")
    reset_peak()
    step = make_case(name, torch)
    # At least REPEATS timed runs after 2 warm-ups, and more until they add up to 0.3 s (at most
    # 2000), as on wavetrain's side.
    ms = []
    i = 0
    while i < 2 or (len(ms) < repeats or sum(ms) < 300.0) and len(ms) < 2000:
        t0 = time.perf_counter()
        step()
        if i >= 2:
            ms.append((time.perf_counter() - t0) * 1000)
        i += 1
    ms.sort()
    print("%.3f %.3f %.1f" % (ms[len(ms) // 2], ms[0], (status_kb("VmHWM") - before) / 1024))


main()
