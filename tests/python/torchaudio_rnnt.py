# Test-only client: torchaudio's rnnt_loss (Debian's python3-torchaudio) on random inputs, as a
# reference for wavetrain's rnnt_loss (tests/rnnt_loss_test.cpp). For each case prints
#   B T U C / logits / targets / logit lengths / target lengths / losses (reduction none)
# one line each, space-separated, logits in float32 values.
import torch
import torchaudio.functional as F

torch.manual_seed(5)
for B, T, U, C in [(2, 6, 3, 5), (3, 12, 5, 8), (1, 20, 9, 30)]:
    logits = torch.randn(B, T, U + 1, C)
    targets = torch.randint(1, C, (B, U), dtype=torch.int32)
    logit_lengths = torch.tensor([T - (b % 3) for b in range(B)], dtype=torch.int32)
    target_lengths = torch.tensor([U - (b % 2) for b in range(B)], dtype=torch.int32)
    loss = F.rnnt_loss(logits, targets, logit_lengths, target_lengths, blank=0, reduction="none")
    print(B, T, U, C)
    for t in (logits, targets, logit_lengths, target_lengths, loss):
        print(" ".join(repr(float(v)) for v in t.flatten().tolist()))
