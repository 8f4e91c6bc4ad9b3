#!/usr/bin/python3
"""tensorscope's character GPT in PyTorch (tests/reference/torch_gpt_model.py):
the twin of `tensorscope train --model gpt` and the peer of bench/bench_gpt.c.

Twin (same initial weights, same batches, same held-out windows):

    tensorscope train --model gpt --save-init INIT [flags]
    /usr/bin/python3 bench/torch_gpt.py twin --init INIT [the same flags]

draws the training windows with splitmix64 from --seed exactly as
ts_corpus_sample does, trains with AdamW (the same lr and weight decay), and
prints `final held-out loss X` over --eval-batches windows drawn from the
same evaluation seed (0x5eed) as the CLI.

Benchmark (random tokens, the timing loop of torch_mlp.py):

    /usr/bin/python3 bench/torch_gpt.py bench --layers 4 --heads 4 --embd 128 \
        --block-size 64 --batch-size 32 --steps N --threads T

prints `pytorch batch=B threads=T steps=N ms_per_step=.. samples_per_s=..
gflops=.. peak_rss_mb=..` (GFLOP/s: 6 * parameters * tokens per step, the
matmul convention; attention's T x T products excluded).
"""
import argparse
import os
import resource
import sys
import time

import numpy as np
import torch

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import torch_gpt_model  # noqa: E402

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
    ap.add_argument("mode", choices=["twin", "bench"])
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
    ap.add_argument("--eval-batches", type=int, default=20)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("TS_BENCH_THREADS", "2")))
    return ap.parse_args()


def twin(a):
    corpus = Corpus(a.data)
    shapes = torch_gpt_model.param_shapes(corpus.vocab, a.block_size, a.layers, a.embd)
    p = {}
    for name in shapes:
        v = np.load(os.path.join(a.init, name + ".npy"))
        assert v.shape == shapes[name], name
        p[name] = torch.from_numpy(v).clone().requires_grad_(True)
    opt = torch.optim.AdamW(list(p.values()), lr=a.lr, weight_decay=a.weight_decay)
    state = a.seed
    t0 = time.perf_counter()
    for step in range(1, a.steps + 1):
        x, y, state = corpus.sample(False, a.batch_size, a.block_size, state)
        opt.zero_grad(set_to_none=True)
        loss = torch_gpt_model.forward(p, x, y, a.layers, a.heads)
        loss.backward()
        opt.step()
    secs = time.perf_counter() - t0
    with torch.no_grad():
        state, total = EVAL_SEED, 0.0
        for _ in range(a.eval_batches):
            x, y, state = corpus.sample(True, a.batch_size, a.block_size, state)
            total += torch_gpt_model.forward(p, x, y, a.layers, a.heads).item()
    print(f"pytorch twin: final held-out loss {total / a.eval_batches:.4f} nats/char after {a.steps} steps "
          f"in {secs:.1f} s (last train loss {loss.item():.4f})")


def bench(a):
    V = 65
    torch.manual_seed(0)
    shapes = torch_gpt_model.param_shapes(V, a.block_size, a.layers, a.embd)
    p = {k: (torch.randn(s) * 0.02).requires_grad_(True) for k, s in shapes.items()}
    n_params = sum(int(np.prod(s)) for k, s in shapes.items() if k != "wpe.weight")
    opt = torch.optim.AdamW(list(p.values()), lr=1e-3, weight_decay=0.01)
    pool = [torch.randint(0, V, (a.batch_size, a.block_size + 1), dtype=torch.int32) for _ in range(8)]
    t0 = 0.0
    for s in range(a.warmup + a.steps):
        if s == a.warmup:
            t0 = time.perf_counter()
        d = pool[s % 8]
        opt.zero_grad(set_to_none=True)
        loss = torch_gpt_model.forward(p, d[:, :-1], d[:, 1:], a.layers, a.heads)
        loss.backward()
        opt.step()
    secs = time.perf_counter() - t0
    flops = 6.0 * n_params * a.batch_size * a.block_size
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"pytorch batch={a.batch_size} threads={a.threads} steps={a.steps} "
          f"ms_per_step={secs * 1e3 / a.steps:.4f} samples_per_s={a.batch_size * a.steps / secs:.1f} "
          f"gflops={flops * a.steps / secs * 1e-9:.3f} peak_rss_mb={rss:.1f} loss={loss.item():.4f}")


def main():
    a = args()
    torch.set_num_threads(a.threads)
    if a.mode == "twin":
        if not a.init:
            sys.exit("torch_gpt.py twin: --init DIR (from tensorscope train --model gpt --save-init DIR) is required")
        twin(a)
    else:
        bench(a)


if __name__ == "__main__":
    main()
