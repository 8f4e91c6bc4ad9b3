#!/usr/bin/env python3
"""Writes tests/reference/onnx/NAME_opN.onnx: PyTorch's exports of
make_onnx_fixtures.py at opsets 13 to 17, converted by onnx's own
version_converter to the newer opsets PyTorch's dynamo exporter writes (18
and newer), for tests/test_onnx_import.c (each is checked against its
source's NAME_opM.npz: the conversion keeps the computation and the
initializer names). Run with onnx==1.23.2, e.g. the venv that
tests/test_onnx_conformance.sh makes:

    build/onnx-venv/bin/python tests/reference/make_onnx_opset_fixtures.py
"""
import os

import onnx
from onnx import version_converter

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "onnx")

# (source, opset): ReduceMean's axes become an input (GPT-2 at 13 computes
# its layer norms with ReduceMean), Split 18 and LayerNormalization (GPT-2
# at 17), Pad and the pools (LeNet), BatchNormalization in training mode
# and MaxPool 22 (ResNet-18), the newest opset (the MLP).
CONVERSIONS = [
    ("gpt2_op13", 18),
    ("gpt2_op17", 28),
    ("lenet_op17", 21),
    ("resnet18_train_op15", 22),
    ("mlp_op17", 28),
]


def main():
    for source, opset in CONVERSIONS:
        model = onnx.load(os.path.join(DIR, source + ".onnx"))
        converted = version_converter.convert_version(model, opset)
        onnx.checker.check_model(converted)
        name = f"{source.rsplit('_op', 1)[0]}_op{opset}.onnx"
        onnx.save(converted, os.path.join(DIR, name))
        print(f"wrote {name} from {source}.onnx")


if __name__ == "__main__":
    main()
