# Test-only client: torchaudio.compliance.kaldi's VTLN-warped mel banks and fbank (Debian's
# python3-torchaudio) as a reference for wavetrain's warp (tests/fbank_test.cpp). One JSON object
# per line: {"options": {...}, "banks_shape": [...], "banks": [...], "waveform": [...],
# "shape": [frames, features], "features": [...]}. The warp factors span the range training draws
# from and beyond, on both sides of 1; the cut-offs and the band vary so that every piece of the
# warp (below l, between l and h, above h) holds some triangle corner.
import json
import random

import torch
import torchaudio.compliance.kaldi as kaldi

rng = random.Random(11)
torch.manual_seed(11)
warps = [0.8, 0.9, 0.95, 1.05, 1.1, 1.25, 0.87, 1.13]
for case, warp in enumerate(warps):
    sample_frequency = rng.choice([8000.0, 16000.0, 22050.0])
    options = {
        "sample_frequency": sample_frequency,
        "dither": 0.0,
        "num_mel_bins": rng.choice([23, 40, 80]),
        "low_freq": rng.choice([0.0, 20.0, 60.0]),
        "high_freq": rng.choice([0.0, -400.0]),
        "vtln_low": rng.choice([100.0, 250.0]),
        "vtln_high": rng.choice([-500.0, -1000.0, sample_frequency / 2 - 1500.0]),
        "vtln_warp": warp,
        "snip_edges": rng.random() < 0.5,
    }
    nyquist = sample_frequency / 2
    high = options["high_freq"] + nyquist if options["high_freq"] <= 0 else options["high_freq"]
    vtln_high = options["vtln_high"] + nyquist if options["vtln_high"] < 0 else options["vtln_high"]
    padded = 1 << (int(sample_frequency * 0.025) - 1).bit_length()  # 25 ms frames, to a power of two
    banks, _ = kaldi.get_mel_banks(options["num_mel_bins"], padded, sample_frequency, options["low_freq"],
                                   high, options["vtln_low"], vtln_high, warp)
    length = rng.randint(3000, 12000)
    waveform = (torch.randn(1, length) * 3000.0).float()
    features = kaldi.fbank(waveform, **options)
    print(json.dumps({"options": options, "padded": padded, "banks_shape": list(banks.shape),
                      "banks": banks.double().flatten().tolist(), "waveform": waveform.flatten().tolist(),
                      "shape": list(features.shape), "features": features.flatten().tolist()}))
