# Baseline for bench/fbank.sh: torchaudio's kaldi.fbank, 80 bins, on 10 s of 16 kHz audio
# (Debian's python3-torchaudio; test-only). Prints the median time in ms.
import sys
import time

import torch
import torchaudio.compliance.kaldi as kaldi

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 20
torch.set_num_threads(threads)
torch.manual_seed(0)
waveform = torch.randn(1, 160000) * 3000
ms = []
for i in range(repeats + 3):
    t0 = time.perf_counter()
    kaldi.fbank(waveform, num_mel_bins=80)
    if i >= 3:
        ms.append((time.perf_counter() - t0) * 1000)
ms.sort()
print("%.3f" % ms[len(ms) // 2])
