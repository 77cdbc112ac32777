# Test-only client: computes auraloss's multi-resolution STFT loss (the real package,
# auraloss.freq.MultiResolutionSTFTLoss() with its default arguments) and its gradient on fresh random
# signals, and writes inputs and results to an HDF5 file, so that wavetrain's MRSTFT loss
# (losses/audio_losses.h) can be checked against auraloss live, not only against stored vectors.
#
# usage: auraloss_live.py OUT.h5 SEED
#
# Inputs: torch.manual_seed(SEED), then pred = randn(2, 1, 8192) and target = randn(2, 1, 8192) in
# float32, drawn in that order (SEED 0 gives exactly the `randn` case of shared/reference's
# mrstft_vectors.h5). The float64 case uses the same values converted to float64, as the stored
# vectors do.
#
# Datasets written, for P in f32 and f64 (each in its own precision):
#   P_pred, P_target        2x1x8192  the inputs
#   P_loss                  scalar    MultiResolutionSTFTLoss()(pred, target)
#   P_grad                  2x1x8192  d loss / d pred (autograd through auraloss)
#   P_sc, P_log_mag         [3]       the per-resolution spectral-convergence and log-magnitude terms
#                                     (fft 1024, 2048, 512), from the same module with output="full"
# File attributes: seed, auraloss and torch versions, and the loss's resolutions.
#
# How wavetrain's side compares (tests/audio_losses_test.cpp against the stored vectors): relative
# error of the loss and relative L2 error of the gradient, ||g - g_ref|| / ||g_ref||, 1e-5 in float32
# (with LibTorch's FFT) and 1e-10 in float64; with its own 8-frame FFT, wavetrain's float32 gradient
# against the float64 one, within 5x auraloss's own float32 error.
#
# Exits with status 1 and a message on stderr when the arguments are bad or the file cannot be
# written.
import sys


def fail(message):
    print("auraloss_live.py: " + message, file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) != 3:
        fail("usage: auraloss_live.py OUT.h5 SEED")
    out_path, seed_text = sys.argv[1], sys.argv[2]
    try:
        seed = int(seed_text)
    except ValueError:
        fail("SEED '%s' is not a whole number" % seed_text)
    if not 0 <= seed < 2**63:
        fail("SEED %d is outside 0 to 2^63-1" % seed)

    try:
        import auraloss
        import h5py
        import torch
    except ImportError as e:
        fail("needs auraloss, h5py and torch (scripts/pip-test-clients.txt): %s" % e)
    from importlib.metadata import version

    torch.manual_seed(seed)
    pred32 = torch.randn(2, 1, 8192, dtype=torch.float32)
    target32 = torch.randn(2, 1, 8192, dtype=torch.float32)

    loss_fn = auraloss.freq.MultiResolutionSTFTLoss()
    terms_fn = auraloss.freq.MultiResolutionSTFTLoss(output="full")
    results = {}
    for prefix, dtype in (("f32", torch.float32), ("f64", torch.float64)):
        target = target32.to(dtype)
        pred = pred32.to(dtype).clone().requires_grad_(True)
        loss = loss_fn(pred, target)
        loss.backward()
        with torch.no_grad():
            full_loss, sc, log_mag, _, _ = terms_fn(pred, target)
        if full_loss.item() != loss.item():
            fail("auraloss gave %r with output='full' and %r without" % (full_loss.item(), loss.item()))
        results[prefix] = {
            "pred": pred.detach(),
            "target": target,
            "loss": loss.detach(),
            "grad": pred.grad,
            "sc": torch.stack(sc),
            "log_mag": torch.stack(log_mag),
        }

    try:
        with h5py.File(out_path, "w") as f:
            for prefix, tensors in results.items():
                for name, tensor in tensors.items():
                    f.create_dataset(prefix + "_" + name, data=tensor.numpy())
            f.attrs["seed"] = seed
            f.attrs["auraloss"] = version("auraloss")
            f.attrs["torch"] = str(torch.__version__)
            f.attrs["loss"] = "auraloss.freq.MultiResolutionSTFTLoss() defaults: fft %s, hop %s, win %s" % (
                loss_fn.fft_sizes, loss_fn.hop_sizes, loss_fn.win_lengths)
    except OSError as e:
        fail("cannot write %s: %s" % (out_path, e))
    for prefix, tensors in results.items():
        print("%s loss %.17g grad_l2 %.17g" % (prefix, tensors["loss"].item(), tensors["grad"].norm().item()))


main()
