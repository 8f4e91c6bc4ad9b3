#!/usr/bin/python3
"""Writes the learning rates of PyTorch's schedulers for test_lr_schedule.

Run from the repository root with Debian's interpreter (torch 1.13):

    /usr/bin/python3 tests/reference/make_lr_fixtures.py [OUT_DIR]

Writes OUT_DIR/lr_schedules_v1.bin (default tests/fixtures) in the format of
make_fixtures.py. Each entry `<case>/lr` f32[STEPS] holds the rate used by
optimizer steps 0..STEPS-1 (what optimizer.param_groups[0]["lr"] is when
step t runs) with base rate 0.1:

    constant        no scheduler
    step            StepLR(step_size=3, gamma=0.5)
    cosine          CosineAnnealingLR(T_max=24, eta_min=0.001)
    warmup_constant LinearLR(1/4, 1, 3) for 4 steps, then constant
    warmup_step     SequentialLR(LinearLR(1/4, 1, 3), StepLR(3, 0.5), [4])
    warmup_cosine   SequentialLR(LinearLR(1/4, 1, 3),
                                 CosineAnnealingLR(20, 0.001), [4])

The cosine cases stop at T_max: past it PyTorch's rate rises again (a
period), where tensorscope holds min_lr (tested apart).
"""
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import Writer  # noqa: E402

STEPS = 24
BASE = 0.1
WARMUP = 4


def rates(make):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=BASE)
    sched = make(opt)
    out = []
    for _ in range(STEPS):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        if sched is not None:
            sched.step()
    return torch.tensor(out, dtype=torch.float32)


def warmup(opt):
    return torch.optim.lr_scheduler.LinearLR(opt, 1.0 / WARMUP, 1.0, WARMUP - 1)


def then(after):
    def make(opt):
        return torch.optim.lr_scheduler.SequentialLR(opt, [warmup(opt), after(opt)], [WARMUP])
    return make


def step(opt):
    return torch.optim.lr_scheduler.StepLR(opt, 3, 0.5)


def cosine_for(t_max):
    def make(opt):
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, t_max, 0.001)
    return make


def constant(opt):
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 1.0)


def main():
    warnings.simplefilter("ignore")  # SequentialLR's deprecation chatter
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures"
    w = Writer()
    w.add("constant/lr", rates(lambda o: None))
    w.add("step/lr", rates(step))
    w.add("cosine/lr", rates(cosine_for(STEPS)))
    w.add("warmup_constant/lr", rates(then(constant)))
    w.add("warmup_step/lr", rates(then(step)))
    w.add("warmup_cosine/lr", rates(then(cosine_for(STEPS - WARMUP))))
    w.write(os.path.join(out_dir, "lr_schedules_v1.bin"))


if __name__ == "__main__":
    main()
