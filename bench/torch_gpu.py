#!/usr/bin/python3
"""PyTorch on the same GPU: the peer of bench/bench_gpu.c, one row a call.

    python3 bench/torch_gpu.py ROW [--steps N]

ROW as bench_gpu.c (mlp32, mlp1000, lenet64, gpt128, gpt2; ROW_tf32 with
float32 products in TF32, torch.backends.cuda.matmul.allow_tf32); the same models
(the tutorial MLP, LeNet+BN as bench/torch_cnn.py, the GPT of
tests/reference/torch_gpt_model.py), optimizers and random data, fp32
without TF32. Times, median of N steps after 3 warm-up steps: eager; the
same step captured once as a CUDA graph and replayed (PyTorch's documented
whole-network capture, capturable optimizers); eager with hooks taking
bench/torch_observe.stats() of every module output, every parameter
gradient and every updated parameter (the summaries .item()'d, as a user
logs them). Prints
    torch row=R eager_ms=E graph_ms=G hooks_ms=H hooks_overhead_pct=P peak_mb=M
"""
import argparse
import os
import statistics
import sys
import time

import torch

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import torch_gpt_model  # noqa: E402
from torch_observe import stats  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def lenet():
    def conv_bn(cin, cout, pad):
        return [torch.nn.Conv2d(cin, cout, 5, padding=pad, bias=False), torch.nn.BatchNorm2d(cout),
                torch.nn.ReLU(), torch.nn.MaxPool2d(2)]
    return torch.nn.Sequential(*conv_bn(1, 6, 2), *conv_bn(6, 16, 0), torch.nn.Flatten(1),
                               torch.nn.Linear(400, 120), torch.nn.ReLU(), torch.nn.Linear(120, 84),
                               torch.nn.ReLU(), torch.nn.Linear(84, 10), torch.nn.LogSoftmax(dim=1))


def make(row, dev):
    torch.manual_seed(0)
    if row in ("mlp32", "mlp1000"):
        B = 32 if row == "mlp32" else 1000
        model = torch.nn.Sequential(torch.nn.Flatten(1), torch.nn.Linear(784, 320), torch.nn.ReLU(),
                                    torch.nn.Linear(320, 100), torch.nn.ReLU(), torch.nn.Linear(100, 10),
                                    torch.nn.LogSoftmax(dim=1)).to(dev)
        x, y = torch.rand(B, 1, 28, 28, device=dev) * 2 - 1, torch.randint(0, 10, (B,), device=dev)
        return model, (x, y), lambda m, x, y: torch.nn.functional.nll_loss(m(x), y), "sgd"
    if row == "lenet64":
        model = lenet().to(dev)
        x, y = torch.rand(64, 1, 28, 28, device=dev) * 2 - 1, torch.randint(0, 10, (64,), device=dev)
        return model, (x, y), lambda m, x, y: torch.nn.functional.nll_loss(m(x), y), "adam"
    V, T, L, H, C, B = (65, 64, 4, 4, 128, 32) if row == "gpt128" else (50304, 1024, 12, 12, 768, 8)
    model = torch_gpt_model.GPT(V, T, L, H, C).to(dev)
    x, y = torch.randint(0, V, (B, T), device=dev), torch.randint(0, V, (B, T), device=dev)
    return model, (x, y), lambda m, x, y: m(x, y), "adamw"


def optimizer(kind, params, capturable):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.01, momentum=0.9)
    if kind == "adam":
        return torch.optim.Adam(params, lr=1e-3, capturable=capturable)
    return torch.optim.AdamW(params, lr=3e-4, weight_decay=0.1, capturable=capturable)


def timed(step, n):
    ts = []
    for _ in range(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        step()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def eager(row, dev, n, hooked=False):
    model, (x, y), lossfn, kind = make(row, dev)
    opt = optimizer(kind, model.parameters(), False)
    logged = []
    if hooked:
        for mod in model.modules():
            if not list(mod.children()):
                mod.register_forward_hook(lambda _m, _i, out: logged.append(stats(out)))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = lossfn(model, x, y)
        loss.backward()
        if hooked:
            logged.extend(stats(p.grad) for p in model.parameters() if p.grad is not None)
        opt.step()
        if hooked:
            logged.extend(stats(p) for p in model.parameters())
            for s in logged:  # a user logs them: each summary to the host
                [v.item() if torch.is_tensor(v) else v for v in s]
            logged.clear()
    for _ in range(3):
        step()
    return timed(step, n)


def graphed(row, dev, n):
    model, (x, y), lossfn, kind = make(row, dev)
    opt = optimizer(kind, model.parameters(), True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            lossfn(model, x, y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        loss = lossfn(model, x, y)
        loss.backward()
        opt.step()
    for _ in range(3):
        g.replay()
    return timed(g.replay, n)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("row")
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    row = a.row[:-len("_tf32")] if a.row.endswith("_tf32") else a.row  # ROW_tf32: float32 products in TF32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = row != a.row
    dev = torch.device("cuda")
    torch.cuda.reset_peak_memory_stats()
    e = eager(row, dev, a.steps)
    peak = torch.cuda.max_memory_allocated() / 2**20
    try:
        gr = "%.4f" % graphed(row, dev, a.steps)
    except Exception as ex:  # noqa: BLE001 -- reported in the table
        gr = "failed(%s)" % type(ex).__name__
    h = eager(row, dev, a.steps, hooked=True)
    print("torch row=%s eager_ms=%.4f graph_ms=%s hooks_ms=%.4f hooks_overhead_pct=%.1f peak_mb=%.1f"
          % (a.row, e, gr, h, 100 * (h / e - 1), peak), flush=True)


if __name__ == "__main__":
    main()
