"""PyTorch models for test_compare_onnx.sh: exports each to ONNX and writes
its reference dump with python/tensorscope_ref.py (Debian's torch).

usage: compare_models.py OUT_DIR
writes OUT_DIR/lenet.onnx, OUT_DIR/lenet/{reference,inputs,weights}.npz,
       OUT_DIR/gpt.onnx and OUT_DIR/gpt/ (make_onnx_fixtures.py's 2-layer
       GPT-2-style model, tied embeddings),
       OUT_DIR/lenet_dim0/ (the same LeNet with log_softmax over dim 0, the
       planted bug), OUT_DIR/tutorial.onnx (the seed tutorial's MLP with
       LogSoftmax(dim=0), for the lint), OUT_DIR/twice.onnx and
       OUT_DIR/twice/ (an MLP calling one activation module twice)
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tensorscope_ref  # noqa: E402
from make_onnx_fixtures import GPT  # noqa: E402


class LeNet(nn.Module):
    def __init__(self, dim=1):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)
        self.log_softmax = nn.LogSoftmax(dim)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.log_softmax(self.fc3(x))


class Tutorial(nn.Module):
    """The seed tutorial's model, LogSoftmax(dim=0) and all."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 320)
        self.fc2 = nn.Linear(320, 100)
        self.fc3 = nn.Linear(100, 10)
        self.log_softmax = nn.LogSoftmax(dim=0)

    def forward(self, x):
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.log_softmax(self.fc3(x))


class Twice(nn.Module):
    """One activation module called twice: its second call is `act#2` in
    the reference, `act_1` in the export's scopes."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(12, 16), nn.Linear(16, 16), nn.Linear(16, 4)
        self.act = nn.Tanh()

    def forward(self, x):
        return F.log_softmax(self.fc3(self.act(self.fc2(self.act(self.fc1(x))))), dim=1)


def export(net, x, path):
    torch.onnx.export(net, (x,), path, input_names=["x"], output_names=["logp"], opset_version=13,
                      do_constant_folding=False)


out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
net = LeNet().eval()
x = torch.randn(8, 1, 28, 28)
y = torch.randint(0, 10, (8,))
export(net, x, os.path.join(out, "lenet.onnx"))
tensorscope_ref.dump(net, {"x": x}, os.path.join(out, "lenet"), loss_fn=F.nll_loss, targets=y)
bad = LeNet(dim=0).eval()
bad.load_state_dict(net.state_dict())
tensorscope_ref.dump(bad, {"x": x}, os.path.join(out, "lenet_dim0"), loss_fn=F.nll_loss, targets=y)
export(Tutorial().eval(), x, os.path.join(out, "tutorial.onnx"))

torch.manual_seed(7)
gpt = GPT().eval()
idx = torch.randint(0, 32, (2, 8))
targets = torch.randint(0, 32, (2, 8))
export(gpt, idx, os.path.join(out, "gpt.onnx"))
tensorscope_ref.dump(gpt, {"x": idx}, os.path.join(out, "gpt"), targets=targets,
                     loss_fn=lambda o, t: F.cross_entropy(o.reshape(-1, o.shape[-1]), t.reshape(-1)))

torch.manual_seed(3)
twice = Twice().eval()
x = torch.randn(6, 12)
export(twice, x, os.path.join(out, "twice.onnx"))
tensorscope_ref.dump(twice, {"x": x}, os.path.join(out, "twice"), loss_fn=F.nll_loss,
                     targets=torch.randint(0, 4, (6,)))
