# Baseline for bench/amp.sh: one training step of a NAM WaveNet written in Python PyTorch from its
# published design (layer arrays: rechannel, dilated conv + input mixer, activation, 1x1 residual,
# summed head, head rechannel, head scale), NAM's loss (MSE + 2e-4 x MRSTFT with auraloss's
# defaults on 0.85 pre-emphasised signals) and Adam lr 0.004, batch 16 x 8192.
# Prints the median step time in ms.
# usage: amp_step_baseline.py [THREADS] [REPEATS] [DEVICE] [PRECISION] [MODEL]
#   DEVICE cpu by default (cuda for scripts/gpu-check); PRECISION 32 (default) or 16-mixed: fp16
#   autocast around the forward pass, the loss in fp32, and torch.amp's GradScaler, as wavetrain's
#   trainer.precision=16-mixed does. MODEL: standard (default; NAM's standard preset), a2 (NAM's
#   A2: 8 channels, 23 layers of kernel 6 or 15, LeakyReLU 0.01, a 16-tap head, head scale 0.01) or
#   blended_silu (the standard preset with blended SiLU layers, as model.activation=SiLU
#   model.gating=blended: each conv gives 2C channels a1, a2; p = s silu(a1) + (1 - s) a1 with
#   s = sigmoid(a2)).
import contextlib
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
model_name = sys.argv[5] if len(sys.argv) > 5 else "standard"
if model_name not in ("standard", "a2", "blended_silu"):
    sys.exit("amp_step_baseline.py: MODEL must be standard, a2 or blended_silu, got %r" % model_name)
torch.set_num_threads(threads)
torch.set_flush_denormal(True)
torch.manual_seed(0)


class Array(nn.Module):
    # layers: (kernel size, dilation) per layer; the head sum runs over the layers' last sum_len
    # outputs, and the head (head_kernel taps) leaves sum_len - head_kernel + 1 of them, which is
    # also what the next array takes of z.
    def __init__(self, cin, ch, head, layers, head_bias, activation=torch.tanh, head_kernel=1, blended=False):
        super().__init__()
        mid = 2 * ch if blended else ch
        self.rechannel = nn.Conv1d(cin, ch, 1, bias=False)
        self.convs = nn.ModuleList([nn.Conv1d(ch, mid, k, dilation=d) for k, d in layers])
        self.mixers = nn.ModuleList([nn.Conv1d(1, mid, 1, bias=False) for _ in layers])
        self.ones = nn.ModuleList([nn.Conv1d(ch, ch, 1) for _ in layers])
        self.head = nn.Conv1d(ch, head, head_kernel, bias=head_bias)
        self.activation = activation
        self.blended = blended
        self.back = sum((k - 1) * d for k, d in layers)

    def forward(self, y, x, head):
        sum_len = y.shape[2] - self.back
        z = self.rechannel(y)
        total = None if head is None else head[:, :, -sum_len:]
        for conv, mixer, one in zip(self.convs, self.mixers, self.ones):
            zc = conv(z)
            a = zc + mixer(x)[:, :, -zc.shape[2]:]
            if self.blended:
                a1, s = a[:, : a.shape[1] // 2], torch.sigmoid(a[:, a.shape[1] // 2 :])
                post = s * self.activation(a1) + (1 - s) * a1
            else:
                post = self.activation(a)
            z = z[:, :, -post.shape[2]:] + one(post)
            term = post[:, :, -sum_len:]
            total = term if total is None else total + term
        h = self.head(total)
        return h, z[:, :, -h.shape[2]:]


class WaveNet(nn.Module):
    def __init__(self, name):
        super().__init__()
        if name in ("standard", "blended_silu"):
            d = [(3, 2 ** i) for i in range(10)]
            f, blended = (F.silu, True) if name == "blended_silu" else (torch.tanh, False)
            self.arrays = nn.ModuleList([Array(1, 16, 8, d, False, f, 1, blended), Array(16, 8, 1, d, True, f, 1, blended)])
            self.scale = 0.02
        else:
            dilations = [1, 3, 7, 17, 41, 101, 239, 1, 3, 7, 17, 41, 101, 239, 1, 13, 1, 3, 7, 17, 41, 101, 239]
            layers = [(15 if i in (14, 15) else 6, d) for i, d in enumerate(dilations)]
            leaky = lambda v: F.leaky_relu(v, 0.01)
            self.arrays = nn.ModuleList([Array(1, 8, 1, layers, True, leaky, 16)])
            self.scale = 0.01
        self.rf = 1 + sum(a.back + a.head.kernel_size[0] - 1 for a in self.arrays)

    def forward(self, x):
        y, head = x, None
        for a in self.arrays:
            head, y = a(y, x, head)
        return self.scale * head


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


model = WaveNet(model_name).to(device)
adam = torch.optim.Adam(model.parameters(), lr=0.004)
x = (torch.randn(16, 1, 8192 + model.rf - 1) * 0.3).to(device)
y = torch.tanh(torch.randn(16, 1, 8192)).to(device)
scaler = torch.amp.GradScaler(device.type) if mixed else None
sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
ms = []
for i in range(repeats + 2):
    sync()
    t0 = time.perf_counter()
    adam.zero_grad()
    # (torch 1.13's CPU autocast refuses float16 even when disabled: no autocast at all in fp32.)
    with torch.autocast(device.type, dtype=torch.float16) if mixed else contextlib.nullcontext():
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
