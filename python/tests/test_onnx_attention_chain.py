"""Attention as PyTorch's TorchScript exporter writes it (MatMul by the
transposed keys, the scale, the causal mask added or filled in, Softmax, MatMul by
the values; grouped-query keys and values expanded before) is imported as
one Attention node per layer with those ops as its unfused twin, reading
the key and value heads before their repeat (docs/onnx.md, "Attention
chains"). The one pass trains as the unfused
ops do (the same model with each layer's probabilities anchored runs
them; the one without runs no Softmax) and as PyTorch does: the losses of four AdamW steps, the first
step's gradients, and the anchored probabilities against PyTorch's."""
import math
import os
import tempfile

import numpy as np
import pytest

import tensorscope as ts

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional

pytestmark = pytest.mark.skipif(not hasattr(ts._capi.lib, "ts_graph_from_onnx"),
                                reason="this library does not import ONNX")
VOCAB, DIM, HEADS, KV_HEADS, LAYERS, BATCH, SEQ, STEPS = 32, 32, 4, 2, 2, 2, 12, 4


class Attention(nn.Module):
    def __init__(self, divide):
        super().__init__()
        self.hd, self.divide = DIM // HEADS, divide
        self.q = nn.Linear(DIM, DIM, bias=False)
        self.k = nn.Linear(DIM, KV_HEADS * self.hd, bias=False)
        self.v = nn.Linear(DIM, KV_HEADS * self.hd, bias=False)
        self.o = nn.Linear(DIM, DIM, bias=False)
        self.probs = None

    def forward(self, x, mask):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, HEADS, self.hd).transpose(1, 2)
        k = self.k(x).view(b, t, KV_HEADS, self.hd).transpose(1, 2)
        v = self.v(x).view(b, t, KV_HEADS, self.hd).transpose(1, 2)
        rep = HEADS // KV_HEADS
        k = k[:, :, None].expand(b, KV_HEADS, rep, t, self.hd).reshape(b, HEADS, t, self.hd)
        v = v[:, :, None].expand(b, KV_HEADS, rep, t, self.hd).reshape(b, HEADS, t, self.hd)
        s = q @ k.transpose(-2, -1)
        s = s / math.sqrt(self.hd) if self.divide else s * (1.0 / math.sqrt(self.hd))
        p = torch.softmax(s + mask if mask.dtype.is_floating_point else s.masked_fill(mask, float("-inf")), dim=-1)
        self.probs = p.detach()
        return self.o((p @ v).transpose(1, 2).reshape(b, t, DIM))


class Decoder(nn.Module):
    """Pre-norm blocks of causal grouped-query attention and a tanh MLP;
    `divide`: the scale as a Div (else a Mul by its inverse); `fill`: the
    mask a bool one, masked_fill (a Where), else an additive -inf one."""

    def __init__(self, divide=False, fill=False):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.norms = nn.ModuleList(nn.LayerNorm(DIM) for _ in range(LAYERS))
        self.attn = nn.ModuleList(Attention(divide) for _ in range(LAYERS))
        self.mlp = nn.ModuleList(nn.Linear(DIM, DIM) for _ in range(LAYERS))
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        causal = torch.ones(SEQ, SEQ, dtype=torch.bool).triu(1)
        self.register_buffer("mask", causal if fill else torch.zeros(SEQ, SEQ).masked_fill(causal, float("-inf")), persistent=False)

    def forward(self, ids, targets):
        x = self.embed(ids)
        for norm, attn, mlp in zip(self.norms, self.attn, self.mlp):
            x = x + attn(norm(x), self.mask)
            x = x + torch.tanh(mlp(x))
        return F.cross_entropy(self.head(x).reshape(-1, VOCAB), targets.reshape(-1))


def softmax_calls():
    """how many Softmax ops this process has run (its OpTime metric)"""
    for block in ts.metrics_report().split("Metric: ")[1:]:
        if block.startswith("OpTime.Softmax\n"):
            return int(block.split("TotalSamples:")[1].split()[0])
    return 0


def batch(step):
    g = torch.Generator().manual_seed(100 + step)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
    return ids[:, :-1].contiguous(), ids[:, 1:].contiguous()


def imported(module):
    from tensorscope._torch import export_onnx
    ids, targets = batch(0)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "decoder.onnx")
        export_onnx(module, (ids, targets), path, ["ids", "targets"])
        return ts.Graph.from_onnx(path, {"ids": tuple(ids.shape), "targets": tuple(targets.shape)})


@pytest.mark.parametrize("divide,fill", [(False, False), (True, False), (False, True)])
def test_attention_chain_one_pass(divide, fill):
    torch.manual_seed(0)
    module = Decoder(divide, fill)
    fused_g, twin_g = imported(module), imported(module)
    att = [t for t in fused_g.tensors() if t.op == "Attention"]
    assert len(att) == LAYERS, f"the exported attention is not one Attention node per layer: {[t.name for t in att]}"
    assert att[0].inputs[-1].op == "MatMul"  # its twin: the unfused ops, the last the product by the values
    assert [att[0].inputs[j].shape[1] for j in range(3)] == [HEADS, KV_HEADS, KV_HEADS]  # k and v before their repeat
    params = sorted(fused_g.parameters())
    grads = lambda o: [o.anchor_tensor(f"g{i}", f"Gradient___{p}", "final") for i, p in enumerate(params)]
    fused_opts, twin_opts = ts.Options(), ts.Options()
    grads(fused_opts), grads(twin_opts)
    for layer in range(LAYERS):  # the file's name of each layer's probabilities: observed, the layer runs its unfused ops
        twin_opts.anchor_tensor(f"p{layer}", f"/attn.{layer}/Softmax_output_0", "final")
    fused = ts.training_model(fused_g, fused_opts, optimizer=ts.AdamW(lr=1e-2), loss=fused_g.outputs[0])
    twin = ts.training_model(twin_g, twin_opts, optimizer=ts.AdamW(lr=1e-2), loss=twin_g.outputs[0])
    opt = torch.optim.AdamW(module.parameters(), lr=1e-2)
    for step in range(STEPS):
        ids, targets = batch(step)
        feed = {"ids": ids.numpy(), "targets": targets.numpy()}
        before = softmax_calls()
        ours = float(fused(**feed))
        assert softmax_calls() == before, "the fused model ran the unfused Softmax"
        unfused = float(twin(**feed))
        assert softmax_calls() > before, "the model with its probabilities anchored did not run the unfused Softmax"
        opt.zero_grad()
        loss = module(ids, targets)
        loss.backward()
        opt.step()
        np.testing.assert_allclose([ours, unfused], [loss.item()] * 2, rtol=2e-5, err_msg=f"step {step}")
        if step == 0:
            for i, p in enumerate(params):
                np.testing.assert_allclose(fused.get_anchored_tensor(f"g{i}"), twin.get_anchored_tensor(f"g{i}"),
                                           rtol=1e-4, atol=1e-6, err_msg=p)
        for layer in range(LAYERS):
            np.testing.assert_allclose(twin.get_anchored_tensor(f"p{layer}"), module.attn[layer].probs.numpy(),
                                       rtol=1e-4, atol=1e-6, err_msg=f"step {step} layer {layer}")
