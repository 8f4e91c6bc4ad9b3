"""A Llama-style decoder trains through ts.training_model as in PyTorch's
own loop: RMSNorm, rotary position embeddings computed in forward from
the positions (an input) by sin and cos on graph tensors, grouped-query
attention under a causal mask, a SiLU-gated MLP; 10 AdamW steps, the
losses and the final weights within 1e-5 relative (train_beside_torch)."""
import math

import pytest

import tensorscope as ts

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional

from test_torch_semantics import train_beside_torch  # noqa: E402

pytestmark = pytest.mark.skipif(not hasattr(ts._capi.lib, "ts_graph_from_onnx"),
                                reason="this library does not import ONNX")
VOCAB, DIM, HEADS, KV_HEADS, LAYERS, BATCH, SEQ = 32, 16, 4, 2, 2, 2, 8


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Rotary(nn.Module):
    """cos and sin of positions * inv_freq, computed in forward from the
    positions the model is given."""

    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, positions):
        freqs = positions[..., None].float() * self.inv_freq  # [B, T, hd/2]
        angles = torch.cat((freqs, freqs), dim=-1)[:, None]  # [B, 1, T, hd]
        return angles.cos(), angles.sin()


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.head_dim = DIM // HEADS
        self.q_proj = nn.Linear(DIM, HEADS * self.head_dim, bias=False)
        self.k_proj = nn.Linear(DIM, KV_HEADS * self.head_dim, bias=False)
        self.v_proj = nn.Linear(DIM, KV_HEADS * self.head_dim, bias=False)
        self.o_proj = nn.Linear(HEADS * self.head_dim, DIM, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, HEADS, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, KV_HEADS, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, KV_HEADS, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        groups = HEADS // KV_HEADS  # each key/value head serves `groups` query heads
        k = k[:, :, None].expand(b, KV_HEADS, groups, t, self.head_dim).reshape(b, HEADS, t, self.head_dim)
        v = v[:, :, None].expand(b, KV_HEADS, groups, t, self.head_dim).reshape(b, HEADS, t, self.head_dim)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        causal = torch.ones(t, t, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(causal, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(b, t, DIM))


class MLP(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.gate_proj = nn.Linear(DIM, hidden, bias=False)
        self.up_proj = nn.Linear(DIM, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, DIM, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_norm, self.attn = RMSNorm(DIM), Attention()
        self.post_norm, self.mlp = RMSNorm(DIM), MLP()

    def forward(self, x, cos, sin):
        x = x + self.attn(self.input_norm(x), cos, sin)
        return x + self.mlp(self.post_norm(x))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.rotary = Rotary(DIM // HEADS)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = RMSNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, tokens, positions, targets):
        x = self.embed(tokens)
        cos, sin = self.rotary(positions)
        for layer in self.layers:
            x = layer(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def llama_inputs(step):
    g = torch.Generator().manual_seed(300 + step)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
    start = torch.randint(0, 5, (BATCH, 1), generator=g)  # each sequence from its own offset
    positions = start + torch.arange(SEQ)[None]
    return tokens[:, :-1], positions, tokens[:, 1:]


def test_a_llama_decoder_with_rope_trains_as_in_torch():
    torch.manual_seed(0)
    net = Llama()
    _, _, ours, theirs = train_beside_torch(
        net, lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01), llama_inputs)
    assert ours[-1] < ours[0]  # it learns


@pytest.mark.parametrize("capture", ["export", "onnx"])
def test_silu_is_one_op_through_either_capture(capture):
    """F.silu reaches the graph as one Silu op per MLP, no Sigmoid (the
    ONNX import fuses Mul(x, Sigmoid(x)); torch.export's capture keeps
    aten.silu out of the decompositions), and the model trains as in
    PyTorch's loop (the test above, through the default capture)."""
    from tensorscope import _export
    if capture == "export" and not _export.available(torch):
        pytest.skip(f"PyTorch {torch.__version__} has no torch.export front end")
    torch.manual_seed(0)
    net = Llama()
    tokens, positions, targets = llama_inputs(0)
    model = ts.training_model(net, ts.Options().capture(capture), optimizer=ts.SGD(lr=0.0),
                              example_inputs=(tokens, positions, targets))
    ops = [t.op for t in model.graph.tensors()]
    assert ops.count("Silu") == LAYERS and "Sigmoid" not in ops, sorted(set(ops))
    with torch.no_grad():
        want = net(tokens, positions, targets).item()
    assert float(model(tokens.numpy(), positions.numpy(), targets.numpy())) == pytest.approx(want, rel=1e-5)


def test_the_rotary_angles_are_graph_ops_of_the_positions():
    """cos and sin are computed in the graph from the positions input, not
    folded into constants at capture: other positions give other losses."""
    torch.manual_seed(0)
    net = Llama()
    tokens, positions, targets = llama_inputs(0)
    model = ts.training_model(net, ts.Options(), optimizer=ts.SGD(lr=0.0),
                              example_inputs=(tokens, positions, targets))
    ops = {t.op for t in model.graph.tensors()}
    assert {"Sin", "Cos"} <= ops, sorted(ops)
    for shift in (0, 3):
        with torch.no_grad():
            want = net(tokens, positions + shift, targets).item()
        got = float(model(tokens.numpy(), (positions + shift).numpy(), targets.numpy()))
        assert got == pytest.approx(want, rel=1e-5)


def test_the_written_out_rms_norms_are_rms_norm_ops():
    """Each RMSNorm module (x * rsqrt(mean(x^2) + eps) * w) is one RMSNorm
    op named in its module's scope, through either capture."""
    torch.manual_seed(0)
    net = Llama()
    model = ts.training_model(net, ts.Options(), optimizer=ts.SGD(lr=0.0), example_inputs=llama_inputs(0))
    norms = sorted(t.name for t in model.graph.tensors() if t.op == "RMSNorm")
    assert norms == sorted([f"layers.{i}.{n}/RMSNorm:0" for i in range(LAYERS) for n in ("input_norm", "post_norm")]
                           + ["norm/RMSNorm:0"]), norms


class NormedMLP(nn.Module):
    """nn.RMSNorm after a Linear, and F.rms_norm over the last two dims
    without a weight: torch.export keeps aten.rms_norm whole."""

    def __init__(self):
        super().__init__()
        self.fc1, self.norm, self.fc2 = nn.Linear(DIM, DIM), nn.RMSNorm(DIM, eps=1e-5), nn.Linear(DIM, VOCAB)

    def forward(self, x, targets):
        h = F.gelu(self.norm(self.fc1(x)))
        h = F.rms_norm(h.view(BATCH, SEQ, 4, DIM // 4), [4, DIM // 4]).view(BATCH, SEQ, DIM)
        return F.cross_entropy(self.fc2(h).reshape(-1, VOCAB), targets.reshape(-1))


@pytest.mark.skipif(not hasattr(nn, "RMSNorm"), reason="this PyTorch has no nn.RMSNorm (2.4 on)")
def test_rms_norm_is_one_op_and_trains_as_in_torch():
    torch.manual_seed(0)
    net = NormedMLP()
    with torch.no_grad():
        net.norm.weight.uniform_(0.5, 1.5)
    g = torch.Generator().manual_seed(500)
    x, targets = torch.randn(BATCH, SEQ, DIM, generator=g), torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    model = ts.training_model(net, ts.Options(), optimizer=ts.SGD(lr=0.0), example_inputs=(x, targets))
    ops = [t.op for t in model.graph.tensors()]
    from tensorscope._torch import capture_of
    # the ONNX capture's export writes the two-dim one as the ops it is made of
    assert ops.count("RMSNorm") == (2 if capture_of(ts.Options()) == "export" else 1), sorted(set(ops))
    assert "norm/RMSNorm:0" in {t.name for t in model.graph.tensors()}
    _, _, ours, _ = train_beside_torch(
        net, lambda m: torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.01), lambda step: (x, targets))
    assert ours[-1] < ours[0]
