#!/usr/bin/env python3
# Test-only reference: reads a .nam model file and computes its output the way the NAM plugin's C++
# core (NeuralAmpModelerCore, as of mid-2026: .nam format 0.5 to 0.7) does, in float64 with torch.
# Written from our own reading of the format's semantics (summarised in docs/nam-format.md); it
# shares no code with the core or with wavetrain.
#
# usage:
#   nam_core_reference.py MODEL.nam INPUT.wav [OUTPUT.wav] [--slimmable-size X]
#       runs MODEL on INPUT (mono) the way the plugin does after Reset(sample_rate, 64) and writes
#       OUTPUT (float32) when given; prints a short summary.
#   nam_core_reference.py --check-all DIR
#       for every DIR/models/NAME.nam: runs it on DIR/input.wav and compares with
#       DIR/core-output/NAME.wav; prints rms(ours - core) / rms(core) at offset 0 and the integer
#       offset (within +-64 samples) that minimises that error. Exit status 1 when a model is
#       above the tolerance (1e-5) at offset 0.
#
# What "the way the plugin does" means here (see the spec for the details):
#   * Every model starts from its freshly constructed state: convolution histories are zero, an
#     LSTM starts from the hidden / cell state stored in the file.
#   * The plugin then prewarms: it feeds zeros in host-buffer-sized blocks (64 samples) until at
#     least prewarm_samples() samples went through, then the real input follows in the same stream.
#     We reproduce that by running the model once over [zeros(prewarm) ++ input] and dropping the
#     first `prewarm` outputs. For a WaveNet any prewarm >= its receptive field gives the same
#     result; for an LSTM the exact count matters, so it is mirrored exactly (see LSTM_PREWARMS).
import argparse
import glob
import json
import math
import os
import re
import sys

import numpy as np
import soundfile as sf
import torch
import torch.nn.functional as F

DTYPE = torch.float64
HOST_BUFFER = 64          # Reset(48000, 64): the prewarm runs in 64-sample blocks
LOAD_BUFFER = 4096        # the core's default max buffer size when prewarm() runs before any Reset
TOLERANCE = 1e-5

# How many prewarms an LSTM gets before the audio (the README's recipe is get_dsp() then
# Reset(48000, 64)): "reset" = only Reset's prewarm (0.5 s of zeros in 64-sample blocks), as we read
# the current core; "load+reset" = also one at load time in 4096-sample blocks, as older cores did.
# The example LSTM's stored state is already its zero-input fixed point, so core-output/lstm.wav
# cannot tell the two apart (both 1.2e-6; see the spec, section 6).
LSTM_PREWARMS = "reset"


class NamFileError(Exception):
    """A file the core would refuse (the message says why, in our words)."""


# ----------------------------------------------------------------------------------------------
# Version check
# ----------------------------------------------------------------------------------------------

EARLIEST = (0, 5, 0)
LATEST = (0, 7, 0)


def check_version(version):
    """Accepts what the core accepts: strict "A.B.C" digits, >= 0.5.0, major 0 and minor <= 7.
    A patch newer than 0.7.0 (0.7.1, ...) is only partially supported but still loaded."""
    if not isinstance(version, str) or not re.fullmatch(r"\d+\.\d+\.\d+", version):
        raise NamFileError("version %r is not one the core loads (needs A.B.C, 0.5.0 to 0.7.x)" % (version,))
    v = tuple(int(p) for p in version.split("."))
    if v < EARLIEST or v[0] > LATEST[0] or v[1] > LATEST[1]:
        raise NamFileError("version %r is not one the core loads (needs A.B.C, 0.5.0 to 0.7.x)" % (version,))
    return "partial" if v > LATEST else "full"


# ----------------------------------------------------------------------------------------------
# Weights: a flat list consumed front to back
# ----------------------------------------------------------------------------------------------

class WeightReader:
    def __init__(self, values):
        self.values = np.asarray(values, dtype=np.float64)
        self.pos = 0

    def take(self, count):
        if self.pos + count > len(self.values):
            raise NamFileError("weights: the model needs more than the %d provided" % len(self.values))
        out = self.values[self.pos:self.pos + count]
        self.pos += count
        return torch.tensor(out, dtype=DTYPE)

    def finish(self):
        if self.pos != len(self.values):
            raise NamFileError("weights: %d provided, the model used %d" % (len(self.values), self.pos))


class Conv:
    """A causal dilated convolution (kernel 1 = a per-sample linear map, the core's Conv1x1).
    Stored like torch's conv1d: weight (out, in / groups, kernel), which is also the order in
    which the file lists them (group, then out row, then in column, then kernel tap), bias after.
    Tap k of the kernel sees the input (kernel - 1 - k) * dilation samples in the past."""

    def __init__(self, reader, cin, cout, kernel=1, bias=True, dilation=1, groups=1):
        if cin % groups or cout % groups:
            raise NamFileError("channels (%d -> %d) are not divisible by groups %d" % (cin, cout, groups))
        self.cin, self.cout, self.kernel, self.dilation, self.groups = cin, cout, kernel, dilation, groups
        self.weight = reader.take(cout * (cin // groups) * kernel).view(cout, cin // groups, kernel)
        self.bias = reader.take(cout) if bias else None

    def __call__(self, x):
        # x: (cin, T); zero history before the first sample (a freshly reset buffer)
        pad = (self.kernel - 1) * self.dilation
        y = F.conv1d(F.pad(x[None], (pad, 0)), self.weight, self.bias, dilation=self.dilation,
                     groups=self.groups)
        return y[0]

    def sliced(self, cin, cout):
        """The slimmable "slice_channels_uniform" cut: the first cout rows and cin columns."""
        assert self.groups == 1
        out = Conv.__new__(Conv)
        out.cin, out.cout, out.kernel, out.dilation, out.groups = cin, cout, self.kernel, self.dilation, 1
        out.weight = self.weight[:cout, :cin].clone()
        out.bias = None if self.bias is None else self.bias[:cout].clone()
        return out


# ----------------------------------------------------------------------------------------------
# Activations
# ----------------------------------------------------------------------------------------------

ACTIVATION_NAMES = {"Tanh", "Hardtanh", "Fasttanh", "ReLU", "LeakyReLU", "PReLU", "Sigmoid", "SiLU",
                    "Hardswish", "LeakyHardtanh", "LeakyHardTanh", "Softsign"}


def fast_tanh(x):
    # the core's rational approximation of tanh ("Fasttanh")
    ax = x.abs()
    x2 = x * x
    num = x * (2.45550750702956 + 2.45550750702956 * ax + (0.893229853513558 + 0.821226666969744 * ax) * x2)
    den = 2.44506634652299 + (2.44506634652299 + x2) * (x + 0.814642734961073 * x * ax).abs()
    return num / den


def leaky(x, slope):
    return torch.where(x > 0, x, slope * x)


def make_activation(cfg):
    """cfg: a name string or an object {"type": NAME, parameters...}. Returns f(x) for x of shape
    (channels, T); per-channel parameters (PReLU's negative_slopes) follow the rows."""
    if isinstance(cfg, str):
        name, params = cfg, {}
    elif isinstance(cfg, dict):
        name, params = cfg.get("type"), cfg
    else:
        raise NamFileError("an activation must be a name or an object with a type")
    if name not in ACTIVATION_NAMES:
        raise NamFileError("activation %r is not one the core implements" % (name,))
    if name == "Tanh":
        return torch.tanh
    if name == "Fasttanh":
        return fast_tanh
    if name == "Hardtanh":
        return lambda x: x.clamp(-1.0, 1.0)
    if name == "ReLU":
        return torch.relu
    if name == "Sigmoid":
        return torch.sigmoid
    if name == "SiLU":
        return lambda x: x * torch.sigmoid(x)
    if name == "Hardswish":
        return lambda x: x * (x + 3.0).clamp(0.0, 6.0) / 6.0
    if name == "Softsign":
        return lambda x: x / (1.0 + x.abs())
    if name == "LeakyReLU":
        slope = float(params.get("negative_slope", 0.01))
        return lambda x: leaky(x, slope)
    if name == "PReLU":
        if "negative_slope" in params:
            slopes = [float(params["negative_slope"])]
        elif "negative_slopes" in params:
            slopes = [float(s) for s in params["negative_slopes"]]
        else:
            slopes = [0.01]

        def prelu(x):
            if len(slopes) == 1:
                return leaky(x, slopes[0])
            if len(slopes) != x.shape[0]:
                raise NamFileError("PReLU has %d slopes for %d channels" % (len(slopes), x.shape[0]))
            return leaky(x, torch.tensor(slopes, dtype=DTYPE)[:, None])
        return prelu
    # LeakyHardtanh: identity inside [min_val, max_val], slopes min_slope / max_slope outside
    lo = float(params.get("min_val", -1.0))
    hi = float(params.get("max_val", 1.0))
    lo_slope = float(params.get("min_slope", 0.01))
    hi_slope = float(params.get("max_slope", 0.01))

    def leaky_hardtanh(x):
        y = torch.where(x < lo, (x - lo) * lo_slope + lo, x)
        return torch.where(x > hi, (x - hi) * hi_slope + hi, y)
    return leaky_hardtanh


# ----------------------------------------------------------------------------------------------
# FiLM: scale (and shift) computed from the condition by a 1x1 conv with bias
# ----------------------------------------------------------------------------------------------

FILM_KEYS = ["conv_pre_film", "conv_post_film", "input_mixin_pre_film", "input_mixin_post_film",
             "activation_pre_film", "activation_post_film", "layer1x1_post_film", "head1x1_post_film"]


def parse_film(layer_cfg, key):
    """Absent or false: off. An object: active (default true), shift (default true), groups (1).
    Anything else (null, true, a number) makes the core's JSON library throw."""
    if key not in layer_cfg or layer_cfg[key] is False:
        return None
    v = layer_cfg[key]
    if not isinstance(v, dict):
        raise NamFileError("%s has to be an object or false" % key)
    if not v.get("active", True):
        return None
    return {"shift": bool(v.get("shift", True)), "groups": int(v.get("groups", 1))}


class FiLM:
    def __init__(self, reader, cond_dim, dim, shift, groups):
        self.dim, self.shift = dim, shift
        self.conv = Conv(reader, cond_dim, (2 if shift else 1) * dim, 1, True, 1, groups)

    def __call__(self, x, cond):
        ss = self.conv(cond)
        y = x * ss[:self.dim]                 # the first dim rows are the scale
        if self.shift:
            y = y + ss[self.dim:]              # the next dim rows the shift
        return y


# ----------------------------------------------------------------------------------------------
# WaveNet
# ----------------------------------------------------------------------------------------------

class LayerArrayParams:
    """One entry of config["layers"], parsed with the core's defaults and checks."""

    def __init__(self, la, index):
        where = "Layer array %d: " % index
        self.input_size = int(la["input_size"])
        self.condition_size = int(la["condition_size"])
        self.channels = int(la["channels"])
        self.bottleneck = int(la.get("bottleneck", self.channels))
        self.groups_input = int(la.get("groups_input", 1))
        self.groups_input_mixin = int(la.get("groups_input_mixin", 1))
        for key in ("layer1x1", "head1x1"):
            if key in la and not isinstance(la[key], dict):
                raise NamFileError(where + "%s has to be an object" % key)
        l1 = la.get("layer1x1")
        self.layer1x1 = True if l1 is None else bool(l1["active"])
        self.layer1x1_groups = 1 if l1 is None else int(l1["groups"])
        h1 = la.get("head1x1")
        self.head1x1 = False if h1 is None else bool(h1["active"])
        self.head1x1_out = self.channels if h1 is None else int(h1["out_channels"])
        self.head1x1_groups = 1 if h1 is None else int(h1["groups"])

        head = la.get("head")
        if head is not None:
            if not isinstance(head, dict):
                raise NamFileError(where + "head has to be an object")
            self.head_size = int(head["out_channels"])
            self.head_kernel = int(head["kernel_size"])
            self.head_bias = bool(head["bias"])
            # newer cores also read an optional "head_dilation" here (default 1); no example uses it
            hd = head.get("head_dilation")
            self.head_dilation = 1 if hd is None else int(hd)
        elif "head_size" in la:
            self.head_size, self.head_kernel, self.head_bias = int(la["head_size"]), 1, bool(la["head_bias"])
            self.head_dilation = 1
        else:
            raise NamFileError(where + "neither a head object nor head_size/head_bias")
        if self.head_kernel < 1:
            raise NamFileError(where + "head kernel_size below 1")

        self.dilations = [int(d) for d in la["dilations"]]
        n = len(self.dilations)
        if "kernel_size" in la and "kernel_sizes" in la:
            raise NamFileError(where + "give kernel_size or kernel_sizes, not both")
        if "kernel_sizes" in la:
            self.kernel_sizes = [int(k) for k in la["kernel_sizes"]]
            if len(self.kernel_sizes) != n:
                raise NamFileError(where + "kernel_sizes and dilations differ in length")
        elif "kernel_size" in la:
            self.kernel_sizes = [int(la["kernel_size"])] * n
        else:
            raise NamFileError(where + "kernel_size or kernel_sizes is missing")

        act = la["activation"]
        self.activations = list(act) if isinstance(act, list) else [act] * n
        if len(self.activations) != n:
            raise NamFileError(where + "the activation list and dilations differ in length")
        for a in self.activations:
            make_activation(a)  # refuse unknown names at load time, like the core

        # gating: "gating_mode" (string or per-layer list) wins over the legacy "gated" bool
        sec = la.get("secondary_activation", None)
        has_sec = "secondary_activation" in la
        if "gating_mode" in la:
            gm = la["gating_mode"]
            modes = list(gm) if isinstance(gm, list) else [gm] * n
            for m in modes:
                if m not in ("none", "gated", "blended"):
                    raise NamFileError("gating_mode %r is not none, gated or blended" % (m,))
            if len(modes) != n:
                raise NamFileError(where + "the gating_mode list and dilations differ in length")
            if isinstance(gm, list) and isinstance(sec, list) and len(sec) != n:
                raise NamFileError(where + "the secondary_activation list and dilations differ in length")
            secondaries = []
            for i, m in enumerate(modes):
                if m == "none":
                    secondaries.append(None)      # not read at all (may be null / "")
                elif not has_sec:
                    secondaries.append("Sigmoid")
                elif isinstance(sec, list):
                    secondaries.append(sec[i])
                else:
                    secondaries.append(sec)
        elif "gated" in la:
            modes = ["gated" if la["gated"] else "none"] * n
            secondaries = ["Sigmoid" if la["gated"] else None] * n   # legacy: always Sigmoid
        else:
            modes, secondaries = ["none"] * n, [None] * n
        for s in secondaries:
            if s is not None:
                make_activation(s)
        self.gating_modes, self.secondaries = modes, secondaries

        self.films = {k: parse_film(la, k) for k in FILM_KEYS}
        if self.films["layer1x1_post_film"] and not self.layer1x1:
            raise NamFileError(where + "layer1x1_post_film needs an active layer1x1")
        if not self.layer1x1 and self.bottleneck != self.channels:
            raise NamFileError("without an active layer1x1 the bottleneck has to equal channels")
        if self.films["head1x1_post_film"] and not self.head1x1:
            raise NamFileError("head1x1_post_film needs an active head1x1")

        sl = la.get("slimmable")
        self.allowed_channels = None
        if isinstance(sl, dict):
            method = sl.get("method", "")
            if method != "slice_channels_uniform":
                raise NamFileError("slimmable method %r is not slice_channels_uniform" % method)
            kw = sl.get("kwargs") or {}
            self.allowed_channels = ([int(c) for c in kw["allowed_channels"]] if "allowed_channels" in kw
                                     else list(range(1, self.channels + 1)))
            ac = self.allowed_channels
            if any(y <= x for x, y in zip(ac, ac[1:])) or (ac and ac[-1] != self.channels):
                raise NamFileError(where + "allowed_channels must increase and end at channels")

    @property
    def head_in(self):
        # rows of the per-array head accumulator
        return self.head1x1_out if self.head1x1 else self.bottleneck

    def receptive_field(self):
        # the core's "zero-indexed" receptive field of a layer array
        return (sum(d * (k - 1) for d, k in zip(self.dilations, self.kernel_sizes))
                + (self.head_kernel - 1) * self.head_dilation)


class Layer:
    def __init__(self, reader, p, i):
        b, c, cond = p.bottleneck, p.channels, p.condition_size
        self.mode = p.gating_modes[i]
        self.b = b
        zc = 2 * b if self.mode != "none" else b          # rows of z (doubled when gated/blended)
        self.zc = zc
        self.act = make_activation(p.activations[i])
        self.sec = make_activation(p.secondaries[i]) if self.mode != "none" else None
        # weight order inside a layer: conv, input mixin, layer1x1, head1x1, then the 8 FiLMs
        self.conv = Conv(reader, c, zc, p.kernel_sizes[i], True, p.dilations[i], p.groups_input)
        self.mixin = Conv(reader, cond, zc, 1, False, 1, p.groups_input_mixin)
        self.layer1x1 = Conv(reader, b, c, 1, True, 1, p.layer1x1_groups) if p.layer1x1 else None
        self.head1x1 = Conv(reader, b, p.head1x1_out, 1, True, 1, p.head1x1_groups) if p.head1x1 else None
        dims = {"conv_pre_film": c, "conv_post_film": zc, "input_mixin_pre_film": cond,
                "input_mixin_post_film": zc, "activation_pre_film": zc, "activation_post_film": b,
                "layer1x1_post_film": c, "head1x1_post_film": p.head1x1_out}
        self.films = {}
        for k in FILM_KEYS:
            f = p.films[k]
            if f is not None:
                self.films[k] = FiLM(reader, cond, dims[k], f["shift"], f["groups"])

    def film(self, key, x, cond):
        f = self.films.get(key)
        return f(x, cond) if f is not None else x

    def __call__(self, x, cond):
        """x: (channels, T) layer input, cond: (condition_size, T).
        Returns (input of the next layer, contribution to the head accumulator)."""
        a = self.conv(self.film("conv_pre_film", x, cond))
        a = self.film("conv_post_film", a, cond)
        m = self.mixin(self.film("input_mixin_pre_film", cond, cond))
        m = self.film("input_mixin_post_film", m, cond)
        z = self.film("activation_pre_film", a + m, cond)
        if self.mode == "none":
            z = self.act(z)
        elif self.mode == "gated":
            z = self.act(z[:self.b]) * self.sec(z[self.b:])
        else:  # blended: alpha * act(top) + (1 - alpha) * top, alpha = secondary(bottom)
            alpha = self.sec(z[self.b:])
            top = z[:self.b]
            z = alpha * self.act(top) + (1.0 - alpha) * top
        z = self.film("activation_post_film", z, cond)
        if self.layer1x1 is not None:
            r = self.layer1x1(z)
            # The core applies layer1x1_post_film only in blended layers (its weights are read
            # for every layer that declares it). Verified on wavenet_a2_max.nam (spec, section 4.2).
            if self.mode == "blended":
                r = self.film("layer1x1_post_film", r, cond)
            nxt = x + r
        else:
            nxt = x
        if self.head1x1 is not None:
            h = self.film("head1x1_post_film", self.head1x1(z), cond)
        else:
            h = z
        return nxt, h


class LayerArray:
    def __init__(self, reader, p):
        self.p = p
        self.rechannel = Conv(reader, p.input_size, p.channels, 1, False)
        self.layers = [Layer(reader, p, i) for i in range(len(p.dilations))]
        self.head_rechannel = Conv(reader, p.head_in, p.head_size, p.head_kernel, p.head_bias, p.head_dilation)

    def __call__(self, x, cond, head_in):
        """x: (input_size, T). head_in: the previous array's head output, or None (zeros)."""
        h = self.rechannel(x)
        acc = torch.zeros(self.p.head_in, x.shape[1], dtype=DTYPE) if head_in is None else head_in.clone()
        if acc.shape[0] != self.p.head_in:
            raise NamFileError("head accumulator: %d rows from the previous array, %d expected"
                               % (acc.shape[0], self.p.head_in))
        for layer in self.layers:
            h, contribution = layer(h, cond)
            acc = acc + contribution
        return h, self.head_rechannel(acc)


class PostStackHead:
    """The optional top-level "head": (activation, then conv) per stage, after head_scale.
    (No example model uses it; untested against the core.)"""

    def __init__(self, reader, cfg, in_channels):
        self.acts, self.convs = [], []
        ks = [int(k) for k in cfg["kernel_sizes"]]
        if not ks:
            raise NamFileError("the post-stack head needs at least one kernel size")
        cin = in_channels
        for i, k in enumerate(ks):
            cout = int(cfg["out_channels"]) if i + 1 == len(ks) else int(cfg["channels"])
            self.acts.append(make_activation(cfg["activation"]))
            self.convs.append(Conv(reader, cin, cout, k, True))
            cin = cout

    def receptive_field(self):
        return 1 + sum(c.kernel - 1 for c in self.convs)

    def __call__(self, x):
        for act, conv in zip(self.acts, self.convs):
            x = conv(act(x))
        return x


class WaveNet:
    def __init__(self, cfg, weights, sample_rate, channels_override=None):
        self.sample_rate = sample_rate
        self.cfg = cfg
        cd = cfg.get("condition_dsp")
        self.condition_dsp = load_model(cd) if cd is not None else None
        if self.condition_dsp is not None and self.condition_dsp.sample_rate != sample_rate:
            raise NamFileError("condition_dsp and the WaveNet declare different sample rates")
        self.in_channels = int(cfg.get("in_channels", 1))
        self.params = [LayerArrayParams(la, i) for i, la in enumerate(cfg["layers"])]
        if not self.params:
            raise NamFileError("a WaveNet needs at least one layer array")
        for i in range(1, len(self.params)):
            if self.params[i].channels != self.params[i - 1].head_size:
                raise NamFileError("layer array %d: channels differ from the previous array's head size" % i)
        if self.condition_dsp is not None:
            for i, p in enumerate(self.params):
                if p.condition_size != self.condition_dsp.out_channels:
                    raise NamFileError("layer array %d: condition_size differs from the condition_dsp's output channels" % i)
        reader = WeightReader(weights)
        self.arrays = [LayerArray(reader, p) for p in self.params]
        head_cfg = cfg.get("head")
        self.post_head = None
        if head_cfg is not None:
            self.post_head = PostStackHead(reader, head_cfg, self.params[-1].head_size)
        # head_scale: the LAST WEIGHT, not config["head_scale"] (the config value is overwritten)
        self.head_scale = float(reader.take(1)[0])
        reader.finish()
        self.out_channels = (int(head_cfg["out_channels"]) if head_cfg is not None
                             else self.params[-1].head_size)

    def prewarm_samples(self):
        n = self.condition_dsp.prewarm_samples() if self.condition_dsp is not None else 1
        n += sum(p.receptive_field() for p in self.params)
        if self.post_head is not None:
            n += self.post_head.receptive_field() - 1
        return n

    def process(self, x):
        """x: (in_channels, T) from a fresh state -> (out_channels, T)."""
        cond = self.condition_dsp.process(x) if self.condition_dsp is not None else x
        # the first array's layer input is the raw input; every array is conditioned on `cond`
        h, head = x, None
        for arr in self.arrays:
            h, head = arr(h, cond, head)
        y = self.head_scale * head
        if self.post_head is not None:
            y = self.post_head(y)
        return y


def slim_wavenet(full, ratio):
    """The SlimmableWavenet at slimmable size `ratio` (the core's default is the full model, ratio
    1.0, which is what this returns unchanged). Other ratios: UNVERIFIED against the core."""
    target = []
    for p in full.params:
        if p.allowed_channels is None:
            target.append(p.channels)
        else:
            a = p.allowed_channels
            target.append(a[min(int(math.floor(ratio * len(a))), len(a) - 1)])
    if all(t == p.channels for t, p in zip(target, full.params)):
        return full
    import copy
    slim = copy.copy(full)
    slim.arrays = []
    slim.params = []
    n = len(full.params)
    for ai, (arr, p) in enumerate(zip(full.arrays, full.params)):
        if p.head_kernel != 1 or p.groups_input != 1 or p.groups_input_mixin != 1 \
                or (p.layer1x1 and p.layer1x1_groups != 1) or (p.head1x1 and p.head1x1_groups != 1):
            raise NamFileError("slimming needs groups 1 everywhere and head kernel 1")
        ch = target[ai]
        bn = max(1, p.bottleneck * ch // p.channels) if p.layer1x1 else ch
        cin = p.input_size if ai == 0 else target[ai - 1]
        hs = target[ai + 1] if ai < n - 1 else p.head_size
        hin = p.head1x1_out if p.head1x1 else bn
        q = copy.copy(p)
        q.channels, q.bottleneck, q.input_size, q.head_size = ch, bn, cin, hs
        a = LayerArray.__new__(LayerArray)
        a.p = q
        a.rechannel = arr.rechannel.sliced(cin, ch)
        a.layers = []
        for lay in arr.layers:
            zc = 2 * bn if lay.mode != "none" else bn
            s = copy.copy(lay)
            s.b, s.zc = bn, zc
            s.conv = lay.conv.sliced(ch, zc)           # first zc rows of the doubled block
            s.mixin = lay.mixin.sliced(p.condition_size, zc)
            s.layer1x1 = lay.layer1x1.sliced(bn, ch) if lay.layer1x1 is not None else None
            s.head1x1 = lay.head1x1.sliced(bn, p.head1x1_out) if lay.head1x1 is not None else None
            dims = {"conv_pre_film": ch, "conv_post_film": zc, "input_mixin_pre_film": p.condition_size,
                    "input_mixin_post_film": zc, "activation_pre_film": zc, "activation_post_film": bn,
                    "layer1x1_post_film": ch, "head1x1_post_film": p.head1x1_out}
            s.films = {}
            for k, f in lay.films.items():
                g = copy.copy(f)
                g.dim = dims[k]
                g.conv = f.conv.sliced(p.condition_size, (2 if f.shift else 1) * dims[k])
                s.films[k] = g
            a.layers.append(s)
        a.head_rechannel = arr.head_rechannel.sliced(hin, hs)
        slim.arrays.append(a)
        slim.params.append(q)
    return slim


# ----------------------------------------------------------------------------------------------
# LSTM
# ----------------------------------------------------------------------------------------------

class LSTM:
    def __init__(self, cfg, weights, sample_rate):
        self.sample_rate = sample_rate
        self.num_layers = int(cfg["num_layers"])
        self.input_size = int(cfg["input_size"])
        self.hidden = int(cfg["hidden_size"])
        self.in_channels = int(cfg.get("in_channels", 1))
        self.out_channels = int(cfg.get("out_channels", 1))
        r = WeightReader(weights)
        H = self.hidden
        self.cells = []
        for i in range(self.num_layers):
            n_in = self.input_size if i == 0 else H
            w = r.take(4 * H * (n_in + H)).view(4 * H, n_in + H).numpy()   # rows i, f, g, o; cols [x, h]
            b = r.take(4 * H).numpy()
            h0 = r.take(H).numpy()
            c0 = r.take(H).numpy()
            self.cells.append((w, b, h0, c0))
        self.head_w = r.take(self.out_channels * H).view(self.out_channels, H).numpy()
        self.head_b = r.take(self.out_channels).numpy()
        r.finish()

    def prewarm_samples(self):
        n = int(0.5 * self.sample_rate)
        return n if n > 0 else 1

    def process(self, x):
        """x: (in_channels, T) from the state stored in the file -> (out_channels, T)."""
        xs = x.numpy()
        T = xs.shape[1]
        H = self.hidden
        state = [(h0.copy(), c0.copy()) for (_, _, h0, c0) in self.cells]
        out = np.empty((self.out_channels, T))
        inp = np.zeros(self.input_size)
        sig = lambda v: 1.0 / (1.0 + np.exp(-v))
        for t in range(T):
            inp[:self.in_channels] = xs[:, t]
            v = inp
            for li, (w, b, _, _) in enumerate(self.cells):
                h, c = state[li]
                g = w @ np.concatenate([v, h]) + b
                c = sig(g[H:2 * H]) * c + sig(g[:H]) * np.tanh(g[2 * H:3 * H])
                h = sig(g[3 * H:]) * np.tanh(c)
                state[li] = (h, c)
                v = h
            out[:, t] = self.head_w @ v + self.head_b
        return torch.tensor(out, dtype=DTYPE)


# ----------------------------------------------------------------------------------------------
# Container and loading
# ----------------------------------------------------------------------------------------------

class SlimmableContainer:
    def __init__(self, cfg, sample_rate):
        subs = cfg.get("submodels")
        if not isinstance(subs, list) or not subs:
            raise NamFileError("a SlimmableContainer needs a non-empty submodels list")
        self.max_values = [float(s["max_value"]) for s in subs]
        if any(b <= a for a, b in zip(self.max_values, self.max_values[1:])):
            raise NamFileError("submodels have to come in strictly increasing max_value order")
        if self.max_values[-1] < 1.0:
            raise NamFileError("the last submodel's max_value has to be at least 1.0")
        self.models = [load_model(s["model"]) for s in subs]
        self.sample_rate = sample_rate
        self.active = len(self.models) - 1          # default: the last (largest) submodel

    def set_slimmable_size(self, val):
        self.active = next((i for i, m in enumerate(self.max_values) if val < m), len(self.models) - 1)


def load_model(j, slimmable_size=None):
    if not isinstance(j, dict):
        raise NamFileError("model must be a JSON object")
    for key in ("version", "architecture", "config", "weights"):
        if key not in j:
            raise NamFileError("missing required key \"%s\"" % key)
    check_version(j["version"])
    sr = float(j["sample_rate"]) if "sample_rate" in j else -1.0
    arch, cfg, w = j["architecture"], j["config"], j["weights"]
    if arch == "WaveNet":
        m = WaveNet(cfg, w, sr)
        if any(p.allowed_channels is not None for p in m.params):
            if m.post_head is not None:
                raise NamFileError("a slimmable WaveNet cannot have a post-stack head")
            m = slim_wavenet(m, 1.0 if slimmable_size is None else slimmable_size)
        return m
    if arch == "LSTM":
        return LSTM(cfg, w, sr)
    if arch == "SlimmableContainer":
        c = SlimmableContainer(cfg, sr)
        if slimmable_size is not None:
            c.set_slimmable_size(slimmable_size)
        return c
    raise NamFileError("architecture %r is not one this reference (or the core) knows" % (arch,))


def prewarm_length(n, block):
    """The core's prewarm loop: whole blocks of zeros until at least n samples went through."""
    return 0 if n <= 0 else block * ((n + block - 1) // block)


def run_as_plugin(model, audio):
    """audio: float array (T,) -> output (T,) as after get_dsp(), Reset(sr, 64), 64-sample blocks."""
    if isinstance(model, SlimmableContainer):
        model = model.models[model.active]
    x = torch.tensor(np.asarray(audio, dtype=np.float32).astype(np.float64), dtype=DTYPE)[None]
    warm = prewarm_length(model.prewarm_samples(), HOST_BUFFER)
    if isinstance(model, LSTM) and LSTM_PREWARMS == "load+reset":
        warm += prewarm_length(model.prewarm_samples(), LOAD_BUFFER)
    x = torch.cat([torch.zeros(x.shape[0], warm, dtype=DTYPE), x], dim=1)
    y = model.process(x)[:, warm:]
    if y.shape[0] != 1:
        raise NamFileError("the model has %d output channels; this script writes mono" % y.shape[0])
    return y[0].numpy()


def compare(ours, core, max_offset=64):
    """relative rms error at offset 0, and the best integer offset in [-max_offset, max_offset]
    (positive: ours lags the core by that many samples)."""
    def rel(off):
        if off >= 0:
            a, b = ours[off:], core[:len(core) - off]
        else:
            a, b = ours[:off], core[-off:]
        return float(np.sqrt(np.mean((a - b) ** 2)) / np.sqrt(np.mean(b ** 2)))
    errs = {o: rel(o) for o in range(-max_offset, max_offset + 1)}
    best = min(errs, key=errs.get)
    return errs[0], best, errs[best]


def check_all(root):
    audio, sr = sf.read(os.path.join(root, "input.wav"), dtype="float32")
    failed = 0
    for path in sorted(glob.glob(os.path.join(root, "models", "*.nam"))):
        name = os.path.splitext(os.path.basename(path))[0]
        core, _ = sf.read(os.path.join(root, "core-output", name + ".wav"), dtype="float64")
        with open(path) as f:
            model = load_model(json.load(f))
        ours = run_as_plugin(model, audio)
        e0, best, eb = compare(ours, core)
        ok = e0 <= TOLERANCE
        failed += not ok
        print("%-24s rel_rms@0 = %.3e   best offset %+d (rel_rms %.3e)   %s"
              % (name, e0, best, eb, "ok" if ok else "FAIL"))
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("model", nargs="?")
    ap.add_argument("input", nargs="?")
    ap.add_argument("output", nargs="?")
    ap.add_argument("--check-all", metavar="DIR")
    ap.add_argument("--slimmable-size", type=float, default=None)
    args = ap.parse_args()
    if args.check_all:
        sys.exit(1 if check_all(args.check_all) else 0)
    if not args.model or not args.input:
        ap.error("MODEL.nam and INPUT.wav are required (or --check-all DIR)")
    audio, sr = sf.read(args.input, dtype="float32")
    if audio.ndim != 1:
        ap.error("the input must be mono")
    with open(args.model) as f:
        model = load_model(json.load(f), args.slimmable_size)
    y = run_as_plugin(model, audio)
    if args.output:
        sf.write(args.output, y.astype(np.float32), sr, subtype="FLOAT")
    print("%s: %d samples, rms %.6g" % (args.model, len(y), float(np.sqrt(np.mean(y ** 2)))))


if __name__ == "__main__":
    try:
        main()
    except NamFileError as e:
        print("nam_core_reference.py: " + str(e), file=sys.stderr)
        sys.exit(1)
