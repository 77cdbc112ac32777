# Benchmark client (test-only, not part of wavetrain): times one training step of NAM's "standard"
# WaveNet in neural-amp-modeler's own code, for comparison with wavetrain's step in bench/amp.sh (the anchor: the NAM trainer itself).
# The model is built by NAM's model classes (nam.models.wavenet.WaveNet) and the step runs through
# NAM's own training module (nam.train.lightning_module.LightningModule: its training_step computes
# the forward pass and NAM's loss, its configure_optimizers gives the Adam optimizer), then
# backward and the Adam step. The batch and settings mirror bench/amp_step_baseline.py: batch 16 x
# 8192 output samples (inputs 8192 + 4092 long: the receptive field is 4093), Adam lr 0.004,
# torch.set_num_threads(THREADS), flush-denormal on, seed 0, 2 warm-up steps then REPEATS timed ones.
# Prints the median step time in ms ("%.1f"), like amp_step_baseline.py.
#
# usage: nam_standard_step.py [THREADS] [REPEATS] [DEVICE] [LOSS]
#   THREADS 2, REPEATS 3 (amp_step_baseline.py: 10; bench/amp.sh passes its own), DEVICE cpu by default.
#   LOSS nam (default): MSE + 2e-4 x MRSTFT of the 0.85 pre-emphasised signals (NAM's
#        pre_emph_mrstft loss terms, with NAM's bundled auraloss), the loss amp_step_baseline.py and
#        wavetrain's bench compute, so that the times compare like with like;
#        mse: MSE alone (NAM's LossConfig default).
#
# The model is NAM's own "standard" WaveNet: nam.train.core.get_wavenet_config(Architecture.STANDARD)
# of neural-amp-modeler 0.12.3 (pinned in scripts/pip-test-clients.txt; 0.13 dropped the preset),
# 13801 parameters and receptive field 4093 like wavetrain's "standard" preset (checked).
import sys
import time


def fail(message):
    print("nam_standard_step.py: " + message, file=sys.stderr)
    sys.exit(1)


def main():
    args = sys.argv[1:]
    if len(args) > 4:
        fail("usage: nam_standard_step.py [THREADS] [REPEATS] [DEVICE] [LOSS]")
    try:
        threads = int(args[0]) if len(args) > 0 else 2
        repeats = int(args[1]) if len(args) > 1 else 3
    except ValueError:
        fail("THREADS and REPEATS must be whole numbers, not %s" % " ".join(args[:2]))
    if threads < 1 or repeats < 1:
        fail("THREADS and REPEATS must be at least 1")
    device_name = args[2] if len(args) > 2 else "cpu"
    loss_name = args[3] if len(args) > 3 else "nam"
    if loss_name not in ("nam", "mse"):
        fail("LOSS '%s' is not nam or mse" % loss_name)

    try:
        import torch
    except ImportError as e:
        fail("needs torch: %s" % e)

    try:
        device = torch.device(device_name)
    except RuntimeError as e:
        fail("DEVICE '%s': %s" % (device_name, e))
    if device.type == "cuda" and not torch.cuda.is_available():
        fail("DEVICE %s: no CUDA device here" % device_name)

    try:
        from nam.models.wavenet import WaveNet
        from nam.train.core import Architecture, get_wavenet_config
        from nam.train.lightning_module import LightningModule, LossConfig
    except ImportError as e:
        fail("needs neural-amp-modeler (scripts/pip-test-clients.txt): %s" % e)

    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)
    torch.manual_seed(0)

    net = WaveNet.init_from_config(get_wavenet_config(Architecture.STANDARD))
    parameters = sum(p.numel() for p in net.parameters())
    if parameters != 13801 or net.receptive_field != 4093:
        fail("NAM built a model with %d parameters and receptive field %d, not the standard 13801 and 4093"
             % (parameters, net.receptive_field))
    if loss_name == "nam":
        loss_config = LossConfig(pre_emph_mrstft_weight=2e-4, pre_emph_mrstft_coef=0.85)
    else:
        loss_config = LossConfig()
    module = LightningModule(net, optimizer_config={"lr": 0.004}, loss_config=loss_config).to(device)
    module.train()
    adam = module.configure_optimizers()  # Adam(lr=0.004): no scheduler configured

    # NAM's models take (batch, samples); amp_step_baseline.py's tensors are (16, 1, samples).
    x = (torch.randn(16, 8192 + net.receptive_field - 1) * 0.3).to(device)
    y = torch.tanh(torch.randn(16, 8192)).to(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    ms = []
    for i in range(repeats + 2):
        sync()
        t0 = time.perf_counter()
        adam.zero_grad()
        loss = module.training_step((x, y), i)
        loss.backward()
        adam.step()
        sync()
        if i >= 2:
            ms.append((time.perf_counter() - t0) * 1000)
        if not torch.isfinite(loss):
            fail("the loss is %s at step %d" % (loss.item(), i))
    ms.sort()
    print("%.1f" % ms[len(ms) // 2])


main()
