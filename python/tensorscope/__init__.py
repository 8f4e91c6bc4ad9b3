"""tensorscope: train on a compiled static graph and see any tensor in it.

A thin binding of the C library (include/tensorscope.h) with PopTorch's
vocabulary and numpy arrays in and out:

    import numpy as np, tensorscope as ts
    g = ts.Graph(seed=0)
    x = g.input("x", "f32", [64, 1, 28, 28]); labels = g.input("labels", "i32", [64])
    h = g.relu(g.linear(g.flatten(x, 1), 320, "fc1"))
    loss = g.nll_loss(g.log_softmax(g.linear(h, 10, "fc3"), 1), labels)
    loss.name = "loss"
    opts = ts.Options().device_iterations(4).anchor_tensor("g", "Gradient___fc3.bias", "all")
    model = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.01, momentum=0.9))
    model.compile()
    print(model.get_tensor_names())
    loss = model(xs, ys)                      # xs f32[4*64,1,28,28], ys i32[4*64]
    model.get_anchored_tensor("g")            # f32[4,10], a copy

Errors of the library are raised as TensorscopeError subclasses carrying its
message. Arrays returned are copies (valid after the next run); inputs are
read in place when C-contiguous; Tensor.view() is the zero-copy exception.
"""
from ._capi import lib as _lib
from .data import DataLoader, Dataset
from .errors import (FileError, FormatError, InternalError, InvalidArgumentError,
                     NotFoundError, NumericsError, OutOfMemoryError, ShapeError, StateError,
                     TensorscopeError, UnsupportedError)
from .graph import OPS, Graph, Tensor, print_tensor
from .model import Model, inference_model, metrics_report, training_model
from .observe import plot_gradient_histogram, save_npy, summary, summary_line
from .options import SGD, Adam, AdamW, Options, OutfeedQueue, OutputMode, Record, Watch

__version__ = _lib.ts_version().decode()


def set_log_level(level):
    """0 off, 1 error (print ops), 2 warn, 3 info (default), 4 debug, 5 trace."""
    _lib.ts_set_log_level(int(level))


def metrics_reset():
    _lib.ts_metrics_reset()
