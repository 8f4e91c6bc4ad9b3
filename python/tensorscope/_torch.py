"""Wrapping a PyTorch module, PopTorch-style: export it through ONNX,
each module in its own train/eval mode, import it, train it in
tensorscope, copy the weights back.

What the module says about training beyond its ops is carried (detach(),
frozen parameters, the optimizer's parameter groups, padding_idx, label
smoothing, BatchNorm's statistics) or refused (hooks, data-dependent
control flow, optimizers and schedulers tensorscope lacks): the wrapper
never trains another program silently. The exporter's printout goes to the
library's log.

torch is imported here only, when a module is wrapped.

Errors name the module, never the temporary ONNX file: the export keeps
each node's Python stack (its doc_string), and a message that names the
file's node N (import) or location file:N (compile, runs) is rewritten to
name the module path and the line of the user's forward that made it."""
from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
import inspect
import io
import os
import re
import shutil
import sys
import tempfile
import warnings
import weakref
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import _capi
from .errors import NotFoundError, StateError, TensorscopeError, UnsupportedError
from .graph import Graph
from .model import Model, new_training_model
from .options import SGD, Adam, AdamW, LRSchedule


def _group_optimizer(optimizer, h, scheduled=False):
    """A ts optimizer of a torch.optim SGD/Adam/AdamW's parameter group `h`;
    what it cannot carry is refused with the reason. scheduled: a torch LR
    scheduler drives it, whose own first factor is already in h["lr"]
    (LinearLR's start_factor): the rate is its initial_lr."""
    import torch
    kind = type(optimizer)
    if kind not in (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW):
        raise TypeError(f"optimizer {kind.__name__}: tensorscope trains with SGD, Adam and AdamW; "
                        "use ts.SGD, ts.Adam, ts.AdamW or torch.optim.SGD, Adam or AdamW")
    for option in ("maximize", "amsgrad"):
        if h.get(option):
            raise ValueError(f"torch optimizer {kind.__name__}({option}=True): tensorscope has no "
                             f"{option}; train with {option}=False")
    lr = h["initial_lr"] if scheduled and "initial_lr" in h else h["lr"]
    if kind is torch.optim.SGD:
        return SGD(lr, h["momentum"], h["weight_decay"], h["dampening"], h["nesterov"])
    if kind is torch.optim.Adam:
        return Adam(lr, h["betas"], h["eps"], h["weight_decay"])
    return AdamW(lr, h["betas"], h["eps"], h["weight_decay"])


def _optimizer_of(optimizer, scheduled=False):
    """A ts optimizer from itself or from a torch.optim SGD/Adam/AdamW (its
    first parameter group's settings; TorchModel's _set_param_groups gives
    every parameter its own group's)."""
    if isinstance(optimizer, _capi.Optimizer):
        return optimizer
    import torch
    if isinstance(optimizer, torch.optim.Optimizer):
        return _group_optimizer(optimizer, optimizer.param_groups[0], scheduled)
    raise TypeError(f"optimizer {type(optimizer).__name__}: use ts.SGD, ts.Adam, ts.AdamW or "
                    "torch.optim.SGD, Adam or AdamW")


_SETTINGS = ("kind", "lr", "momentum", "dampening", "nesterov", "weight_decay", "beta1", "beta2", "eps")


def _same_settings(a, b) -> bool:
    return all(getattr(a, f) == getattr(b, f) for f in _SETTINGS)


def set_param_training(module, graph, optimizer, model_opt, scheduled=False) -> None:
    """Each parameter of `graph` trained as PyTorch would train it: not at
    all when it has requires_grad=False or the torch optimizer does not
    hold it (frozen: its gradient not computed for it), else with its
    parameter group's settings. A parameter of the graph that no module
    parameter names, when some are frozen or grouped, is an error: it
    could not be given its settings. A buffer (rotary embeddings'
    inv_freq, a registered mask) is never trained: the ONNX capture holds
    it as an initializer, which the graph would otherwise train like a
    weight."""
    import torch
    params = graph.parameters()
    try:  # every path of a shared buffer (remove_duplicate: PyTorch 2.0 on)
        buffers = list(module.named_buffers(remove_duplicate=False))
    except TypeError:
        buffers = list(module.named_buffers())
    for name, _ in buffers:
        if name in params:
            params[name].trainable = False
    by_tensor = {}  # id(torch parameter) -> its group's ts optimizer
    if isinstance(optimizer, torch.optim.Optimizer):
        for h in optimizer.param_groups:
            group = _group_optimizer(optimizer, h, scheduled)
            for p in h["params"]:
                by_tensor[id(p)] = group
    settings = {}  # graph parameter name -> ts optimizer, or None: frozen
    state = module.state_dict(keep_vars=True)  # every name of a tied parameter
    for name, p in state.items():
        if not isinstance(p, torch.nn.Parameter):
            continue
        held = id(p) in by_tensor or not isinstance(optimizer, torch.optim.Optimizer)
        if not p.requires_grad or not held:
            settings[name] = None
        elif by_tensor.get(id(p)) is not None and not _same_settings(by_tensor[id(p)], model_opt):
            settings[name] = by_tensor[id(p)]
    if not settings:
        return
    unknown = [n for n in params if n not in state]
    if unknown:
        raise ValueError(f"the export holds parameters under names the module does not have "
                         f"({', '.join(unknown[:5])}), so frozen parameters and parameter groups "
                         "cannot be told apart there: train every parameter with one setting (one "
                         "parameter group, every parameter requiring grad)")
    for name, how in settings.items():
        t = params.get(name)
        if t is None:
            continue  # not in the export: forward does not use it
        if how is None:
            t.trainable = False
        else:
            t.set_optimizer(how)


def lr_schedule_of(scheduler):
    """Our LRSchedule for a torch LR scheduler that has one, stepped once
    per optimizer step (call its step() after every optimizer.step()):
    StepLR, CosineAnnealingLR over its first T_max steps, and a LinearLR
    warmup from 1/W to 1 over W - 1 steps (our warmup of W steps); any
    other is refused with what to use instead."""
    import torch
    sched = torch.optim.lr_scheduler
    what = type(scheduler).__name__
    if getattr(scheduler, "last_epoch", 0) != 0:
        raise ValueError(f"LR scheduler {what} has stepped {scheduler.last_epoch} times already: "
                         "pass a new one (training starts from its first step)")
    if type(scheduler) is sched.StepLR:
        return LRSchedule("step", step_size=scheduler.step_size, gamma=scheduler.gamma)
    if type(scheduler) is sched.CosineAnnealingLR:
        return LRSchedule("cosine", total_steps=scheduler.T_max, min_lr=scheduler.eta_min)
    if type(scheduler) is sched.LinearLR:
        w = scheduler.total_iters + 1
        if scheduler.end_factor == 1.0 and abs(scheduler.start_factor * w - 1.0) < 1e-6:
            return LRSchedule("constant", warmup_steps=w)
        raise ValueError(f"LR scheduler LinearLR(start_factor={scheduler.start_factor}, end_factor="
                         f"{scheduler.end_factor}, total_iters={scheduler.total_iters}): tensorscope's "
                         f"linear warmup of W steps is LinearLR(start_factor=1/W, end_factor=1, "
                         f"total_iters=W - 1), e.g. LinearLR(opt, 1 / {w}, 1.0, {w - 1})")
    raise ValueError(f"LR scheduler {what}: tensorscope follows StepLR, CosineAnnealingLR and a "
                     "LinearLR warmup (and a warmup before either, ts.LRSchedule(kind, "
                     "warmup_steps=...)); pass one of them or a ts.LRSchedule, or lr_schedule=None "
                     "for a constant rate")


EXPORT_OPSET = 17  # every PyTorch from 1.13 writes it: the same graph whichever torch exports
OWN_DOMAIN = "ai.tensorscope"  # tensorscope's own ops in the file, where ONNX has none


def _stop_gradient(g, x):
    """aten::detach as tensorscope's StopGradient (the exporter drops a
    detach otherwise: ONNX has no stop-gradient)."""
    out = g.op(f"{OWN_DOMAIN}::StopGradient", x)
    out.setType(x.type())  # its shape and dtype are x's
    return out


def _embedding(g, weight, indices, padding_idx, scale_grad_by_freq, sparse):
    """aten::embedding as a Gather whose padding row gets no gradient
    (PyTorch's padding_idx; the exporter drops it otherwise): the rows
    gathered at padding positions pass through a StopGradient, the
    others as they are: out = e + (StopGradient(e) - e) * (indices == k)."""
    import torch
    from torch.onnx import symbolic_helper
    if symbolic_helper._maybe_get_const(scale_grad_by_freq, "b") is True:
        raise ValueError("nn.Embedding(scale_grad_by_freq=True): tensorscope does not scale "
                         "an embedding's gradient by frequency; use scale_grad_by_freq=False")
    out = g.op("Gather", weight, indices)
    pad = symbolic_helper._maybe_get_const(padding_idx, "i")
    if not isinstance(pad, int) or pad < 0:  # -1: none (nn.Embedding makes a negative one positive)
        return out
    is_pad = g.op("Equal", indices, g.op("Constant", value_t=torch.tensor(pad, dtype=torch.int64)))
    mask = g.op("Unsqueeze", g.op("Cast", is_pad, to_i=1),  # 1 = FLOAT
                g.op("Constant", value_t=torch.tensor([-1], dtype=torch.int64)))
    held = g.op("Sub", _stop_gradient(g, out), out)
    return g.op("Add", out, g.op("Mul", held, mask))


def _cross_entropy(g, scores, target, weight, reduction, ignore_index, label_smoothing):
    """aten::cross_entropy_loss as ONNX's SoftmaxCrossEntropyLoss (the
    exporter's own), and with label_smoothing e > 0 (which the exporter
    refuses) PyTorch's formula: (1 - e) * that loss + e / C * the mean (or
    sum) over the samples not ignored of -sum_c w_c log p_c, a weighted
    mean dividing by the weights of the samples' classes."""
    import torch
    from torch.onnx import symbolic_helper as sh
    how = ["none", "mean", "sum"][sh._maybe_get_const(reduction, "i")]
    ii = sh._maybe_get_const(ignore_index, "i")
    e = sh._maybe_get_const(label_smoothing, "f")
    weighted = not weight.node().mustBeNone()
    if target.type().scalarType() in ("Float", "Double", "Half", "BFloat16"):
        return _cross_entropy_probabilities(g, scores, target, weight if weighted else None, how, e)
    ins = (scores, target, weight) if weighted else (scores, target)
    loss = g.op("SoftmaxCrossEntropyLoss", *ins, reduction_s=how, ignore_index_i=ii)
    if not e:
        return loss
    sizes = sh._get_tensor_sizes(scores) or []
    if len(sizes) != 2 or not isinstance(sizes[1], int):
        raise ValueError("cross_entropy(label_smoothing=...) of scores of shape "
                         f"{sizes}: tensorscope smooths scores [N, C] only; flatten them to "
                         "[N, C] (and the labels to [N]) first")
    const = lambda v, dtype=torch.float32: g.op("Constant", value_t=torch.tensor(v, dtype=dtype))  # noqa: E731
    logp = g.op("LogSoftmax", scores, axis_i=1)
    if weighted:
        logp = g.op("Mul", logp, weight)
    smooth = g.op("Neg", g.op("ReduceSum", logp, const([1], torch.int64), keepdims_i=0))
    kept = g.op("Cast", g.op("Not", g.op("Equal", target, const(ii, torch.int64))), to_i=1)
    smooth = g.op("Mul", smooth, kept)
    if how != "none":
        smooth = g.op("ReduceSum", smooth, keepdims_i=0)
    if how == "mean":
        if weighted:  # the weights of the kept samples' classes, through one-hot rows
            one_hot = g.op("Cast", g.op("Equal", g.op("Unsqueeze", target, const([1], torch.int64)),
                                        const(list(range(sizes[1])), torch.int64)), to_i=1)
            kept = g.op("Mul", g.op("ReduceSum", g.op("Mul", one_hot, weight), const([1], torch.int64),
                                    keepdims_i=0), kept)
        count = g.op("ReduceSum", kept, keepdims_i=0)
        smooth = g.op("Div", smooth, count)
    return g.op("Add", g.op("Mul", loss, const(1.0 - e)), g.op("Mul", smooth, const(e / sizes[1])))


_EXPORTING = []  # the module export_onnx exports, while it runs


def _buffer_as_constant(g, v):
    """v, or where it is a buffer of the module being exported (a loss's
    class weights: the file would hold it as an initializer, which an
    import trains unless an op takes it as a setting) a Constant of its
    values."""
    import torch
    buffers = dict(_EXPORTING[-1].named_buffers()) if _EXPORTING else {}
    b = buffers.get(v.debugName()) if v.node().kind() == "prim::Param" else None
    return v if b is None else g.op("Constant", value_t=b.detach().to(torch.float32).cpu().clone())


def _cross_entropy_probabilities(g, scores, target, weight, how, e):
    """cross_entropy of class probabilities (a float target, which ONNX's
    SoftmaxCrossEntropyLoss does not take) as PyTorch defines it: each
    sample's -sum_c w_c q_c log p_c with q = (1 - e) * target + e / C,
    its mean over every sample (and position) for "mean", never divided by
    the weights."""
    import torch
    from torch.onnx import symbolic_helper as sh
    sizes = sh._get_tensor_sizes(scores) or []
    if len(sizes) < 2 or not isinstance(sizes[1], int):
        raise ValueError(f"cross_entropy of scores of shape {sizes} with class probabilities: tensorscope takes "
                         "scores [N, C, ...] whose class count is known at export")
    const = lambda v, dtype=torch.float32: g.op("Constant", value_t=torch.tensor(v, dtype=dtype))  # noqa: E731
    logp = g.op("LogSoftmax", scores, axis_i=1)
    if weight is not None:  # [C] along axis 1
        weight = _buffer_as_constant(g, weight)
        logp = g.op("Mul", logp, g.op("Reshape", weight, const([sizes[1]] + [1] * (len(sizes) - 2), torch.int64)))
    if e:
        target = g.op("Add", g.op("Mul", target, const(1.0 - e)), const(e / sizes[1]))
    loss = g.op("Neg", g.op("ReduceSum", g.op("Mul", target, logp), const([1], torch.int64), keepdims_i=0))
    if how == "sum":
        return g.op("ReduceSum", loss, keepdims_i=0)
    return g.op("ReduceMean", loss, keepdims_i=0) if how == "mean" else loss


def _softplus(g, x, beta, threshold):
    """aten::softplus as PyTorch computes it: x itself where beta * x
    exceeds threshold, else log(1 + exp(beta * x)) / beta (the exporter's
    Softplus drops the threshold)."""
    import torch
    from torch.onnx import symbolic_helper as sh
    b, t = sh._maybe_get_const(beta, "f"), sh._maybe_get_const(threshold, "f")
    const = lambda v: g.op("Constant", value_t=torch.tensor(v, dtype=torch.float32))  # noqa: E731
    bx = g.op("Mul", x, const(float(b))) if b != 1 else x
    soft = g.op("Softplus", bx)
    if b != 1:
        soft = g.op("Div", soft, const(float(b)))
    return g.op("Where", g.op("Greater", bx, const(float(t))), x, soft)


def _rms_norm(g, x, normalized_shape, weight, eps):
    """aten::rms_norm (nn.RMSNorm, F.rms_norm; the exporter has none before
    opset 23) as the nodes it writes for x * rsqrt(mean(x^2) + eps) * w,
    which the import makes one RMSNorm op over the last dim (eps None:
    float32's machine epsilon, as PyTorch's)."""
    import torch
    from torch.onnx import symbolic_helper as sh
    k = len(sh._maybe_get_const(normalized_shape, "is"))
    e = sh._maybe_get_const(eps, "f")
    e = float(torch.finfo(torch.float32).eps) if e is None or sh._is_none(eps) else float(e)
    const = lambda v: g.op("Constant", value_t=torch.tensor(v, dtype=torch.float32))  # noqa: E731
    ms = g.op("ReduceMean", g.op("Pow", x, const(2.0)), axes_i=list(range(-k, 0)), keepdims_i=1)
    y = g.op("Mul", x, g.op("Div", const(1.0), g.op("Sqrt", g.op("Add", ms, const(e)))))
    return y if sh._is_none(weight) else g.op("Mul", y, weight)


_CARRIED = {"aten::detach": _stop_gradient, "aten::embedding": _embedding,
            "aten::cross_entropy_loss": _cross_entropy, "aten::softplus": _softplus,
            "aten::rms_norm": _rms_norm}


@contextlib.contextmanager
def _semantics_carried(module):
    """Exports what ONNX's ops lose of forward's semantics (each detach(),
    an Embedding's padding_idx, cross_entropy's label_smoothing and class
    probabilities, softplus's threshold; rms_norm, which it lacks) in
    tensorscope's terms while the export
    runs (the registrations are the exporter's, process-wide)."""
    import torch
    for name, fn in _CARRIED.items():
        torch.onnx.register_custom_op_symbolic(name, fn, EXPORT_OPSET)
    _EXPORTING.append(module)
    try:
        yield
    finally:
        _EXPORTING.pop()
        for name in _CARRIED:
            torch.onnx.unregister_custom_op_symbolic(name, EXPORT_OPSET)


@contextlib.contextmanager
def _state_kept(module):
    """The module's buffers and torch's random state as they were before
    the export: tracing runs forward once, which moves BatchNorm's running
    statistics (and num_batches_tracked) and draws Dropout masks. Yields
    the buffers' values from before, by state_dict name."""
    import torch
    buffers = {n: b.detach().clone() for n, b in module.named_buffers()}
    rng = torch.random.get_rng_state()
    try:
        yield buffers
    finally:
        with torch.no_grad():
            for n, b in module.named_buffers():
                if n in buffers:
                    b.copy_(buffers[n])
        torch.random.set_rng_state(rng)


def export_onnx(module, example_inputs, path, input_names, keep_stacks=False, preserve_modes=False):
    """torch.onnx.export in training mode with parameters kept as named
    initializers (no constant folding), the TorchScript exporter at opset
    EXPORT_OPSET (PyTorch 2.9 on defaults to the dynamo exporter, which
    folds BatchNormalization into the convolutions, parameters gone, even
    in training mode). keep_stacks: each node keeps the Python stack that made it (its
    doc_string; the exporter's verbose mode, without its printout).
    preserve_modes: each module exported in its own train/eval mode
    (TrainingMode.PRESERVE), not all of them in training mode."""
    import torch
    kwargs = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    mode = torch.onnx.TrainingMode.PRESERVE if preserve_modes else torch.onnx.TrainingMode.TRAINING
    quiet = contextlib.nullcontext()
    if keep_stacks and callable(getattr(torch.onnx, "log", None)):
        quiet = _patched(torch.onnx, "log", lambda *args: None)  # verbose prints the graph
    with _output_logged("torch.onnx.export"), quiet, _semantics_carried(module), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            # its own domain's opset (version 1) is declared by the exporter when a node uses it
            torch.onnx.export(module, tuple(example_inputs), path, input_names=input_names,
                              training=mode, do_constant_folding=False,
                              opset_version=EXPORT_OPSET, verbose=keep_stacks, **kwargs)
        except Exception as e:
            if importlib.util.find_spec("onnx") is None:  # PyTorch 2.9 on writes ONNX through it
                raise ImportError(f"PyTorch {torch.__version__} exports ONNX through the onnx "
                                  "package, which is not installed: pip install onnx") from e
            raise
    for w in caught:  # the exporter's chatter (deprecations, its tracer's notes): in the log
        log(LOG_DEBUG, f"torch.onnx.export: {w.category.__name__}: {w.message} ({w.filename}:{w.lineno})")
    return caught


LOG_WARN, LOG_INFO, LOG_DEBUG = 2, 3, 4  # ts_log_level


def log(level: int, message: str) -> None:
    """One message of the wrapper into the library's log (ts.set_log_level,
    ts.set_log_callback)."""
    write = getattr(_capi.lib, "ts_log_write", None)  # absent from older libraries
    if write is not None:
        write(level, message.encode("utf-8", "replace"))


@contextlib.contextmanager
def _output_logged(what):
    """What is printed while the block runs -- to Python's sys.stdout and
    sys.stderr and to the process's descriptors 1 and 2, where PyTorch's
    C++ side prints (the exporter's graph, its warnings) -- goes into the
    library's log at debug level, not to the terminal. The descriptors are
    the process's: another thread's output meanwhile goes there too."""
    py = io.StringIO()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    with tempfile.TemporaryFile() as f:
        saved = [os.dup(1), os.dup(2)]
        try:
            os.dup2(f.fileno(), 1)
            os.dup2(f.fileno(), 2)
            with contextlib.redirect_stdout(py), contextlib.redirect_stderr(py):
                yield
        finally:
            with contextlib.suppress(OSError, AttributeError):
                ctypes.CDLL(None).fflush(None)  # C stdio buffers, before the descriptors go back
            for fd, old in zip((1, 2), saved):
                os.dup2(old, fd)
                os.close(old)
            f.seek(0)
            text = (py.getvalue() + f.read().decode("utf-8", "replace")).rstrip()
            if text:
                log(LOG_DEBUG, f"{what} printed:\n{text}")


@contextlib.contextmanager
def _patched(obj, name, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


# ---- where each node of the export came from

def _fields(buf, start=0, end=None):
    """(field number, wire type, value) of a protobuf message's fields:
    value is an int (varint, fixed) or a memoryview (length-delimited)."""
    for field, wire, value, _ in _field_spans(buf, start, end):
        yield field, wire, value


def _field_spans(buf, start=0, end=None):
    """_fields with where each value starts in buf (a length-delimited
    one's bytes, after its length)."""
    end = len(buf) if end is None else end
    i = start
    while i < end:
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = int.from_bytes(buf[i:i + 8], "little"), i + 8
        elif wire == 5:
            value, i = int.from_bytes(buf[i:i + 4], "little"), i + 4
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i:i + n], i + n
        else:
            return  # groups: not in ONNX files
        yield field, wire, value, (i - len(value) if wire == 2 else None)


def _varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, i


def set_initializers(path: str, values: Dict[str, bytes]) -> None:
    """Writes values[name] over the raw data of each initializer of an ONNX
    file that has that name and data of that size (ModelProto.graph = 7,
    GraphProto.initializer = 5, TensorProto.name = 8, raw_data = 9)."""
    with open(path, "r+b") as f:
        buf = bytearray(f.read())
        view = memoryview(buf)
        for field, wire, graph, g0 in _field_spans(view):
            if field != 7 or wire != 2:
                continue
            for gfield, gwire, tensor, t0 in _field_spans(view, g0, g0 + len(graph)):
                if gfield != 5 or gwire != 2:
                    continue
                name, raw = None, None
                for tfield, twire, v, v0 in _field_spans(view, t0, t0 + len(tensor)):
                    if twire == 2 and tfield == 8:
                        name = bytes(v).decode("utf-8", "replace")
                    elif twire == 2 and tfield == 9:
                        raw = (v0, len(v))
                if name in values and raw and len(values[name]) == raw[1]:
                    buf[raw[0]:raw[0] + raw[1]] = values[name]
        del view
        f.seek(0)
        f.write(buf)


def onnx_node_origins(path: str) -> List[Tuple[str, str]]:
    """(node name, doc_string) of every node of an ONNX file's graph, in
    file order (ModelProto.graph = 7, GraphProto.node = 1, NodeProto.name
    = 3, doc_string = 6)."""
    with open(path, "rb") as f:
        buf = memoryview(f.read())
    nodes = []
    for field, wire, graph in _fields(buf):
        if field != 7 or wire != 2:
            continue
        for gfield, gwire, node in _fields(graph):
            if gfield != 1 or gwire != 2:
                continue
            name = doc = ""
            for nfield, nwire, v in _fields(node):
                if nwire == 2 and nfield == 3:
                    name = bytes(v).decode("utf-8", "replace")
                elif nwire == 2 and nfield == 6:
                    doc = bytes(v).decode("utf-8", "replace")
            nodes.append((name, doc))
    return nodes


_FRAME = re.compile(r"^(.*)\((\d+)\): (\S+)$")


def _user_line(doc: str) -> Optional[str]:
    """The innermost frame of an exporter stack outside torch: "file:line"."""
    import torch
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    for line in doc.splitlines():
        m = _FRAME.match(line.strip())
        if m and not os.path.abspath(m.group(1)).startswith(torch_dir + os.sep):
            return f"{m.group(1)}:{m.group(2)}"
    return None


class _Origins:
    """Rewrites the library's messages about an exported module's file into
    the module's words: its class, the node's module path and source line."""

    def __init__(self, module, path: str) -> None:
        self.path = path
        self.what = f"torch module {type(module).__name__}"
        self.nodes = []
        try:
            self.nodes = onnx_node_origins(path)
        except (OSError, IndexError):
            pass  # nothing to add: the messages still drop the file name

    def where(self, index: int) -> str:
        if not 0 <= index < len(self.nodes):
            return self.what
        name, doc = self.nodes[index]
        scope = ".".join(p for p in name.split("/")[1:-1] if p)
        line = _user_line(doc)
        parts = [f"module '{scope}'" if scope else "the top module"]
        if line:
            parts.append(f"forward at {line}")
        return f"{self.what}, {', '.join(parts)}"

    def explain(self, message: str) -> str:
        # the file as the importer names it, and as locations name it (its base name)
        p = f"(?:{re.escape(self.path)}|{re.escape(os.path.basename(self.path))})"
        message = re.sub(p + r": node (\d+) ('[^']*' \([^)]*\))",
                         lambda m: f"{self.where(int(m.group(1)))}: node {m.group(2)}", message)

        def located(m):
            index = int(m.group(1))
            if index < 0:  # a graph input
                return self.what + (f" ({m.group(2)})" if m.group(2) else "")
            return self.where(index) + (f" (node '{m.group(2)}')" if m.group(2) else "")

        message = re.sub(p + r":(-?\d+)(?: \(([^)]*)\))?", located, message)
        return message.replace(self.path, self.what)

    def reraise(self, e: TensorscopeError):
        new = type(e)(self.explain(str(e)))
        new.__dict__.update(e.__dict__)  # NumericsError.tensor
        if getattr(new, "report", None):  # NumericsError.report
            new.report = self.explain(new.report)
        raise new.with_traceback(e.__traceback__) from None


def _explained(method):
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except TensorscopeError as e:
            if self._origins is None:
                raise
            self._origins.reraise(e)
    return wrapper


class TorchModel(Model):
    """A training model of a torch module; `module` is the wrapped module.
    Its errors name the module path and the line of forward that made the
    failing op."""

    module = None
    _program = None  # the captured program's file (save_program)
    _origins = None

    compile = _explained(Model.compile)
    __call__ = _explained(Model.__call__)
    load_checkpoint = _explained(Model.load_checkpoint)
    get_anchored_tensor = _explained(Model.get_anchored_tensor)

    @_explained
    def dump(self, fmt: str = "text", locations: bool = False, backward: bool = False) -> str:
        """Model.dump, each location naming the module path and the line of forward."""
        text = Model.dump(self, fmt, locations, backward)
        return self._origins.explain(text) if self._origins else text

    def copy_weights_to_torch(self) -> None:
        """Writes the trained parameters (and buffers such as BatchNorm's
        running statistics) back into the module, by state_dict name."""
        import torch
        missing = []
        tied: Dict[int, List[Tuple[str, Any]]] = {}  # one tensor under several names (GPT-2's lm_head is wte)
        for name, t in self.module.state_dict(keep_vars=True).items():
            if t.dtype in (torch.float32, torch.float64):  # counters (num_batches_tracked) stay torch's
                tied.setdefault(t.data_ptr(), []).append((name, t))
        with torch.no_grad():
            for names in tied.values():
                for name, t in names:  # the first name the graph has
                    try:
                        values = self.graph.tensor(name).numpy()
                    except (NotFoundError, StateError):  # absent, or not a parameter
                        continue
                    t.copy_(torch.from_numpy(values).reshape(t.shape))
                    break
                else:
                    missing.append(" = ".join(n for n, _ in names))
        if missing:
            raise NotFoundError(f"no parameter of the imported graph for {', '.join(missing)}: "
                                "the ONNX export folded or renamed them")

    def save_program(self, path) -> str:
        """Writes the captured program -- the ONNX file the module was
        exported to, or the ExportedProgram of capture("export")
        (torch.export.save), its weights those of the module when it was
        wrapped -- to `path` (atomically), to run it for inference or
        compare it elsewhere (ts.Graph.from_onnx, onnxruntime where it has
        no tensorscope op such as a detach()'s StopGradient;
        torch.export.load). Returns path."""
        path = os.fspath(path)
        tmp = f"{path}.tmp{os.getpid()}"
        try:
            program = getattr(self.graph, "_exported", None)
            if program is not None:
                import torch
                torch.export.save(program, tmp)
            else:
                shutil.copyfile(self._program, tmp)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise
        return path

    def copy_weights_to_device(self) -> None:
        """Writes the module's current parameters into the graph."""
        self.graph.load_state_dict({n: p.detach().cpu().numpy()
                                    for n, p in self.module.named_parameters()})


_LOSSES = {"cross_entropy": "cross_entropy", "nll": "nll_loss"}  # loss= -> Graph method


CAPTURES = {"onnx": "the ONNX exporter (TorchScript)",
            "export": "torch.export, decomposed to Core ATen"}


def _torch_version(torch) -> Tuple[int, int]:
    return tuple(int(p) for p in re.findall(r"\d+", torch.__version__)[:2])


def capture_of(options) -> str:
    """The capture `options` ask for (Options.capture), or by default
    "export" where this PyTorch has the torch.export front end, else
    "onnx"."""
    how = options._capture if options is not None else None
    if how is not None:
        return how
    import torch
    from . import _export
    return "export" if _export.available(torch) else "onnx"


def capture_module(module, example_inputs, capture, purpose):
    """The module captured with `capture` ("onnx" or "export") at
    example_inputs and imported: (graph, the captured file, its _Origins,
    the finalizer that removes the file with the graph; file and finalizer None for
    "export", whose graph holds its ExportedProgram). Its buffers (and
    torch's random state) are as before the capture; one log line says
    which capture ran, for `purpose`."""
    if capture not in CAPTURES:
        raise ValueError(f"capture {capture!r}: use 'onnx' or 'export'")
    if example_inputs is None:
        raise TypeError("wrapping a torch module needs example_inputs=(x, ...): the inputs of "
                        "one micro-batch, as forward takes them")
    import torch
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    refuse_hooks(module)
    params = list(inspect.signature(module.forward).parameters)
    names = params[:len(example_inputs)]
    if capture == "export":
        from . import _export
        with _state_kept(module), _output_logged("torch.export"), \
                warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            graph, _, program = _export.capture(module, example_inputs, names)
        for w in caught:
            log(LOG_DEBUG, f"torch.export: {w.category.__name__}: {w.message} ({w.filename}:{w.lineno})")
        graph._exported = program
        log(LOG_INFO, f"{purpose} torch module {type(module).__name__}, captured through "
                      f"{CAPTURES[capture]} of PyTorch {torch.__version__}")
        return graph, None, graph._origins, None
    _capi.function("ts_graph_from_onnx", "capturing a torch module through ONNX")  # before exporting
    d = tempfile.mkdtemp(prefix="tensorscope-")  # the captured program: the graph's, till it goes
    try:
        path = os.path.join(d, "module.onnx")
        with _state_kept(module) as buffers:
            caught = export_onnx(module, example_inputs, path, names, keep_stacks=True,
                                 preserve_modes=True)
            refuse_traced_values(module, caught)
        # the file's buffers as they were before the trace moved them
        set_initializers(path, {n: b.cpu().numpy().tobytes() for n, b in buffers.items()})
        origins = _Origins(module, path)
        try:
            graph = Graph.from_onnx(path, {n: tuple(t.shape) for n, t in zip(names, example_inputs)})
        except TensorscopeError as e:
            origins.reraise(e)
    except BaseException:
        shutil.rmtree(d, ignore_errors=True)
        raise
    finalizer = weakref.finalize(graph, shutil.rmtree, d, True)
    graph._origins = origins
    older = "" if capture != "onnx" or _torch_version(torch) >= (2, 5) else \
        " (the torch.export capture needs PyTorch 2.5 or later)"
    log(LOG_INFO, f"{purpose} torch module {type(module).__name__}, captured through "
                  f"{CAPTURES[capture]} of PyTorch {torch.__version__}{older}")
    return graph, path, origins, finalizer


def graph_of_module(module, example_inputs, capture=None) -> Graph:
    """ts.Graph.from_torch: the captured graph itself (capture None: as
    capture_of chooses)."""
    if capture is None:
        capture = capture_of(None)
    graph, path, _, finalizer = capture_module(module, example_inputs, capture, "graph of")
    graph._program_kept = finalizer  # the file goes with the graph
    return graph


def inference_model_of_module(module, options, outputs, example_inputs):
    """ts.inference_model(module): the module captured (Options.capture)
    with its weights and buffers as they are now, computing forward's
    outputs (or `outputs`, names of its graph)."""
    from .model import new_inference_model
    capture = capture_of(options)
    graph, path, origins, finalizer = capture_module(module, example_inputs, capture, "inference of")
    say_dropout_differs(graph)
    try:
        model = new_inference_model(TorchModel, graph, options, outputs or graph.outputs)
    except TensorscopeError as e:
        origins.reraise(e)
    model.module = module
    model._origins = origins
    model._program = path
    model._program_kept = finalizer
    if module.training:
        log(LOG_INFO, f"torch module {type(module).__name__} is in train() mode: its Dropout and "
                      "BatchNorm run as in training, as PyTorch runs them; call module.eval() "
                      "before wrapping it for inference behaviour")
    return model


def training_model_of_module(module, options, optimizer, example_inputs, loss, scheduled=False):
    """scheduled: a torch LR scheduler drives the optimizer (lr_schedule_of)."""
    if example_inputs is None:
        raise TypeError("wrapping a torch module needs example_inputs=(x, ...): the inputs of "
                        "one micro-batch, as forward takes them")
    if optimizer is None:
        raise TypeError("training_model needs an optimizer (ts.SGD(...) or a torch.optim one)")
    if loss is not None and loss not in _LOSSES:
        raise ValueError(f"loss={loss!r}: for a torch module use None (forward returns its loss, "
                         f"last) or one of {', '.join(_LOSSES)}")
    capture = capture_of(options)
    graph, path, origins, finalizer = capture_module(module, example_inputs, capture, "training")
    say_dropout_differs(graph)
    outputs = graph.outputs
    if not outputs:
        raise ValueError("the exported module has no output")
    try:
        if loss is None:
            loss_t = outputs[-1]  # PopTorch: forward returns (output, loss) or loss
        else:
            scores = outputs[0]
            labels = graph.input("labels", "i32", list(scores.shape[:-1]) if len(scores.shape) > 2
                                 else [scores.shape[0]])  # per token: [B, T] of [B, T, V]
            loss_t = getattr(graph, _LOSSES[loss])(scores, labels)
            loss_t.name = "loss"
        model_opt = _optimizer_of(optimizer, scheduled)
        set_param_training(module, graph, optimizer, model_opt, scheduled)
        model = new_training_model(TorchModel, graph, options, model_opt, loss_t)
    except TensorscopeError as e:
        origins.reraise(e)
    model.module = module
    model._origins = origins
    model._program = path
    model._program_kept = finalizer  # the file goes with the graph
    returns_as_poptorch(model, [t.name for t in outputs], loss_t.name, loss is None)
    if not module.training:
        log(LOG_INFO, f"torch module {type(module).__name__} is in eval() mode: its Dropout and "
                      "BatchNorm train as in eval, as PyTorch runs them; call module.train() before "
                      "wrapping it for training behaviour")
    return model


def returns_as_poptorch(model, outputs, loss, forward_returns_loss) -> None:
    """A call of a wrapped module's training model returns what PopTorch's
    does: what forward returns (its outputs, then its loss: the loss alone
    when forward returns only that), or with a loss added by the wrapper
    (loss="cross_entropy", "nll") forward's outputs and then that loss.
    Each output is anchored under its name, in the loss's output mode."""
    returns = list(outputs) if forward_returns_loss else list(outputs) + [loss]
    for name in dict.fromkeys(returns):
        if name != loss:
            model.anchor_tensor(name)
    model._returns = returns


def refuse_hooks(module) -> None:
    """A hook on a module or parameter would not run here (the captured
    program has its ops, not its side effects): refused, naming it."""
    import torch
    kinds = (("_forward_pre_hooks", "a forward pre-hook"), ("_forward_hooks", "a forward hook"),
             ("_backward_pre_hooks", "a backward pre-hook"), ("_backward_hooks", "a backward hook"))
    instead = ("remove it (the handle's .remove()) before wrapping: tensorscope shows every "
               "activation and gradient by name (Options.anchor_tensor, watch, Model.inspect), "
               "and what a hook changes belongs in forward")
    what = f"torch module {type(module).__name__}"
    for path, m in module.named_modules():
        for attr, kind in kinds:
            hooks = getattr(m, attr, None)
            if hooks:
                fn = next(iter(hooks.values()))
                raise UnsupportedError(f"{what}, module '{path}' has {kind} "
                                       f"({getattr(fn, '__qualname__', fn)}); {instead}" if path else
                                       f"{what} has {kind} ({getattr(fn, '__qualname__', fn)}); {instead}")
    for name, p in module.named_parameters():
        if getattr(p, "_backward_hooks", None):
            raise UnsupportedError(f"{what}: parameter '{name}' has a gradient hook (register_hook); "
                                   f"{instead}")
    mod = torch.nn.modules.module
    for attr in ("_global_forward_pre_hooks", "_global_forward_hooks", "_global_backward_hooks",
                 "_global_backward_pre_hooks"):
        if getattr(mod, attr, None):
            raise UnsupportedError(f"{what}: a global module hook is registered "
                                   f"(torch.nn.modules.module.register_module_{attr[8:-1]}); {instead}")


def _installed(filename: str) -> bool:
    """Code of torch or of an installed package, not the user's own."""
    import torch
    path = os.path.abspath(filename)
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    return path.startswith(torch_dir + os.sep) or any(
        part in ("site-packages", "dist-packages") for part in path.split(os.sep))


def _module_at(module, filename: str, line: int) -> str:
    """The path of a submodule whose forward holds filename:line ("" for
    the top module; None when none does)."""
    for path, m in module.named_modules():
        try:
            lines, start = inspect.getsourcelines(type(m).forward)
            source = inspect.getsourcefile(type(m).forward)
        except (OSError, TypeError):
            continue
        if source and os.path.abspath(source) == os.path.abspath(filename) and \
                start <= line < start + len(lines):
            return path
    return None


def refuse_traced_values(module, caught) -> None:
    """The tracer's note that forward turned a tensor into a Python value
    (an `if` on a tensor, int(x), x.item()) in the user's own code: the
    captured program holds that one branch or value, not the data's, so
    it is refused, naming the module and the line. (Code of installed
    packages does it to shapes, which stay fixed: not refused.)"""
    import torch
    for w in caught:
        if not issubclass(w.category, torch.jit.TracerWarning) or _installed(w.filename):
            continue
        text = str(w.message)
        if "Converting a tensor to a Python" not in text and "Python value" not in text:
            continue
        path = _module_at(module, w.filename, w.lineno)
        where = f"module '{path}'" if path else "the top module" if path == "" else "forward's code"
        raise UnsupportedError(
            f"torch module {type(module).__name__}, {where}, forward at {w.filename}:{w.lineno}: "
            f"data-dependent control flow or value ({text.split('.')[0]}): the capture records the "
            "branch or value of the example inputs only, and would train that program for every "
            "batch; write it with tensor ops (torch.where(cond, a, b) for an if, a tensor instead "
            "of .item() or int(x)), or give it as an input")


_told_dropout = False  # the message about Dropout's masks, once per process


def say_dropout_differs(graph) -> None:
    global _told_dropout
    masks = [t.name for t in graph.tensors() if t.op == "DropoutMask"]
    if masks and not _told_dropout:
        _told_dropout = True
        log(LOG_WARN, f"Dropout ({', '.join(masks[:3])}{', ...' if len(masks) > 3 else ''}) draws "
                      "its masks from tensorscope's generator, not PyTorch's: a step's loss differs "
                      "from PyTorch's. To compare the two, set its p=0 or put the module in eval() "
                      "mode before wrapping it")
