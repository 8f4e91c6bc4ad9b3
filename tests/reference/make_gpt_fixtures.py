#!/usr/bin/python3
"""Writes the PyTorch reference fixture of a 2-layer character GPT.

    /usr/bin/python3 tests/reference/make_gpt_fixtures.py [OUT_DIR]

OUT_DIR defaults to tests/fixtures; the file is gpt_v1.bin, in the format of
make_fixtures.py (its Writer is reused). The model is ts_gpt_build's, op for
op, with tensorscope's names: vocab 11, block 8, 2 layers, 2 heads, 16
channels, batch 3; pre-norm blocks, causal attention, GELU (erf) MLPs, tied
embeddings (wte.weight is also the output projection). Weights from
torch.manual_seed(0), N(0, 0.2) so that activations are far from trivial.

Entries:
    tokens, targets               i32 [3,8]
    <param>                       every initial parameter
    loss                          f32[]
    Gradient___<param>            every parameter gradient (wte.weight's is
                                  the sum of its two uses)
    <activation>, Gradient___<activation>   for ACTIVATIONS below
    adamw1/<param>                parameters after one AdamW step
                                  (lr 1e-2, weight decay 0.1)
    traj/tokens, traj/targets     i32 [60,8]: 20 micro-batches of 3
    traj/loss                     f32[20]: per micro-batch loss, AdamW
                                  (lr 1e-2, wd 0.1), A = 2 over 10 steps
    traj/final/<param>            parameters after the 10 steps
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import ROOT, Writer  # noqa: E402

V, T, L, H, C, B = 11, 8, 2, 2, 16, 3
TRAJ_STEPS, TRAJ_ACCUM = 10, 2


def param_shapes():
    s = {"wte.weight": (V, C), "wpe.weight": (T, C)}
    for l in range(L):
        p = f"blocks.{l}."
        s[p + "ln1.weight"], s[p + "ln1.bias"] = (C,), (C,)
        s[p + "attn.qkv.weight"], s[p + "attn.qkv.bias"] = (3 * C, C), (3 * C,)
        s[p + "attn.proj.weight"], s[p + "attn.proj.bias"] = (C, C), (C,)
        s[p + "ln2.weight"], s[p + "ln2.bias"] = (C,), (C,)
        s[p + "mlp.fc.weight"], s[p + "mlp.fc.bias"] = (4 * C, C), (4 * C,)
        s[p + "mlp.proj.weight"], s[p + "mlp.proj.bias"] = (C, 4 * C), (C,)
    s["ln_f.weight"], s["ln_f.bias"] = (C,), (C,)
    return s


def initial_params():
    torch.manual_seed(0)
    out = {}
    for name, shape in param_shapes().items():
        v = torch.randn(shape) * 0.2
        if name.endswith("ln1.weight") or name.endswith("ln2.weight") or name == "ln_f.weight":
            v = 1.0 + v
        out[name] = v
    return out


def forward(p, tokens, targets):
    """ts_gpt_build op for op; returns (loss, activations by name)."""
    a = {}
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    emb = p["wte.weight"][tokens.long()]
    a["Embedding:0"] = emb
    x = emb + p["wpe.weight"]
    a["Add:0"] = x
    x = x.reshape(B * T, C)
    a["Reshape:0"] = x
    for l in range(L):
        s = f"blocks.{l}"
        h = F.layer_norm(x, (C,), p[s + ".ln1.weight"], p[s + ".ln1.bias"], 1e-5)
        a[s + ".ln1/LayerNorm:0"] = h
        qkv = h @ p[s + ".attn.qkv.weight"].t() + p[s + ".attn.qkv.bias"]
        a[s + ".attn.qkv/Add:0"] = qkv
        heads = []
        for k in range(3):
            part = qkv[:, k * C:(k + 1) * C]
            a[f"{s}.attn/Slice:{k}"] = part
            th = part.reshape(B, T, H, C // H).transpose(1, 2)
            a[f"{s}.attn/Transpose:{k}"] = th
            heads.append(th)
        q, kk, v = heads
        att = (q @ kk.transpose(-1, -2)) * (1.0 / math.sqrt(C // H))
        a[s + ".attn/Scale:0"] = att
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        a[s + ".attn/Softmax:0"] = att
        y = att @ v
        a[s + ".attn/MatMul:1"] = y
        y = y.transpose(1, 2).reshape(B * T, C)
        a[s + ".attn/Reshape:3"] = y
        y = y @ p[s + ".attn.proj.weight"].t() + p[s + ".attn.proj.bias"]
        a[s + ".attn.proj/Add:0"] = y
        x = x + y
        a[s + "/Add:0"] = x
        h = F.layer_norm(x, (C,), p[s + ".ln2.weight"], p[s + ".ln2.bias"], 1e-5)
        a[s + ".ln2/LayerNorm:0"] = h
        h = h @ p[s + ".mlp.fc.weight"].t() + p[s + ".mlp.fc.bias"]
        a[s + ".mlp.fc/Add:0"] = h
        h = F.gelu(h)
        a[s + ".mlp/Gelu:0"] = h
        h = h @ p[s + ".mlp.proj.weight"].t() + p[s + ".mlp.proj.bias"]
        a[s + ".mlp.proj/Add:0"] = h
        x = x + h
        a[s + "/Add:1"] = x
    x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    a["ln_f/LayerNorm:0"] = x
    logits = (x @ p["wte.weight"].t()).reshape(B, T, V)
    a["logits"] = logits
    loss = F.cross_entropy(logits.reshape(B * T, V), targets.long().reshape(B * T))
    return loss, a


def leaf_copies(params):
    return {k: v.clone().requires_grad_(True) for k, v in params.items()}


def add_params(w, prefix, p):
    for name in param_shapes():
        w.add(prefix + name, p[name])


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "fixtures")
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    params = initial_params()
    g = torch.Generator().manual_seed(1)
    n = (1 + TRAJ_STEPS * TRAJ_ACCUM) * B
    data = torch.randint(0, V, (n, T + 1), generator=g, dtype=torch.int32)
    tokens, targets = data[:B, :T].contiguous(), data[:B, 1:].contiguous()
    w = Writer()
    w.add("tokens", tokens)
    w.add("targets", targets)
    add_params(w, "", params)

    p = leaf_copies(params)
    loss, acts = forward(p, tokens, targets)
    for t in acts.values():
        t.retain_grad()
    loss.backward()
    w.add("loss", loss.detach().reshape(()))
    for name in param_shapes():
        w.add("Gradient___" + name, p[name].grad)
    for name, t in acts.items():
        w.add(name, t)
        w.add("Gradient___" + name, t.grad)

    p = leaf_copies(params)
    opt = torch.optim.AdamW(list(p.values()), lr=1e-2, weight_decay=0.1)
    loss, _ = forward(p, tokens, targets)
    loss.backward()
    opt.step()
    add_params(w, "adamw1/", p)

    p = leaf_copies(params)
    opt = torch.optim.AdamW(list(p.values()), lr=1e-2, weight_decay=0.1)
    tt, ty = data[B:, :T].contiguous(), data[B:, 1:].contiguous()
    losses = []
    for step in range(TRAJ_STEPS):
        opt.zero_grad()
        for k in range(TRAJ_ACCUM):
            i = (step * TRAJ_ACCUM + k) * B
            loss, _ = forward(p, tt[i:i + B], ty[i:i + B])
            (loss / TRAJ_ACCUM).backward()
            losses.append(loss.item())
        opt.step()
    w.add("traj/tokens", tt)
    w.add("traj/targets", ty)
    w.add("traj/loss", np.array(losses, dtype=np.float32))
    add_params(w, "traj/final/", p)
    w.write(os.path.join(out_dir, "gpt_v1.bin"))


if __name__ == "__main__":
    main()
