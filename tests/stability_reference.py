"""The stability signals of one training step (tensorscope train
--watch-stability), read back by TensorBoard's EventAccumulator from the
run's event file, against NumPy recomputing each from the same run's
tensors: the anchored arrays (--dump-npy: activations, attention scores,
logits, Accum___ gradients, UpdatedVar___ weights, Adam's moments) and the
weights before the step (--save-init).

usage: stability_reference.py NPY_DIR INIT_DIR EVENT_DIR OPTIMIZER LR WEIGHT_DECAY"""
import math
import os
import sys
import warnings

warnings.simplefilter("ignore")
import numpy as np
from tensorboard.backend.event_processing import event_accumulator as ea

npy, init, events, optimizer, lr, wd = sys.argv[1:7]
lr, wd = float(lr), float(wd)
failures = 0


def check(ok, msg):
    global failures
    print(("ok   " if ok else "FAIL ") + msg, flush=True)
    failures += not ok
    return ok


def close(got, want, rel, what):
    if math.isinf(want):  # ||dw|| / ||w|| of a parameter that was all zeros (a bias at its initial 0)
        ok = got == want
    else:
        ok = math.isfinite(got) and abs(got - want) <= rel * max(abs(want), 1e-30)
    check(ok, f"{what}: tensorscope {got:.7g}, numpy {want:.7g}")


acc = ea.EventAccumulator(events, size_guidance={ea.SCALARS: 0})
acc.Reload()
tags = [t for t in acc.Tags()["scalars"] if t.startswith("stability/")]
check(len(tags) > 0, f"TensorBoard reads {len(tags)} stability/<layer>/<signal> scalars")
tb = {}
for t in tags:
    ev = acc.Scalars(t)
    check(len(ev) == 1 and ev[0].step == 1, f"{t}: one value, at step 1")
    tb[t] = ev[0].value


def signal(layer, sig):
    t = f"stability/{layer}/{sig}"
    if not check(t in tb, f"{t} is in the event file"):
        return float("nan")
    return tb.pop(t)


order = [line.rstrip("\n").split("\t") for line in open(os.path.join(npy, "order.txt"))]
arrays = {name: np.load(os.path.join(npy, stem + ".npy")).astype(np.float64) for stem, name in order}
names = [name for _, name in order]
derived = ("Gradient___", "Accum___", "UpdatedVar___", "Accl___", "Accl1___", "Accl2___", "Step___")

# each layer's output: the last tensor its scope makes, in graph order
last = {}
for n in names:
    if "/" in n and not n.startswith(derived) and arrays[n].dtype.kind == "f":
        last[n.rsplit("/", 1)[0]] = n
check(len(last) >= 3, f"{len(last)} layers: {', '.join(sorted(last))}")
for layer, n in last.items():
    x = arrays[n]
    close(signal(layer, "rms"), math.sqrt((x * x).mean()), 1e-5, f"{layer} rms of {n}")
    close(signal(layer, "max_abs"), np.abs(x).max(), 1e-6, f"{layer} max_abs of {n}")

# attention: the scores the Softmax reads, [B, H, T, T] (the built-in GPT's masked scaled q.k)
for n in names:
    if n.endswith("/MaskedFill:0") and not n.startswith(derived):
        layer, x = n.rsplit("/", 1)[0], arrays[n]
        for h in range(x.shape[1]):
            close(signal(layer, f"max_logit.h{h}"), x[:, h].max(), 1e-6, f"{layer} head {h} max logit")

# the logits the loss reads: mean over rows of log(sum(exp(x)))
logits = "logits" if "logits" in arrays else "fc3/Add:0"
x = arrays[logits]
x = x.reshape(-1, x.shape[-1])
mx = x.max(axis=1, keepdims=True)
lse = (mx[:, 0] + np.log(np.exp(x - mx).sum(axis=1))).mean()
close(signal(logits.rsplit("/", 1)[0] if "/" in logits else logits, "lse"), lse, 1e-5, f"lse of {logits}")

# each parameter: its gradient, its update against the weights before the step, Adam's direction
params = sorted(f[:-4] for f in os.listdir(init) if f.endswith(".npy"))
check(len(params) >= 4, f"{len(params)} parameters in the initial weights")
for p in params:
    w0 = np.load(os.path.join(init, p + ".npy")).astype(np.float32)
    w1 = arrays["UpdatedVar___" + p].astype(np.float32)
    g = arrays["Accum___" + p]
    close(signal(p, "grad_norm"), np.linalg.norm(g), 1e-5, f"{p} gradient norm")
    dw, n0 = np.linalg.norm((w1 - w0).astype(np.float64)), np.linalg.norm(w0.astype(np.float64))
    close(signal(p, "update_ratio"), dw / n0 if n0 > 0 else math.inf if dw > 0 else 0.0, 1e-4, f"{p} ||dw||/||w||")
    if optimizer.startswith("adam"):
        m, v = arrays["Accl1___" + p], arrays["Accl2___" + p]
        u = (m / (1 - 0.9)) / (np.sqrt(v) / math.sqrt(1 - 0.999) + 1e-8)  # the first step's bias corrections
        got = signal(p, "adam_update_norm")
        close(got, np.linalg.norm(u), 1e-4, f"{p} Adam update norm from its moments")
        decayed = w0.astype(np.float64) * (1 - lr * wd) if optimizer == "adamw" else w0.astype(np.float64)
        close(got, np.linalg.norm(w1 - decayed) / lr, 2e-3, f"{p} Adam update norm from the step it made")
check(not tb, "every stability scalar was checked" + (f" (left: {sorted(tb)[:5]})" if tb else ""))
sys.exit(1 if failures else 0)
