#!/usr/bin/python3
"""Writes full-size ONNX exports for bench_onnx_import into OUTDIR (not
committed: ~45 MB each):
  resnet18.onnx   torchvision's ResNet-18 layout at full widths (11.7M
                  parameters, eval export, batch norm folded)
  mlp45m.onnx     an MLP of the same size (3072-2048-2048-1024-10), every
                  op of which imports today
  lenet_bn.onnx   the built-in `cnn` (LeNet + batch norm, bench/torch_cnn.py's
                  twin), training export, for the imported-vs-built-in row
Run with Debian's interpreter: /usr/bin/python3 bench/make_onnx_models.py OUTDIR
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from make_onnx_fixtures import ResNet18  # noqa: E402


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    resnet = ResNet18(w=(64, 128, 256, 512), classes=1000).eval()
    torch.onnx.export(resnet, torch.randn(1, 3, 224, 224), os.path.join(out, "resnet18.onnx"), opset_version=13,
                      input_names=["x"], output_names=["out"])
    mlp = nn.Sequential(nn.Flatten(), nn.Linear(3072, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                        nn.Linear(2048, 1024), nn.ReLU(), nn.Linear(1024, 10)).eval()
    torch.onnx.export(mlp, torch.randn(1, 3, 32, 32), os.path.join(out, "mlp45m.onnx"), opset_version=13,
                      input_names=["x"], output_names=["out"])
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_cnn import make_model  # noqa: E402
    lenet, c, size = make_model("lenet")
    torch.onnx.export(lenet.train(), torch.randn(64, c, size, size), os.path.join(out, "lenet_bn.onnx"), opset_version=15,
                      input_names=["x"], training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    for name in ("resnet18.onnx", "mlp45m.onnx", "lenet_bn.onnx"):
        print(f"{name}: {os.path.getsize(os.path.join(out, name)) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
