# The NAM trainer's side of bench/amp_time_to_esr.sh (test-only, not part of wavetrain): trains
# NAM's "standard" WaveNet with neural-amp-modeler's own pieces, as its `nam-full` trainer does
# (nam.train.lightning_module.LightningModule from a model config, nam.data.Dataset, a Lightning
# Trainer), with NAM's defaults: Adam lr 0.004, ExponentialLR gamma 0.993 per epoch, batch 16 x 8192
# output samples, MSE + 2e-4 x MRSTFT on 0.85 pre-emphasised signals, validation loss ESR. The data
# is the train and valid split of a wavetrain capture store (already aligned: delay 0), so that both
# trainers learn and are judged on the same samples.
#
# Prints one line per validation, "epoch seconds esr", seconds counted from the start of this
# script (imports included, as wavetrain's count includes its start-up), and stops at the first
# ESR <= TARGET or after MINUTES.
#
# usage: .venv/bin/python bench/nam_time_to_esr.py STORE MINUTES TARGET THREADS
import sys
import time

START = time.perf_counter()


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: nam_time_to_esr.py STORE MINUTES TARGET THREADS")
    store, minutes, target, threads = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    import h5py
    import pytorch_lightning as pl
    import torch
    from nam.data import Dataset
    from nam.train.core import Architecture, get_wavenet_config
    from nam.train.lightning_module import LightningModule
    from torch.utils.data import DataLoader

    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)
    torch.manual_seed(0)
    model = LightningModule.init_from_config({
        "net": {"name": "WaveNet", "config": get_wavenet_config(Architecture.STANDARD)},
        "loss": {"val_loss": "esr", "mask_first": 4095, "pre_emph_mrstft_weight": 2e-4, "pre_emph_mrstft_coef": 0.85},
        "optimizer": {"lr": 0.004},
        "lr_scheduler": {"class": "ExponentialLR", "kwargs": {"gamma": 0.993}},
    })
    nx = model.net.receptive_field
    with h5py.File(store, "r") as f:
        rate = float(f.attrs["sample_rate"])
        split = {name: (torch.tensor(f[name + "/input/data"][:]), torch.tensor(f[name + "/target/data"][:]))
                 for name in ("train", "valid")}
    train = Dataset(*split["train"], nx=nx, ny=8192, sample_rate=rate, require_input_pre_silence=None)
    valid = Dataset(*split["valid"], nx=nx, ny=None, sample_rate=rate, require_input_pre_silence=None)
    model.net.sample_rate = rate

    class Watch(pl.Callback):
        def on_validation_epoch_end(self, trainer, module):
            if trainer.sanity_checking:
                return
            esr = float(trainer.callback_metrics["val_loss"])
            seconds = time.perf_counter() - START
            print("%d %.1f %.6f" % (trainer.current_epoch + 1, seconds, esr), flush=True)
            if esr <= target or seconds > 60 * minutes:
                trainer.should_stop = True

    trainer = pl.Trainer(accelerator="cpu", devices=1, max_epochs=10000, callbacks=[Watch()], logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=0)
    trainer.fit(model, DataLoader(train, batch_size=16, shuffle=True, drop_last=True),
                DataLoader(valid, batch_size=1))


main()
