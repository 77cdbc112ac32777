# Test-only client: k2's fast_rnnt (built into the project's .venv by scripts/setup --test-deps) on
# fresh random float64 inputs, as a live reference for wavetrain's transducer losses beside the
# stored vectors: the mutual-information recursion with its gradients (regular and modified, with
# per-item boundaries), and the simple, smoothed, pruned and full RNN-T losses (regular and
# modified, per-utterance losses: reduction "none").
#
# usage: fast_rnnt_live.py OUT.h5 SEED
# Writes the inputs and every result as float64 / int64 datasets of OUT.h5; exits 1 with a message
# on stderr when fast_rnnt or h5py is missing or the file cannot be written.
import sys


def fail(message):
    print("fast_rnnt_live.py: " + message, file=sys.stderr)
    sys.exit(1)


if len(sys.argv) != 3:
    fail("usage: fast_rnnt_live.py OUT.h5 SEED")
try:
    import fast_rnnt
    import h5py
    import torch
except ImportError as e:
    fail("needs fast_rnnt, h5py and torch (scripts/setup --test-deps): %s" % e)

torch.manual_seed(int(sys.argv[2]))
B, S, T, C = 3, 7, 23, 11
out = {}

# The recursion on random log-probabilities, each item in its own box.
boundary = torch.tensor([[0, 0, S, T], [1, 2, S - 1, T - 3], [0, 1, S - 2, T - 5]], dtype=torch.int64)
for mode, t1 in (("regular", T + 1), ("modified", T)):
    px = torch.randn(B, S, t1, dtype=torch.float64)
    py = torch.randn(B, S + 1, T, dtype=torch.float64)
    scores, (px_grad, py_grad) = fast_rnnt.mutual_information_recursion(px, py, boundary, return_grad=True)
    out.update({"mi_%s_px" % mode: px, "mi_%s_py" % mode: py, "mi_%s_scores" % mode: scores,
                "mi_%s_px_grad" % mode: px_grad, "mi_%s_py_grad" % mode: py_grad})
out["boundary"] = boundary

# The losses on a transducer's outputs: lm [B][S+1][C], am [B][T][C], symbols in 1..C-1 (0 is blank).
lm = torch.randn(B, S + 1, C, dtype=torch.float64)
am = torch.randn(B, T, C, dtype=torch.float64)
symbols = torch.randint(1, C, (B, S), dtype=torch.int64)
out.update({"lm": lm, "am": am, "symbols": symbols})
for mode in ("regular", "modified"):
    common = dict(termination_symbol=0, boundary=boundary, rnnt_type=mode, reduction="none")
    simple, (px_grad, py_grad) = fast_rnnt.rnnt_loss_simple(lm, am, symbols, return_grad=True, **common)
    smoothed = fast_rnnt.rnnt_loss_smoothed(lm, am, symbols, lm_only_scale=0.1, am_only_scale=0.2, **common)
    ranges = fast_rnnt.get_rnnt_prune_ranges(px_grad, py_grad, boundary, 4)
    am_pruned, lm_pruned = fast_rnnt.do_rnnt_pruning(am, lm, ranges)
    pruned = fast_rnnt.rnnt_loss_pruned(torch.tanh(am_pruned + lm_pruned), symbols, ranges, **common)
    full = fast_rnnt.rnnt_loss(torch.tanh(am[:, :, None, :] + lm[:, None, :, :]), symbols, **common)
    out.update({"%s_simple" % mode: simple, "%s_simple_px_grad" % mode: px_grad,
                "%s_simple_py_grad" % mode: py_grad, "%s_smoothed" % mode: smoothed,
                "%s_ranges" % mode: ranges, "%s_pruned" % mode: pruned, "%s_full" % mode: full})

try:
    with h5py.File(sys.argv[1], "w") as f:
        for name, tensor in out.items():
            f.create_dataset(name, data=tensor.detach().numpy())
except OSError as e:
    fail("cannot write %s: %s" % (sys.argv[1], e))
print("fast_rnnt %s: %d datasets" % (getattr(fast_rnnt, "__version__", "1.3"), len(out)))
