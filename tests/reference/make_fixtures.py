#!/usr/bin/python3
"""Writes the PyTorch reference fixtures of the tutorial MLP.

Run from the repository root with Debian's interpreter (it has torch 1.13 and
numpy):

    /usr/bin/python3 tests/reference/make_fixtures.py [OUT_DIR]

OUT_DIR defaults to tests/fixtures. The output is deterministic (fixed seeds,
one thread, deterministic algorithms), so re-running reproduces the committed
files byte for byte on the same torch build.

File format (little-endian; read by tests/support/fixture.c):

    magic    8 bytes  "TSFIXTR\\0"
    version  u32      1
    count    u32      number of entries
    per entry:
      name_len u32, name bytes (no NUL)
      dtype    u32    0 = f32, 2 = i32 (the values of ts_dtype)
      ndim     u32    0 for a scalar
      shape    i64[ndim]
      data     prod(shape) * 4 bytes, C order

mlp_v1.bin holds, for the model
    x f32[16,1,28,28] -> flatten(1) -> fc1 Linear(784,320) -> ReLU
      -> fc2 Linear(320,100) -> ReLU -> fc3 Linear(100,10)
      -> log_softmax(dim=1) -> nll_loss(mean) with labels i32[16]
on the first 16 images of data/mnist's test set, normalised (x/255-0.5)/0.5,
and weights from torch.manual_seed(0):

    x, labels                      the batch
    fc1.weight ... fc3.bias        initial parameters (tensorscope names)
    loss                           f32[] scalar
    Gradient___<param>             every parameter gradient
    <activation>, Gradient___<activation>
        for fc1/MatMul:0 (x W^T, no bias), fc1/Add:0, Relu:0, fc2/MatMul:0,
        fc2/Add:0, Relu:1, fc3/MatMul:0, fc3/Add:0, LogSoftmax:0
    <opt>1/<param>, <opt>2/<param> parameters after one and two optimizer
        steps on the same batch, <opt> in
          sgd   SGD(lr=0.1, momentum=0.9, weight_decay=0.01)
          adam  Adam(lr=1e-3)
          adamw AdamW(lr=1e-3, weight_decay=0.01)
    <opt>/loss f32[2]              the loss computed before each of the steps
    traj/loss f32[20]              gradient accumulation A=2 over 10 steps of
        SGD(lr=0.05, momentum=0.9): micro-batch i (0..19) is test images
        16+16i .. 31+16i; each step averages two micro-batch gradients; the
        losses are the per-micro-batch forward losses (not halved)
    traj/labels i32[320]           the labels of those micro-batches
    traj/final/<param>             parameters after the 10 steps

Size: a full copy of fc1.weight is 1 MB, so the snapshots after optimizer
steps (<opt>1/, <opt>2/, traj/final/) keep only the first SNAPSHOT_ROWS rows
of fc1.weight and fc2.weight (the shape says how many). Row-major order makes
them a prefix of the full tensor; optimizer updates are elementwise, and the
full gradients are stored, so the prefix checks the update rule while the
later losses depend on every weight.
"""
import gzip
import os
import struct
import sys

import numpy as np
try:
    import torch
    import torch.nn.functional as F
except ImportError:  # the Writer alone, from an interpreter without torch (make_lowbits_fixtures.py)
    torch = F = None

MAGIC = b"TSFIXTR\0"
VERSION = 1
DTYPES = {np.dtype(np.float32): 0, np.dtype(np.int32): 2}
BATCH = 16
TRAJ_STEPS, TRAJ_ACCUM = 10, 2
PARAMS = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"]
SNAPSHOT_ROWS = {"fc1.weight": 8, "fc2.weight": 16}
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def read_idx(path):
    """A gzip'd IDX file of unsigned bytes as a numpy array."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    zero, dtype_code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype_code != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    return data.reshape(dims)


def load_mnist(n):
    d = os.path.join(ROOT, "data", "mnist")
    images = read_idx(os.path.join(d, "t10k-images-idx3-ubyte.gz"))[:n]
    labels = read_idx(os.path.join(d, "t10k-labels-idx1-ubyte.gz"))[:n]
    # the same float32 arithmetic as the C loader: (x/255 - 0.5)/0.5
    x = images.astype(np.float32) / np.float32(255.0)
    x = (x - np.float32(0.5)) / np.float32(0.5)
    return x.reshape(n, 1, 28, 28).astype(np.float32), labels.astype(np.int32)


class Writer:
    def __init__(self):
        self.entries = []
        self.names = set()

    def add(self, name, value):
        if torch is not None and isinstance(value, torch.Tensor):
            value = value.detach().cpu().numpy()
        a = np.array(value, order="C")  # keeps 0-d scalars 0-d
        if a.dtype not in DTYPES:
            raise TypeError(f"{name}: dtype {a.dtype} is not f32 or i32")
        if name in self.names:
            raise ValueError(f"duplicate fixture entry {name}")
        self.names.add(name)
        self.entries.append((name, a))

    def add_params(self, prefix, params, snapshot):
        for name in PARAMS:
            v = params[name].detach().cpu().numpy()
            if snapshot and name in SNAPSHOT_ROWS:
                v = v[:SNAPSHOT_ROWS[name]]
            self.add(prefix + name, v)

    def write(self, path):
        out = bytearray(MAGIC)
        out += struct.pack("<II", VERSION, len(self.entries))
        for name, a in self.entries:
            nb = name.encode("utf-8")
            out += struct.pack("<I", len(nb)) + nb
            out += struct.pack("<II", DTYPES[a.dtype], a.ndim)
            out += struct.pack("<" + "q" * a.ndim, *a.shape)
            out += a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(out)
        os.replace(tmp, path)  # never leave a half-written fixture
        print(f"wrote {path}: {len(self.entries)} entries, {len(out)} bytes")


def initial_params():
    torch.manual_seed(0)
    fc1 = torch.nn.Linear(784, 320)
    fc2 = torch.nn.Linear(320, 100)
    fc3 = torch.nn.Linear(100, 10)
    return {
        "fc1.weight": fc1.weight.detach().clone(), "fc1.bias": fc1.bias.detach().clone(),
        "fc2.weight": fc2.weight.detach().clone(), "fc2.bias": fc2.bias.detach().clone(),
        "fc3.weight": fc3.weight.detach().clone(), "fc3.bias": fc3.bias.detach().clone(),
    }


def leaf_copies(params):
    return {k: v.clone().requires_grad_(True) for k, v in params.items()}


def forward(p, x, y):
    """The tensorscope graph op for op; returns (loss, activations by name)."""
    h = torch.flatten(x, start_dim=1)
    acts = {}
    relu_k = 0
    for layer in ("fc1", "fc2", "fc3"):
        mm = h.matmul(p[layer + ".weight"].t())
        add = mm + p[layer + ".bias"]
        acts[layer + "/MatMul:0"] = mm
        acts[layer + "/Add:0"] = add
        h = add
        if layer != "fc3":
            h = torch.relu(add)
            acts[f"Relu:{relu_k}"] = h
            relu_k += 1
    logp = F.log_softmax(h, dim=1)
    acts["LogSoftmax:0"] = logp
    return F.nll_loss(logp, y.long()), acts


def reference_pass(w, params, x, y):
    p = leaf_copies(params)
    loss, acts = forward(p, x, y)
    for a in acts.values():
        a.retain_grad()
    loss.backward()
    w.add("loss", loss.detach().reshape(()))
    for name in PARAMS:
        w.add("Gradient___" + name, p[name].grad)
    for name, a in acts.items():
        w.add(name, a)
        w.add("Gradient___" + name, a.grad)


def optimizer_steps(w, tag, make_opt, params, x, y, steps=2):
    p = leaf_copies(params)
    opt = make_opt([p[n] for n in PARAMS])
    losses = []
    for step in range(1, steps + 1):
        opt.zero_grad()
        loss, _ = forward(p, x, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        w.add_params(f"{tag}{step}/", p, snapshot=True)
    w.add(f"{tag}/loss", np.array(losses, dtype=np.float32))


def accumulated_steps(opt, micro_loss, steps, accum):
    """`steps` optimizer steps, each on the mean gradient of `accum`
    micro-batches; micro_loss(i) is micro-batch i's loss. Returns the
    per-micro-batch losses (not divided by accum)."""
    losses = []
    for step in range(steps):
        opt.zero_grad()
        for k in range(accum):
            loss = micro_loss(step * accum + k)
            (loss / accum).backward()
            losses.append(loss.item())
        opt.step()
    return losses


def trajectory(w, params, x, y):
    p = leaf_copies(params)
    opt = torch.optim.SGD([p[n] for n in PARAMS], lr=0.05, momentum=0.9)
    losses = accumulated_steps(
        opt, lambda i: forward(p, x[i * BATCH:(i + 1) * BATCH], y[i * BATCH:(i + 1) * BATCH])[0], TRAJ_STEPS, TRAJ_ACCUM)
    w.add("traj/loss", np.array(losses, dtype=np.float32))
    w.add("traj/labels", y.numpy())
    w.add_params("traj/final/", p, snapshot=True)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "fixtures")
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    n_traj = TRAJ_STEPS * TRAJ_ACCUM * BATCH
    xs, ys = load_mnist(BATCH + n_traj)
    x, y = torch.from_numpy(xs[:BATCH]), torch.from_numpy(ys[:BATCH])
    params = initial_params()

    w = Writer()
    w.add("x", x)
    w.add("labels", y)
    w.add_params("", params, snapshot=False)
    reference_pass(w, params, x, y)
    optimizer_steps(w, "sgd", lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9,
                                                         weight_decay=0.01), params, x, y)
    optimizer_steps(w, "adam", lambda ps: torch.optim.Adam(ps, lr=1e-3), params, x, y)
    optimizer_steps(w, "adamw", lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01),
                    params, x, y)
    trajectory(w, params, torch.from_numpy(xs[BATCH:]), torch.from_numpy(ys[BATCH:]))
    os.makedirs(out_dir, exist_ok=True)
    w.write(os.path.join(out_dir, "mlp_v1.bin"))


if __name__ == "__main__":
    main()
