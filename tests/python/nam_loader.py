# Test-only client: loads a .nam file with neural-amp-modeler's own loader (the `nam` package,
# nam.models.init_from_nam) and runs NAM's own torch model on a test signal, so that wavetrain's
# exported files are checked against the real program that reads them. Prints the output samples,
# one per line, like nam_forward.py.
#
# usage: nam_loader.py MODEL.nam [MODEL.nam ...] SAMPLES
#   Several models in one run (importing nam takes seconds): their outputs one after another.
#   The input is x[n] = 0.5 sin(0.01 n) + 0.1 sin(0.37 n), n = 0 .. SAMPLES-1, float32 (the same
#   signal as nam_forward.py and amp_model_test.cpp's test_signal).
#
# Output alignment: exactly SAMPLES values, sample n of the output belongs to sample n of the input.
# The model is called with pad_start=True, NAM's own option, which puts receptive_field - 1 zeros in
# front of the input before the forward pass. So the first receptive_field - 1 outputs are computed
# from a history of zeros (what NAM's export, the plugin after its prewarm, and nam_forward.py all
# do); nothing is cut off or added at either end. An LSTM has a receptive field of 1: no padding, and
# its state starts from the initial hidden and cell state stored in the file.
#
# neural-amp-modeler is pinned to 0.12.3 (scripts/pip-test-clients.txt): its loader reads the 0.5.x
# layer-array keys ("head_size", "head_bias", "gated") that wavetrain and the plugin core write; 0.13
# accepts only its newer keys and refuses such files. `import nam` imports tkinter (for its GUI
# trainer) even when only the models are used: Debian's python3-tk (scripts/setup --test-deps).
#
# On a bad file or argument it prints the reason to stderr and exits with status 1, stdout empty.
import json
import sys


def fail(message):
    print("nam_loader.py: " + message, file=sys.stderr)
    sys.exit(1)


def run_one(path, samples, torch, init_from_nam):
    try:
        with open(path) as f:
            model_file = json.load(f)
    except OSError as e:
        fail("%s cannot be read: %s" % (path, e.strerror))
    except ValueError as e:
        fail("%s is not JSON: %s" % (path, e))
    if not isinstance(model_file, dict):
        fail("%s is JSON but not an object (not a .nam file?)" % path)
    for key in ("architecture", "config", "weights"):
        if key not in model_file:
            fail("%s has no '%s' (not a .nam file?)" % (path, key))
    try:
        model = init_from_nam(model_file)
        model.eval()
        if model_file["architecture"] == "WaveNet":
            # init_from_nam does not check that the file has no weights left over: a WaveNet file
            # holds every parameter of the model NAM built, then the head scale.
            expected = sum(p.numel() for p in model.parameters()) + 1
            if expected != len(model_file["weights"]):
                fail("%s has %d weights, NAM's model takes %d" % (path, len(model_file["weights"]), expected))
    except SystemExit:
        raise
    except Exception as e:  # NAM reports a file it cannot take with a variety of exception types
        fail("NAM cannot load %s: %s: %s" % (path, type(e).__name__, e))

    n = torch.arange(samples, dtype=torch.float64)
    x = (0.5 * torch.sin(0.01 * n) + 0.1 * torch.sin(0.37 * n)).float()
    try:
        with torch.no_grad():
            y = model(x[None], pad_start=True)[0]
    except Exception as e:  # a model NAM built but cannot run (e.g. an unsupported condition DSP)
        fail("NAM loaded %s but cannot run it: %s: %s" % (path, type(e).__name__, e))
    if y.shape != (samples,):
        fail("NAM's model gave %s output samples for %d input samples" % (tuple(y.shape), samples))
    if not torch.isfinite(y).all():
        fail("NAM's model output is not finite")
    return y


def main():
    if len(sys.argv) < 3:
        fail("usage: nam_loader.py MODEL.nam [MODEL.nam ...] SAMPLES")
    paths, samples_text = sys.argv[1:-1], sys.argv[-1]
    try:
        samples = int(samples_text)
    except ValueError:
        fail("SAMPLES '%s' is not a whole number" % samples_text)
    if samples < 1:
        fail("SAMPLES must be at least 1, not %d" % samples)
    try:
        import torch
        from nam.models import init_from_nam
    except ImportError as e:
        fail("needs neural-amp-modeler and torch (scripts/pip-test-clients.txt): %s" % e)
    # All models first, so that a bad one leaves stdout empty.
    outputs = [run_one(path, samples, torch, init_from_nam) for path in paths]
    sys.stdout.write("".join(repr(v) + "\n" for y in outputs for v in y.tolist()))


main()
