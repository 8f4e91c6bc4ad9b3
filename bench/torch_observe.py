#!/usr/bin/python3
"""What observing costs in PyTorch: the peer of `bench_observe watch`.

    /usr/bin/python3 bench/torch_observe.py --batch B [--steps N] [--warmup W]
        [--threads T] [--reps R]

The tutorial MLP of bench/torch_mlp.py trained plain (the baseline) against
the same training observed the way a PyTorch user would: a forward hook on
every module computing count, mean, std, min, max, L2 norm, zeros, NaN,
+Inf and -Inf counts of its output (as tensorscope's TS_WATCH_STATS; see
stats()), the same stats of every .grad
after backward() and of every parameter after optimizer.step(): 7 + 6 + 6
= 19 summaries a step, as bench_observe's.

Both models live in one process and are timed in interleaved repetitions
(the side that goes first alternates); the overhead is the median over
repetitions of cand/base - 1 of the pair timed back to back (see
bench_observe.c). ms_per_step is each side's median repetition, best_ms and
worst_ms its spread; min_pct and max_pct the spread of the pairs' overheads. Prints one line per side, then the overhead:
`torch-plain role=base batch=B threads=T steps=N reps=R ms_per_step=.. best_ms=.. worst_ms=.. samples_per_s=.. gflops=..`
`torch-hooks role=cand ...`
`overhead pct=.. best_pct=.. min_pct=.. max_pct=..`
(the impl names carry the version: torch2.15.0-plain)
"""
import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F

POOL = 8
LAYERS = [(784, 320), (320, 100), (100, 10)]
WATCHED = 19


def stats(t):
    """TS_WATCH_STATS of t, written as a PyTorch user would for speed: fused
    reductions (var_mean, aminmax, vector_norm, count_nonzero) on the tensor
    itself, a masked copy only when it holds NaN or Inf (moments, min and max
    cover the finite values, as tensorscope's)."""
    t = t.detach()
    nans, pinfs, ninfs = (torch.isnan(t).sum(), torch.isposinf(t).sum(),
                          torch.isneginf(t).sum())
    f = t
    if (nans + pinfs + ninfs).item():
        f = t[torch.isfinite(t)]
    var, mean = torch.var_mean(f, unbiased=False)
    lo, hi = torch.aminmax(f)
    return (t.numel(), mean, var.sqrt(), lo, hi, torch.linalg.vector_norm(f),
            t.numel() - torch.count_nonzero(t), nans, pinfs, ninfs)


def make_model(observed, results):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Flatten(1),
        torch.nn.Linear(784, 320), torch.nn.ReLU(),
        torch.nn.Linear(320, 100), torch.nn.ReLU(),
        torch.nn.Linear(100, 10), torch.nn.LogSoftmax(dim=1))
    if observed:
        for name, mod in model.named_children():
            mod.register_forward_hook(
                lambda m, i, out, name=name: results.__setitem__("act:" + name, stats(out)))
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def train(model, opt, observed, results, xs, ys, first, n):
    t0 = time.perf_counter()
    for s in range(first, first + n):
        k = s % POOL
        opt.zero_grad(set_to_none=True)
        loss = F.nll_loss(model(xs[k]), ys[k])
        loss.backward()
        if observed:
            for name, p in model.named_parameters():
                results["grad:" + name] = stats(p.grad)
        opt.step()
        if observed:
            for name, p in model.named_parameters():
                results["updated:" + name] = stats(p)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("TS_BENCH_THREADS", "2")))
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    xs = torch.rand(POOL, a.batch, 1, 28, 28) * 2 - 1
    ys = torch.randint(0, 10, (POOL, a.batch))
    results = [{}, {}]
    sides = [make_model(k == 1, results[k]) for k in range(2)]
    secs = [[], []]
    for k in range(2):
        train(*sides[k], k == 1, results[k], xs, ys, 0, a.warmup)
    for r in range(a.reps):
        for i in range(2):
            k = (r + i) % 2  # alternate which side goes first
            secs[k].append(train(*sides[k], k == 1, results[k], xs, ys,
                                 a.warmup + r * a.steps, a.steps))
    if len(results[1]) != WATCHED:
        raise SystemExit(f"torch_observe: {len(results[1])} summaries, expected {WATCHED}")

    flops = 6 * a.batch * sum(i * o for i, o in LAYERS)
    best = []
    ver = torch.__version__.split("+")[0]
    for k, impl in enumerate((f"torch{ver}-plain", f"torch{ver}-hooks")):
        med = statistics.median(secs[k]) / a.steps
        best.append(min(secs[k]) / a.steps)
        print(f"{impl} role={'cand' if k else 'base'} batch={a.batch} threads={a.threads} "
              f"steps={a.steps} reps={a.reps} ms_per_step={med * 1e3:.4f} "
              f"best_ms={best[k] * 1e3:.4f} worst_ms={max(secs[k]) / a.steps * 1e3:.4f} "
              f"samples_per_s={a.batch / med:.1f} "
              f"gflops={flops / med * 1e-9:.3f}")
    ratios = [c / b for b, c in zip(secs[0], secs[1])]
    ratio = statistics.median(ratios)
    print(f"overhead pct={(ratio - 1) * 100:.2f} best_pct={(best[1] / best[0] - 1) * 100:.2f} "
          f"min_pct={(min(ratios) - 1) * 100:.2f} max_pct={(max(ratios) - 1) * 100:.2f}")

if __name__ == "__main__":
    main()
