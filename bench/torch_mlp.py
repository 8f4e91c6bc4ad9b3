#!/usr/bin/python3
"""The tutorial MLP in PyTorch: the peer of bench/bench_mlp.c.

    /usr/bin/python3 bench/torch_mlp.py --batch B [--steps N] [--warmup W] [--threads T] [--precision P]

Same model (784-320-100-10, ReLU, log_softmax + nll_loss), SGD lr 0.01, a
pool of 8 random batches (x ~ U(-1,1), labels 0..9) cycled step by step,
warmup steps excluded from the timing. torch.set_num_threads(T), T = 2 by
default (or $TS_BENCH_THREADS). PyTorch gets its fastest loop: zero_grad
with set_to_none, no per-step .item(). --precision bf16|f16: autocast on
the CPU, f16 with a GradScaler (bench/torch_amp.py; PyTorch 2.3 or later
for f16).

GFLOP/s counts matmuls only (the convention of bench/run.sh):
6 * B * (784*320 + 320*100 + 100*10) per step.

Runs under any PyTorch: bench/run.sh runs it with the current PyPI release
(its venv) and with Debian's. Prints one line, the impl named by the version
and peak_rss_mb the process's peak resident set (getrusage):
`pytorch-2.15.0 batch=B threads=T precision=P steps=N ms_per_step=.. samples_per_s=.. gflops=.. peak_rss_mb=.. loss=..`
"""
import argparse
import os
import resource
import time

import torch
import torch.nn.functional as F

import torch_amp

POOL = 8
LAYERS = [(784, 320), (320, 100), (100, 10)]


def matmul_flops_per_step(batch):
    return 6 * batch * sum(i * o for i, o in LAYERS)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("TS_BENCH_THREADS", "2")))
    torch_amp.add_argument(ap)
    a = ap.parse_args()
    amp = torch_amp.Amp(a.precision)

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Flatten(1),
        torch.nn.Linear(784, 320), torch.nn.ReLU(),
        torch.nn.Linear(320, 100), torch.nn.ReLU(),
        torch.nn.Linear(100, 10), torch.nn.LogSoftmax(dim=1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    xs = torch.rand(POOL, a.batch, 1, 28, 28) * 2 - 1
    ys = torch.randint(0, 10, (POOL, a.batch))

    t0 = 0.0
    for s in range(a.warmup + a.steps):
        if s == a.warmup:
            t0 = time.perf_counter()
        k = s % POOL
        opt.zero_grad(set_to_none=True)
        with amp.autocast():
            loss = F.nll_loss(model(xs[k]), ys[k])
        amp.step(loss, opt)
    secs = time.perf_counter() - t0

    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"pytorch-{torch.__version__.split('+')[0]} batch={a.batch} threads={a.threads} precision={a.precision} steps={a.steps} "
          f"ms_per_step={secs * 1e3 / a.steps:.4f} samples_per_s={a.batch * a.steps / secs:.1f} "
          f"gflops={matmul_flops_per_step(a.batch) * a.steps / secs * 1e-9:.3f} peak_rss_mb={rss_mb:.1f} "
          f"loss={loss.item():.4f}")


if __name__ == "__main__":
    main()
