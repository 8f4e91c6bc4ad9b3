"""ts.training_model(module) on the real models of the ONNX import's tests
(tests/real_models.py: torchvision's resnet18, mobilenet_v3_small and a
small ViT, transformers' GPT-2 and BERT, nn.TransformerEncoder and nn.LSTM
classifiers, their dropout modules exported as Dropout nodes), with the
PyTorch this runs with: Debian's 1.13 under test_python (with Debian's
torchvision 0.14, and transformers 4.40 from PyPI: the last that runs on
1.13), the current one under test_onnx_real_models. The first
step's loss is PyTorch's on the same batch and weights (training mode:
BatchNorm by batch statistics); 10 Adam steps lower it; the trained weights
copied back into the module lower PyTorch's loss too."""
import os
import sys

import numpy as np
import pytest

import tensorscope as ts
from conftest import SOURCE_DIR

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests"))
import real_models  # noqa: E402

HAS_ONNX_IMPORT = hasattr(ts._capi.lib, "ts_graph_from_onnx")
NEEDS = {"resnet18": "torchvision", "mobilenet_v3_small": "torchvision", "vit": "torchvision",
         "gpt2": "transformers", "bert": "transformers"}
STEPS = 10


def torch_loss(module, inputs, labels):
    scores = module(*inputs.values())
    scores = scores[0] if isinstance(scores, (tuple, list)) else scores
    return float(torch.nn.functional.cross_entropy(scores.reshape(-1, scores.shape[-1]), labels.reshape(-1)))


@pytest.mark.skipif(not HAS_ONNX_IMPORT, reason="this library does not import ONNX")
@pytest.mark.parametrize("name", real_models.MODELS)
def test_a_real_model_trains_through_training_model(name):
    if name in NEEDS:
        pytest.importorskip(NEEDS[name])
    module, inputs, labels = real_models.build(name)
    with torch.no_grad():
        first_torch = torch_loss(module, inputs, labels)
    m = ts.training_model(module, ts.Options().output_mode("final"), optimizer=ts.Adam(1e-3),
                          example_inputs=tuple(inputs.values()), loss="cross_entropy")
    feeds = {k: v.numpy() for k, v in inputs.items()}
    y = labels.numpy().astype(np.int32)
    losses = [float(m(**feeds, labels=y)[-1]) for _ in range(STEPS)]
    assert abs(losses[0] - first_torch) <= 1e-4 * (1 + abs(first_torch)), (losses[0], first_torch)
    assert np.all(np.isfinite(losses)) and min(losses[-3:]) < losses[0], losses
    m.copy_weights_to_torch()
    with torch.no_grad():
        after = torch_loss(module, inputs, labels)
    assert after < first_torch, (after, first_torch)
