# Baseline for bench/mrstft.sh: the multi-resolution STFT loss written in Python PyTorch from its
# published definition (auraloss's defaults: fft 1024/2048/512, hop 120/240/50, window 600/1200/240,
# Hann; spectral convergence + log-magnitude L1, mean over resolutions), the way a user writes it.
# Prints "batch samples median_ms" lines like the C++ benchmark.
import sys
import time

import torch

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 10
torch.set_num_threads(threads)
torch.manual_seed(0)

RESOLUTIONS = [(1024, 120, 600), (2048, 240, 1200), (512, 50, 240)]
WINDOWS = {w: torch.hann_window(w) for _, _, w in RESOLUTIONS}


def stft_mag(x, fft, hop, win):
    s = torch.stft(x.reshape(-1, x.shape[-1]), fft, hop, win, WINDOWS[win], return_complex=True)
    return torch.sqrt(torch.clamp(s.real ** 2 + s.imag ** 2, min=1e-8))


def mrstft(pred, target):
    total = 0.0
    for fft, hop, win in RESOLUTIONS:
        x, y = stft_mag(pred, fft, hop, win), stft_mag(target, fft, hop, win)
        sc = torch.norm(y - x, p="fro") / torch.norm(y, p="fro")
        log_mag = torch.nn.functional.l1_loss(torch.log(x), torch.log(y))
        total = total + sc + log_mag
    return total / len(RESOLUTIONS)


for batch, samples in [(16, 8192), (4, 65536)]:
    target = torch.randn(batch, 1, samples)
    pred = (target + 0.1 * torch.randn(batch, 1, samples)).requires_grad_(True)
    ms = []
    for i in range(repeats + 2):
        t0 = time.perf_counter()
        mrstft(pred, target).backward()
        pred.grad.zero_()
        if i >= 2:
            ms.append((time.perf_counter() - t0) * 1000)
    ms.sort()
    print(batch, samples, "%.3f" % ms[len(ms) // 2])
