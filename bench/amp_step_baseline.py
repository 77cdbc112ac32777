# Baseline for bench/amp.sh: one training step of NAM's standard WaveNet written in Python PyTorch
# from its published design (layer arrays: rechannel, dilated conv + input mixer, tanh, 1x1
# residual, summed head, head rechannel, head scale 0.02), NAM's loss (MSE + 2e-4 x MRSTFT with
# auraloss's defaults on 0.85 pre-emphasised signals) and Adam lr 0.004, batch 16 x 8192.
# Prints the median step time in ms.
# usage: amp_step_baseline.py [THREADS] [REPEATS] [DEVICE] [PRECISION]
#   DEVICE cpu by default (cuda for scripts/gpu-check); PRECISION 32 (default) or 16-mixed: fp16
#   autocast around the forward pass, the loss in fp32, and torch.amp's GradScaler, as wavetrain's
#   trainer.precision=16-mixed does
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 10
device = torch.device(sys.argv[3] if len(sys.argv) > 3 else "cpu")
precision = sys.argv[4] if len(sys.argv) > 4 else "32"
if precision not in ("32", "16-mixed"):
    sys.exit("amp_step_baseline.py: PRECISION must be 32 or 16-mixed, got %r" % precision)
mixed = precision == "16-mixed"
torch.set_num_threads(threads)
torch.set_flush_denormal(True)
torch.manual_seed(0)


class Array(nn.Module):
    def __init__(self, cin, ch, head, dilations, head_bias):
        super().__init__()
        self.rechannel = nn.Conv1d(cin, ch, 1, bias=False)
        self.convs = nn.ModuleList([nn.Conv1d(ch, ch, 3, dilation=d) for d in dilations])
        self.mixers = nn.ModuleList([nn.Conv1d(1, ch, 1, bias=False) for _ in dilations])
        self.ones = nn.ModuleList([nn.Conv1d(ch, ch, 1) for _ in dilations])
        self.head = nn.Conv1d(ch, head, 1, bias=head_bias)
        self.rf = 1 + 2 * sum(dilations)

    def forward(self, y, x, head):
        out_len = y.shape[2] - (self.rf - 1)
        z = self.rechannel(y)
        total = None if head is None else head[:, :, -out_len:]
        for conv, mixer, one in zip(self.convs, self.mixers, self.ones):
            zc = conv(z)
            post = torch.tanh(zc + mixer(x)[:, :, -zc.shape[2]:])
            z = z[:, :, -post.shape[2]:] + one(post)
            term = post[:, :, -out_len:]
            total = term if total is None else total + term
        return self.head(total), z


class WaveNet(nn.Module):
    def __init__(self):
        super().__init__()
        d = [2 ** i for i in range(10)]
        self.arrays = nn.ModuleList([Array(1, 16, 8, d, False), Array(16, 8, 1, d, True)])

    def forward(self, x):
        y, head = x, None
        for a in self.arrays:
            head, y = a(y, x, head)
        return 0.02 * head


WINDOWS = {w: torch.hann_window(w, device=device) for w in (600, 1200, 240)}


def mrstft(p, t):
    total = 0.0
    for fft, hop, win in [(1024, 120, 600), (2048, 240, 1200), (512, 50, 240)]:
        def mag(v):
            s = torch.stft(v.reshape(-1, v.shape[-1]), fft, hop, win, WINDOWS[win], return_complex=True)
            return torch.sqrt(torch.clamp(s.real ** 2 + s.imag ** 2, min=1e-8))
        x, y = mag(p), mag(t)
        total = total + torch.norm(y - x, p="fro") / torch.norm(y, p="fro") + F.l1_loss(torch.log(x), torch.log(y))
    return total / 3


model = WaveNet().to(device)
adam = torch.optim.Adam(model.parameters(), lr=0.004)
x = (torch.randn(16, 1, 8192 + 4092) * 0.3).to(device)
y = torch.tanh(torch.randn(16, 1, 8192)).to(device)
scaler = torch.amp.GradScaler(device.type) if mixed else None
sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
ms = []
for i in range(repeats + 2):
    sync()
    t0 = time.perf_counter()
    adam.zero_grad()
    with torch.autocast(device.type, dtype=torch.float16, enabled=mixed):
        p = model(x)
    p = p.float()
    pe = lambda v: v[..., 1:] - 0.85 * v[..., :-1]
    loss = F.mse_loss(p, y) + 2e-4 * mrstft(pe(p), pe(y))
    if scaler is None:
        loss.backward()
        adam.step()
    else:
        scaler.scale(loss).backward()
        scaler.step(adam)
        scaler.update()
    sync()
    if i >= 2:
        ms.append((time.perf_counter() - t0) * 1000)
ms.sort()
print("%.1f" % ms[len(ms) // 2])
