# Baseline for bench/asr.sh: one training step of the `tiny` transducer written in Python PyTorch
# from the same design as experiments/asr/ (Conformer with rotary positions and conv2d subsampling,
# icefall's stateless predictor, joiner), icefall's pruned RNN-T loss from k2's fast_rnnt (the
# smoothed simple loss with its gradients, prune ranges, pruned joiner, pruned loss), Adam; batch
# 16 utterances of ~3 s. Without fast_rnnt it falls back to torchaudio's full rnnt_loss and says so.
# Adam is PyTorch's fused CPU implementation (fused=True) where the installed torch has it.
# PARTS > 1 is the equivalent of wavetrain's trainer.cpu_batch_parts: the batch cut into PARTS runs
# of consecutive items, each part's forward and backward on its own Python thread at once (PyTorch
# releases the GIL inside its operators), one intra-op thread each, the gradients summed into the
# shared parameters (autograd's accumulation is thread-safe), then one Adam step.
# Prints "median_ms parameters peak_rss_mb loss_name".
# usage: asr_step_baseline.py [THREADS] [REPEATS] [VOCAB] [PARTS]
import concurrent.futures
import math
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 10
vocab = int(sys.argv[3]) if len(sys.argv) > 3 else 40
parts = int(sys.argv[4]) if len(sys.argv) > 4 else 1
torch.set_num_threads(1 if parts > 1 else threads)
torch.set_flush_denormal(True)
torch.manual_seed(0)

D, FF, LAYERS, HEADS, KERNEL, CH, PRED, JOIN, VOCAB, CONTEXT = 128, 512, 4, 4, 15, 32, 128, 192, vocab, 2


def rotary(x):
    t, half = x.shape[2], x.shape[3] // 2
    inv = 10000.0 ** (-torch.arange(half, dtype=torch.float32) / half)
    ang = torch.outer(torch.arange(t, dtype=torch.float32), inv)
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * ang.cos() - b * ang.sin(), a * ang.sin() + b * ang.cos()], -1)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        ln = lambda: nn.LayerNorm(D)
        self.ff1_norm, self.attn_norm, self.conv_norm, self.conv_inner_norm, self.ff2_norm, self.final_norm = (ln() for _ in range(6))
        self.ff1_in, self.ff1_out = nn.Linear(D, FF), nn.Linear(FF, D)
        self.ff2_in, self.ff2_out = nn.Linear(D, FF), nn.Linear(FF, D)
        self.qkv, self.attn_out = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.pw_in, self.pw_out = nn.Linear(D, 2 * D), nn.Linear(D, D)
        self.dw = nn.Conv1d(D, D, KERNEL, padding=KERNEL // 2, groups=D)
        self.drop = nn.Dropout(0.1)

    def ff(self, norm, i, o, x):
        return self.drop(o(self.drop(F.silu(i(norm(x))))))

    def forward(self, x, valid):
        b, t, _ = x.shape
        x = x + 0.5 * self.ff(self.ff1_norm, self.ff1_in, self.ff1_out, x)
        q, k, v = self.qkv(self.attn_norm(x)).view(b, t, 3, HEADS, D // HEADS).permute(2, 0, 3, 1, 4)
        s = rotary(q) @ rotary(k).transpose(2, 3) / math.sqrt(D // HEADS)
        s = s.masked_fill(~valid.view(b, 1, 1, t), float("-inf"))
        x = x + self.drop(self.attn_out((self.drop(s.softmax(-1)) @ v).transpose(1, 2).reshape(b, t, D)))
        y = F.glu(self.pw_in(self.conv_norm(x)), -1).masked_fill(~valid.unsqueeze(-1), 0)
        y = self.dw(y.transpose(1, 2)).transpose(1, 2)
        x = x + self.drop(self.pw_out(F.silu(self.conv_inner_norm(y))))
        x = x + 0.5 * self.ff(self.ff2_norm, self.ff2_in, self.ff2_out, x)
        return self.final_norm(x)


class Transducer(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, CH, 3, 2), nn.Conv2d(CH, CH, 3, 2)
        self.sub_out = nn.Linear(CH * 19, D)
        self.drop = nn.Dropout(0.1)
        self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.embedding = nn.Embedding(VOCAB, PRED, padding_idx=0)
        self.pred_conv = nn.Conv1d(PRED, PRED, CONTEXT, groups=PRED // 4, bias=False)
        self.enc_proj, self.pred_proj, self.join_out = nn.Linear(D, JOIN), nn.Linear(PRED, JOIN), nn.Linear(JOIN, VOCAB)
        self.simple_am, self.simple_lm = nn.Linear(D, VOCAB), nn.Linear(PRED, VOCAB)

    def encode(self, x, lengths):
        x = F.relu(self.conv2(F.relu(self.conv1(x.unsqueeze(1)))))
        b, c, t, f = x.shape
        x = self.drop(self.sub_out(x.permute(0, 2, 1, 3).reshape(b, t, c * f)))
        out_len = ((lengths - 1) // 2 - 1) // 2
        valid = torch.arange(t).unsqueeze(0) < out_len.unsqueeze(1)
        for blk in self.blocks:
            x = blk(x, valid)
        return x, out_len

    def predict(self, y):
        e = self.embedding(y).transpose(1, 2)
        return F.relu(self.pred_conv(F.pad(e, (CONTEXT - 1, 0))).transpose(1, 2))


try:
    import fast_rnnt
    loss_name = "fast_rnnt pruned"
except ImportError:
    fast_rnnt = None
    import torchaudio
    loss_name = "torchaudio full rnnt_loss (fast_rnnt not installed)"


def loss_fn(model, feats, lengths, tokens, counts):
    enc, frames = model.encode(feats, lengths)
    b = tokens.shape[0]
    pred = model.predict(torch.cat([torch.zeros(b, 1, dtype=torch.long), tokens], 1))
    boundary = torch.stack([torch.zeros_like(frames), torch.zeros_like(frames), counts, frames], 1)
    if fast_rnnt is not None:
        simple, (px_grad, py_grad) = fast_rnnt.rnnt_loss_smoothed(
            lm=model.simple_lm(pred), am=model.simple_am(enc), symbols=tokens, termination_symbol=0,
            lm_only_scale=0.25, am_only_scale=0.0, boundary=boundary, reduction="sum", return_grad=True)
        ranges = fast_rnnt.get_rnnt_prune_ranges(px_grad, py_grad, boundary, 5)
        am_p, lm_p = fast_rnnt.do_rnnt_pruning(model.enc_proj(enc), model.pred_proj(pred), ranges)
        logits = model.join_out(torch.tanh(am_p + lm_p))
        pruned = fast_rnnt.rnnt_loss_pruned(logits, tokens, ranges, 0, boundary, reduction="sum")
        return (0.5 * simple + pruned) / frames.sum()
    logits = model.join_out(torch.tanh(model.enc_proj(enc).unsqueeze(2) + model.pred_proj(pred).unsqueeze(1)))
    return torchaudio.functional.rnnt_loss(logits, tokens.int(), frames.int(), counts.int(), blank=0, reduction="sum") / frames.sum()


model = Transducer()
params = sum(p.numel() for p in model.parameters())
try:
    adam = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    loss_name += ", fused Adam"
except (TypeError, RuntimeError):  # Debian's PyTorch 1.13 has no fused CPU Adam
    adam = torch.optim.Adam(model.parameters(), lr=1e-3)
# The batch of bench/asr_step_bench.cpp: 16 utterances of 2.55-3.0 s (255-300 frames), 12-24
# tokens, the same formulas.
B = 16
lengths = torch.tensor([300 - 3 * i for i in range(B)])
counts = torch.tensor([12 + (7 * i) % 13 for i in range(B)])
tokens = torch.tensor([[3 + (31 * i + 17 * j) % (VOCAB - 3) for j in range(int(counts.max()))] for i in range(B)])
feats = torch.randn(B, 300, 80, generator=torch.Generator().manual_seed(1))
# The parts as wavetrain cuts a batch: consecutive items, sizes differing by at most one.
cuts = [torch.arange(B)[k * B // parts:(k + 1) * B // parts] for k in range(parts)]
pool = concurrent.futures.ThreadPoolExecutor(parts) if parts > 1 else None


def part_step(index):
    # The mean of the parts' losses, as the trainer's train_parts scales each part by 1 / parts.
    loss = loss_fn(model, feats[index], lengths[index], tokens[index], counts[index]) / parts
    loss.backward()
    return loss.detach()


ms = []
for i in range(repeats + 2):
    t0 = time.perf_counter()
    adam.zero_grad()
    if parts > 1:
        futures = [pool.submit(part_step, p) for p in cuts]
        loss = sum(f.result() for f in futures)
    else:
        loss = loss_fn(model, feats, lengths, tokens, counts)
        loss.backward()
    adam.step()
    if i >= 2:
        ms.append(1000 * (time.perf_counter() - t0))
ms.sort()
print(f"{ms[len(ms) // 2]:.1f} {params} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} {loss_name}")
