# Writes the seed corpora of the audio, store, nam and config fuzz targets (docs/fuzzing.md) into
# tests/fuzz/seeds/<target>/. Test-only: Debian's python3 with python3-h5py and numpy, and sox.
# The seeds are small on purpose (libFuzzer mutates small inputs faster); re-running this script
# writes the same files, except the HDF5 ones (HDF5 records no times here, so those too).
import json
import os
import subprocess
import sys

import h5py
import numpy as np

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds")


def out(target, name):
    d = os.path.join(root, target)
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, name)


# ---- audio: the formats and sample types users bring, a few hundred samples each ---------------
for name, args in [("pcm16_mono_8k.wav", ["-r", "8000", "-c", "1", "-b", "16"]),
                   ("pcm24_stereo_48k.wav", ["-r", "48000", "-c", "2", "-b", "24"]),
                   ("float32_mono_44k1.wav", ["-r", "44100", "-c", "1", "-e", "floating-point", "-b", "32"]),
                   ("pcm8_mono_11k.wav", ["-r", "11025", "-c", "1", "-b", "8", "-e", "unsigned-integer"]),
                   ("mono_16k.flac", ["-r", "16000", "-c", "1", "-b", "16"]),
                   ("mono_22k.aiff", ["-r", "22050", "-c", "1", "-b", "16"])]:
    subprocess.run(["sox", "-n"] + args + [out("audio", name), "synth", "0.006", "sine", "440", "vol", "0.5"], check=True)

# ---- store: the schema of docs/data-format.md, as wavetrain writes it (version-2 headers with
# checksums, Fletcher-32 chunks) and as h5py writes it by default (version-1 headers) -------------
def store(path, libver, fletcher32):
    with h5py.File(path, "w", libver=libver, track_order=False) as f:
        f.attrs["format"] = "wavetrain-dataset"
        f.attrs["format_version"] = np.int64(1)
        f.attrs["command"] = "make_seeds.py"
        f.attrs["sample_rate"] = np.float64(48000)
        f.attrs["complete"] = np.int64(1)
        items = [np.arange(n, dtype=np.float32).reshape(-1, 1) for n in (3, 0, 5)]
        for split in ("train", "valid"):
            g = f.create_group(split)
            g.attrs["items"] = np.int64(len(items))
            for field, values in (("x", items), ("id", [np.frombuffer(b"item%d" % i, np.uint8) for i in range(3)])):
                h = g.create_group(field)
                data = np.concatenate(values)
                h.create_dataset("data", data=data, chunks=(4,) + data.shape[1:], maxshape=(None,) + data.shape[1:],
                                 shuffle=True, compression="gzip", compression_opts=4, fletcher32=fletcher32)
                h.create_dataset("offsets", data=np.cumsum([0] + [len(v) for v in values]).astype(np.int64))


store(out("store", "v2_checksums.h5"), ("v108", "latest"), True)
store(out("store", "v1_default.h5"), "earliest", False)

# ---- nam: each architecture with random weights of the right count ------------------------------
rng = np.random.default_rng(0)


def wavenet_weights(layers):
    n = 1
    for a in layers:
        mid = 2 * a["channels"] if a["gated"] else a["channels"]
        n += a["input_size"] * a["channels"]
        n += (a["channels"] * mid * a["kernel_size"] + mid + a["condition_size"] * mid + a["channels"] ** 2 + a["channels"]) * len(a["dilations"])
        n += a["channels"] * a["head_size"] + (a["head_size"] if a["head_bias"] else 0)
    return n


def array(inp, channels, head, dilations, head_bias, gated=False, activation="Tanh", kernel=3):
    return {"input_size": inp, "condition_size": 1, "head_size": head, "channels": channels, "kernel_size": kernel,
            "dilations": dilations, "activation": activation, "gated": gated, "head_bias": head_bias}


def nam(name, architecture, config, count):
    weights = [round(float(w), 4) for w in rng.normal(0, 0.3, count)]
    with open(out("nam", name), "w") as f:
        json.dump({"version": "0.5.4", "architecture": architecture, "config": config, "weights": weights,
                   "sample_rate": 48000, "metadata": {"name": name, "loudness": -10.0}}, f)


small = [array(1, 4, 2, [1, 2, 4], False), array(4, 2, 1, [8, 16], True)]
nam("wavenet_small.nam", "WaveNet", {"layers": small, "head": None, "head_scale": 0.02}, wavenet_weights(small))
gated = [array(1, 3, 1, [1, 3], True, gated=True, activation="ReLU", kernel=2)]
nam("wavenet_gated.nam", "WaveNet", {"layers": gated, "head": None, "head_scale": 0.5}, wavenet_weights(gated))
h = 4
nam("lstm_2x4.nam", "LSTM", {"input_size": 1, "hidden_size": h, "num_layers": 2},
    (h + 1) + (4 * h * (1 + h) + 6 * h) + (4 * h * (2 * h) + 6 * h))

# The NAM core's own examples of the 0.6/0.7 options (FiLM, gating modes, activations, a
# condition_dsp, slimmable arrays), weights rounded to 3 decimals to fit the fuzzer's max_len.
def rounded(j):
    if isinstance(j, dict):
        return {k: ([round(float(w), 3) for w in v] if k == "weights" else rounded(v)) for k, v in j.items()}
    if isinstance(j, list):
        return [rounded(v) for v in j]
    return j


examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "reference", "nam", "models")
for name in ["wavenet_a2_max", "wavenet_condition_dsp", "slimmable_wavenet"]:
    with open(os.path.join(examples, name + ".nam")) as f:
        model = rounded(json.load(f))
    with open(out("nam", "core_" + name + ".nam"), "w") as f:
        json.dump(model, f, separators=(",", ":"))

# ---- config: config.yaml NUL group/a.yaml NUL group/b.yaml NUL override NUL override ... --------
configs = {
    "basic": ["defaults:\n  - group: a\n  - _self_\nx: 1\ny: ${x}\nz: '${oc.env:HOME}/${now:%Y}'\n",
              "lr: 0.1\nlayers: [1, 2, {k: v}]\n", "lr: 0.2\n", "group=b", "x=5", "+w=[1,2]", "++y.q=3", "~z"],
    "packages": ["defaults:\n  - group@sub: a\n  - override group@sub: b\n  - _self_\nsub:\n  keep: true\n",
                 "# @package _global_\nq: ${sub.lr}\n", "lr: 1e-3\nnote: \"quoted: \\u00e9\"\n", "sub.lr=2", "'s=a b'"],
    "sweep": ["defaults:\n  - group: a\nn: 0\nm: [a, b]\n", "v: !!str 12\n", "v: null\n",
              "n=1,2,3", "group=a,b", "m=[c,d]", "+p=range(0,4)", "+r={a:1,b:[2,3]}"],
    "anchors": ["base: &b {u: 1, v: [x, y]}\nderived:\n  <<: *b\n  v: z\nmissing: ???\n", "", "", "missing=3"],
}
for name, parts in configs.items():
    with open(out("config", name + ".bin"), "wb") as f:
        f.write(b"\0".join(p.encode() for p in parts))
print("seeds written under", root)
