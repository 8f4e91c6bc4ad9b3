"""PyTorch models for test_compare_models.sh, the models a user brings to
`tensorscope compare` beyond a classifier: each exported to ONNX with its
reference dump (python/tensorscope_ref.py, Debian's torch).

usage: compare_any_models.py OUT_DIR
writes OUT_DIR/NAME.onnx and OUT_DIR/NAME/{reference,inputs,weights}.npz for
  ownloss   forward(x, labels) returns its own cross-entropy loss, a scalar
  pair      forward(x, labels) returns (scores, loss)
  regress   forward(x) returns one value per sample, [B] (a regression)
  conv      forward(x) returns feature maps, [B, C, H, W]
  energy    forward(x) returns a scalar computed from x alone (no labels)
and OUT_DIR/NAME_fwd/ for regress and conv: the forward alone, no loss.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import tensorscope_ref  # noqa: E402


class MLP(nn.Module):
    def __init__(self, n_out):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(12, 16), nn.Linear(16, n_out)

    def body(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


class OwnLoss(MLP):
    def __init__(self):
        super().__init__(5)

    def forward(self, x, labels):
        return F.cross_entropy(self.body(x), labels)


class Pair(MLP):
    def __init__(self):
        super().__init__(5)

    def forward(self, x, labels):
        scores = self.body(x)
        return scores, F.cross_entropy(scores, labels)


class Regress(MLP):
    def __init__(self):
        super().__init__(1)
        self.head = nn.Flatten(0)  # [B, 1] -> [B]

    def forward(self, x):
        return self.head(self.body(x))


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(2, 4, 3, padding=1), nn.Conv2d(4, 3, 3)

    def forward(self, x):
        return self.conv2(F.relu(self.conv1(x)))


class Energy(MLP):
    def __init__(self):
        super().__init__(3)

    def forward(self, x):
        return (self.body(x) ** 2).mean()


def export(net, args, names, path):
    torch.onnx.export(net, args, path, input_names=names, opset_version=13, do_constant_folding=False)


out = sys.argv[1]
os.makedirs(out, exist_ok=True)
own = lambda o, _t: o  # noqa: E731  (forward returns the loss)
torch.manual_seed(0)
x, y = torch.randn(6, 12), torch.randint(0, 5, (6,))
for name, net, loss_fn in (("ownloss", OwnLoss(), own), ("pair", Pair(), lambda o, _t: o[1])):
    export(net, (x, y), ["x", "labels"], os.path.join(out, name + ".onnx"))
    tensorscope_ref.dump(net, {"x": x, "labels": y}, os.path.join(out, name), loss_fn=loss_fn, targets=y)

net = Regress()
export(net, (x,), ["x"], os.path.join(out, "regress.onnx"))
tensorscope_ref.dump(net, {"x": x}, os.path.join(out, "regress_fwd"))
tensorscope_ref.dump(net, {"x": x}, os.path.join(out, "regress"), loss_fn=F.mse_loss, targets=torch.randn(6))

net, xc = Conv(), torch.randn(3, 2, 7, 7)
export(net, (xc,), ["x"], os.path.join(out, "conv.onnx"))
tensorscope_ref.dump(net, {"x": xc}, os.path.join(out, "conv_fwd"))
tensorscope_ref.dump(net, {"x": xc}, os.path.join(out, "conv"), loss_fn=F.mse_loss, targets=torch.randn(3, 3, 5, 5))

net = Energy()
export(net, (x,), ["x"], os.path.join(out, "energy.onnx"))
tensorscope_ref.dump(net, {"x": x}, os.path.join(out, "energy"), loss_fn=own, targets=torch.zeros(()))
