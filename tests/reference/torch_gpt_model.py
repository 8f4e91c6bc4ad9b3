"""tensorscope's character GPT (ts_gpt_build) in PyTorch, op for op, with
tensorscope's names: used by make_gpt_fixtures.py and by the benchmark's
twin (bench/torch_gpt.py)."""
import math

import torch
import torch.nn.functional as F


def param_shapes(V, T, L, C):
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


def forward(p, tokens, targets, L, H, acts=None):
    """Returns the mean cross entropy; `acts` (a dict) gets every named
    intermediate when given."""
    a = acts if acts is not None else {}
    B, T = tokens.shape
    V, C = p["wte.weight"].shape
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
    return F.cross_entropy(logits.reshape(B * T, V), targets.long().reshape(B * T))
