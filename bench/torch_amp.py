"""PyTorch's mixed precision as its users write it on the CPU, for the twins
of tensorscope's --precision (docs/precision.md): the forward and the loss
under torch.autocast("cpu", dtype=...) (bf16 or f16: matmuls and
convolutions in 16 bits, the rest f32, the master weights f32), and for f16
a GradScaler (dynamic loss scaling with its defaults, as tensorscope's f16).

    amp = Amp("bf16")
    with amp.autocast():
        loss = model(x, y)
    amp.step(loss, opt)      # backward() and opt.step(), scaled for f16
"""
import contextlib

import torch

PRECISIONS = ("f32", "bf16", "f16")


def add_argument(ap):
    ap.add_argument("--precision", choices=PRECISIONS, default="f32",
                    help="f32, or autocast to bf16 or f16 (f16 with a GradScaler)")


class Amp:
    def __init__(self, precision):
        self.precision = precision
        self.dtype = {"f32": None, "bf16": torch.bfloat16, "f16": torch.float16}[precision]
        # torch.amp.GradScaler("cpu"): PyTorch 2.3 and later
        self.scaler = torch.amp.GradScaler("cpu") if precision == "f16" else None

    def autocast(self):
        return torch.autocast("cpu", dtype=self.dtype) if self.dtype else contextlib.nullcontext()

    def step(self, loss, opt):
        if self.scaler is None:
            loss.backward()
            opt.step()
            return
        self.scaler.scale(loss).backward()
        self.scaler.step(opt)
        self.scaler.update()
