# Test client (Debian's python3-torch): the learning rates of PyTorch's own schedulers, one line per
# case: "name lr_0 lr_1 ...", lr_t being the rate in force after t scheduler steps.
import torch

COUNT = 21


def run(name, base, make):
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=base)
    sched = make(opt)
    lrs = []
    for _ in range(COUNT):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    print(name, " ".join(repr(x) for x in lrs))


lr = torch.optim.lr_scheduler
run("exponential", 0.004, lambda o: lr.ExponentialLR(o, gamma=0.993))
run("step", 0.1, lambda o: lr.StepLR(o, step_size=3, gamma=0.5))
run("cosine", 0.01, lambda o: lr.SequentialLR(
    o, [lr.LinearLR(o, start_factor=0.1, total_iters=5), lr.CosineAnnealingLR(o, T_max=15, eta_min=1e-5)],
    milestones=[5]))
run("constant", 0.02, lambda o: lr.ConstantLR(o, factor=1.0, total_iters=1))
