"""tensorscope's character GPT (ts_gpt_build) in PyTorch, twice: forward()
op for op with tensorscope's names for every intermediate (what
make_gpt_fixtures.py writes), and GPT, the same model as nn.Modules
(nn.Embedding, nn.LayerNorm, nn.Linear, an attention module, the output
projection tied to wte) whose parameter names are tensorscope's, so that a
PyTorch user's forward hooks attach to every layer (bench/torch_gpt.py: the
twin, the benchmark and the observed training)."""
import math

import torch
import torch.nn as nn
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


class Attention(nn.Module):
    """Causal self-attention over [B*T, C]: qkv, heads, masked softmax, proj."""

    def __init__(self, C, H, T):
        super().__init__()
        self.qkv, self.proj, self.heads = nn.Linear(C, 3 * C), nn.Linear(C, C), H
        self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1), persistent=False)
        self.softmax = nn.Softmax(dim=-1)  # a module, so a hook sees the attention probabilities

    def forward(self, h, B, T):
        C = h.shape[1]
        q, k, v = (part.reshape(B, T, self.heads, C // self.heads).transpose(1, 2) for part in self.qkv(h).split(C, dim=1))
        att = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(C // self.heads))
        att = self.softmax(att.masked_fill(self.mask[:T, :T], float("-inf")))
        return self.proj((att @ v).transpose(1, 2).reshape(B * T, C))


class MLP(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.fc, self.gelu, self.proj = nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C)

    def forward(self, h):
        return self.proj(self.gelu(self.fc(h)))


class Block(nn.Module):
    def __init__(self, C, H, T):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(C), Attention(C, H, T)
        self.ln2, self.mlp = nn.LayerNorm(C), MLP(C)

    def forward(self, x, B, T):
        x = x + self.attn(self.ln1(x), B, T)
        return x + self.mlp(self.ln2(x))


class TiedHead(nn.Module):
    """logits = x wte^T: the input embedding again (no parameter of its own)."""

    def __init__(self, wte):
        super().__init__()
        self.wte = [wte]  # in a list: not a submodule, so wte.weight is named once

    def forward(self, x):
        return x @ self.wte[0].weight.t()


class GPT(nn.Module):
    """ts_gpt_build as modules; parameter names as param_shapes()."""

    def __init__(self, V, T, L, H, C):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, H, T) for _ in range(L))
        self.ln_f, self.lm_head = nn.LayerNorm(C), TiedHead(self.wte)

    def forward(self, tokens, targets):
        B, T = tokens.shape
        x = (self.wte(tokens.long()) + self.wpe.weight[:T]).reshape(B * T, -1)
        for block in self.blocks:
            x = block(x, B, T)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits, targets.long().reshape(B * T))

    def load_params(self, p):
        """Copies {name: array or tensor} (every name of param_shapes) in."""
        with torch.no_grad():
            for name, q in self.named_parameters():
                q.copy_(torch.as_tensor(p[name]))
