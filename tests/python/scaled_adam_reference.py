# Test client (torch, float64): icefall's ScaledAdam and Eden written out from their published
# definitions (icefall, egs/librispeech/ASR/zipformer/optim.py; Povey et al., "Zipformer", ICLR 2024)
# one parameter at a time, as the independent statement tests/scaled_adam_test.cpp compares
# wavetrain's C++ against. State is kept in the parameters' dtype (icefall keeps it in float32).
#
# usage: scaled_adam_reference.py CASE.json
#   CASE: {"options": {...}, "params": [[shape, values]], "groups": [[param indices]],
#          "steps": [{"lr": x, "grads": [values or null per param]}], "eden": [[step, epoch, base,
#          lr_batches, lr_epochs, warmup, warmup_start]]}
# prints: {"params": [values after the last step], "clipping": [[scale per group] per step],
#          "eden": [lr per case]}
import json
import math
import sys

import torch


def scaled_adam_step(o, lr, p, g, s):
    """The change to p of one step; `s` is p's state (a dict), updated."""
    scalar = p.numel() == 1
    t = s.setdefault("step", 0)
    # Adam's second moment, bias-corrected only while the correction is large.
    v = s.setdefault("v", torch.zeros_like(p))
    v.mul_(o["beta2"]).add_((1 - o["beta2"]) * g * g)
    corr = 1 - o["beta2"] ** (t + 1)
    v_hat = v / corr if corr < 0.99 else v
    step_lr = lr * o["scalar_lr_scale"] if scalar else lr
    d = -step_lr * g / (v_hat.sqrt() + o["eps"])
    if not scalar:
        period = o["size_update_period"]
        if "rms" not in s:
            s["rms"] = (p * p).mean().sqrt()
            s["scale_v"] = torch.zeros_like(s["rms"])
            s["scale_grads"] = torch.zeros(period, dtype=p.dtype)
        s["scale_grads"][t % period] = (p * g).sum()
        update_size = t % period == period - 1
        if update_size:
            s["rms"] = (p * p).mean().sqrt()
        d = d * max(s["rms"].item(), o["param_min_rms"])
        if update_size and t > 0:
            b = o["beta2"] ** period
            s["scale_v"] = b * s["scale_v"] + (1 - b) * (s["scale_grads"] ** 2).mean()
            bias = 1 - b ** ((t + 1) // period)
            size_step = (-lr * o["scalar_lr_scale"] * math.sqrt(bias) * s["scale_grads"].sum()
                         / (s["scale_v"].sqrt() + o["eps"])).item()
            rms = s["rms"].item()
            if rms < o["param_min_rms"]:
                size_step = 0.0
            size_step = min(max(size_step, -0.1), 0.1)
            size_step = min(size_step, (o["param_max_rms"] - rms) / rms)
            d = d + p * size_step
    m = s.setdefault("m", torch.zeros_like(p))
    m.mul_(o["beta1"]).add_((1 - o["beta1"]) * d)
    return m


def clipping(o, group_state, params, grads, states):
    """The factor a group's gradients are scaled by this step."""
    if o["clipping_scale"] <= 0 or not states[0] or states[0]["step"] == 0:
        return 1.0
    step = states[0]["step"]
    total = 0.0
    for p, g, s in zip(params, grads, states):
        if p.numel() == 1:
            total += (g * g).sum().item() * o["scalar_lr_scale"] ** 2
        else:
            total += ((g * s["rms"]) ** 2).sum().item()
    norm = math.sqrt(total)
    period = o["clipping_update_period"]
    norms = group_state.setdefault("norms", [0.0] * period)
    norms[step % period] = norm
    early = step in [i for i in (10, 20, 40) if i < period]
    if step % period == 0 or early:
        ordered = sorted(norms)
        if early:
            ordered = ordered[-step:]
        n = len(ordered)
        median = ordered[min(n - 1, (n // 4) * 2)]
        if math.isnan(median):
            raise RuntimeError("median norm is nan")
        group_state["threshold"] = o["clipping_scale"] * median * (2.0 if early else 1.0)
    if "threshold" not in group_state:
        return 1.0
    scale = min(1.0, group_state["threshold"] / (norm + 1e-20))
    return 0.0 if math.isnan(scale) else scale


def eden(step, epoch, base, lr_batches, lr_epochs, warmup, warmup_start):
    factor = ((step ** 2 + lr_batches ** 2) / lr_batches ** 2) ** -0.25 * \
             ((epoch ** 2 + lr_epochs ** 2) / lr_epochs ** 2) ** -0.25
    warm = 1.0 if step >= warmup else warmup_start + (1.0 - warmup_start) * step / warmup
    return base * factor * warm


def main():
    case = json.load(open(sys.argv[1]))
    o = case["options"]
    params = [torch.tensor(values, dtype=torch.float64).reshape(shape) for shape, values in case["params"]]
    states = [dict() for _ in params]
    group_states = [dict() for _ in case["groups"]]
    clip_log = []
    for step in case["steps"]:
        grads = [torch.zeros_like(p) if g is None else torch.tensor(g, dtype=torch.float64).reshape(p.shape)
                 for p, g in zip(params, step["grads"])]
        scales = []
        for gi, members in enumerate(case["groups"]):
            scale = clipping(o, group_states[gi], [params[i] for i in members], [grads[i] for i in members],
                             [states[i] for i in members])
            scales.append(scale)
            for i in members:
                g = grads[i] * scale
                params[i] = params[i] + scaled_adam_step(o, step["lr"], params[i], g, states[i])
                if params[i].numel() == 1:
                    params[i] = params[i].clamp(-o["scalar_max"], o["scalar_max"])
                states[i]["step"] += 1
        clip_log.append(scales)
    print(json.dumps({"params": [p.reshape(-1).tolist() for p in params], "clipping": clip_log,
                      "eden": [eden(*c) for c in case.get("eden", [])]}))


main()
