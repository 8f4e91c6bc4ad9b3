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
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import ROOT, Writer, accumulated_steps  # noqa: E402
import torch_gpt_model  # noqa: E402

V, T, L, H, C, B = 11, 8, 2, 2, 16, 3
TRAJ_STEPS, TRAJ_ACCUM = 10, 2


def param_shapes():
    return torch_gpt_model.param_shapes(V, T, L, C)


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
    acts = {}
    loss = torch_gpt_model.forward(p, tokens, targets, L, H, acts)
    return loss, acts


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
    losses = accumulated_steps(opt, lambda i: forward(p, tt[i * B:(i + 1) * B], ty[i * B:(i + 1) * B])[0], TRAJ_STEPS, TRAJ_ACCUM)
    w.add("traj/tokens", tt)
    w.add("traj/targets", ty)
    w.add("traj/loss", np.array(losses, dtype=np.float32))
    add_params(w, "traj/final/", p)
    w.write(os.path.join(out_dir, "gpt_v1.bin"))


if __name__ == "__main__":
    main()
