#!/usr/bin/python3
"""Exports small PyTorch models to ONNX and writes what PyTorch computes for
them, for tests/test_onnx_import.c. Run with Debian's interpreter (it has
python3-torch and numpy):

    /usr/bin/python3 tests/reference/make_onnx_fixtures.py [OUTDIR]

For each model NAME it writes NAME.onnx and NAME.npz holding
  x, labels         the fixed input batch and integer labels
  out               PyTorch's output for x
  loss              cross_entropy(out, labels) (mean; GPT: over [B*T, V])
  grad/<param>      d loss / d param for every named parameter
  traj              (MLP, LeNet) the loss of 10 SGD steps (lr 0.05) on x
mlp_dynamic_op13 leaves the batch dimension dynamic; mlp_op11 is an export
at an opset before 13 (its ops' older versions, LogSoftmax's 2-D coercion).
Widths are reduced so every file stays small; weights and inputs come from
fixed seeds, so a rerun writes the same numbers.
"""
import io
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "onnx")


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 12)
        self.fc2 = nn.Linear(12, 10)
        self.fc3 = nn.Linear(10, 5)

    def forward(self, x):
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return F.log_softmax(self.fc3(x), dim=1)


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 5, padding=2)
        self.conv2 = nn.Conv2d(4, 6, 5)
        self.fc1 = nn.Linear(6 * 2 * 2, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(torch.tanh(self.conv1(x)), 2)
        x = F.avg_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc2(torch.sigmoid(self.fc1(x)))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.downsample is None else self.downsample(x)))


class ResNet18(nn.Module):
    """torchvision's resnet18 layout (2-2-2-2 basic blocks) at widths w."""

    def __init__(self, w=(4, 8, 8, 16), classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, w[0], 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(w[0])
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = w[0]
        for i, c in enumerate(w):
            stride = 1 if i == 0 else 2
            setattr(self, f"layer{i + 1}", nn.Sequential(BasicBlock(cin, c, stride), BasicBlock(c, c, 1)))
            cin = c
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class Attention(nn.Module):
    def __init__(self, d, heads, ctx):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, d, heads, ctx):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads, ctx)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """A 2-layer GPT-2-style model (nanoGPT's layout, tied embeddings)."""

    def __init__(self, vocab=32, ctx=8, d=16, heads=2, layers=2):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.h = nn.ModuleList([Block(d, heads, ctx) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        T = idx.shape[1]
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device).unsqueeze(0)
        x = self.wte(idx) + self.wpe(pos)
        for b in self.h:
            x = b(x)
        return self.lm_head(self.ln_f(x))


def export(model, x, opset, training, dynamic=False):
    f = io.BytesIO()
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    torch.onnx.export(model, x, f, opset_version=opset, input_names=["x"], output_names=["out"],
                      training=mode, do_constant_folding=not training,
                      dynamic_axes={"x": {0: "batch"}, "out": {0: "batch"}} if dynamic else None)
    return f.getvalue()


def loss_of(out, labels):
    if out.dim() == 3:
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), labels.reshape(-1))
    return F.cross_entropy(out, labels)


def write(name, model, x, labels, opset, training=False, traj=False, dynamic=False):
    model.train(training)
    onnx = export(model, x, opset, training, dynamic)
    model.train(training)
    model.zero_grad()
    out = model(x)
    loss = loss_of(out, labels)
    loss.backward()
    arrays = {"x": x.numpy(), "labels": labels.numpy().astype(np.int64), "out": out.detach().numpy(),
              "loss": np.array(loss.item(), dtype=np.float32)}
    for pname, p in model.named_parameters():
        arrays["grad/" + pname] = p.grad.numpy().copy()
    if traj:
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        losses = []
        for _ in range(10):
            opt.zero_grad()
            step_loss = loss_of(model(x), labels)
            losses.append(step_loss.item())
            step_loss.backward()
            opt.step()
        arrays["traj"] = np.array(losses, dtype=np.float32)
    with open(os.path.join(OUT, name + ".onnx"), "wb") as f:
        f.write(onnx)
    np.savez(os.path.join(OUT, name + ".npz"), **arrays)
    print(f"{name}.onnx: {len(onnx)} bytes, loss {loss.item():.6f}")


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    x = torch.randn(4, 1, 4, 4)
    labels = torch.randint(0, 5, (4,))
    for opset in (13, 17):
        torch.manual_seed(1)
        write(f"mlp_op{opset}", MLP(), x, labels, opset, traj=True)
    # a batch dimension left dynamic (the importer needs its size given),
    # and an opset older than the importer reads
    torch.manual_seed(1)
    write("mlp_dynamic_op13", MLP(), x, labels, 13, dynamic=True)
    torch.manual_seed(1)
    write("mlp_op11", MLP(), x, labels, 11)
    torch.manual_seed(2)
    x = torch.randn(4, 1, 16, 16)
    labels = torch.randint(0, 10, (4,))
    for opset in (13, 17):
        torch.manual_seed(3)
        write(f"lenet_op{opset}", LeNet(), x, labels, opset, traj=True)
    torch.manual_seed(4)
    # batch 8: layer4's batch norm sees 8 values per channel (1x1 maps), so
    # the gradients are well conditioned enough to compare in float32
    x = torch.randn(8, 3, 32, 32)
    labels = torch.randint(0, 10, (8,))
    torch.manual_seed(5)
    resnet = ResNet18()
    with torch.no_grad():  # running statistics that are not the defaults
        for m in resnet.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    write("resnet18_eval_op13", resnet, x, labels, 13)
    write("resnet18_train_op15", resnet, x, labels, 15, training=True)
    torch.manual_seed(6)
    idx = torch.randint(0, 32, (2, 8))
    labels = torch.randint(0, 32, (2, 8))
    for opset in (13, 17):
        torch.manual_seed(7)
        write(f"gpt2_op{opset}", GPT(), idx, labels, opset)


if __name__ == "__main__":
    main()
