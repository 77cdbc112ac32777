# Test-only client: recomputes the version-dependent parts of tests/data/reference/fbank_vectors.json
# (torchaudio 0.13.1 on torch 1.13) with the torchaudio installed beside this Python, for builds on
# another LibTorch: float32 log and cos round differently from version to version, and torchaudio
# 2.11's own fbank differs from the stored values by up to 2.8e-4 (log-mel) and its mel banks by
# 1.1e-5. Prints one JSON object: {"torch": version, "cases": {name: {"int16"|"unit": {"shape",
# "data"}}}, "mel_banks_NNx256": {"shape", "data"}, "mel_center_freqs_NN": [...]} for NN = 23, 80, 128.
#
# usage: torchaudio_fbank_reference.py FBANK_VECTORS.json
import json
import sys

import torch
import torchaudio.compliance.kaldi as kaldi

stored = json.load(open(sys.argv[1]))
waveform = torch.tensor(stored["waveform_int16"], dtype=torch.float32)
out = {"torch": torch.__version__, "cases": {}}
for name, case in stored["cases"].items():
    out["cases"][name] = {}
    for scaling in ("int16", "unit"):
        x = waveform if scaling == "int16" else waveform / 32768.0
        features = kaldi.fbank(x[None], **case["kwargs"])
        out["cases"][name][scaling] = {"shape": list(features.shape), "data": features.flatten().tolist()}
# The mel banks of torchaudio's defaults (a 400-sample frame padded to 512, 16 kHz, 20 Hz to Nyquist,
# no VTLN warp), as the stored ones were made.
for bins in (23, 80, 128):
    banks, centres = kaldi.get_mel_banks(bins, 512, 16000.0, 20.0, 0.0, 100.0, -500.0, 1.0)
    out["mel_banks_%dx256" % bins] = {"shape": list(banks.shape), "data": banks.flatten().tolist()}
    out["mel_center_freqs_%d" % bins] = centres.flatten().tolist()  # in Hz
print(json.dumps(out))
