#!/usr/bin/python3
"""Writes the PyTorch reference fixtures of the LeNet+BN CNN.

Run from the repository root with Debian's interpreter (torch and numpy):

    /usr/bin/python3 tests/reference/make_cnn_fixtures.py [OUT_DIR]

OUT_DIR defaults to tests/fixtures. Deterministic (fixed seeds, one thread,
deterministic algorithms); the file format is make_fixtures.py's.

cnn_v1.bin holds, for the model (the CLI's `--model cnn`)
    x f32[16,1,28,28] -> conv1 Conv2d(1,6,5,padding=2,bias=False)
      -> bn1 BatchNorm2d(6) -> ReLU -> max_pool2d(2)
      -> conv2 Conv2d(6,16,5,bias=False) -> bn2 BatchNorm2d(16) -> ReLU
      -> max_pool2d(2) -> flatten(1) -> fc1 Linear(400,120) -> ReLU
      -> fc2 Linear(120,84) -> ReLU -> fc3 Linear(84,10)
      -> log_softmax(dim=1) -> nll_loss(mean)
(convolutions before batch norm have no bias, as usual: the normalisation
cancels it, so its gradient is rounding noise that Adam would turn into
steps of +-lr in either direction)
in training mode (batch statistics; running statistics updated with
momentum 0.1, eps 1e-5) on the first 16 images of data/mnist's test set,
normalised (x/255-0.5)/0.5, weights from torch.manual_seed(0):

    x, labels                      the batch
    <param>                        initial parameters (tensorscope names)
    loss                           f32[] scalar
    Gradient___<param>             every parameter gradient
    <activation>, Gradient___<activation>
                                   every op output (tensorscope names, e.g.
                                   conv1/Conv2d:0, bn1/BatchNorm:0, Relu:0,
                                   MaxPool2d:0) and its gradient
    f32_error/<name>               f32[] for each loss, activation and
                                   gradient above: the largest |PyTorch float32
                                   - PyTorch float64| over it (how far float32
                                   rounding alone moves it: batch norm divides
                                   by small deviations, and conv1's weight
                                   gradient sums 12,544 products per element)
    running/<buffer>               bn*.running_mean / running_var after the
                                   forward pass of that batch
    sgd1/<param>, sgd1/<buffer>    after one step of SGD(lr=0.1, momentum=0.9,
                                   weight_decay=0.01) on the batch
    adam1/<param>, adam1/<buffer>  after one step of Adam(lr=1e-3)
    traj/loss f32[20]              10 steps of SGD(lr=0.05, momentum=0.9) with
        gradient accumulation A=2: micro-batch i (0..19) is test images
        16+16i .. 31+16i; each step averages two micro-batch gradients (the
        running statistics move at each micro-batch's forward, as in PyTorch)
    traj/labels i32[320]           the labels of those micro-batches
    traj/final/<param>, traj/final/<buffer>  after the 10 steps

Size: activations and their gradients with more than 8192 elements keep only
their first 2 samples, and fc1.weight snapshots after steps their first 8
rows (the shape says how many; the tests compare those leading rows).
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import Writer, load_mnist  # noqa: E402  (one reader, one writer)

BATCH = 16
TRAJ_STEPS, TRAJ_ACCUM = 10, 2
BIG = 8192
KEEP_SAMPLES = 2
PARAMS = ["conv1.weight", "bn1.weight", "bn1.bias", "conv2.weight", "bn2.weight", "bn2.bias",
          "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"]
BUFFERS = [f"bn{i}.running_{s}" for i in (1, 2) for s in ("mean", "var")]
SNAPSHOT_ROWS = {"fc1.weight": 8}
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def initial_state():
    torch.manual_seed(0)
    mods = {"conv1": torch.nn.Conv2d(1, 6, 5, padding=2, bias=False), "bn1": torch.nn.BatchNorm2d(6),
            "conv2": torch.nn.Conv2d(6, 16, 5, bias=False), "bn2": torch.nn.BatchNorm2d(16),
            "fc1": torch.nn.Linear(400, 120), "fc2": torch.nn.Linear(120, 84), "fc3": torch.nn.Linear(84, 10)}
    params = {n: getattr(mods[n.split(".")[0]], n.split(".")[1]).detach().clone() for n in PARAMS}
    buffers = {n: getattr(mods[n.split(".")[0]], n.split(".")[1]).detach().clone() for n in BUFFERS}
    return params, buffers


def forward(p, b, x, y):
    """The tensorscope graph op for op (training mode); updates b in place."""
    acts = {}
    relu = [0]

    def act(name, t):
        acts[name] = t
        return t

    def relu_(t):
        out = act(f"Relu:{relu[0]}", torch.relu(t))
        relu[0] += 1
        return out

    def bn(layer, t):
        return act(f"{layer}/BatchNorm:0", F.batch_norm(t, b[layer + ".running_mean"], b[layer + ".running_var"],
                                                        p[layer + ".weight"], p[layer + ".bias"], training=True,
                                                        momentum=0.1, eps=1e-5))

    def linear(layer, t):
        mm = act(f"{layer}/MatMul:0", t.matmul(p[layer + ".weight"].t()))
        return act(f"{layer}/Add:0", mm + p[layer + ".bias"])

    h = act("conv1/Conv2d:0", F.conv2d(x, p["conv1.weight"], padding=2))
    h = act("MaxPool2d:0", F.max_pool2d(relu_(bn("bn1", h)), 2))
    h = act("conv2/Conv2d:0", F.conv2d(h, p["conv2.weight"]))
    h = act("MaxPool2d:1", F.max_pool2d(relu_(bn("bn2", h)), 2))
    h = act("Flatten:0", torch.flatten(h, 1))
    h = relu_(linear("fc1", h))
    h = relu_(linear("fc2", h))
    h = linear("fc3", h)
    logp = act("LogSoftmax:0", F.log_softmax(h, dim=1))
    return F.nll_loss(logp, y.long()), acts


def leaf_copies(params):
    return {k: v.clone().requires_grad_(True) for k, v in params.items()}


def buffer_copies(buffers):
    return {k: v.clone() for k, v in buffers.items()}


def add_state(w, prefix, p, b, snapshot):
    for name in PARAMS:
        v = p[name].detach().numpy()
        if snapshot and name in SNAPSHOT_ROWS:
            v = v[:SNAPSHOT_ROWS[name]]
        w.add(prefix + name, v)
    for name in BUFFERS:
        w.add(prefix + name, b[name])


def crop(t):
    t = t.detach()
    return t[:KEEP_SAMPLES] if t.numel() > BIG else t


def backward_pass(params, buffers, x, y, dtype):
    """loss, activations and gradients by tensorscope name, and the buffers."""
    p = {k: v.to(dtype).clone().requires_grad_(True) for k, v in params.items()}
    b = {k: v.to(dtype).clone() for k, v in buffers.items()}
    loss, acts = forward(p, b, x.to(dtype), y)
    for a in acts.values():
        a.retain_grad()
    loss.backward()
    out = {"loss": loss.detach().reshape(())}
    out.update({"Gradient___" + n: p[n].grad for n in PARAMS})
    for name, a in acts.items():
        out[name] = a.detach()
        out["Gradient___" + name] = a.grad
    return out, b


def reference_pass(w, params, buffers, x, y):
    ref, b = backward_pass(params, buffers, x, y, torch.float32)
    exact, _ = backward_pass(params, buffers, x, y, torch.float64)
    for name, v in ref.items():
        w.add(name, crop(v))
    for name, v in ref.items():
        err = (v.double() - exact[name]).abs().max().item()
        w.add("f32_error/" + name, np.array(err, dtype=np.float32))
    for name in BUFFERS:
        w.add("running/" + name, b[name])


def one_step(w, tag, make_opt, params, buffers, x, y):
    p, b = leaf_copies(params), buffer_copies(buffers)
    opt = make_opt([p[n] for n in PARAMS])
    opt.zero_grad()
    loss, _ = forward(p, b, x, y)
    loss.backward()
    opt.step()
    add_state(w, f"{tag}1/", p, b, snapshot=True)


def trajectory(w, params, buffers, x, y):
    p, b = leaf_copies(params), buffer_copies(buffers)
    opt = torch.optim.SGD([p[n] for n in PARAMS], lr=0.05, momentum=0.9)
    losses = []
    for step in range(TRAJ_STEPS):
        opt.zero_grad()
        for k in range(TRAJ_ACCUM):
            i = (step * TRAJ_ACCUM + k) * BATCH
            loss, _ = forward(p, b, x[i:i + BATCH], y[i:i + BATCH])
            (loss / TRAJ_ACCUM).backward()
            losses.append(loss.item())
        opt.step()
    w.add("traj/loss", np.array(losses, dtype=np.float32))
    w.add("traj/labels", y.numpy())
    add_state(w, "traj/final/", p, b, snapshot=True)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "fixtures")
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    n_traj = TRAJ_STEPS * TRAJ_ACCUM * BATCH
    xs, ys = load_mnist(BATCH + n_traj)
    x, y = torch.from_numpy(xs[:BATCH]), torch.from_numpy(ys[:BATCH])
    params, buffers = initial_state()

    w = Writer()
    w.add("x", x)
    w.add("labels", y)
    add_state(w, "", params, buffers, snapshot=False)
    reference_pass(w, params, buffers, x, y)
    one_step(w, "sgd", lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01), params, buffers, x, y)
    one_step(w, "adam", lambda ps: torch.optim.Adam(ps, lr=1e-3), params, buffers, x, y)
    trajectory(w, params, buffers, torch.from_numpy(xs[BATCH:]), torch.from_numpy(ys[BATCH:]))
    os.makedirs(out_dir, exist_ok=True)
    w.write(os.path.join(out_dir, "cnn_v1.bin"))


if __name__ == "__main__":
    main()
