"""Three ordinary model shapes brought from PyTorch, a training step each:
tensorscope against PyTorch's own step, in one process, interleaved
(bench/run.sh's exported-model rows).

    python bench/onnx_models.py MODEL --threads T --steps N --reps R
        MODEL: unet   a small U-Net (2 levels, 16-32-64 channels, GroupNorm,
                      ConvTranspose down-up, a bilinear upsampling, skip
                      concatenations), 1x32x32 images, MSE to a target
               audio  a 1-D convolutional audio encoder (strided Conv1d
                      stack with GroupNorm and GELU over 1 s of 16 kHz
                      audio, mean pooling, a linear classifier), cross entropy
               llama  a Llama-style decoder (2 layers, 128 channels, 4 query
                      heads sharing 2 key/value heads, rotary position
                      embeddings, RMSNorm, SiLU-gated MLP), next-token loss

Each module computes its own loss and is exported by PyTorch's TorchScript
exporter in training mode (tensorscope._torch.export_onnx, parameters kept
as named initializers); tensorscope trains the file's loss, PyTorch the
module, both with AdamW (lr 1e-3) on the same batch at T threads. Before
timing, a few steps on each side check that the model imports and trains:
the losses finite and falling. R rounds; each times N steps of both sides
in a rotating order after a warm-up. Prints, per side, the median round's
    <impl> batch=B threads=T steps=N ms_per_step=.. samples_per_s=.. spread_ms=MIN..MAX
and `ratio pytorch/tensorscope median=.. rounds=MIN..MAX`. Needs torch and
onnx (the real-model tests' venv).
"""
import argparse
import math
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import peer_rows


class Block(nn.Module):
    """Two 3x3 convolutions, each GroupNorm then SiLU."""

    def __init__(self, cin, cout, groups=8):
        super().__init__()
        self.c1, self.n1 = nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(groups, cout)
        self.c2, self.n2 = nn.Conv2d(cout, cout, 3, padding=1), nn.GroupNorm(groups, cout)

    def forward(self, x):
        return F.silu(self.n2(self.c2(F.silu(self.n1(self.c1(x))))))


class UNet(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.e1, self.e2, self.mid = Block(1, c), Block(c, 2 * c), Block(2 * c, 4 * c)
        self.down1, self.down2 = nn.Conv2d(c, c, 2, stride=2), nn.Conv2d(2 * c, 2 * c, 2, stride=2)
        self.up2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, stride=2)
        self.d2 = Block(4 * c, 2 * c)
        self.up1 = nn.Conv2d(2 * c, c, 1)  # after a bilinear upsampling
        self.d1 = Block(2 * c, c)
        self.out = nn.Conv2d(c, 1, 1)

    def forward(self, x, target):
        s1 = self.e1(x)
        s2 = self.e2(self.down1(s1))
        h = self.mid(self.down2(s2))
        h = self.d2(torch.cat([self.up2(h), s2], dim=1))
        h = self.up1(F.interpolate(h, scale_factor=2.0, mode="bilinear", align_corners=False))
        h = self.d1(torch.cat([h, s1], dim=1))
        return F.mse_loss(self.out(h), target)


class AudioEncoder(nn.Module):
    """wav2vec-style feature encoder: strided Conv1d, GroupNorm, GELU."""

    def __init__(self, c=64, classes=10):
        super().__init__()
        spec = [(1, c, 10, 5), (c, c, 3, 2), (c, c, 3, 2), (c, c, 3, 2), (c, c, 3, 2), (c, c, 2, 2)]
        self.convs = nn.ModuleList(nn.Conv1d(i, o, k, stride=s, bias=False) for i, o, k, s in spec)
        self.norm = nn.GroupNorm(c, c)  # wav2vec 2.0's first layer norm: one group per channel
        self.proj = nn.Linear(c, classes)

    def forward(self, wav, labels):
        h = wav
        for i, conv in enumerate(self.convs):
            h = conv(h)
            if i == 0:
                h = self.norm(h)
            h = F.gelu(h)
        return F.cross_entropy(self.proj(h.mean(dim=2)), labels)


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, d, heads, kv_heads):
        super().__init__()
        self.h, self.kv, self.hd = heads, kv_heads, d // heads
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.o = nn.Linear(d, d, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, d = x.shape
        q = self.q(x).view(b, t, self.h, self.hd).transpose(1, 2)
        k = self.k(x).view(b, t, self.kv, self.hd).transpose(1, 2)
        v = self.v(x).view(b, t, self.kv, self.hd).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        rep = self.h // self.kv  # grouped-query attention: each key/value head serves rep query heads
        k = k[:, :, None].expand(b, self.kv, rep, t, self.hd).reshape(b, self.h, t, self.hd)
        v = v[:, :, None].expand(b, self.kv, rep, t, self.hd).reshape(b, self.h, t, self.hd)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hd)) + mask
        y = torch.softmax(att, dim=-1) @ v
        return self.o(y.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.gate, self.up = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Layer(nn.Module):
    def __init__(self, d, heads, kv_heads, hidden):
        super().__init__()
        self.n1, self.attn = RMSNorm(d), Attention(d, heads, kv_heads)
        self.n2, self.mlp = RMSNorm(d), MLP(d, hidden)

    def forward(self, x, cos, sin, mask):
        x = x + self.attn(self.n1(x), cos, sin, mask)
        return x + self.mlp(self.n2(x))


class Llama(nn.Module):
    def __init__(self, vocab=256, d=128, layers=2, heads=4, kv_heads=2, hidden=352, block=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Layer(d, heads, kv_heads, hidden) for _ in range(layers))
        self.norm, self.head = RMSNorm(d), nn.Linear(d, vocab, bias=False)
        hd = d // heads
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd)), persistent=False)
        self.register_buffer("mask", torch.full((block, block), float("-inf")).triu(1), persistent=False)

    def forward(self, ids, targets):
        t = ids.shape[1]
        pos = torch.arange(t, dtype=torch.float32)
        freqs = pos[:, None] * self.inv_freq[None, :]  # as transformers' Llama: cos and sin of the positions
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        mask = self.mask[:t, :t]
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def make(name, batch):
    """(module, feeds in forward's order, default batch)"""
    g = torch.Generator().manual_seed(0)
    if name == "unet":
        b = batch or 8
        return UNet(), {"x": torch.randn(b, 1, 32, 32, generator=g), "target": torch.randn(b, 1, 32, 32, generator=g)}
    if name == "audio":
        b = batch or 8
        return AudioEncoder(), {"wav": torch.randn(b, 1, 16000, generator=g),
                                "labels": torch.randint(0, 10, (b,), generator=g)}
    b = batch or 8
    ids = torch.randint(0, 256, (b, 65), generator=g)
    return Llama(), {"ids": ids[:, :-1].contiguous(), "targets": ids[:, 1:].contiguous()}


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=["unet", "audio", "llama"])
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("TS_BENCH_THREADS", "2")))
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--check-steps", type=int, default=5)
    return ap.parse_args()


def falling(name, side, losses):
    """the check: every loss finite, the last below the first"""
    if not all(math.isfinite(v) for v in losses) or not losses[-1] < losses[0]:
        sys.exit(f"onnx_models.py {name}: {side}'s loss does not train: {losses}")


def main():
    a = parse()
    import tensorscope as ts
    from tensorscope._torch import export_onnx

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    module, feeds = make(a.model, a.batch)
    batch = next(iter(feeds.values())).shape[0]
    with tempfile.TemporaryDirectory() as workdir:
        path = os.path.join(workdir, a.model + ".onnx")
        export_onnx(module, tuple(feeds.values()), path, list(feeds))
        g = ts.Graph.from_onnx(path, {k: tuple(v.shape) for k, v in feeds.items()})
    module.train()
    m = ts.training_model(g, ts.Options().threads(a.threads).output_mode("final"),
                          optimizer=ts.AdamW(lr=1e-3), loss=g.outputs[0])
    m.compile()
    run = {k: (v.numpy().astype(np.int64) if v.dtype == torch.int64 else v.numpy()) for k, v in feeds.items()}
    opt = torch.optim.AdamW(module.parameters(), lr=1e-3)
    args = tuple(feeds.values())

    def torch_step():
        opt.zero_grad(set_to_none=True)
        loss = module(*args)
        loss.backward()
        opt.step()
        return float(loss.detach())

    def ts_step():
        return float(m(**run))

    # both start from the same weights: the first losses agree
    first = (ts_step(), torch_step())
    if abs(first[0] - first[1]) > 1e-4 * (1 + abs(first[1])):
        sys.exit(f"onnx_models.py {a.model}: first loss {first[0]:.7g} vs PyTorch's {first[1]:.7g}")
    for side, fn, v0 in (("tensorscope", ts_step, first[0]), ("pytorch", torch_step, first[1])):
        falling(a.model, side, [v0] + [fn() for _ in range(a.check_steps)])
    peer_rows.compare({"tensorscope": ts_step, "pytorch": torch_step}, batch, a.threads, a.warmup, a.steps, a.reps)


if __name__ == "__main__":
    main()
