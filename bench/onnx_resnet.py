"""ResNet-18 brought from PyTorch: tensorscope against what users run it with
today, in one process, interleaved (bench/run.sh's ONNX peer rows).

    python bench/onnx_resnet.py infer --batch B --threads T --steps N --reps R
        torchvision's resnet18 (random weights) exported by PyTorch's
        TorchScript exporter as one deploys it (opset 17, eval mode,
        constants folded: batch norm folded into the convolutions), run by onnxruntime
        (intra-op threads T) and by tensorscope's inference model of the
        same file, at batch B
    python bench/onnx_resnet.py train --batch B --threads T --steps N --reps R
        one SGD step of the exported (training-mode) model in tensorscope
        against the module's own step in PyTorch (torch.set_num_threads(T))

R rounds; each round times N calls of every side in a rotating order after
a warm-up, so that the machine's slow moments fall on both. Prints, per
side, the median round's line
    <impl> batch=B threads=T steps=N ms_per_step=.. samples_per_s=.. spread_ms=MIN..MAX
and `ratio peer/tensorscope median=.. rounds=MIN..MAX`. Needs torch,
torchvision, onnx and onnxruntime (the real-model tests' venv).
"""
import argparse
import os
import sys
import tempfile

import numpy as np

import peer_rows


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["infer", "train"])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("TS_BENCH_THREADS", "2")))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    return ap.parse_args()


def sides_infer(a, workdir):
    import torch
    import torchvision
    import onnxruntime as ort
    import tensorscope as ts
    import warnings

    module = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(a.batch, 3, 224, 224)
    path = os.path.join(workdir, "resnet18.onnx")
    with torch.no_grad(), warnings.catch_warnings():  # as a user deploys it: eval mode, folded
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), path, input_names=["x"], opset_version=17, dynamo=False)
    feed = x.numpy()
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    g = ts.Graph.from_onnx(path, {"x": tuple(feed.shape)})
    m = ts.inference_model(g, ts.Options().threads(a.threads).output_mode("final"))
    m.compile()
    got = np.asarray(m(x=feed))
    want = sess.run(None, {"x": feed})[0]
    err = float(np.max(np.abs(got.reshape(want.shape) - want)) / (1 + np.max(np.abs(want))))
    if not err <= 1e-4:
        sys.exit(f"onnx_resnet.py: tensorscope and onnxruntime disagree by {err:.3g}")
    return {"tensorscope": lambda: m(x=feed), "onnxruntime": lambda: sess.run(None, {"x": feed})}


def sides_train(a, workdir):
    import torch
    import torchvision
    import tensorscope as ts
    from tensorscope._torch import export_onnx

    torch.set_num_threads(a.threads)
    module = torchvision.models.resnet18(weights=None, num_classes=10).train()
    x = torch.randn(a.batch, 3, 224, 224)
    y = torch.randint(0, 10, (a.batch,))
    path = os.path.join(workdir, "resnet18.onnx")
    export_onnx(module, (x,), path, ["x"])
    module.train()
    g = ts.Graph.from_onnx(path, {"x": tuple(x.shape)})
    lab = g.input("labels", "i32", [a.batch])
    loss = g.cross_entropy(g.outputs[0], lab)
    loss.name = "loss"
    m = ts.training_model(g, ts.Options().threads(a.threads).output_mode("final"),
                          optimizer=ts.SGD(lr=0.01), loss=loss)
    m.compile()
    feed, labels = x.numpy(), y.numpy().astype(np.int32)
    opt = torch.optim.SGD(module.parameters(), lr=0.01)
    lossf = torch.nn.CrossEntropyLoss()

    def torch_step():
        opt.zero_grad(set_to_none=True)
        lossf(module(x), y).backward()
        opt.step()

    return {"tensorscope": lambda: m(x=feed, labels=labels), "pytorch": torch_step}


def main():
    a = parse()
    with tempfile.TemporaryDirectory() as workdir:
        sides = (sides_infer if a.mode == "infer" else sides_train)(a, workdir)
        peer_rows.compare(sides, a.batch, a.threads, a.warmup, a.steps, a.reps)


if __name__ == "__main__":
    main()
