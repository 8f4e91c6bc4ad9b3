"""The torch.export front end (Options().capture("export")): the user's
module captured by torch.export, decomposed to PyTorch's Core ATen
operator set, and each node built through the graph builder (ts.Graph's
ops), one row of ATEN per ATen op.

What it keeps of the program:
- parameters and buffers under their PyTorch names (state_dict's), with
  their values now; forward's inputs under forward's argument names;
- each x.detach(), and the results of a `torch.no_grad()` region inside
  forward, as a StopGradient (rewritten before the decomposition into
  tensorscope::stop_gradient, an op no decomposition removes);
- BatchNorm's running statistics, updated by the batch_norm op;
- each node's module path (its tensors named `<module path>/<Op>:<k>`,
  as the ONNX capture names them) and the line of forward that made it
  (its node.meta["stack_trace"]), which errors name.

An ATen op without a row, and whatever forward does that the graph
cannot hold (a buffer written in place other than BatchNorm's statistics,
random values drawn in forward, a float64 tensor), is refused naming the
op, the module path and the line of forward, and what to do instead.

Integer and boolean tensors that forward computes are held as f32 (exact
below 2**24); the ops that read indices (embedding, gather, where's
condition) take them as i32. An integer input of forward is an i32 input
of the graph. What does not depend on an input, a parameter or a buffer
(torch.arange, a mask built from shapes) is computed once, by PyTorch, at
capture: a constant of the graph."""
from __future__ import annotations

import contextlib
import math
import operator
import os
import re
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .errors import UnsupportedError
from .graph import Graph, Tensor

_STOP_GRADIENT = None  # torch.ops.tensorscope.stop_gradient, once registered


def available(torch) -> bool:
    """Whether this PyTorch has what the front end needs: torch.export with
    run_decompositions and torch.library.custom_op (PyTorch 2.5 on)."""
    from ._torch import _torch_version
    return (_torch_version(torch) >= (2, 5) and hasattr(torch, "export")
            and hasattr(getattr(torch, "library", None), "custom_op"))


def _stop_gradient_op(torch):
    """tensorscope::stop_gradient: what each detach() becomes before the
    decomposition (which turns a detach into an alias, no longer told
    apart from a view)."""
    global _STOP_GRADIENT
    if _STOP_GRADIENT is None:
        @torch.library.custom_op("tensorscope::stop_gradient", mutates_args=(),
                                 schema="(Tensor x) -> Tensor")
        def stop_gradient(x):
            return x.detach().clone()

        @stop_gradient.register_fake
        def _(x):
            return torch.empty_like(x)

        _STOP_GRADIENT = torch.ops.tensorscope.stop_gradient.default
    return _STOP_GRADIENT


def _mark_stop_gradients(torch, gm) -> None:
    """Each aten.detach of the captured graph, and each result of a region
    run with the gradient off (torch.no_grad() in forward: the capture's
    wrap_with_set_grad_enabled(False, ...)), becomes stop_gradient."""
    sg = _stop_gradient_op(torch)
    hop = getattr(torch.ops.higher_order, "wrap_with_set_grad_enabled", None)
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        if node.target is torch.ops.aten.detach.default:
            node.target = sg
        elif hop is not None and node.target is hop and node.args and node.args[0] is False:
            for user in list(node.users):
                if user.target is not operator.getitem:
                    continue
                with gm.graph.inserting_after(user):
                    held = gm.graph.call_function(sg, (user,))
                held.meta.update(user.meta)
                user.replace_all_uses_with(held, delete_user_cb=lambda n: n is not held)
    gm.graph.lint()
    gm.recompile()


# ---- where a node came from

def _user_frame(stack: str) -> Optional[Tuple[str, int]]:
    """The innermost frame of a node's stack_trace in the user's code (not
    torch's, not an installed package's): (file, line)."""
    from ._torch import _installed
    frames = re.findall(r'File "([^"]+)", line (\d+)', stack or "")
    for f, line in reversed(frames):
        if not f.startswith("<") and not _installed(f):
            return f, int(line)
    if frames and not frames[-1][0].startswith("<"):
        return frames[-1][0], int(frames[-1][1])
    return None


def _module_path(node) -> str:
    """The node's module path as the ONNX capture scopes it: each module
    called on the way, named relative to its caller ("blocks.0/attn")."""
    stack = node.meta.get("nn_module_stack") or {}
    paths = [v[0] for v in stack.values() if isinstance(v, tuple) and v and v[0]]
    parts, prev = [], ""
    for p in paths:
        if prev and p.startswith(prev + "."):
            parts.append(p[len(prev) + 1:])
        elif p != prev:
            parts.append(p)
        prev = p
    return "/".join(parts)


def _dotted(path: str) -> str:
    return path.replace("/", ".")


class _Unavailable:
    """A result of an ATen op that the graph does not compute (the indices
    of max_pool2d_with_indices, layer norm's saved mean): an error if read."""

    def __init__(self, what: str) -> None:
        self.what = what


# ---- the capture

class _Capture:
    def __init__(self, torch, module, ep, input_names) -> None:
        self.torch = torch
        self.module = module
        self.ep = ep
        self.g = Graph(seed=0)
        self.env: Dict[Any, Any] = {}
        self.as_float: Dict[int, Tensor] = {}  # i32 tensor -> its f32 copy
        self.as_index: Dict[Any, Tensor] = {}  # (f32 tensor, range) -> its i32 copy
        self.input_names = input_names
        self.node = None
        self.n_const = 0
        self.what = f"torch module {type(module).__name__}"
        self.lines: Dict[Tuple[str, int], List[str]] = {}  # line of forward -> module paths

    # -- errors
    def where(self, node=None) -> str:
        node = node or self.node
        parts = [self.what]
        if node is not None:
            path = _dotted(_module_path(node))
            parts.append(f"module '{path}'" if path else "the top module")
            at = _user_frame(node.meta.get("stack_trace"))
            if at:
                parts.append(f"forward at {at[0]}:{at[1]}")
        return ", ".join(parts)

    def refuse(self, why: str, instead: str) -> None:
        raise UnsupportedError(f"{self.where()}: {why}; {instead}")

    def unmapped(self, op: str) -> None:
        self.refuse(f"ATen op {op} has no mapping to tensorscope's ops (torch.export capture)",
                    "write forward with ops that have one (docs/python.md lists them), or capture "
                    "the module through ONNX: Options().capture('onnx')")

    # -- values
    def shape(self, node) -> Tuple[int, ...]:
        v = node.meta.get("val")
        if isinstance(v, (tuple, list)):  # an op of several results: its first's
            v = v[0]
        try:
            return tuple(int(d) for d in v.shape)
        except (TypeError, AttributeError):
            self.refuse(f"node {node.name} has a shape that is not fixed ({getattr(v, 'shape', v)})",
                        "capture with example inputs of fixed shapes (no dynamic_shapes)")

    def dtype(self, node):
        v = node.meta["val"]
        return (v[0] if isinstance(v, (tuple, list)) else v).dtype

    def const(self, value) -> Tensor:
        """A constant of the graph holding a torch tensor or a number (f32)."""
        torch = self.torch
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().to(torch.float32).numpy()
        self.n_const += 1
        name = f"{self.node.name if self.node is not None else 'capture'}/const:{self.n_const}"
        return self.g.constant(name, np.ascontiguousarray(np.asarray(value, dtype=np.float32)))

    def f(self, x) -> Tensor:
        """x as an f32 tensor of the graph."""
        if isinstance(x, Tensor):
            if x.dtype != np.int32:
                return x
            if x._ptr not in self.as_float:
                self.as_float[x._ptr] = self.g.unary("CastFloat", x)
            return self.as_float[x._ptr]
        if isinstance(x, _Unavailable):
            self.refuse(f"{x.what} is read, which tensorscope does not compute",
                        "compute it with other ops, or capture through Options().capture('onnx')")
        if isinstance(x, (bool, int, float)) or isinstance(x, self.torch.Tensor):
            return self.const(x)
        raise AssertionError(f"not a tensor: {x!r}")

    def i(self, x, lo: float = -2.0 ** 31, hi: float = 2.0 ** 31 - 1) -> Tensor:
        """x as an i32 tensor (indices): an i32 input as it is, an f32 one
        through CastIndex (clamped to [lo, hi])."""
        if isinstance(x, Tensor) and x.dtype == np.int32:
            return x
        if isinstance(x, self.torch.Tensor):
            self.n_const += 1
            return self.g.constant(f"{self.node.name}/const:{self.n_const}",
                                   np.ascontiguousarray(x.detach().cpu().numpy().astype(np.int32)))
        x = self.f(x)
        key = (x._ptr, lo, hi)
        if key not in self.as_index:
            self.as_index[key] = self.g.unary("CastIndex", x, lo, hi)
        return self.as_index[key]

    def cond(self, x) -> Tensor:
        """x (a bool tensor) as where's i32 condition."""
        if isinstance(x, Tensor) and x.dtype == np.int32:
            return x
        return self.g.unary("CastIndex", self.g.unary("CastBool", self.f(x)), 0.0, 1.0)

    def arg(self, a):
        from torch.fx import Node
        if isinstance(a, Node):
            return self.env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self.arg(x) for x in a)
        return a

    # -- the program
    def placeholders(self) -> None:
        torch = self.torch
        from torch.export.graph_signature import InputKind
        sig = self.ep.graph_signature
        state = dict(self.ep.state_dict)
        state.update(getattr(self.ep, "constants", {}) or {})
        live = dict(self.module.state_dict(keep_vars=True))
        users = [s for s in sig.input_specs if s.kind == InputKind.USER_INPUT]
        names = {s.arg.name: (self.input_names[k] if k < len(self.input_names) else s.arg.name)
                 for k, s in enumerate(users)}
        kinds = {s.arg.name: s for s in sig.input_specs}
        for node in self.ep.graph.nodes:
            if node.op != "placeholder":
                continue
            self.node = node
            spec = kinds.get(node.name)
            val = node.meta.get("val")
            if spec is None or spec.kind == InputKind.USER_INPUT:
                if not isinstance(val, torch.Tensor):
                    self.env[node] = val  # a number passed to forward: fixed by the capture
                    continue
                dt = "f32" if val.dtype.is_floating_point else "i32"
                if val.dtype not in (torch.float32,) and val.dtype.is_floating_point:
                    self.refuse(f"input '{names.get(node.name, node.name)}' is {val.dtype}",
                                "tensorscope trains float32: pass float32 inputs")
                self.env[node] = self.g.input(names.get(node.name, node.name), dt, self.shape(node))
                continue
            target = spec.target
            value = state.get(target, live.get(target))
            if value is None:
                self.refuse(f"the capture's {spec.kind.name.lower()} '{target}' has no value",
                            "capture through Options().capture('onnx')")
            value = value.detach()
            # a 0-d one is held as [1] (its state_dict value reshapes back), read as 0-d
            held = list(value.shape) or [1]
            if spec.kind == InputKind.PARAMETER:
                if value.dtype != torch.float32:
                    self.refuse(f"parameter '{target}' is {value.dtype}", "keep parameters float32")
                t = self.g.param(target, held)
                t.set_value(value.cpu().numpy().reshape(held))
                self.env[node] = t if value.shape else self.g.reshape(t, [])
            elif spec.kind == InputKind.BUFFER and value.dtype == torch.float32:
                t = self.g.buffer(target, held)
                t.set_value(value.cpu().numpy().reshape(held))
                self.env[node] = t if value.shape else self.g.reshape(t, [])
            else:  # constants, counters (num_batches_tracked): computed with at capture
                self.env[node] = value.clone()

    def build(self) -> List[Tensor]:
        from torch.export.graph_signature import OutputKind
        self.placeholders()
        out_node = None
        for node in self.ep.graph.nodes:
            if node.op == "output":
                out_node = node
                continue
            if node.op != "call_function":
                continue
            self.node = node
            path = _module_path(node)
            at = _user_frame(node.meta.get("stack_trace"))
            self.g._at = at
            if at:
                self.lines.setdefault(at, []).append(_dotted(path))
            with contextlib.ExitStack() as scopes:  # one scope per module level
                for part in path.split("/") if path else ():
                    scopes.enter_context(self.g.scope(part))
                self.env[node] = self.call(node)
        self.g._at = None
        outputs = []
        specs = self.ep.graph_signature.output_specs
        for spec, a in zip(specs, out_node.args[0]):
            self.node = a if hasattr(a, "meta") else None
            value = self.arg(a)
            if spec.kind == OutputKind.USER_OUTPUT:
                outputs.append(value if isinstance(value, Tensor) else self.f(value))
            elif spec.kind == OutputKind.BUFFER_MUTATION:
                if isinstance(value, Tensor) and value.is_buffer and value.name == spec.target:
                    continue  # batch norm's statistics: the op updates them
                if spec.target.endswith("num_batches_tracked"):
                    continue  # BatchNorm's counter, with momentum set: torch's to keep
                self.refuse(f"forward writes buffer '{spec.target}' in place",
                            "tensorscope updates only BatchNorm's running statistics; compute the "
                            "value in forward instead of storing it")
            elif spec.kind == OutputKind.LOSS_OUTPUT:
                outputs.append(self.f(value))
            else:
                self.refuse(f"forward writes its input or state in place ({spec.kind.name})",
                            "return the value from forward instead")
        return outputs

    def call(self, node):
        torch = self.torch
        target = node.target
        args = [self.arg(a) for a in node.args]
        kwargs = {k: self.arg(v) for k, v in node.kwargs.items()}
        if target is operator.getitem:
            seq, k = args
            return seq[k]
        name = str(target)
        seeded = torch.Tag.nondeterministic_seeded in getattr(target, "tags", ())
        known = not any(isinstance(a, (Tensor, _Unavailable)) for a in _flat(args + list(kwargs.values())))
        if known and not seeded and target is not _STOP_GRADIENT:
            return target(*args, **kwargs)  # computed once, by PyTorch
        row = ATEN.get(_op_name(target))
        if row is None:
            self.unmapped(name)
        if node.meta.get("val") is not None and _float64(torch, node.meta["val"]):
            self.refuse(f"ATen op {name} computes float64", "keep the model float32")
        out = row(self, node, *args, **kwargs)
        if "avg_pool" in name and not self.dtype(node).is_floating_point:
            out = self.g.unary("CastInt", out)  # an integer mean: toward zero, as PyTorch's
        return out


def _flat(xs):
    for x in xs:
        if isinstance(x, (list, tuple)):
            yield from _flat(x)
        else:
            yield x


def _float64(torch, val) -> bool:
    vals = val if isinstance(val, (list, tuple)) else [val]
    return any(isinstance(v, torch.Tensor) and v.dtype == torch.float64 for v in vals)


def _op_name(target) -> str:
    """"add.Tensor" for torch.ops.aten.add.Tensor."""
    s = str(target)
    return s[5:] if s.startswith("aten.") else s


# ---- the rows: one function per ATen op (or family), building its node

ATEN: Dict[str, Any] = {}


def row(*names):
    def put(fn):
        for n in names:
            ATEN[n] = fn
        return fn
    return put


def _dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def _rank(c: _Capture, node) -> int:
    return len(c.shape(node.args[0]))


def _reshaped(c: _Capture, node, x):
    shape = c.shape(node)
    x = x if isinstance(x, Tensor) else c.f(x)
    return x if tuple(x.shape) == shape else c.g.reshape(x, list(shape))


@row("alias.default", "clone.default", "lift_fresh_copy.default", "contiguous.default")
def _identity(c, node, x, *rest, **kw):
    return x


@row("_assert_tensor_metadata.default", "_assert_scalar.default", "_assert_async.msg",
     "sym_constrain_range_for_size.default")
def _assertion(c, node, *args, **kw):
    return None  # the capture's own checks of its example: nothing to compute


@row("tensorscope.stop_gradient.default")
def _stop(c, node, x):
    if not isinstance(x, Tensor) or x.dtype != np.float32:
        return x
    return c.g.stop_gradient(x)


@row("view.default", "_unsafe_view.default", "reshape.default", "squeeze.dim", "squeeze.dims",
     "squeeze.default", "unsqueeze.default", "flatten.using_ints")
def _view(c, node, x, *rest, **kw):
    return _reshaped(c, node, x)


@row("expand.default", "expand_copy.default")
def _expand(c, node, x, sizes, *rest, **kw):
    shape = c.shape(node)
    x = c.f(x)
    if tuple(x.shape) == shape:
        return x
    return c.g.add(x, c.const(np.zeros(shape, np.float32)))


@row("permute.default")
def _permute(c, node, x, dims):
    rank = len(dims)
    perm = [_dim(d, rank) for d in dims]
    return x if perm == list(range(rank)) else c.g.permute(x, perm)


@row("t.default", "transpose.int")
def _transpose(c, node, x, d0=0, d1=1):
    if len(c.shape(node.args[0])) < 2:
        return x
    return c.g.transpose(x, d0, d1)


@row("_to_copy.default", "to.dtype", "copy.default")
def _to_copy(c, node, x, *rest, **kw):
    torch = c.torch
    if str(node.target) == "aten.copy.default":  # copy(self, src): src in self's shape
        return _expand(c, node, rest[0], None)
    dt = c.dtype(node)
    src = c.dtype(node.args[0])
    x = c.f(x)
    if dt.is_floating_point or dt == src:
        return x
    if dt == torch.bool:
        return c.g.unary("CastBool", x)
    if src.is_floating_point:
        return c.g.unary("CastInt", x)  # toward zero, held in f32
    return x


# elementwise

_UNARY = {"sin": "Sin", "cos": "Cos", "tan": "Tan", "asin": "Asin", "acos": "Acos", "atan": "Atan",
          "sinh": "Sinh", "cosh": "Cosh", "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh",
          "ceil": "Ceil", "floor": "Floor", "round": "Round", "trunc": "CastInt",
          "isnan": "IsNaN", "logical_not": "Not", "bitwise_not": "Not"}


@row(*[f"{n}.default" for n in _UNARY])
def _unary(c, node, x):
    op = _UNARY[str(node.target).split(".")[1]]
    if op == "Not" and c.dtype(node.args[0]) != c.torch.bool and "bitwise" in str(node.target):
        c.unmapped(str(node.target) + " of integers")
    if op in ("Ceil", "Floor", "Round", "CastInt") and not c.dtype(node.args[0]).is_floating_point:
        return x
    return c.g.unary(op, c.f(x))


@row("isinf.default")
def _isinf(c, node, x):
    return c.g.unary("IsInf", c.f(x), 1.0, 1.0)


_SIMPLE = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp", "log": "log",
           "sqrt": "sqrt", "erf": "erf", "abs": "abs"}


@row(*[f"{n}.default" for n in _SIMPLE])
def _simple(c, node, x):
    return getattr(c.g, _SIMPLE[str(node.target).split(".")[1]])(c.f(x))


@row("neg.default")
def _neg(c, node, x):
    return c.g.scale(c.f(x), -1.0)


@row("rsqrt.default")
def _rsqrt(c, node, x):
    return c.g.div(c.const(1.0), c.g.sqrt(c.f(x)))


@row("reciprocal.default")
def _reciprocal(c, node, x):
    return c.g.div(c.const(1.0), c.f(x))


@row("log1p.default")
def _log1p(c, node, x):
    return c.g.log(c.g.add(c.f(x), c.const(1.0)))


@row("expm1.default")
def _expm1(c, node, x):
    return c.g.sub(c.g.exp(c.f(x)), c.const(1.0))


@row("log2.default", "log10.default")
def _log_base(c, node, x):
    base = 2.0 if "log2" in str(node.target) else 10.0
    return c.g.scale(c.g.log(c.f(x)), 1.0 / math.log(base))


@row("sign.default", "sgn.default")
def _sign(c, node, x):
    x = c.f(x)
    zero = c.const(0.0)
    return c.g.sub(c.g.binary("Greater", x, zero), c.g.binary("Less", x, zero))


@row("gelu.default")
def _gelu(c, node, x, approximate="none"):
    return c.g.gelu(c.f(x), 1 if approximate == "tanh" else 0)


@row("leaky_relu.default")
def _leaky(c, node, x, slope=0.01):
    return c.g.unary("LeakyRelu", c.f(x), float(slope))


@row("elu.default")
def _elu(c, node, x, alpha=1.0, scale=1.0, input_scale=1.0):
    if input_scale != 1.0:
        c.unmapped("elu.default with input_scale")
    if scale == 1.0:
        return c.g.unary("Elu", c.f(x), float(alpha))
    return c.g.unary("Selu", c.f(x), float(alpha), float(scale))


@row("hardtanh.default", "clamp.default", "clamp.Tensor", "clamp_min.default", "clamp_max.default")
def _clamp(c, node, x, lo=None, hi=None):
    name = str(node.target)
    if name.startswith("aten.clamp_max"):
        lo, hi = None, lo
    if name.startswith("aten.hardtanh"):
        lo = -1.0 if lo is None else lo
        hi = 1.0 if hi is None else hi
        if not c.dtype(node).is_floating_point:  # the bounds in the tensor's integer dtype
            lo, hi = math.trunc(lo), math.trunc(hi)
    y = c.f(x)
    if lo is not None:
        y = c.g.binary("Max", y, c.f(lo))
    if hi is not None:
        y = c.g.binary("Min", y, c.f(hi))
    return y


@row("add.Tensor", "add.Scalar", "sub.Tensor", "sub.Scalar", "rsub.Scalar", "rsub.Tensor")
def _add(c, node, a, b, alpha=1):
    name = str(node.target)
    if name.startswith("aten.rsub"):
        a, b = b, a
        name = "aten.sub"
    if alpha != 1:
        b = c.g.scale(c.f(b), float(alpha)) if isinstance(b, Tensor) else b * alpha
    fn = c.g.add if name.startswith("aten.add") else c.g.sub
    return fn(c.f(a), c.f(b))


@row("mul.Tensor", "mul.Scalar")
def _mul(c, node, a, b):
    if not isinstance(b, (Tensor, _Unavailable)) and not isinstance(b, c.torch.Tensor):
        return c.g.scale(c.f(a), float(b))
    if not isinstance(a, (Tensor, _Unavailable)) and not isinstance(a, c.torch.Tensor):
        return c.g.scale(c.f(b), float(a))
    return c.g.mul(c.f(a), c.f(b))


@row("div.Tensor", "div.Scalar", "div.Tensor_mode", "div.Scalar_mode")
def _div(c, node, a, b, rounding_mode=None):
    if not isinstance(b, (Tensor, c.torch.Tensor)) and rounding_mode is None:
        q = c.g.scale(c.f(a), 1.0 / float(b))
    else:
        q = c.g.div(c.f(a), c.f(b))
    if rounding_mode == "floor":
        return c.g.unary("Floor", q)
    if rounding_mode == "trunc":
        return c.g.unary("CastInt", q)
    return q


_BINARY = {"maximum": "Max", "minimum": "Min", "fmod": "FMod", "remainder": "Mod",
           "eq": "Equal", "gt": "Greater", "ge": "GreaterOrEqual", "lt": "Less", "le": "LessOrEqual",
           "logical_and": "And", "logical_or": "Or", "logical_xor": "Xor",
           "bitwise_and": "And", "bitwise_or": "Or", "bitwise_xor": "Xor", "pow": "Pow"}


@row(*[f"{n}.{o}" for n in _BINARY for o in ("Tensor", "Scalar", "default", "Tensor_Tensor",
                                                 "Tensor_Scalar")], "ne.Tensor", "ne.Scalar")
def _binary(c, node, a, b):
    base = str(node.target).split(".")[1]
    if base.startswith("bitwise") and c.dtype(node) != c.torch.bool:
        c.unmapped(f"{node.target} of integers")
    if base == "pow" and not isinstance(b, (Tensor, c.torch.Tensor, _Unavailable)):
        if float(b) == 2.0:
            x = c.f(a)
            return c.g.mul(x, x)
        return c.g.pow(c.f(a), float(b))
    if base == "ne":
        return c.g.unary("Not", c.g.binary("Equal", c.f(a), c.f(b)))
    return c.g.binary(_BINARY[base], c.f(a), c.f(b))


@row("where.self", "where.ScalarOther", "where.ScalarSelf", "where.Scalar")
def _where(c, node, cond, a, b):
    return c.g.where(c.cond(cond), c.f(a), c.f(b))


# reductions

def _dims(c, node, dims):
    rank = _rank(c, node)
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return [_dim(d, rank) for d in dims]


def _reduce(c, node, fn, x, dims, keepdim):
    x = c.f(x)
    axes = _dims(c, node, dims)
    if not axes or not x.shape:
        return _reshaped(c, node, x)
    return _reshaped(c, node, fn(x, axes, 1 if keepdim else 0))


@row("sum.dim_IntList", "sum.default")
def _sum(c, node, x, dims=None, keepdim=False, **kw):
    return _reduce(c, node, c.g.reduce_sum, x, dims, keepdim)


@row("mean.dim", "mean.default")
def _mean(c, node, x, dims=None, keepdim=False, **kw):
    return _reduce(c, node, c.g.reduce_mean, x, dims, keepdim)


@row("amax.default")
def _amax(c, node, x, dims=(), keepdim=False):
    return _reduce(c, node, c.g.reduce_max, x, dims, keepdim)


@row("amin.default")
def _amin(c, node, x, dims=(), keepdim=False):
    return c.g.scale(_reduce(c, node, c.g.reduce_max, c.g.scale(c.f(x), -1.0), dims, keepdim), -1.0)


@row("any.default", "any.dim", "any.dims")
def _any(c, node, x, dims=None, keepdim=False):
    return _reduce(c, node, c.g.reduce_max, c.g.unary("CastBool", c.f(x)), dims, keepdim)


@row("max.dim", "min.dim")
def _max_dim(c, node, x, dim, keepdim=False):
    sign = -1.0 if str(node.target).startswith("aten.min") else 1.0
    v = c.f(x) if sign > 0 else c.g.scale(c.f(x), -1.0)
    out = _reduce(c, node, c.g.reduce_max, v, [dim], keepdim) if c.shape(node.args[0]) else v
    if sign < 0:
        out = c.g.scale(out, -1.0)
    return [out, _Unavailable(f"the indices of {node.target}")]


@row("max.default", "min.default")
def _max_all(c, node, x):
    if str(node.target).startswith("aten.min"):
        return c.g.scale(_reduce(c, node, c.g.reduce_max, c.g.scale(c.f(x), -1.0), None, False), -1.0)
    return _reduce(c, node, c.g.reduce_max, x, None, False)


@row("round.decimals")
def _round_decimals(c, node, x, decimals=0):
    scale = 10.0 ** decimals  # as PyTorch: round(x * 10^d) / 10^d, half to even
    return c.g.scale(c.g.unary("Round", c.g.scale(c.f(x), scale)), 1.0 / scale)


@row("var.correction", "var.dim")
def _var(c, node, x, dims=None, *rest, correction=None, keepdim=False):
    if str(node.target) == "aten.var.dim":  # (x, dims, unbiased, keepdim)
        correction = 1 if (rest[0] if rest else True) else 0
        keepdim = rest[1] if len(rest) > 1 else keepdim
    correction = 1 if correction is None else correction
    shape = c.shape(node.args[0])
    axes = _dims(c, node, dims)
    n = int(np.prod([shape[a] for a in axes])) if axes else 1
    x = c.f(x)
    d = c.g.sub(x, c.g.reduce_mean(x, axes, 1)) if axes else c.g.sub(x, x)
    s = c.g.reduce_sum(c.g.mul(d, d), axes, 1 if keepdim else 0) if axes else c.g.mul(d, d)
    dof = n - float(correction)  # 0 or less: inf or NaN, as PyTorch's
    return _reshaped(c, node, c.g.scale(s, 1.0 / dof) if dof > 0 else c.g.div(s, c.const(max(dof, 0.0))))


@row("cumsum.default")
def _cumsum(c, node, x, dim, dtype=None):
    shape = c.shape(node.args[0])
    if not shape:
        return c.f(x)
    rank = len(shape)
    dim = _dim(dim, rank)
    n = shape[dim]
    x = c.f(x)
    if dim != rank - 1:
        x = c.g.transpose(x, dim, rank - 1)
    tri = c.const(np.triu(np.ones((n, n), np.float32)))  # out[j] = sum_{i <= j} x[i]
    y = c.g.matmul_batched(x, tri) if rank > 1 else c.g.reshape(
        c.g.matmul(c.g.reshape(x, [1, n]), tri), [n])
    return c.g.transpose(y, dim, rank - 1) if dim != rank - 1 else y


# linear algebra

@row("mm.default")
def _mm(c, node, a, b):
    return c.g.matmul(c.f(a), c.f(b))


@row("bmm.default", "matmul.default")
def _bmm(c, node, a, b):
    return c.g.matmul_batched(c.f(a), c.f(b))


@row("addmm.default")
def _addmm(c, node, bias, a, b, beta=1, alpha=1):
    y = c.g.matmul(c.f(a), c.f(b))
    if alpha != 1:
        y = c.g.scale(y, float(alpha))
    bias = c.f(bias)
    if beta != 1:
        bias = c.g.scale(bias, float(beta))
    return c.g.add(y, bias) if beta != 0 else y


# softmax and normalisation

@row("_softmax.default", "softmax.int")
def _softmax(c, node, x, dim, *rest):
    if not c.shape(node.args[0]):
        return c.g.div(c.f(x), c.f(x))
    return c.g.softmax(c.f(x), dim)


@row("_log_softmax.default", "log_softmax.int")
def _log_softmax(c, node, x, dim, *rest):
    if not c.shape(node.args[0]):
        return c.g.sub(c.f(x), c.f(x))
    return c.g.log_softmax(c.f(x), dim)


def _ones_or(c, w, n, value):
    return c.f(w) if w is not None else c.const(np.full((n,), value, np.float32))


@row("native_layer_norm.default")
def _layer_norm(c, node, x, normalized_shape, w, b, eps):
    n = int(np.prod(normalized_shape))
    shape = list(normalized_shape)
    w = _ones_or(c, w, n, 1.0)
    b = _ones_or(c, b, n, 0.0)
    if len(shape) > 1 and tuple(w.shape) != tuple(shape):
        w, b = c.g.reshape(w, shape), c.g.reshape(b, shape)
    y = c.g.layer_norm(c.f(x), w, b, len(shape), float(eps))
    return [y, _Unavailable("layer norm's saved mean"), _Unavailable("layer norm's saved 1/std")]


@row("native_group_norm.default")
def _group_norm(c, node, x, w, b, n, channels, hw, groups, eps):
    w = c.f(w) if w is not None else c.const(np.ones(channels, np.float32))
    b = c.f(b) if b is not None else c.const(np.zeros(channels, np.float32))
    y = c.g.group_norm(c.f(x), w, b, int(groups), float(eps))
    return [y, _Unavailable("group norm's saved mean"), _Unavailable("group norm's saved 1/std")]


def _batch_norm(c, node, x, w, b, rm, rv, training, momentum, eps):
    ch = c.shape(node.args[0])[1]
    for t, what in ((rm, "running_mean"), (rv, "running_var")):
        if not isinstance(t, Tensor) or not t.is_buffer:
            c.refuse(f"batch norm's {what} is not a buffer of the module",
                     "keep BatchNorm's running statistics as its buffers (track_running_stats=True)")
    shape = c.shape(node.args[0])
    x = c.f(x)
    if len(shape) not in (2, 4):  # [N, C, L, ...] as [N, C, L*..., 1]
        x = c.g.reshape(x, [shape[0], ch, int(np.prod(shape[2:])), 1])
    y = c.g.batch_norm(x, _ones_or(c, w, ch, 1.0), _ones_or(c, b, ch, 0.0), rm, rv,
                       float(eps), float(momentum if momentum is not None else 0.1),
                       0 if training else 1)
    if len(shape) not in (2, 4):
        y = c.g.reshape(y, list(shape))
    return [y, _Unavailable("batch norm's saved mean"), _Unavailable("batch norm's saved 1/std"), rm, rv]


@row("_native_batch_norm_legit_functional.default", "_native_batch_norm_legit.default")
def _bn_train(c, node, x, w, b, rm, rv, training, momentum, eps):
    return _batch_norm(c, node, x, w, b, rm, rv, training, momentum, eps)


@row("_native_batch_norm_legit_no_training.default")
def _bn_eval(c, node, x, w, b, rm, rv, momentum, eps):
    return _batch_norm(c, node, x, w, b, rm, rv, False, momentum, eps)[:3]


@row("_native_batch_norm_legit.no_stats")
def _bn_no_stats(c, node, x, w, b, training, momentum, eps):
    ch = c.shape(node.args[0])[1]
    c.n_const += 1
    rm = c.g.buffer(f"{node.name}/running_mean:{c.n_const}", [ch])
    rv = c.g.buffer(f"{node.name}/running_var:{c.n_const}", [ch])
    rv.set_value(np.ones(ch, np.float32))
    return _batch_norm(c, node, x, w, b, rm, rv, True, momentum, eps)[:3]


@row("native_dropout.default")
def _dropout(c, node, x, p, train):
    if not train or not p:
        return [c.f(x), _Unavailable("dropout's mask")]
    return [c.g.dropout(c.f(x), float(p)), _Unavailable("dropout's mask")]


# indexing and shapes

@row("slice.Tensor")
def _slice(c, node, x, dim=0, start=None, end=None, step=1):
    shape = c.shape(node.args[0])
    dim = _dim(dim, len(shape))
    n = shape[dim]
    start, end, step = slice(start, end, step).indices(n)
    length = len(range(start, end, step))
    if length == n:
        return x
    if step == 1:
        return c.g.slice(c.f(x), dim, start, length)
    idx = np.arange(start, end, step, dtype=np.int32)
    c.n_const += 1
    return c.g.gather(c.f(x), c.g.constant(f"{node.name}/index:{c.n_const}", idx), dim)


@row("select.int")
def _select(c, node, x, dim, index):
    shape = c.shape(node.args[0])
    dim = _dim(dim, len(shape))
    index = index + shape[dim] if index < 0 else index
    return _reshaped(c, node, c.g.slice(c.f(x), dim, index, 1))


@row("split_with_sizes.default", "split.Tensor")
def _split(c, node, x, sizes, dim=0):
    shape = c.shape(node.args[0])
    dim = _dim(dim, len(shape))
    if isinstance(sizes, int):
        sizes = [min(sizes, shape[dim] - s) for s in range(0, shape[dim], sizes)]
    out, at = [], 0
    for s in sizes:
        out.append(x if s == shape[dim] else c.g.slice(c.f(x), dim, at, s))
        at += s
    return out


@row("cat.default")
def _cat(c, node, xs, dim=0):
    xs = [c.f(x) for x, n in zip(xs, node.args[0]) if 0 not in c.shape(n)]
    return xs[0] if len(xs) == 1 else c.g.concat(xs, dim)


@row("constant_pad_nd.default")
def _pad(c, node, x, pad, value=0.0):
    return c.g.pad(c.f(x), _np_pads(c.shape(node.args[0]), pad), "constant", float(value))


def _np_pads(shape, pad):
    """torch's pad list (last dim first, before and after) as numpy's
    befores of every dim, then afters."""
    rank = len(shape)
    before, after = [0] * rank, [0] * rank
    for k in range(len(pad) // 2):
        before[rank - 1 - k] = int(pad[2 * k])
        after[rank - 1 - k] = int(pad[2 * k + 1])
    return before + after


@row("reflection_pad1d.default", "reflection_pad2d.default", "reflection_pad3d.default",
     "replication_pad1d.default", "replication_pad2d.default", "replication_pad3d.default")
def _pad_mode(c, node, x, pad):
    mode = "reflect" if "reflection" in str(node.target) else "edge"
    return c.g.pad(c.f(x), _np_pads(c.shape(node.args[0]), pad), mode)


@row("index_select.default")
def _index_select(c, node, x, dim, index):
    d = _dim(dim, _rank(c, node))
    n = c.shape(node.args[0])[d] if c.shape(node.args[0]) else 1
    if not c.shape(node.args[0]):
        return x
    return _reshaped(c, node, c.g.gather(c.f(x), c.i(index, 0, n - 1), d))


@row("gather.default")
def _gather(c, node, x, dim, index, sparse_grad=False):
    shape = c.shape(node.args[0])
    if not shape:
        return x
    d = _dim(dim, len(shape))
    return c.g.gather_elements(c.f(x), c.i(index, 0, shape[d] - 1), d)


@row("index.Tensor")
def _index(c, node, x, indices):
    """x[..., i, j, ...] with index tensors on consecutive dims k..k+m-1 (a
    None before them for each dim taken whole): those dims merged into one,
    gathered at the flat index sum_j i_j * stride_j (negative indices
    counted from the end), as torch's advanced indexing."""
    given = [k for k, t in enumerate(indices) if t is not None]
    if given != list(range(given[0], given[-1] + 1)):
        c.unmapped("index.Tensor with index tensors on dims that are not consecutive")
    if any(c.dtype(node.args[1][k]) == c.torch.bool for k in given):
        c.unmapped("index.Tensor with a boolean mask (its result's shape depends on the data)")
    shape = c.shape(node.args[0])
    k, m = given[0], len(given)
    sizes = shape[k:k + m]
    flat, stride = None, 1
    for j in reversed(range(m)):
        t, n = indices[k + j], sizes[j]
        if isinstance(t, Tensor) and t.dtype == np.int32 and m == 1:
            flat = t  # an i32 input: the gather checks it at run
            break
        t = c.f(t)
        t = c.g.add(t, c.g.scale(c.g.binary("Less", t, c.const(0.0)), float(n)))  # -1: the last
        t = c.g.scale(t, float(stride)) if stride != 1 else t
        flat = t if flat is None else c.g.add(flat, t)
        stride *= n
    total = int(np.prod(sizes))
    y = c.f(x)
    if m > 1:
        y = c.g.reshape(y, list(shape[:k]) + [total] + list(shape[k + m:]))
    return _reshaped(c, node, c.g.gather(y, c.i(flat, 0, total - 1), k))


@row("embedding.default")
def _embedding(c, node, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    if scale_grad_by_freq:
        c.refuse("nn.Embedding(scale_grad_by_freq=True): tensorscope does not scale an embedding's "
                 "gradient by frequency", "use scale_grad_by_freq=False")
    v = c.shape(node.args[0])[0]
    idx = c.i(indices, 0, v - 1)
    out = c.g.embedding(c.f(weight), idx)
    if padding_idx is None or padding_idx < 0:
        return out
    # the rows gathered at padding positions pass through a StopGradient
    mask = c.g.binary("Equal", c.f(indices), c.const(float(padding_idx)))
    mask = c.g.reshape(mask, list(mask.shape) + [1])
    return c.g.add(out, c.g.mul(c.g.sub(c.g.stop_gradient(out), out), mask))


@row("flip.default")
def _flip(c, node, x, dims):
    shape = c.shape(node.args[0])
    y = c.f(x)
    for d in dims:
        d = _dim(d, len(shape))
        c.n_const += 1
        idx = np.arange(shape[d] - 1, -1, -1, dtype=np.int32)
        y = c.g.gather(y, c.g.constant(f"{node.name}/index:{c.n_const}", idx), d)
    return y


@row("repeat.default")
def _repeat(c, node, x, repeats):
    shape = c.shape(node.args[0])
    y = c.f(x)
    lead = len(repeats) - len(shape)
    if lead:
        y = c.g.reshape(y, [1] * lead + list(shape))
    for d, r in enumerate(repeats):
        if r != 1:
            y = c.g.concat([y] * r, d)
    return y


@row("upsample_nearest2d.vec", "upsample_nearest2d.default")
def _upsample_nearest(c, node, x, output_size, *scales):
    shape = c.shape(node.args[0])
    out = c.shape(node)
    y = c.f(x)
    for d in (2, 3):
        if out[d] != shape[d]:
            c.n_const += 1
            idx = np.floor(np.arange(out[d]) * (shape[d] / out[d])).astype(np.int32)
            y = c.g.gather(y, c.g.constant(f"{node.name}/index:{c.n_const}", idx), d)
    return y


@row("arange.start_step", "arange.default", "full.default", "scalar_tensor.default", "zeros.default",
     "ones.default")
def _made(c, node, *args, **kw):
    """Reached only with a tensor argument, which these take none of: they
    are computed at capture (call folds them), constants of the graph."""
    c.unmapped(str(node.target) + " of a graph tensor")


@row("full_like.default", "zeros_like.default", "ones_like.default", "empty_like.default",
     "fill.Scalar", "new_zeros.default", "new_ones.default", "new_full.default")
def _full_like(c, node, x, *rest, **kw):
    torch = c.torch
    name = str(node.target)
    value = {"aten.zeros_like.default": 0.0, "aten.ones_like.default": 1.0,
             "aten.empty_like.default": 0.0, "aten.new_zeros.default": 0.0,
             "aten.new_ones.default": 1.0}.get(name)
    if value is None:
        value = rest[-1] if name == "aten.new_full.default" else rest[0]
    return c.const(torch.full(c.shape(node), float(value)))


# convolutions and pooling

def _pairs(v, n=2):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return v * n if len(v) == 1 else v


@row("convolution.default")
def _convolution(c, node, x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    rank = len(c.shape(node.args[0]))
    if rank not in (3, 4):
        c.unmapped(f"convolution.default of {rank - 2}-d data")
    x, w = c.f(x), c.f(w)
    one_d = rank == 3
    if one_d:  # [N, C, L] as [N, C, 1, L]
        xs, ws = c.shape(node.args[0]), c.shape(node.args[1])
        x = c.g.reshape(x, [xs[0], xs[1], 1, xs[2]])
        w = c.g.reshape(w, [ws[0], ws[1], 1, ws[2]])
        stride, padding, dilation = [1] + list(stride), [0] + list(padding), [1] + list(dilation)
        output_padding = [0] + list(output_padding)
    stride, padding, dilation = _pairs(stride), _pairs(padding), _pairs(dilation)
    params = {"stride_h": stride[0], "stride_w": stride[1], "pad_top": padding[0],
              "pad_bottom": padding[0], "pad_left": padding[1], "pad_right": padding[1],
              "dilation_h": dilation[0], "dilation_w": dilation[1], "groups": groups}
    b = c.f(b) if b is not None else None
    if transposed:
        op = _pairs(output_padding)
        params.update(output_pad_h=op[0], output_pad_w=op[1])
        y = c.g.conv_transpose2d(x, w, b, params)
    else:
        y = c.g.conv2d(x, w, b, params)
    return _reshaped(c, node, y) if one_d else y


def _pool_params(kernel, stride, padding, dilation=(1, 1), ceil_mode=False):
    kernel = _pairs(kernel)
    stride = _pairs(stride) if stride else kernel
    padding, dilation = _pairs(padding), _pairs(dilation)
    return {"kernel_h": kernel[0], "kernel_w": kernel[1], "stride_h": stride[0], "stride_w": stride[1],
            "pad_top": padding[0], "pad_bottom": padding[0], "pad_left": padding[1],
            "pad_right": padding[1], "dilation_h": dilation[0], "dilation_w": dilation[1],
            "ceil_mode": int(bool(ceil_mode))}


def _batched(c, node, x, pool):
    """pool(x) of x [N, C, H, W], or of unbatched x [C, H, W] as a batch of one."""
    shape = c.shape(node.args[0])
    x = c.f(x)
    if len(shape) == 4:
        return pool(x)
    y = pool(c.g.reshape(x, [1] + list(shape)))
    return c.g.reshape(y, list(y.shape[1:]))


@row("max_pool2d_with_indices.default")
def _max_pool(c, node, x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    p = _pool_params(kernel, stride, padding, dilation, ceil_mode)
    return [_batched(c, node, x, lambda v: c.g.max_pool2d(v, p)), _Unavailable("max pooling's indices")]


@row("avg_pool2d.default")
def _avg_pool(c, node, x, kernel, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
              divisor_override=None):
    if divisor_override is not None:
        c.unmapped("avg_pool2d.default with divisor_override")
    p = _pool_params(kernel, stride, padding, 1, ceil_mode)
    p["exclude_pad"] = 0 if count_include_pad else 1
    return _batched(c, node, x, lambda v: c.g.avg_pool2d(v, p))


@row("avg_pool1d.default", "adaptive_avg_pool1d.default")
def _pool1d(c, node, x, kernel, *rest):
    """A 1-d pooling of x [N, C, L] (or [C, L]) as the 2-d one of [N, C, 1, L]."""
    shape = c.shape(node.args[0])
    y = c.g.reshape(c.f(x), list(shape[:-1]) + [1, shape[-1]])
    if str(node.target).startswith("aten.adaptive"):
        (n,) = _pairs(kernel, 1)
        if shape[-1] % n:
            c.unmapped(f"adaptive_avg_pool1d.default from {shape[-1]} to {n} (not a whole window)")
        k = shape[-1] // n
        p = _pool_params((1, k), (1, k), 0)
    else:
        stride = rest[0] if rest and rest[0] else kernel
        padding = rest[1] if len(rest) > 1 else 0
        p = _pool_params((1, _pairs(kernel, 1)[0]), (1, _pairs(stride, 1)[0]), (0, _pairs(padding, 1)[0]),
                         1, rest[2] if len(rest) > 2 else False)
        p["exclude_pad"] = 0 if (rest[3] if len(rest) > 3 else True) else 1
    if len(shape) == 2:  # unbatched [C, L]: [1, C, 1, L]
        y = c.g.reshape(y, [1] + list(y.shape))
    return _reshaped(c, node, c.g.avg_pool2d(y, p))


@row("_adaptive_avg_pool2d.default")
def _adaptive_avg(c, node, x, output_size):
    shape = c.shape(node.args[0])
    oh, ow = _pairs(output_size)
    h, w = shape[-2], shape[-1]
    if h % oh or w % ow:
        c.unmapped(f"_adaptive_avg_pool2d.default from {h}x{w} to {oh}x{ow} (not a whole window)")
    if (oh, ow) == (1, 1):
        return _batched(c, node, x, c.g.global_avg_pool2d)
    p = _pool_params((h // oh, w // ow), (h // oh, w // ow), 0)
    return _batched(c, node, x, lambda v: c.g.avg_pool2d(v, p))


# composed from graph ops: each exact in f32 (no exp/log tricks) and
# differentiable through the ops it is built of

def _index_const(c, node, values):
    c.n_const += 1
    return c.g.constant(f"{node.name}/index:{c.n_const}", np.ascontiguousarray(values, dtype=np.int32))


def _along(values, d, rank):
    """A 1-D constant shaped to broadcast along dim d of a rank-`rank` tensor."""
    return np.asarray(values, np.float32).reshape([-1] + [1] * (rank - d - 1))


@row("atan2.default")
def _atan2(c, node, y, x):
    """atan(y / x), moved by pi to x's half plane (+pi where y >= 0, -pi
    below); atan2(0, 0) = 0 as PyTorch's."""
    y, x = c.f(y), c.f(x)
    r = c.g.unary("Atan", c.g.div(y, x))
    half = c.g.where(c.cond(c.g.binary("GreaterOrEqual", y, c.const(0.0))), c.const(np.pi), c.const(-np.pi))
    r = c.g.add(r, c.g.mul(c.g.binary("Less", x, c.const(0.0)), half))
    both = c.g.binary("And", c.g.binary("Equal", x, c.const(0.0)), c.g.binary("Equal", y, c.const(0.0)))
    return _reshaped(c, node, c.g.where(c.cond(both), c.const(0.0), r))


@row("argmax.default", "argmin.default")
def _argmax(c, node, x, dim=None, keepdim=False):
    """The first index of the maximum (minimum): the largest of
    (x == max) * (n - i) over the dim, taken from n."""
    shape = c.shape(node.args[0])
    v = c.f(x)
    if str(node.target).startswith("aten.argmin"):
        v = c.g.scale(v, -1.0)
    if dim is None or not shape:
        n = int(np.prod(shape)) if shape else 1
        v, d, rank = c.g.reshape(v, [n]), 0, 1
    else:
        rank = len(shape)
        d = _dim(dim, rank)
        n = shape[d]
    hit = c.g.binary("Equal", v, c.g.reduce_max(v, [d], 1))
    score = c.g.mul(hit, c.const(_along(n - np.arange(n), d, rank)))
    first = c.g.sub(c.const(float(n)), c.g.reduce_max(score, [d], 1))
    return _reshaped(c, node, first)


@row("prod.default", "prod.dim_int")
def _prod(c, node, x, dim=None, keepdim=False, dtype=None):
    """The product along a dim by a tree of multiplications of its halves
    (exact zeros and signs, a gradient through each mul)."""
    shape = c.shape(node.args[0])
    if isinstance(dim, (c.torch.dtype, type(None))) and str(node.target) == "aten.prod.default":
        dim = None
    y = c.f(x)
    if dim is None or not shape:
        n = int(np.prod(shape)) if shape else 1
        y, d = c.g.reshape(y, [n]), 0
    else:
        d = _dim(dim, len(shape))
        n = shape[d]
    if n == 0:
        return c.const(np.ones(c.shape(node), np.float32))
    while n > 1:
        h = n // 2
        p = c.g.mul(c.g.slice(y, d, 0, h), c.g.slice(y, d, h, h))
        y = c.g.concat([p, c.g.slice(y, d, 2 * h, 1)], d) if n % 2 else p
        n = h + n % 2
    return _reshaped(c, node, y)


@row("diagonal.default")
def _diagonal(c, node, x, offset=0, dim1=0, dim2=1):
    shape = c.shape(node.args[0])
    rank = len(shape)
    d1, d2 = _dim(dim1, rank), _dim(dim2, rank)
    n = c.shape(node)[-1]
    if n == 0:
        c.unmapped("diagonal.default of an empty diagonal")
    rest = [k for k in range(rank) if k not in (d1, d2)]
    y = c.g.permute(c.f(x), rest + [d1, d2])
    n2 = shape[d2]
    y = c.g.reshape(y, [shape[k] for k in rest] + [shape[d1] * n2])
    i = np.arange(n)
    flat = i * n2 + i + offset if offset >= 0 else (i - offset) * n2 + i
    return c.g.gather(y, _index_const(c, node, flat), len(rest))


@row("select_scatter.default")
def _select_scatter(c, node, x, src, dim, index):
    shape = c.shape(node.args[0])
    d = _dim(dim, len(shape))
    k = index + shape[d] if index < 0 else index
    s = c.g.reshape(c.f(src), list(shape[:d]) + [1] + list(shape[d + 1:]))
    mask = _along(np.arange(shape[d]) == k, d, len(shape))
    return c.g.where(c.cond(c.const(mask)), s, c.f(x))


@row("slice_scatter.default")
def _slice_scatter(c, node, x, src, dim=0, start=None, end=None, step=1):
    shape = c.shape(node.args[0])
    d = _dim(dim, len(shape))
    picked = list(range(shape[d]))[slice(start, end, step)]
    if not picked:
        return c.f(x)
    at = np.zeros(shape[d], np.int32)  # which row of src lands on each row of x
    at[picked] = np.arange(len(picked))
    mask = np.zeros(shape[d], bool)
    mask[picked] = True
    s = c.g.gather(c.f(src), _index_const(c, node, at), d)
    return c.g.where(c.cond(c.const(_along(mask, d, len(shape)))), s, c.f(x))


@row("scatter.src", "scatter.value", "scatter_add.default")
def _scatter(c, node, x, dim, index, src):
    """By a one-hot of the index along a new dim: src's entries (within the
    index's shape) summed onto (scatter_add) or written over (scatter) the
    rows they name. scatter
    with an index naming one row twice keeps their sum (PyTorch keeps one
    of them, unspecified which)."""
    shape = c.shape(node.args[0])
    ishape = c.shape(node.args[2])
    if not shape:
        c.unmapped(f"{node.target} of a 0-d tensor")
    rank = len(shape)
    d = _dim(dim, rank)
    n = shape[d]
    lifted = list(ishape[:d + 1]) + [1] + list(ishape[d + 1:])
    idx = c.g.reshape(c.f(index), lifted)
    onehot = c.g.binary("Equal", idx, c.const(_along(np.arange(n), d + 1, rank + 1)))
    if isinstance(src, (Tensor, c.torch.Tensor)):
        sshape = c.shape(node.args[3]) if isinstance(src, Tensor) else tuple(src.shape)
        s = c.f(src)
        for k in range(rank):
            if sshape[k] != ishape[k]:
                s = c.g.slice(s, k, 0, ishape[k])
        s = c.g.reshape(s, lifted)
    else:
        s = c.const(float(src))
    # over the index's extent off dim d; the rest of x, past it, is kept
    after = [0 if k == d else shape[k] - ishape[k] for k in range(rank)]
    spread = (lambda t: c.g.pad(t, [0] * rank + after)) if any(after) else (lambda t: t)
    added = spread(c.g.reduce_sum(c.g.mul(onehot, s), [d], 0))
    if str(node.target).startswith("aten.scatter_add"):
        return c.g.add(c.f(x), added)
    hit = spread(c.g.reduce_max(onehot, [d], 0))
    return c.g.where(c.cond(hit), added, c.f(x))


def _interpolation(n_in, n_out, align_corners, scale):
    """[n_out, n_in]: PyTorch's linear interpolation weights along one dim."""
    a = np.zeros((n_out, n_in), np.float64)
    i = np.arange(n_out, dtype=np.float64)
    if align_corners:
        src = i * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros(n_out)
    else:
        r = 1.0 / scale if scale else n_in / n_out
        src = np.maximum((i + 0.5) * r - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    w = src - i0
    np.add.at(a, (np.arange(n_out), i0), 1.0 - w)
    np.add.at(a, (np.arange(n_out), i1), w)
    return a.astype(np.float32)


@row("upsample_bilinear2d.vec")
def _upsample_bilinear(c, node, x, output_size, align_corners, scale_factors=None):
    """Bilinear resizing as two matmuls by constant interpolation matrices
    (rows, then columns)."""
    shape, out = c.shape(node.args[0]), c.shape(node)
    sh, sw = (scale_factors or (None, None))
    ah = _interpolation(shape[2], out[2], align_corners, sh)
    aw = _interpolation(shape[3], out[3], align_corners, sw)
    y = c.g.matmul_batched(c.f(x), c.const(aw.T.reshape(1, 1, shape[3], out[3])))
    return c.g.matmul_batched(c.const(ah.reshape(1, 1, out[2], shape[2])), y)


# ---- entry

def origins_class():
    from ._torch import _Origins

    class Origins(_Origins):
        """The library's messages about the graph in the module's words:
        each line of forward a node was recorded at ("file:line") named
        with the module path that made it."""

        def __init__(self, module, lines) -> None:
            self.what = f"torch module {type(module).__name__}"
            self.lines = lines
            self.path = None
            files = sorted({re.escape(f) for f, _ in lines}, key=len, reverse=True)
            self.pattern = re.compile(r"(?<!forward at )(" + "|".join(files) + r"):(\d+)") if files else None

        def explain(self, message: str) -> str:
            if self.pattern is None:
                return message

            def named(m):
                paths = list(dict.fromkeys(self.lines.get((m.group(1), int(m.group(2))), [])))
                if not paths:
                    return m.group(0)
                where = ", ".join(f"module '{p}'" if p else "the top module" for p in paths)
                return f"{self.what}, {where}, forward at {m.group(0)}"
            return self.pattern.sub(named, message)

    return Origins


def _refusal_of(module, e) -> UnsupportedError:
    """torch.export's failure as tensorscope's refusal: the module path and
    the line of forward where it stopped (the innermost frame of the
    user's code in its traceback), why, and what to write instead."""
    import traceback
    from ._torch import _installed, _module_at
    what = f"torch module {type(module).__name__}"
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if not f.filename.startswith("<") and not _installed(f.filename)
              and not f.filename.startswith(os.path.dirname(os.path.abspath(__file__)))]
    if frames:
        f = frames[-1]
        path = _module_at(module, f.filename, f.lineno)
        where = f"module '{path}'" if path else "the top module" if path == "" else "forward's code"
        what = f"{what}, {where}, forward at {f.filename}:{f.lineno}"
    text = str(e).strip().splitlines()
    first = text[0] if text else type(e).__name__
    if "data-dependent" in str(e) or "DataDependent" in type(e).__name__:
        return UnsupportedError(
            f"{what}: data-dependent control flow or value ({first}): the capture would keep one "
            "branch or value for every batch; write it with tensor ops (torch.where(cond, a, b) "
            "for an if on a tensor, a tensor instead of .item() or int(x)), or give it as an input")
    return UnsupportedError(f"{what}: torch.export cannot capture forward ({type(e).__name__}: "
                            f"{first}); change forward so that it can, or capture through ONNX: "
                            "Options().capture('onnx')")


def capture(module, example_inputs, input_names):
    """(graph, its outputs, the ExportedProgram) of `module` at
    example_inputs, through torch.export."""
    import torch
    if not available(torch):
        raise UnsupportedError(f"Options().capture('export'): PyTorch {torch.__version__} has no "
                               "torch.export front end (it needs PyTorch 2.5 or later); use "
                               "capture('onnx'), or install a newer PyTorch")
    try:
        ep = torch.export.export(module, tuple(example_inputs))
    except Exception as e:  # the exporter's own reason: data-dependent flow, untraceable code
        raise _refusal_of(module, e) from e
    _mark_stop_gradients(torch, ep.graph_module)
    ep = ep.run_decompositions()
    c = _Capture(torch, module, ep, list(input_names))
    outputs = c.build()
    c.g._outputs = outputs
    c.g._origins = origins_class()(module, c.lines)
    return c.g, outputs, ep
