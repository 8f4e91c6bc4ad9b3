"""The public API speaks Python: docstrings that never send the reader to
the C header, type hints on every public function and method, and repr()s
that show what an object is."""
import inspect
import re

import numpy as np
import pytest

import tensorscope as ts
from conftest import batches, small_mlp

CLASSES = [ts.Graph, ts.Tensor, ts.Model, ts.Options, ts.Dataset, ts.DataLoader, ts.OutfeedQueue,
           ts.LRSchedule]
FUNCTIONS = [getattr(ts, n) for n in ts.__all__ if inspect.isfunction(getattr(ts, n))]
C_TERMS = re.compile(r"include/tensorscope\.h|\bts_[a-z_0-9]+\b|The builder's|ts_status|\bNULL\b")


def public_callables():
    for cls in CLASSES:
        for name, member in vars(cls).items():
            if name.startswith("_") and name not in ("__init__", "__call__"):
                continue
            if isinstance(member, property):
                yield f"{cls.__name__}.{name}", member.fget
            elif inspect.isfunction(member) or isinstance(member, (classmethod, staticmethod)):
                yield f"{cls.__name__}.{name}", getattr(member, "__func__", member)
    for f in FUNCTIONS:
        yield f.__name__, f


@pytest.mark.parametrize("name,fn", list(public_callables()), ids=lambda v: v if isinstance(v, str) else "")
def test_docstrings_in_python_terms_and_type_hints(name, fn):
    doc = inspect.getdoc(fn)
    if name.split(".")[-1] not in ("__init__", "__call__") or doc:
        assert doc, f"{name} has no docstring"
        assert not C_TERMS.search(doc), f"{name}'s docstring speaks C: {C_TERMS.search(doc).group()}"
    sig = inspect.signature(fn)
    for p in list(sig.parameters.values())[1 if "." in name else 0:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.annotation is p.empty:
            continue
        if p.name.startswith("_"):
            continue
        assert p.annotation is not p.empty, f"{name}({p.name}) has no type hint"
    assert sig.return_annotation is not sig.empty, f"{name} has no return type hint"


def test_every_builder_op_says_what_it_does():
    for method in ts.OPS:
        doc = getattr(ts.Graph, method).__doc__
        assert doc and not C_TERMS.search(doc), method
    assert "kernel_h" in ts.Graph.max_pool2d.__doc__  # the dict's fields, named
    assert "params: Optional[Dict[str, int]]" in ts.Graph.max_pool2d.__doc__


def test_reprs_show_what_an_object_is():
    g = small_mlp()
    # fc1: 5 x 6 + 5, fc2: 3 x 5 + 3 values
    assert repr(g) == ("<Graph of 13 tensors, 4 parameters (53 values), inputs: x f32[4,6], "
                       "labels i32[4]>")
    assert repr(g.tensor("fc1.weight")) == "<Tensor fc1.weight f32[5,6] parameter>"
    assert repr(g.tensor("labels")) == "<Tensor labels i32[4] input>"
    opts = (ts.Options().device_iterations(2).anchor_tensor("g", "Gradient___fc2.bias", "all")
            .watch("fc1/*"))
    assert repr(opts) == ("Options(device_iterations=2, anchors=['g=Gradient___fc2.bias:All'], "
                          "watches=['fc1/*'])")
    sgd = ts.SGD(lr=0.5, momentum=0.9)
    assert repr(sgd) == "SGD(lr=0.5, momentum=0.9, weight_decay=0, dampening=0, nesterov=False)"
    assert repr(ts.AdamW(lr=0.25)).startswith("AdamW(lr=0.25, betas=(0.9, 0.999), eps=1e-08")
    sched = ts.LRSchedule("cosine", warmup_steps=2, total_steps=10)
    assert repr(sched) == "LRSchedule('cosine', warmup_steps=2, total_steps=10, min_lr=0)"
    model = ts.training_model(g, opts, optimizer=sgd, lr_schedule=sched)
    assert repr(model).startswith("<Model training of loss 'loss', not compiled, lr=0.25, ")
    model(*batches(2))
    r = repr(model)
    assert "1 runs, 2 steps" in r and "lr=0.5" in r and repr(sched) in r and repr(opts) in r
    infer = ts.inference_model(g, outputs=["LogSoftmax:0"])
    assert repr(infer) == "<Model inference of outputs ['LogSoftmax:0'], not compiled, Options()>"
    x = np.zeros((10, 6), np.float32)
    data = ts.Dataset.from_arrays(x, np.zeros(10, np.int32))
    assert repr(data) == "<Dataset of 10 samples: x f32[10,6], labels i32[10]>"
    loader = ts.DataLoader(data, batch_size=4, shuffle=True, seed=3, drop_last=True)
    assert repr(loader) == ("<DataLoader(batch_size=4, shuffle=True, seed=3, drop_last=True, "
                            "group=1, first=0, count=0): 2 batches an epoch, epoch 0>")
    q = ts.OutfeedQueue("grads")
    assert repr(q) == "<OutfeedQueue 'grads' mode='all': 0 records enqueued, 0 dropped>"
    g.close()
    assert repr(g) == "<Graph (closed)>" and repr(model) == "<Model (closed)>"
