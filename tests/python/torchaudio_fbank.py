# Test-only client: torchaudio.compliance.kaldi.fbank (Debian's python3-torchaudio) on random
# waveforms with random option combinations, as a reference for wavetrain's fbank
# (tests/fbank_test.cpp). One JSON object per line: {"options": {...}, "waveform": [...],
# "shape": [frames, features], "features": [...]}.
import json
import random

import torch
import torchaudio.compliance.kaldi as kaldi

rng = random.Random(7)
torch.manual_seed(7)
for case in range(12):
    sample_frequency = rng.choice([8000.0, 16000.0, 22050.0])
    options = {
        "sample_frequency": sample_frequency,
        "dither": 0.0,
        "num_mel_bins": rng.choice([23, 40, 64, 80]),
        "window_type": rng.choice(["povey", "hanning", "hamming", "rectangular", "blackman"]),
        "snip_edges": rng.random() < 0.5,
        "frame_length": rng.choice([20.0, 25.0, 32.0]),
        "frame_shift": rng.choice([8.0, 10.0, 12.5]),
        "round_to_power_of_two": rng.random() < 0.7,
        "low_freq": rng.choice([0.0, 20.0, 100.0]),
        "high_freq": rng.choice([0.0, -400.0, sample_frequency / 2 - 1000.0]),
        "preemphasis_coefficient": rng.choice([0.0, 0.97, 0.5]),
        "remove_dc_offset": rng.random() < 0.8,
        "use_energy": rng.random() < 0.5,
        "raw_energy": rng.random() < 0.5,
        "htk_compat": rng.random() < 0.5,
        "energy_floor": rng.choice([0.0, 1.0, 2.0]),
        "use_power": rng.random() < 0.7,
        "use_log_fbank": rng.random() < 0.8,
        "subtract_mean": rng.random() < 0.3,
        "blackman_coeff": 0.42,
    }
    if not options["round_to_power_of_two"]:
        # the padded window must be even: an even number of samples per frame
        n = int(sample_frequency * options["frame_length"] * 0.001)
        if n % 2:
            options["round_to_power_of_two"] = True
    length = rng.randint(3000, 12000)
    waveform = (torch.randn(1, length) * rng.choice([1.0, 3000.0])).float()
    features = kaldi.fbank(waveform, **options)
    print(json.dumps({"options": options, "waveform": waveform.flatten().tolist(),
                      "shape": list(features.shape), "features": features.flatten().tolist()}))
