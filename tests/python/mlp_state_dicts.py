# Test client (Debian's python3-torch): writes the state dicts of a small MLP with a BatchNorm,
# plain and as DataParallel saves them, plus an input and the model's output on it.
# usage: mlp_state_dicts.py OUT_DIR
import sys

import torch

out = sys.argv[1]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
model.train()
for _ in range(3):  # non-trivial running statistics
    model(torch.randn(16, 4))
model.eval()
x = torch.randn(5, 4)
with torch.no_grad():
    y = model(x)
torch.save(model.state_dict(), f"{out}/plain.pt")
torch.save(torch.nn.DataParallel(model).state_dict(), f"{out}/data_parallel.pt")
torch.save({"x": x, "y": y}, f"{out}/io.pt")
print("wrote", len(model.state_dict()), "tensors")
