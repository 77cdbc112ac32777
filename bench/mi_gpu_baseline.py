# Baseline for scripts/gpu-check: the mutual-information recursion (regular, no boundary) and its
# gradients on a GPU in Python PyTorch, at the size wavetrain_bench_gpu times (16 x 100 symbols x
# 400 frames). The recursion advances one anti-diagonal (s + t = d) per step with tensor ops, and
# autograd gives the gradients (k2 returns them as occupation probabilities; autograd of the score
# is the same quantity). When fast_rnnt imports, its CUDA kernel is timed too.
#
# usage: mi_gpu_baseline.py [REPEATS] [DEVICE]
# prints "python_ms fast_rnnt_ms" (fast_rnnt_ms is "-" when fast_rnnt is not installed)
import sys
import time

import torch

repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 20
device = torch.device(sys.argv[2] if len(sys.argv) > 2 else "cuda")
B, S, T = 16, 100, 400


def recursion(px, py):
    """Scores [B] of p[s][t] = logaddexp(p[s-1][t] + px[s-1][t], p[s][t-1] + py[s][t-1])."""
    ninf = torch.tensor(float("-inf"), device=px.device, dtype=px.dtype)
    s_index = torch.arange(S + 1, device=px.device)
    # Diagonal d holds p[s][d - s] for s = 0..S (-inf where t = d - s is outside 0..T).
    previous = torch.where(s_index == 0, torch.zeros((), device=px.device, dtype=px.dtype), ninf).expand(B, S + 1)
    for d in range(1, S + T + 1):
        t = d - s_index
        inside = (t >= 0) & (t <= T)
        # From p[s-1][t] (previous diagonal, index s-1) through px[s-1][t].
        t_px = t.clamp(0, T)[1:]
        from_above = previous[:, :-1] + px[:, torch.arange(S, device=px.device), t_px]
        from_above = torch.cat([ninf.expand(B, 1), from_above], dim=1)
        from_above = torch.where((t >= 0)[None, :] & (s_index >= 1)[None, :], from_above, ninf)
        # From p[s][t-1] (previous diagonal, index s) through py[s][t-1].
        t_py = (t - 1).clamp(0, T - 1)
        from_left = previous + py[:, s_index, t_py]
        from_left = torch.where((t >= 1)[None, :], from_left, ninf)
        current = torch.logaddexp(from_above, from_left)
        previous = torch.where(inside[None, :], current, ninf)
    return previous[:, S]


sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def median_ms(step):
    ms = []
    for i in range(repeats + 3):
        sync()
        t0 = time.perf_counter()
        step()
        sync()
        if i >= 3:
            ms.append((time.perf_counter() - t0) * 1000)
    ms.sort()
    return ms[len(ms) // 2]


torch.manual_seed(0)
px = torch.randn(B, S, T + 1, device=device, requires_grad=True)
py = torch.randn(B, S + 1, T, device=device, requires_grad=True)


def python_step():
    scores = recursion(px, py)
    torch.autograd.grad(scores.sum(), [px, py])


python_ms = median_ms(python_step)
try:
    import fast_rnnt

    def fast_rnnt_step():
        fast_rnnt.mutual_information_recursion(px, py, return_grad=True)

    fast_ms = "%.2f" % median_ms(fast_rnnt_step)
except ImportError:
    fast_ms = "-"
print("%.2f %s" % (python_ms, fast_ms))
