"""The built-in `mlp` model in PyTorch (same layers, same names), for the
compare tests: writes a reference dump with python/tensorscope_ref.py.

usage: mlp_twin.py OUT_DIR [--softmax-dim D] [--seed S]
"""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import tensorscope_ref  # noqa: E402


class MLP(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc1 = nn.Linear(784, 320)
        self.fc2 = nn.Linear(320, 100)
        self.fc3 = nn.Linear(100, 10)
        self.log_softmax = nn.LogSoftmax(dim)

    def forward(self, x):
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.log_softmax(self.fc3(x))


ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--softmax-dim", type=int, default=1)
ap.add_argument("--seed", type=int, default=0)
a = ap.parse_args()
torch.manual_seed(a.seed)
net = MLP(a.softmax_dim)
x = torch.randn(8, 1, 28, 28)
y = torch.randint(0, 10, (8,))
tensorscope_ref.dump(net, {"x": x}, a.out, loss_fn=F.nll_loss, targets=y)
