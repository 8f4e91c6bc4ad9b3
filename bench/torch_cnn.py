#!/usr/bin/python3
"""Convolutional networks in PyTorch: the peer of bench/bench_cnn.c.

    python bench/torch_cnn.py --mode train|observe --model lenet|resnet --batch B
        [--steps N] [--warmup W] [--threads T] [--reps R]

The same models, optimizer (SGD lr 0.01 momentum 0.9), data (a pool of 8
random batches, x ~ U(-1,1), labels 0..9) and loop as bench_cnn.c; PyTorch
gets its fastest loop (zero_grad(set_to_none=True), no per-step .item()).
--mode observe times plain against observed training in one process,
interleaved (as bench/torch_observe.py, whose stats() it uses): a forward
hook on every leaf module computing the TS_WATCH_STATS summary of its
output, the same of every .grad after backward() and of every parameter
after step(). Prints bench_cnn.c's lines with the impl named by the version.
"""
import argparse
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_observe import stats  # noqa: E402  (one definition of the summary)

POOL = 8


def conv_bn(cin, cout, k, stride):
    return torch.nn.Sequential(torch.nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), torch.nn.BatchNorm2d(cout))


class Block(torch.nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1, self.r1, self.c2 = conv_bn(cin, cout, 3, stride), torch.nn.ReLU(), conv_bn(cout, cout, 3, 1)
        self.down = conv_bn(cin, cout, 1, stride) if stride != 1 else None
        self.r2 = torch.nn.ReLU()

    def forward(self, x):
        return self.r2(self.c2(self.r1(self.c1(x))) + (self.down(x) if self.down is not None else x))


def make_model(name):
    torch.manual_seed(0)
    if name == "lenet":
        return torch.nn.Sequential(
            torch.nn.Conv2d(1, 6, 5, padding=2, bias=False), torch.nn.BatchNorm2d(6), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(6, 16, 5, bias=False), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(1), torch.nn.Linear(400, 120), torch.nn.ReLU(), torch.nn.Linear(120, 84), torch.nn.ReLU(),
            torch.nn.Linear(84, 10), torch.nn.LogSoftmax(dim=1)), 1, 28
    return torch.nn.Sequential(
        conv_bn(3, 16, 3, 1), torch.nn.ReLU(), Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(1), torch.nn.Linear(64, 10)), 3, 32


def flops_per_step(model, x):
    """2 per MAC of every conv and linear, forward + backward (x3), as
    ts_model_flops_per_microbatch counts them."""
    total = [0]

    def hook(m, i, out):
        if isinstance(m, torch.nn.Conv2d):
            total[0] += 2 * out.numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]
        elif isinstance(m, torch.nn.Linear):
            total[0] += 2 * out.numel() * m.in_features
    hs = [m.register_forward_hook(hook) for m in model.modules()]
    with torch.no_grad():
        model(x)
    for h in hs:
        h.remove()
    return 3 * total[0]


def side(name, observed, results):
    model, _, _ = make_model(name)
    if observed:
        for mname, mod in model.named_modules():
            if len(list(mod.children())) == 0:
                mod.register_forward_hook(lambda m, i, out, n=mname: results.__setitem__("act:" + n, stats(out)))
    return model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def train(model, opt, observed, results, xs, ys, lossfn, first, n):
    t0 = time.perf_counter()
    for s in range(first, first + n):
        k = s % POOL
        opt.zero_grad(set_to_none=True)
        lossfn(model(xs[k]), ys[k]).backward()
        if observed:
            for pname, p in model.named_parameters():
                results["grad:" + pname] = stats(p.grad)
        opt.step()
        if observed:
            for pname, p in model.named_parameters():
                results["updated:" + pname] = stats(p)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("train", "observe"), default="train")
    ap.add_argument("--model", choices=("lenet", "resnet"), default="lenet")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("TS_BENCH_THREADS", "2")))
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    _, ch, hw = make_model(a.model)
    torch.manual_seed(0)
    xs = torch.rand(POOL, a.batch, ch, hw, hw) * 2 - 1
    ys = torch.randint(0, 10, (POOL, a.batch))
    lossfn = F.nll_loss if a.model == "lenet" else F.cross_entropy
    ver = torch.__version__.split("+")[0]
    n_sides = 2 if a.mode == "observe" else 1
    results = [{}, {}]
    sides = [side(a.model, k == 1, results[k]) for k in range(n_sides)]
    flops = flops_per_step(sides[0][0], xs[0])
    reps = a.reps if a.mode == "observe" else 1
    secs = [[], []]
    for k in range(n_sides):
        train(*sides[k], k == 1, results[k], xs, ys, lossfn, 0, a.warmup)
    for r in range(reps):
        for i in range(n_sides):
            k = (r + i) % n_sides
            secs[k].append(train(*sides[k], k == 1, results[k], xs, ys, lossfn, a.warmup + r * a.steps, a.steps))
    if a.mode == "train":
        ms = secs[0][0] * 1e3 / a.steps
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        print(f"pytorch-{ver} model={a.model} batch={a.batch} threads={a.threads} steps={a.steps} ms_per_step={ms:.4f} "
              f"samples_per_s={a.batch * 1e3 / ms:.1f} gflops={flops / ms * 1e-6:.3f} peak_rss_mb={rss:.1f}")
        return
    best = []
    for k, impl in enumerate((f"torch{ver}-plain", f"torch{ver}-hooks")):
        med = statistics.median(secs[k]) / a.steps
        best.append(min(secs[k]) / a.steps)
        print(f"{impl} role={'cand' if k else 'base'} model={a.model} batch={a.batch} threads={a.threads} steps={a.steps} "
              f"reps={reps} watched={len(results[k])} ms_per_step={med * 1e3:.4f} best_ms={best[k] * 1e3:.4f} "
              f"worst_ms={max(secs[k]) / a.steps * 1e3:.4f} samples_per_s={a.batch / med:.1f} gflops={flops / med * 1e-9:.3f}")
    ratios = [c / b for b, c in zip(secs[0], secs[1])]
    print(f"overhead pct={(statistics.median(ratios) - 1) * 100:.2f} best_pct={(best[1] / best[0] - 1) * 100:.2f} "
          f"min_pct={(min(ratios) - 1) * 100:.2f} max_pct={(max(ratios) - 1) * 100:.2f}")


if __name__ == "__main__":
    main()
