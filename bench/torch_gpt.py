#!/usr/bin/python3
"""tensorscope's character GPT in PyTorch (tests/reference/torch_gpt_model.py,
as nn.Modules: GPT): the twin of `tensorscope train --model gpt` and the peer
of bench/bench_gpt.c.

Twin (same initial weights, same batches, same held-out windows):

    tensorscope train --model gpt --save-init INIT [flags]
    /usr/bin/python3 bench/torch_gpt.py twin --init INIT [the same flags]

draws the training windows with splitmix64 from --seed exactly as
ts_corpus_sample does, trains with AdamW (the same lr and weight decay), and
prints `final held-out loss X` over --holdout windows (the CLI's flag and
default: 20 batches' worth) drawn from the same evaluation seed (0x5eed) as
the CLI.

Benchmark (random tokens, the timing loop of torch_mlp.py):

    /usr/bin/python3 bench/torch_gpt.py bench --layers 4 --heads 4 --embd 128 \
        --block-size 64 --batch-size 32 --steps N --threads T

prints `pytorch batch=B threads=T precision=P steps=N ms_per_step=.. samples_per_s=..
gflops=.. peak_rss_mb=..` (GFLOP/s: 6 * parameters * tokens per step, the
matmul convention; attention's T x T products excluded).

--precision bf16|f16 (twin and bench): the forward and the loss under
torch.autocast("cpu"), f16 with a GradScaler (bench/torch_amp.py), the
twins of tensorscope's --precision; twin evaluates under autocast too.

Observed training (the peer of `bench_gpt watch`), the same flags and
--reps R:

    /usr/bin/python3 bench/torch_gpt.py observe ... --steps N --reps R

times the plain model against one observed as a PyTorch user would, in one
process with interleaved repetitions (as bench/torch_cnn.py --mode observe):
a forward hook on every module computing torch_observe.stats() of its output
(the attention probabilities through the Softmax module), the same of every
parameter's .grad after backward() and of every parameter after step().
Prints `torch<ver>-plain role=base ...`, `torch<ver>-hooks role=cand ...`
(watched= the summaries a step) and `overhead pct=.. best_pct=.. min_pct=..
max_pct=..`.
"""
import argparse
import os
import resource
import sys
import time

import statistics

import numpy as np
import torch

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import torch_gpt_model  # noqa: E402
import torch_amp  # noqa: E402  (bench/, this script's directory)
from torch_observe import stats  # noqa: E402  (one definition of the summary)

M64 = (1 << 64) - 1
EVAL_SEED = 0x5EED


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


class Corpus:
    """ts_corpus: distinct bytes in byte order, the last tenth held out."""

    def __init__(self, path):
        if os.path.isdir(path):
            path = os.path.join(path, "input.txt")
        raw = np.frombuffer(open(path, "rb").read(), dtype=np.uint8)
        vocab = np.unique(raw)
        lut = np.zeros(256, dtype=np.int32)
        lut[vocab] = np.arange(len(vocab), dtype=np.int32)
        self.ids = lut[raw]
        self.vocab = len(vocab)
        self.n_train = len(raw) - len(raw) // 10

    def sample(self, held_out, batch, T, state):
        first = self.n_train if held_out else 0
        n = len(self.ids) - self.n_train if held_out else self.n_train
        x = np.empty((batch, T), dtype=np.int32)
        y = np.empty((batch, T), dtype=np.int32)
        for b in range(batch):
            state, z = splitmix64(state)
            off = first + z % (n - T)
            x[b] = self.ids[off:off + T]
            y[b] = self.ids[off + 1:off + 1 + T]
        return torch.from_numpy(x), torch.from_numpy(y), state


def args():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["twin", "bench", "observe"])
    ap.add_argument("--init")
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "tinyshakespeare"))
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--embd", type=int, default=64)
    ap.add_argument("--block-size", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--holdout", type=int, default=-1, help="held-out windows (default 20 * --batch-size, as the CLI)")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("TS_BENCH_THREADS", "2")))
    ap.add_argument("--reps", type=int, default=5)
    torch_amp.add_argument(ap)
    return ap.parse_args()


def twin(a):
    if a.holdout == 0:
        sys.exit("torch_gpt.py twin: --holdout 0 leaves nothing to evaluate")
    corpus = Corpus(a.data)
    model = torch_gpt_model.GPT(corpus.vocab, a.block_size, a.layers, a.heads, a.embd)
    shapes = torch_gpt_model.param_shapes(corpus.vocab, a.block_size, a.layers, a.embd)
    init = {}
    for name in shapes:
        init[name] = np.load(os.path.join(a.init, name + ".npy"))
        assert init[name].shape == shapes[name], name
    model.load_params(init)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    amp = torch_amp.Amp(a.precision)
    state = a.seed
    t0 = time.perf_counter()
    for step in range(1, a.steps + 1):
        x, y, state = corpus.sample(False, a.batch_size, a.block_size, state)
        opt.zero_grad(set_to_none=True)
        with amp.autocast():
            loss = model(x, y)
        amp.step(loss, opt)
    secs = time.perf_counter() - t0
    with torch.no_grad(), amp.autocast():
        batches = (a.holdout + a.batch_size - 1) // a.batch_size if a.holdout >= 0 else 20
        state, total = EVAL_SEED, 0.0
        for _ in range(batches):
            x, y, state = corpus.sample(True, a.batch_size, a.block_size, state)
            total += model(x, y).item()
    print(f"pytorch twin ({a.precision}): final held-out loss {total / batches:.4f} nats/char after {a.steps} steps "
          f"in {secs:.1f} s (last train loss {loss.item():.4f})")


V = 65  # the benchmark's vocabulary (Tiny Shakespeare's)


def bench_side(a, results=None):
    """A model with its optimizer; `results` (a dict) makes it the observed
    one: hooks on every module, and train() summarises .grad and the
    updated parameters into it."""
    torch.manual_seed(0)
    model = torch_gpt_model.GPT(V, a.block_size, a.layers, a.heads, a.embd)
    with torch.no_grad():  # ts_gpt_build's initialisation: N(0, 0.02), zero biases, unit norms
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.zero_()
            elif ".ln" not in name and not name.startswith("ln"):
                p.normal_(0.0, 0.02)
    if results is not None:
        for name, mod in model.named_modules():
            mod.register_forward_hook(lambda m, i, out, n=name: results.__setitem__("act:" + n, stats(out)))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01), results, torch_amp.Amp(a.precision)


def train(side, pool, first, n):
    model, opt, results, amp = side
    t0 = time.perf_counter()
    for s in range(first, first + n):
        d = pool[s % len(pool)]
        opt.zero_grad(set_to_none=True)
        with amp.autocast():
            loss = model(d[:, :-1], d[:, 1:])
        if results is not None:  # observe (f32): the summaries sit between backward and step
            loss.backward()
            for name, p in model.named_parameters():
                results["grad:" + name] = stats(p.grad)
            opt.step()
        else:
            amp.step(loss, opt)
        if results is not None:
            for name, p in model.named_parameters():
                results["updated:" + name] = stats(p)
    return time.perf_counter() - t0, loss


def bench_setup(a):
    torch.manual_seed(1)
    pool = [torch.randint(0, V, (a.batch_size, a.block_size + 1), dtype=torch.int32) for _ in range(8)]
    shapes = torch_gpt_model.param_shapes(V, a.block_size, a.layers, a.embd)
    n_params = sum(int(np.prod(s)) for k, s in shapes.items() if k != "wpe.weight")
    return pool, 6.0 * n_params * a.batch_size * a.block_size


def bench(a):
    pool, flops = bench_setup(a)
    side = bench_side(a)
    train(side, pool, 0, a.warmup)
    secs, loss = train(side, pool, a.warmup, a.steps)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"pytorch batch={a.batch_size} threads={a.threads} precision={a.precision} steps={a.steps} "
          f"ms_per_step={secs * 1e3 / a.steps:.4f} samples_per_s={a.batch_size * a.steps / secs:.1f} "
          f"gflops={flops * a.steps / secs * 1e-9:.3f} peak_rss_mb={rss:.1f} loss={loss.item():.4f}")


def observe(a):
    pool, flops = bench_setup(a)
    sides = [bench_side(a), bench_side(a, {})]
    for side in sides:
        train(side, pool, 0, a.warmup)
    secs = [[], []]
    for r in range(a.reps):
        for i in range(2):
            k = (r + i) % 2  # alternate which side goes first
            secs[k].append(train(sides[k], pool, a.warmup + r * a.steps, a.steps)[0])
    ver = torch.__version__.split("+")[0]
    best = []
    for k, impl in enumerate((f"torch{ver}-plain", f"torch{ver}-hooks")):
        med = statistics.median(secs[k]) / a.steps
        best.append(min(secs[k]) / a.steps)
        watched = len(sides[1][2]) if k else 0
        print(f"{impl} role={'cand' if k else 'base'} batch={a.batch_size} threads={a.threads} steps={a.steps} "
              f"reps={a.reps} watched={watched} ms_per_step={med * 1e3:.4f} best_ms={best[k] * 1e3:.4f} "
              f"worst_ms={max(secs[k]) / a.steps * 1e3:.4f} samples_per_s={a.batch_size / med:.1f} gflops={flops / med * 1e-9:.3f}")
    ratios = [c / b for b, c in zip(secs[0], secs[1])]
    print(f"overhead pct={(statistics.median(ratios) - 1) * 100:.2f} best_pct={(best[1] / best[0] - 1) * 100:.2f} "
          f"min_pct={(min(ratios) - 1) * 100:.2f} max_pct={(max(ratios) - 1) * 100:.2f}")


def main():
    a = args()
    torch.set_num_threads(a.threads)
    if a.mode == "twin":
        if not a.init:
            sys.exit("torch_gpt.py twin: --init DIR (from tensorscope train --model gpt --save-init DIR) is required")
        twin(a)
    elif a.mode == "bench":
        bench(a)
    elif a.precision != "f32":
        sys.exit("torch_gpt.py observe: f32 only (--precision is for twin and bench)")
    else:
        observe(a)


if __name__ == "__main__":
    main()
