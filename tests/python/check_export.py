# Test client (Debian's python3-torch): loads what wavetrain exported with weights_only=True,
# into a plain model and into a DataParallel-wrapped one, and checks the outputs wavetrain
# computed. Prints "max_abs_diff D" and exits 1 if D > 1e-6.
# usage: check_export.py OUT_DIR
import sys

import torch

out = sys.argv[1]


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 3))


io = torch.load(f"{out}/cpp_io.pt", weights_only=True)
plain = mlp()
plain.load_state_dict(torch.load(f"{out}/cpp_plain.pt", weights_only=True))
wrapped = torch.nn.DataParallel(mlp())
wrapped.load_state_dict(torch.load(f"{out}/cpp_data_parallel.pt", weights_only=True))
diff = 0.0
with torch.no_grad():
    for m in (plain.eval(), wrapped.eval()):
        diff = max(diff, (m(io["x"]) - io["y"]).abs().max().item())
print("max_abs_diff", diff)
sys.exit(0 if diff <= 1e-6 else 1)
