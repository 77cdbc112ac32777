# Test-only client: computes a WaveNet .nam file's output on a test signal with torch.nn.functional
# alone, reading the file the way NAM's format describes it (config + weights in the plugin's
# order), with none of wavenet's code. Prints the output samples, one per line.
# usage: nam_forward.py MODEL.nam SAMPLES (the input is sin(0.01 n) * 0.5 + 0.1 sin(0.37 n))
import json
import sys

import torch
import torch.nn.functional as F

model = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
t = torch.arange(n, dtype=torch.float64)
x = (0.5 * torch.sin(0.01 * t) + 0.1 * torch.sin(0.37 * t)).float().view(1, 1, -1)
w = torch.tensor(model["weights"], dtype=torch.float32)
pos = 0


def take(*shape):
    global pos
    count = 1
    for s in shape:
        count *= s
    out = w[pos:pos + count].view(*shape)
    pos += count
    return out


act = {"Tanh": torch.tanh, "ReLU": torch.relu, "Sigmoid": torch.sigmoid, "Hardtanh": F.hardtanh}
cfg = model["config"]
rf = 1 + sum((a["kernel_size"] - 1) * sum(a["dilations"]) for a in cfg["layers"])
x = torch.cat([torch.zeros(1, 1, rf - 1), x], dim=2)  # output aligned with the input
y, head = x, None
for a in cfg["layers"]:
    c = a["channels"]
    out_len = y.shape[2] - (a["kernel_size"] - 1) * sum(a["dilations"])
    z = F.conv1d(y, take(c, a["input_size"], 1))
    total = None if head is None else head[:, :, -out_len:]
    for d in a["dilations"]:
        mid = 2 * c if a["gated"] else c
        conv_w, conv_b = take(mid, c, a["kernel_size"]), take(mid)
        mixer = take(mid, a["condition_size"], 1)
        one_w, one_b = take(c, c, 1), take(c)
        zc = F.conv1d(z, conv_w, conv_b, dilation=d)
        z1 = zc + F.conv1d(x, mixer)[:, :, -zc.shape[2]:]
        post = act[a["activation"]](z1) if not a["gated"] else act[a["activation"]](z1[:, :c]) * torch.sigmoid(z1[:, c:])
        z = z[:, :, -post.shape[2]:] + F.conv1d(post, one_w, one_b)
        term = post[:, :, -out_len:]
        total = term if total is None else total + term
    hw = take(a["head_size"], c, 1)
    hb = take(a["head_size"]) if a["head_bias"] else None
    head = F.conv1d(total, hw, hb)
    y = z
scale = w[pos].item()
assert pos + 1 == len(w), (pos, len(w))
for v in (scale * head).flatten().tolist():
    print(repr(v))
