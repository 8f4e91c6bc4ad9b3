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

import math
import operator
import os
import re
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ._capi import lib
from .errors import InvalidArgumentError, UnsupportedError
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


# ---- names: each tensor as the ONNX capture names it

_SCRATCH = "~capture"  # the scope a node's tensors are made in, till _Names names them

# the ONNX op the TorchScript exporter writes for an ATen op, which names its
# result in the ONNX capture (`fc1/Gemm:0`); an op not here is named by its own
# op (Relu, Softmax, ...), as the ONNX import names an op it builds as itself
_ONNX_KIND = {
    "addmm": "Gemm", "mm": "MatMul", "bmm": "MatMul", "native_layer_norm": "LayerNormalization",
    "_native_batch_norm_legit_functional": "BatchNormalization",
    "_native_batch_norm_legit": "BatchNormalization",
    "_native_batch_norm_legit_no_training": "BatchNormalization",
    "embedding": "Gather", "max_pool2d_with_indices": "MaxPool", "avg_pool2d": "AveragePool",
    "max_pool3d_with_indices": "MaxPool", "avg_pool3d": "AveragePool",
    "_softmax": "Softmax", "_log_softmax": "LogSoftmax", "native_dropout": "Dropout",
    "mul": "Mul", "div": "Div", "neg": "Neg", "unsqueeze": "Unsqueeze", "squeeze": "Squeeze",
    "permute": "Transpose", "t": "Transpose", "transpose": "Transpose", "cat": "Concat",
    "select": "Gather", "index_select": "Gather", "gather": "GatherElements", "expand": "Expand",
    "hardtanh": "Clip", "clamp": "Clip", "mean": "ReduceMean", "sum": "ReduceSum",
    "amax": "ReduceMax", "constant_pad_nd": "Pad", "view": "Reshape", "_unsafe_view": "Reshape",
    "reshape": "Reshape", "pow": "Pow", "argmax": "ArgMax", "argmin": "ArgMin",
}

# the ONNX ops the exporter writes for a torch function of several: those
# before the one naming the result are counted in the module's scope, as
# the ONNX import counts them (gelu's Div, Erf, Add, Mul, Mul chain imports
# as one Gelu op)
_CALL_KIND = {
    "gelu": ((), "Gelu"),
    "flatten": ((), "Flatten"),
}


class _Names:
    """Names each tensor a node made `<module path>/<Op>:<k>` as the ONNX
    import does (ts_graph_op_output_name: k counts <Op> in the module's
    scope), <Op> the ONNX op that computes it in the ONNX capture for the
    node's result, its own op for the tensors on the way; so a module's
    output, watched, anchored or compared, has one name whichever capture
    made the graph."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        self.count: Dict[str, int] = {}
        self.marked: Dict[int, str] = {}  # tensor -> the ONNX op that names it (a fused call's)

    def take(self, scope: str, kind: str) -> str:
        prefix = f"{scope}/{kind}" if scope else kind
        k = self.count.get(prefix, 0)
        self.count[prefix] = k + 1
        return f"{prefix}:{k}"

    def mark(self, t: Tensor, kind: str) -> Tensor:
        self.marked[t._ptr] = kind
        return t

    def name_made(self, first: int, scope: str, result, kind) -> None:
        """Names the tensors made since tensor `first`; `result` (the
        node's value) after kind: (ONNX ops counted before it, its ONNX op)."""
        before, final = kind
        if isinstance(result, (list, tuple)):
            result = result[0] if result else None
        res = result._ptr if isinstance(result, Tensor) else None
        h = self.g._h
        for i in range(first, lib.ts_graph_tensor_count(h)):
            t = Tensor(self.g, lib.ts_graph_tensor_at(h, i))
            if not t.name.startswith(_SCRATCH + "/"):
                continue  # named by its row (a constant, a buffer)
            own = t.op
            name = self.take(scope, own)
            onnx = self.marked.pop(t._ptr, None) or (final if t._ptr == res else None)
            if t._ptr == res:
                for b in before:
                    self.take(scope, b)
            if onnx and onnx != own:
                name = self.take(scope, onnx)
            for _ in range(lib.ts_graph_tensor_count(h) + 1):
                try:
                    t.name = name
                    break
                except InvalidArgumentError:  # taken (a 0-d parameter's Reshape): the next k
                    if not lib.ts_graph_find(h, name.encode()):
                        raise
                    name = self.take(scope, onnx if onnx and onnx != own else own)


class _Calls:
    """The torch calls of forward (node.meta["torch_fn"]: the nodes one
    call of F.linear or torch.matmul decomposed into), each named as the
    ONNX capture names the call's result; a linear or matmul of more than
    2-d tensors built as one call (`fused`, its other nodes `inner`), as
    the ONNX import builds its MatMul: no batch copies of the weight."""

    def __init__(self, graph) -> None:
        self.inner = set()
        self.fused: Dict[Any, Any] = {}
        self.last: Dict[Any, str] = {}  # a call's last node -> the torch function
        groups: List[Tuple[Any, str, List[Any]]] = []
        for n in graph.nodes:
            if n.op != "call_function":
                continue
            fn = n.meta.get("torch_fn")
            if groups and fn and groups[-1][0] == fn[0]:
                groups[-1][2].append(n)
            else:
                groups.append((fn[0] if fn else None, str(fn[1]).rsplit(".", 1)[-1] if fn else "", [n]))
        for _, fname, nodes in groups:
            made = [n for n in nodes if n.target is not operator.getitem]
            if made:
                self.last[made[-1]] = fname
            build = _fusion(fname, nodes)
            if build is not None:
                self.inner.update(nodes[:-1])
                self.fused[nodes[-1]] = build
        self.rms = set()
        for n in graph.nodes:  # RMSNorm written out (Llama's): one RMSNorm op, as the ONNX import makes it
            chain = _rms_norm_chain(n)
            if chain and not any(m in self.inner or m in self.fused for m in chain[0]):
                self.inner.update(chain[0][:-1])
                self.fused[n] = chain[1]
                self.rms.add(n)
        for n in graph.nodes:  # a permute of a permute: one Transpose, as the exporter writes it
            p = n.args[0] if n.op == "call_function" and n.target is _PERMUTE and n.args else None
            if (getattr(p, "target", None) is _PERMUTE and len(p.users) == 1 and p not in self.inner
                    and p not in self.fused):
                self.inner.add(p)
                self.fused[n] = _permutes(p, n)

    def kind(self, c, node):
        if node in self.rms:
            return (), "RMSNorm"
        fname = self.last.get(node)
        if fname in _CALL_KIND:
            return _CALL_KIND[fname]
        if fname == "linear":
            return (), _linear_kind(c, node)
        if fname == "matmul" and node in self.fused:
            return (), "MatMul"
        if fname == "cross_entropy":
            return (), "SoftmaxCrossEntropyLoss"
        if fname == "nll_loss":  # the exporter fuses a log_softmax before it into one loss
            fused = any(getattr(n, "target", None) is not None and _op_name(n.target).startswith("_log_softmax")
                        for n in _external(_call_nodes(node)))
            return (), "SoftmaxCrossEntropyLoss" if fused else "NegativeLogLikelihoodLoss"
        op = _op_name(node.target).split(".")[0]
        if op == "convolution":
            return (), "ConvTranspose" if node.args[6] else "Conv"
        return (), _ONNX_KIND.get(op)


def _rms_norm_chain(n):
    """(its nodes, a builder) where n is the last node of an RMSNorm
    written out: mul(mul(x, rsqrt(add(mean(pow(x, 2), [-1], True), eps))),
    w) (x * x for the pow, the muls' operands in either order), w [D] of
    x's last dim D, f32, each node on the way read by the next alone;
    else None."""
    def op(m, *names):
        return getattr(m, "op", None) == "call_function" and _op_name(m.target) in names

    def sole(m, *names):
        return m if op(m, *names) and len(m.users) == 1 else None

    def val(m):
        return m.meta.get("val") if hasattr(m, "meta") else None

    if not op(n, "mul.Tensor") or len(n.args) != 2:
        return None
    for side in (0, 1):
        inner, w = sole(n.args[side], "mul.Tensor"), n.args[1 - side]
        if inner is None or len(inner.args) != 2:
            continue
        for xs in (0, 1):
            x, rs = inner.args[xs], sole(inner.args[1 - xs], "rsqrt.default")
            add = sole(rs.args[0], "add.Tensor", "add.Scalar") if rs is not None else None
            if add is None or len(add.args) != 2 or add.kwargs:
                continue
            mean, eps = (add.args[0], add.args[1]) if hasattr(add.args[0], "op") else (add.args[1], add.args[0])
            mean = sole(mean, "mean.dim")
            if mean is None or isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0 or mean.kwargs:
                continue
            vx, vw = val(x), val(w)
            if vx is None or vw is None or str(vx.dtype) != "torch.float32" or str(vw.dtype) != "torch.float32" or vx.dim() < 1:
                continue
            D = int(vx.shape[-1])
            if tuple(int(d) for d in vw.shape) != (D,) or list(mean.args[1]) not in ([-1], [vx.dim() - 1]) or \
                    len(mean.args) < 3 or mean.args[2] is not True:
                continue
            sq = mean.args[0]
            if not (sole(sq, "pow.Tensor_Scalar") is not None and sq.args[0] is x and sq.args[1] == 2) and \
                    not (sole(sq, "mul.Tensor") is not None and sq.args[0] is x and sq.args[1] is x):
                continue

            def build(c, x=x, w=w, eps=float(eps)):
                return c.g.rms_norm(c.f(c.env[x]), c.f(c.env[w]), eps)
            return [sq, mean, add, rs, inner, n], build
    return None


def _permutes(first, second):
    """permute(permute(x, a), b) as one permute of x."""
    def build(c):
        rank = len(first.args[1])
        a = [_dim(d, rank) for d in first.args[1]]
        perm = [a[_dim(d, rank)] for d in second.args[1]]
        x = c.env[first.args[0]]
        return x if perm == list(range(rank)) else c.g.permute(c.f(x), perm)
    return build


def _linear_kind(c, node):
    """F.linear's result in the ONNX capture: Gemm of a 2-d input with a
    bias; else MatMul, and Add after it for a bias."""
    rank = len(c.shape(node))
    bias = any(_op_name(n.target).startswith("addmm") for n in _call_nodes(node))
    return ("Gemm" if rank == 2 else "Add") if bias else "MatMul"


def _call_nodes(node):
    fn = node.meta.get("torch_fn")
    out, n = [], node
    while n is not None and getattr(n, "op", None) == "call_function" and n.meta.get("torch_fn") == fn:
        out.append(n)
        n = n.prev
    return out


_PERMUTE = None  # torch.ops.aten.permute.default, once torch is imported
_VIEWS = ("view.default", "_unsafe_view.default", "reshape.default")


def _external(nodes):
    """The nodes the call reads that it does not make, in order."""
    inside, out = set(nodes), []
    for n in nodes:
        for a in n.all_input_nodes:
            if a not in inside and a not in out:
                out.append(a)
    return out


def _fusion(fname, nodes):
    """A builder of the whole call (F.linear or torch.matmul of more than
    2-d tensors) from what it reads, where no node outside reads its
    nodes on the way; else None."""
    if fname not in ("linear", "matmul") or len(nodes) < 2:
        return None
    inside = set(nodes)
    if any(u not in inside for n in nodes[:-1] for u in n.users):
        return None
    ops = [_op_name(n.target) for n in nodes]
    if fname == "linear" and len(ops) == 2:  # [N, K]: a Gemm, the weight read transposed
        if ops[0] not in ("permute.default", "t.default") or ops[1] not in ("addmm.default", "mm.default"):
            return None
        mm = ops[1] == "mm.default"
        w, (x, wt) = nodes[0].args[0], nodes[1].args[0:2] if mm else nodes[1].args[1:3]
        b = None if mm else nodes[1].args[0]
        if wt is not nodes[0]:
            return None
        if ops[1] == "addmm.default" and (len(nodes[1].args) > 3 or nodes[1].kwargs):
            return None

        def gemm(c):
            y = c.g.matmul_batched(c.f(c.env[x]), c.f(c.env[w]), 0, 1)
            return c.g.add(y, c.f(c.env[b])) if b is not None else y
        return gemm
    if fname == "linear":
        if (len(ops) != 4 or ops[0] not in _VIEWS or ops[1] not in ("permute.default", "t.default")
                or ops[2] not in ("addmm.default", "mm.default") or ops[3] not in _VIEWS):
            return None
        x, w = nodes[0].args[0], nodes[1].args[0]
        b = nodes[2].args[0] if ops[2] == "addmm.default" else None
        if ops[2] == "addmm.default" and (len(nodes[2].args) > 3 or nodes[2].kwargs):
            return None  # beta or alpha given

        def linear(c):
            shape = c.shape(x)
            wt = c.g.transpose(c.f(c.env[w]), 0, 1)
            y = c.g.matmul(c.g.reshape(c.f(c.env[x]), [int(np.prod(shape[:-1])), shape[-1]]), wt)
            y = c.names.mark(c.g.reshape(y, list(shape[:-1]) + [y.shape[-1]]), "MatMul")
            return c.g.add(y, c.f(c.env[b])) if b is not None else y
        return linear
    if ops.count("bmm.default") != 1 or ops[-1] not in _VIEWS:
        return None
    ext = _external(nodes)
    if len(ext) != 2:
        return None
    a, b = ext
    try:
        sa, sb, out = (tuple(int(d) for d in n.meta["val"].shape) for n in (a, b, nodes[-1]))
        fits = len(sa) >= 3 and len(sb) >= 2 and sa[-1] == sb[-2] and out == tuple(
            np.broadcast_shapes(sa[:-2], sb[:-2])) + (sa[-2], sb[-1])
    except (KeyError, AttributeError, TypeError, ValueError):
        fits = False
    if not fits:
        return None

    def matmul(c):
        if len(sb) == 2:  # [..., K] @ [K, N]: as a 2-d matmul, as the ONNX import builds it
            y = c.g.matmul(c.g.reshape(c.f(c.env[a]), [int(np.prod(sa[:-1])), sa[-1]]), c.f(c.env[b]))
            return c.g.reshape(y, list(out))
        return c.g.matmul_batched(c.f(c.env[a]), c.f(c.env[b]))
    return matmul


# ---- the capture

class _Capture:
    def __init__(self, torch, module, ep, input_names) -> None:
        self.torch = torch
        self.module = module
        self.ep = ep
        self.g = Graph(seed=0)
        self.env: Dict[Any, Any] = {}
        self.as_float: Dict[int, Tensor] = {}  # i32 or i64 tensor -> its f32 copy
        self.as_index: Dict[Any, Tensor] = {}  # (f32 tensor, range) or (i64 tensor, "i64") -> its i32 copy
        self.input_names = input_names
        self.node = None
        self.n_const = 0
        self.what = f"torch module {type(module).__name__}"
        self.lines: Dict[Tuple[str, int], List[str]] = {}  # line of forward -> module paths
        self.names = _Names(self.g)
        global _PERMUTE
        _PERMUTE = torch.ops.aten.permute.default
        self.calls = _Calls(ep.graph)

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

    def binary(self, op: str, a: Tensor, b: Tensor) -> Tensor:
        """Graph.binary, a bool result (a comparison's, a logical op's) as
        f32 1 and 0: the capture computes with PyTorch's bools as numbers."""
        return self.numbers(self.g.binary(op, a, b))

    def unary(self, op: str, x: Tensor, *args) -> Tensor:
        """Graph.unary, a bool result (a predicate's, Not's, CastBool's) as
        f32 1 and 0 (see binary); another result (CastIndex's) as it is."""
        return self.numbers(self.g.unary(op, x, *args))

    def numbers(self, t: Tensor) -> Tensor:
        """A bool tensor as f32 1 and 0; another as it is."""
        return self.f(t) if t.dtype == np.bool_ else t

    def f(self, x) -> Tensor:
        """x as an f32 tensor of the graph (the values of an i64 one, the
        positions of argmax and the like, exact below 2^24; a bool one's 1
        and 0)."""
        if isinstance(x, Tensor):
            if x.dtype not in (np.int32, np.int64, np.bool_):
                return x
            if x._ptr not in self.as_float:
                self.as_float[x._ptr] = self.g.unary("CastFloat", x) if x.dtype == np.int32 else self.g.cast(x, "f32")
            return self.as_float[x._ptr]
        if isinstance(x, _Unavailable):
            self.refuse(f"{x.what} is read, which tensorscope does not compute",
                        "compute it with other ops, or capture through Options().capture('onnx')")
        if isinstance(x, (bool, int, float)) or isinstance(x, self.torch.Tensor):
            return self.const(x)
        raise AssertionError(f"not a tensor: {x!r}")

    def i(self, x, lo: float = -2.0 ** 31, hi: float = 2.0 ** 31 - 1) -> Tensor:
        """x as an i32 tensor (indices): an i32 input as it is, an i64 one
        (positions of argmax and the like: below 2^24, so exact in i32)
        cast, both checked by the op that reads them at run (one out of
        range is an error naming them, as PyTorch's), an f32 one through
        CastIndex (clamped to [lo, hi])."""
        if isinstance(x, Tensor) and x.dtype == np.int32:
            return x
        if isinstance(x, Tensor) and x.dtype == np.int64:
            key = (x._ptr, "i64")
            if key not in self.as_index:
                t = self.as_index[key] = self.g.cast(x, "i32")
                t.name = f"{x.name}@i32"  # the run's index error names the positions
            return self.as_index[key]
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
        """x (a bool tensor, held as f32 1 and 0) as where's bool condition."""
        if isinstance(x, Tensor) and x.dtype in (np.int32, np.bool_):
            return x
        return self.g.cast(self.f(x), "bool")

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
                dt = "f32" if val.dtype.is_floating_point else "bool" if val.dtype == torch.bool else "i32"
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
            if node in self.calls.inner:
                continue  # built with the call it belongs to, at its last node
            first = lib.ts_graph_tensor_count(self.g._h)
            with self.g.scope(_SCRATCH):  # each made tensor named by self.names below
                fused = self.calls.fused.get(node)
                self.env[node] = fused(self) if fused else self.call(node)
            self.names.name_made(first, _dotted(path), self.env[node], self.calls.kind(self, node))
        self.g._at = None
        outputs = []
        specs = self.ep.graph_signature.output_specs
        for spec, a in zip(specs, out_node.args[0]):
            self.node = a if hasattr(a, "meta") else None
            value = self.arg(a)
            if spec.kind == OutputKind.USER_OUTPUT:
                value = value if isinstance(value, Tensor) else self.f(value)
                if hasattr(a, "meta") and "val" in a.meta and self.dtype(a) == self.torch.bool and value.dtype != np.bool_:
                    value = self.g.cast(value, "bool")  # PyTorch's bools, held as 1 and 0: returned as bool
                outputs.append(value)
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
    if dt == src and isinstance(x, Tensor) and x.dtype == np.int64:
        return x  # indices kept as the exact int64 they are
    x = c.f(x)
    if dt.is_floating_point or dt == src:
        return x
    if dt == torch.bool:
        return c.unary("CastBool", x)
    if src.is_floating_point:
        return c.unary("CastInt", x)  # toward zero, held in f32
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
    return c.unary(op, c.f(x))


@row("isinf.default")
def _isinf(c, node, x):
    return c.unary("IsInf", c.f(x), 1.0, 1.0)


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
    return c.g.sub(c.binary("Greater", x, zero), c.binary("Less", x, zero))


@row("gelu.default")
def _gelu(c, node, x, approximate="none"):
    return c.g.gelu(c.f(x), 1 if approximate == "tanh" else 0)


@row("silu.default")
def _silu(c, node, x):
    return c.g.silu(c.f(x))


@row("leaky_relu.default")
def _leaky(c, node, x, slope=0.01):
    return c.unary("LeakyRelu", c.f(x), float(slope))


@row("elu.default")
def _elu(c, node, x, alpha=1.0, scale=1.0, input_scale=1.0):
    if input_scale != 1.0:
        c.unmapped("elu.default with input_scale")
    if scale == 1.0:
        return c.unary("Elu", c.f(x), float(alpha))
    return c.unary("Selu", c.f(x), float(alpha), float(scale))


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
        y = c.binary("Max", y, c.f(lo))
    if hi is not None:
        y = c.binary("Min", y, c.f(hi))
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
        return c.unary("Floor", q)
    if rounding_mode == "trunc":
        return c.unary("CastInt", q)
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
        return c.unary("Not", c.binary("Equal", c.f(a), c.f(b)))
    return c.binary(_BINARY[base], c.f(a), c.f(b))


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
    return _reduce(c, node, c.g.reduce_max, c.unary("CastBool", c.f(x)), dims, keepdim)


@row("max.dim", "min.dim")
def _max_dim(c, node, x, dim, keepdim=False):
    """The maximum (minimum) along dim and its first index (_argmax's)."""
    sign = -1.0 if str(node.target).startswith("aten.min") else 1.0
    v = c.f(x) if sign > 0 else c.g.scale(c.f(x), -1.0)
    out = _reduce(c, node, c.g.reduce_max, v, [dim], keepdim) if c.shape(node.args[0]) else v
    if sign < 0:
        out = c.g.scale(out, -1.0)
    return [out, _argmax(c, node, x, dim, keepdim)]


@row("max.default", "min.default")
def _max_all(c, node, x):
    if str(node.target).startswith("aten.min"):
        return c.g.scale(_reduce(c, node, c.g.reduce_max, c.g.scale(c.f(x), -1.0), None, False), -1.0)
    return _reduce(c, node, c.g.reduce_max, x, None, False)


@row("round.decimals")
def _round_decimals(c, node, x, decimals=0):
    scale = 10.0 ** decimals  # as PyTorch: round(x * 10^d) / 10^d, half to even
    return c.g.scale(c.unary("Round", c.g.scale(c.f(x), scale)), 1.0 / scale)


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


def _swap_last(c, t, d, rank):
    """t with its dims d and rank - 1 swapped (itself when d is the last):
    moves a dim last, and back."""
    return c.g.transpose(t, d, rank - 1) if d != rank - 1 else t


def _along_last(c, shape, x, d):
    """For an op along dim d of x (of `shape`): x in f32 with d moved last,
    d counted from the front, the rank and the dim's size."""
    rank = len(shape)
    d = _dim(d, rank)
    return _swap_last(c, c.f(x), d, rank), d, rank, shape[d]


@row("cumsum.default")
def _cumsum(c, node, x, dim, dtype=None):
    shape = c.shape(node.args[0])
    if not shape:
        return c.f(x)
    x, dim, rank, n = _along_last(c, shape, x, dim)
    tri = c.const(np.triu(np.ones((n, n), np.float32)))  # out[j] = sum_{i <= j} x[i]
    y = c.g.matmul_batched(x, tri) if rank > 1 else c.g.reshape(
        c.g.matmul(c.g.reshape(x, [1, n]), tri), [n])
    return _swap_last(c, y, dim, rank)


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


@row("rms_norm.default")
def _rms_norm(c, node, x, normalized_shape, w=None, eps=None):
    # kept out of the decomposition (_KEPT): one RMSNorm op over the
    # normalised dims, flattened into one where there are several
    shape = [int(d) for d in normalized_shape]
    n = int(np.prod(shape))
    xs = c.shape(node.args[0])
    eps = float(np.finfo(np.float32).eps) if eps is None else float(eps)
    xf = c.f(x)
    if len(shape) > 1:
        xf = c.g.reshape(xf, list(xs[:len(xs) - len(shape)]) + [n])
    wf = None if w is None else c.f(w)
    if wf is not None and tuple(wf.shape) != (n,):
        wf = c.g.reshape(wf, [n])
    y = c.g.rms_norm(xf, wf, eps)
    return y if len(shape) == 1 else c.g.reshape(y, list(xs))


@row("native_group_norm.default")
def _group_norm(c, node, x, w, b, n, channels, hw, groups, eps):
    # one GroupNorm op of the module, its weight and bias inside (ones and
    # zeros where it has none), as the ONNX capture imports nn.GroupNorm's
    # export, so both captures name the module's tensors alike
    wc = c.f(w) if w is not None else c.const(np.ones(channels, np.float32))
    bc = c.f(b) if b is not None else c.const(np.zeros(channels, np.float32))
    y = c.g.group_norm(c.f(x), wc, bc, int(groups), float(eps))
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


# random numbers drawn in forward: the graph's RandomUniform op, drawn
# again every micro-batch on every device (counter-based, as dropout's
# masks: not PyTorch's numbers, as dropout's are not)
def _uniform(c, size):
    return c.g.random_uniform(c.const(np.zeros([int(s) for s in size], np.float32)))


@row("rand.default", "rand_like.default")
def _rand(c, node, size, **_):
    return _uniform(c, c.shape(node.args[0]) if "like" in str(node.target) else size)


@row("randn.default", "randn_like.default")
def _randn(c, node, size, **_):
    """Box-Muller: sqrt(-2 ln(1 - u1)) cos(2 pi u2), u1 and u2 uniform in
    [0, 1), so 1 - u1 in (0, 1]."""
    if "like" in str(node.target):
        size = c.shape(node.args[0])
    g = c.g
    u1, u2 = _uniform(c, size), _uniform(c, size)
    r = g.sqrt(g.scale(g.log(g.add(g.scale(u1, -1.0), c.const(1.0))), -2.0))
    return g.mul(r, g.unary("Cos", g.scale(u2, float(2 * np.pi))))


@row("randperm.default")
def _randperm(c, node, n, **_):
    """The order that sorts n uniform draws (ties, 2^-24 apart, in index
    order): a permutation of 0..n-1."""
    n = int(n)
    if n * n > _PAIRWISE_LIMIT:
        c.unmapped(f"randperm.default of {n} (past {int(np.sqrt(_PAIRWISE_LIMIT))}: n x n comparisons)")
    return _ranked(c, node, _uniform(c, [n]), 0, False, shape=[n])[1]


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
    shape = c.shape(node.args[0])
    k, m, flat = _flat_index(c, node, indices, shape)
    total = int(np.prod(shape[k:k + m]))
    y = c.f(x)
    if m > 1:
        y = c.g.reshape(y, list(shape[:k]) + [total] + list(shape[k + m:]))
    return _reshaped(c, node, c.g.gather(y, c.i(flat, 0, total - 1), k))


def _flat_index(c, node, indices, shape):
    """(k, m, flat) of advanced indexing x[..., i, j, ...] by index tensors
    on consecutive dims k..k+m-1 (a None before them for each dim taken
    whole): the flat index sum_j i_j * stride_j into those dims merged
    (negative indices counted from the end), as torch's indexing."""
    op = _op_name(node.target)
    given = [k for k, t in enumerate(indices) if t is not None]
    if given != list(range(given[0], given[-1] + 1)):
        c.unmapped(f"{op} with index tensors on dims that are not consecutive")
    if any(c.dtype(node.args[1][k]) == c.torch.bool for k in given):
        c.unmapped(f"{op} with a boolean mask (its result's shape depends on the data)")
    k, m = given[0], len(given)
    sizes = shape[k:k + m]
    flat, stride = None, 1
    for j in reversed(range(m)):
        t, n = indices[k + j], sizes[j]
        if isinstance(t, Tensor) and t.dtype in (np.int32, np.int64) and m == 1:
            flat = t  # an i32 input or i64 positions: the gather checks them at run
            break
        t = c.f(t)
        t = c.g.add(t, c.g.scale(c.binary("Less", t, c.const(0.0)), float(n)))  # -1: the last
        t = c.g.scale(t, float(stride)) if stride != 1 else t
        flat = t if flat is None else c.g.add(flat, t)
        stride *= n
    return k, m, flat


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
    mask = c.binary("Equal", c.f(indices), c.const(float(padding_idx)))
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


def _pool3d(c, node, x, kernel, stride, padding, dilation, ceil_mode, pool, exclude_pad=None):
    """A 3-d pooling of x [N, C, D, H, W] (or unbatched [C, D, H, W]) as two
    2-d ones, as the ONNX import pools 3-d windows: H, W of [N, C*D, H, W],
    then D of [N, C, D, OH*OW] with a (kd, 1) window. A box's max is the
    max of its rows' maxes, its mean the mean of theirs (its count of taps,
    with or without the padding, a product over the axes)."""
    shape = list(c.shape(node.args[0]))
    batched = len(shape) == 5
    n, ch, d, h, w = shape if batched else [1] + shape
    k = _pairs(kernel, 3)
    s, p, dl = (_pairs(stride, 3) if stride else k), _pairs(padding, 3), _pairs(dilation, 3)

    def params(kernel, stride, padding, dilation):
        q = _pool_params(kernel, stride, padding, dilation, ceil_mode)
        if exclude_pad is not None:
            q["exclude_pad"] = exclude_pad
        return q
    y = pool(c.g.reshape(c.f(x), [n, ch * d, h, w]), params(k[1:], s[1:], p[1:], dl[1:]))
    oh, ow = y.shape[2], y.shape[3]
    y = pool(c.g.reshape(y, [n, ch, d, oh * ow]), params((k[0], 1), (s[0], 1), (p[0], 0), (dl[0], 1)))
    return c.g.reshape(y, ([n] if batched else []) + [ch, y.shape[2], oh, ow])


@row("max_pool3d_with_indices.default")
def _max_pool3d(c, node, x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    return [_pool3d(c, node, x, kernel, stride, padding, dilation, ceil_mode, c.g.max_pool2d),
            _Unavailable("max pooling's indices")]


@row("avg_pool3d.default")
def _avg_pool3d(c, node, x, kernel, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                divisor_override=None):
    if divisor_override is not None:
        c.unmapped("avg_pool3d.default with divisor_override")
    return _pool3d(c, node, x, kernel, stride, padding, 1, ceil_mode, c.g.avg_pool2d,
                   0 if count_include_pad else 1)


@row("_adaptive_avg_pool3d.default")
def _adaptive_avg3d(c, node, x, output_size):
    shape = c.shape(node.args[0])
    out, size = _pairs(output_size, 3), shape[-3:]
    if any(i % o for i, o in zip(size, out)):
        sizes = "x".join(str(i) for i in size) + " to " + "x".join(str(o) for o in out)
        c.unmapped(f"_adaptive_avg_pool3d.default from {sizes} (not a whole window)")
    k = [i // o for i, o in zip(size, out)]
    return _pool3d(c, node, x, k, k, 0, 1, False, c.g.avg_pool2d)


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
    r = c.unary("Atan", c.g.div(y, x))
    half = c.g.where(c.cond(c.binary("GreaterOrEqual", y, c.const(0.0))), c.const(np.pi), c.const(-np.pi))
    r = c.g.add(r, c.g.mul(c.binary("Less", x, c.const(0.0)), half))
    both = c.binary("And", c.binary("Equal", x, c.const(0.0)), c.binary("Equal", y, c.const(0.0)))
    return _reshaped(c, node, c.g.where(c.cond(both), c.const(0.0), r))


@row("argmax.default", "argmin.default")
def _argmax(c, node, x, dim=None, keepdim=False):
    """The first index of the maximum (minimum; NaN is both, as PyTorch's):
    the largest of (x == max or x NaN) * (n - i) over the dim, taken from
    n, as an exact int64 tensor (the ONNX import's ArgMax), which gathers,
    comparisons and the outputs read as it is. (max.dim and min.dim's
    indices too.)"""
    shape = c.shape(node.args[0])
    v = c.f(x)
    if str(node.target).startswith(("aten.argmin", "aten.min")):
        v = c.g.scale(v, -1.0)
    if dim is None or not shape:
        n = int(np.prod(shape)) if shape else 1
        v, d, rank = c.g.reshape(v, [n]), 0, 1
    else:
        rank = len(shape)
        d = _dim(dim, rank)
        n = shape[d]
    _positions_fit(c, n)
    hit = c.binary("Or", c.binary("Equal", v, c.g.reduce_max(v, [d], 1)), c.unary("IsNaN", v))
    score = c.g.mul(hit, c.const(_along(n - np.arange(n), d, rank)))
    first = c.g.sub(c.const(float(n)), c.g.reduce_max(score, [d], 1))
    return _reshaped(c, node, c.g.cast(first, "i64"))


def _positions_fit(c, n):
    """The positions argmax, topk and sort compute are f32 values, exact up to 2^24."""
    if n > 1 << 24:
        c.refuse(f"its dim has {n} positions; the positions it returns are exact up to 2^24 (16777216)",
                 "split the dim, or reduce it in parts")


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
    return _reshaped(c, node, _product(c, y, d, n))


def _product(c, y, d, n):
    """The product of y's n entries along dim d (kept, of size 1) by a tree
    of multiplications of its halves: exact zeros and signs, a gradient
    through each mul."""
    while n > 1:
        h = n // 2
        p = c.g.mul(c.g.slice(y, d, 0, h), c.g.slice(y, d, h, h))
        y = c.g.concat([p, c.g.slice(y, d, 2 * h, 1)], d) if n % 2 else p
        n = h + n % 2
    return y


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
    onehot, s, d, spread = _scatter_parts(c, node, dim, index, src)
    added = spread(c.g.reduce_sum(c.g.mul(onehot, s), [d], 0))
    if str(node.target).startswith("aten.scatter_add"):
        return c.g.add(c.f(x), added)
    hit = spread(c.g.reduce_max(onehot, [d], 0))
    return c.g.where(c.cond(hit), added, c.f(x))


def _scatter_parts(c, node, dim, index, src):
    """(onehot, s, d, spread) of a scatter along dim d: onehot (1 where
    the index names row r) and src's entries s, both over the index's shape
    with a new dim at d + 1 for x's n rows; reducing them over dim d gives
    x's rows within the index's extent, which spread pads to x's shape."""
    shape = c.shape(node.args[0])
    ishape = c.shape(node.args[2])
    if not shape:
        c.unmapped(f"{node.target} of a 0-d tensor")
    rank = len(shape)
    d = _dim(dim, rank)
    n = shape[d]
    lifted = list(ishape[:d + 1]) + [1] + list(ishape[d + 1:])
    idx = c.g.reshape(c.f(index), lifted)
    onehot = c.binary("Equal", idx, c.const(_along(np.arange(n), d + 1, rank + 1)))
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
    return onehot, s, d, spread


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


# sorting, indexing and distances, composed from graph ops

_PAIRWISE_LIMIT = 1 << 22  # elements of each n x n comparison a sort by ranks builds (16 MB of f32)


def _ranked(c, node, x, d, descending, k=None, shape=None):
    """(values, indices) of x sorted along dim d (the first k of them), by
    ranks: each entry's rank is the number of entries that sort before it
    (ties in index order: a stable sort; NaN after every number, as
    PyTorch's, before them descending), and the k-th result is the entry of
    rank k. n x n comparisons along the dim: for the shorter dims. shape:
    x's, where node's first argument is not x."""
    shape = c.shape(node.args[0]) if shape is None else shape
    if not shape:
        return c.f(x), c.const(0.0)
    y, d, rank, n = _along_last(c, shape, x, d)
    k = n if k is None else k
    lead = list(y.shape[:-1])
    xi = c.g.reshape(y, lead + [n, 1])  # the entry ranked
    xj = c.g.reshape(y, lead + [1, n])  # the entries it is compared with
    nan_i, nan_j = c.unary("IsNaN", xi), c.unary("IsNaN", xj)
    if descending:  # j before i: x_j > x_i, or x_j NaN and x_i not
        before = c.binary("Or", c.binary("Greater", xj, xi),
                            c.binary("And", nan_j, c.unary("Not", nan_i)))
    else:  # x_j < x_i, or x_i NaN and x_j not
        before = c.binary("Or", c.binary("Less", xj, xi),
                            c.binary("And", nan_i, c.unary("Not", nan_j)))
    tie = c.binary("Or", c.binary("Equal", xj, xi), c.binary("And", nan_i, nan_j))
    earlier = c.const(np.tril(np.ones((n, n), np.float32), -1))  # [i, j]: j < i
    ahead = c.g.add(before, c.g.mul(tie, earlier))
    r = c.g.reduce_sum(ahead, [rank], 1)  # [..., n, 1]: each entry's rank
    pick = c.binary("Equal", r, c.const(np.arange(k, dtype=np.float32)))  # [..., n(i), k]
    values = c.g.reduce_sum(c.g.where(c.cond(pick), xi, c.const(0.0)), [rank - 1], 0)
    index = c.g.reduce_sum(c.g.mul(pick, c.const(np.arange(n, dtype=np.float32).reshape(n, 1))), [rank - 1], 0)
    values, index = _swap_last(c, values, d, rank), _swap_last(c, index, d, rank)
    return values, index


@row("sort.default", "sort.stable")
def _sort(c, node, x, dim=-1, descending=False, stable=None):
    """By ranks, or along a dim too long for n x n comparisons by a
    bitonic sorting network; stable either way."""
    shape = c.shape(node.args[0])
    if shape and int(np.prod(shape)) * shape[_dim(dim, len(shape))] > _PAIRWISE_LIMIT:
        return _int64_indices(c, node, dim, _bitonic(c, node, x, dim, descending))
    return _int64_indices(c, node, dim, _ranked(c, node, x, dim, descending))


def _int64_indices(c, node, dim, pair):
    """[values, indices] with the indices (f32 positions along dim) an
    exact int64 tensor, as PyTorch's (the ONNX import's TopK)."""
    shape = c.shape(node.args[0])
    _positions_fit(c, shape[_dim(dim, len(shape))] if shape else 1)
    values, index = pair
    return [values, c.g.cast(index, "i64")]


def _bitonic(c, node, x, d, descending):
    """(values, indices) of x sorted along dim d by a bitonic network over
    the dim padded to a power of two: log2(n)(log2(n)+1)/2 stages, each
    entry compared with its partner (a gather) and the pair put in order;
    the order of (NaN, value, index) keys, so ties keep index order and
    NaN goes last (first descending), as PyTorch's."""
    y, d, rank, n = _along_last(c, c.shape(node.args[0]), x, d)
    p = 1 << max(n - 1, 1).bit_length()
    nan = c.unary("IsNaN", y)
    key = c.g.where(c.cond(nan), c.const(0.0), y if not descending else c.g.scale(y, -1.0))
    flag = nan if not descending else c.g.scale(nan, -1.0)  # NaN after (before) the numbers
    lead = list(y.shape[:-1])
    zeros = c.const(np.zeros(lead + [n], np.float32))
    at = c.g.add(zeros, c.const(np.arange(n, dtype=np.float32)))
    if p > n:  # the padding sorts after everything
        pad = [0] * rank + [0] * (rank - 1) + [p - n]
        y, key, at = (c.g.pad(t, pad) for t in (y, key, at))
        flag = c.g.pad(flag, pad, "constant", 2.0)
    pos = np.arange(p)
    k = 2
    while k <= p:
        j = k // 2
        while j >= 1:
            q = pos ^ j
            want_min = c.const((((pos & k) == 0) == (pos < q)).astype(np.float32))
            partner = _index_const(c, node, q)
            fb, kb, ab, yb = (c.g.gather(t, partner, rank - 1) for t in (flag, key, at, y))
            less = c.binary("Or", c.binary("Less", flag, fb), c.binary("And", c.binary("Equal", flag, fb), c.binary(
                "Or", c.binary("Less", key, kb), c.binary("And", c.binary("Equal", key, kb), c.binary("Less", at, ab)))))
            keep = c.cond(c.binary("Equal", less, want_min))
            flag, key, at, y = (c.g.where(keep, a, b) for a, b in ((flag, fb), (key, kb), (at, ab), (y, yb)))
            j //= 2
        k *= 2
    if p > n:
        y, at = c.g.slice(y, rank - 1, 0, n), c.g.slice(at, rank - 1, 0, n)
    y, at = _swap_last(c, y, d, rank), _swap_last(c, at, d, rank)
    return y, at


@row("topk.default")
def _topk(c, node, x, k, dim=-1, largest=True, sorted=True):
    """The k largest (smallest) along dim, in order (`sorted=False` leaves
    their order to the implementation: this one's is sorted): by ranks,
    or, along a dim too long for n x n comparisons, in k rounds, or the
    first k of a bitonic sort for a larger k."""
    shape = c.shape(node.args[0])
    if not shape or int(np.prod(shape)) * shape[_dim(dim, len(shape))] <= _PAIRWISE_LIMIT:
        return _int64_indices(c, node, dim, _ranked(c, node, x, dim, largest, k))
    if k <= _ROUNDS:
        return _int64_indices(c, node, dim, _rounds(c, node, x, dim, largest, k))
    d = _dim(dim, len(shape))
    return _int64_indices(c, node, dim, [c.g.slice(t, d, 0, k) for t in _bitonic(c, node, x, dim, largest)])


_ROUNDS = 64  # the most rounds a topk along a long dim takes


def _rounds(c, node, x, d, largest, k):
    """(values, indices) of topk in k rounds, each taking the first
    largest entry (NaN the largest, as PyTorch's) and putting it out of
    the next rounds' reach."""
    y, d, rank, n = _along_last(c, c.shape(node.args[0]), x, d)
    nan = c.cond(c.unary("IsNaN", y))
    v = c.g.where(nan, c.const(np.inf if largest else -np.inf), y if largest else c.g.scale(y, -1.0))
    at = c.const(np.arange(n, dtype=np.float32))
    values, index = [], []
    for _ in range(k):
        hit = c.binary("Equal", v, c.g.reduce_max(v, [rank - 1], 1))
        first = c.g.sub(c.const(float(n)), c.g.reduce_max(c.g.mul(hit, c.const(n - np.arange(n, dtype=np.float32))),
                                                         [rank - 1], 1))
        pick = c.cond(c.binary("Equal", at, first))
        values.append(c.g.reduce_sum(c.g.where(pick, y, c.const(0.0)), [rank - 1], 1))
        index.append(first)
        v = c.g.where(pick, c.const(-np.inf), v)
    values = c.g.concat(values, rank - 1) if k > 1 else values[0]
    index = c.g.concat(index, rank - 1) if k > 1 else index[0]
    values, index = _swap_last(c, values, d, rank), _swap_last(c, index, d, rank)
    return values, index


@row("index_put.default")
def _index_put(c, node, x, indices, values, accumulate=False):
    """x[indices] = values (+= with accumulate) by a one-hot of the flat
    index over the indexed dims merged: each row of x the index names takes
    the values that name it, summed (without accumulate an index naming a
    row twice keeps their sum; PyTorch keeps one of them, unspecified which)."""
    shape = c.shape(node.args[0])
    given = [k for k, t in enumerate(indices) if t is not None]
    if len(given) == 1 and c.dtype(node.args[1][given[0]]) == c.torch.bool:
        return _masked_put(c, node, x, given[0], indices[given[0]], values, accumulate)
    k, m, flat = _flat_index(c, node, indices, shape)
    total = int(np.prod(shape[k:k + m]))
    ishape = tuple(np.broadcast_shapes(*[c.shape(t) for t in node.args[1] if t is not None]))
    pre, post = int(np.prod(shape[:k])), int(np.prod(shape[k + m:]))
    ni = int(np.prod(ishape))
    want = list(shape[:k]) + list(ishape) + list(shape[k + m:])  # x[indices]'s shape
    v = c.f(values)
    if tuple(v.shape) != tuple(want):
        v = c.g.add(v, c.const(np.zeros(want, np.float32)))
    v = c.g.reshape(v, [pre, ni, 1, post])
    f = c.g.add(c.f(flat), c.const(np.zeros(ishape, np.float32))) if tuple(c.f(flat).shape) != ishape else c.f(flat)
    onehot = c.binary("Equal", c.g.reshape(f, [ni, 1, 1]), c.const(np.arange(total, dtype=np.float32).reshape(total, 1)))
    added = c.g.reduce_sum(c.g.where(c.cond(onehot), v, c.const(0.0)), [1], 0)  # [pre, total, post]
    added = c.g.reshape(added, list(shape))
    if accumulate:
        return c.g.add(c.f(x), added)
    hit = c.g.reshape(c.g.reduce_max(onehot, [0], 0), [1] * k + list(shape[k:k + m]) + [1] * (len(shape) - k - m))
    return c.g.where(c.cond(hit), added, c.f(x))


def _masked_put(c, node, x, k, mask, values, accumulate):
    """x[mask] = values (+=) for a boolean mask on dims k.. of x and values
    the same for every true entry (broadcast along them): a where; values
    one per true entry are refused (how many there are depends on the data)."""
    shape = c.shape(node.args[0])
    mshape = c.shape(node.args[1][k])
    rest = len(shape) - k - len(mshape)
    vs = [1] * (k + 1 + rest - len(c.shape(node.args[2]))) + list(c.shape(node.args[2]))
    if len(vs) != k + 1 + rest or vs[k] != 1:
        c.unmapped("index_put.default with a boolean mask and values for each true entry (how many "
                   "there are depends on the data; a value broadcast to every one is mapped)")
    v = c.g.reshape(c.f(values), vs[:k] + [1] * len(mshape) + vs[k + 1:])
    on = c.cond(c.g.reshape(c.f(mask), [1] * k + list(mshape) + [1] * rest))
    if accumulate:
        return c.g.add(c.f(x), c.g.where(on, v, c.const(0.0)))
    return _reshaped(c, node, c.g.where(on, v, c.f(x)))


@row("scatter_reduce.two")
def _scatter_reduce(c, node, x, dim, index, src, reduce, include_self=True):
    """src's entries reduced onto the rows of x the index names (sum, prod,
    mean, amax, amin), with x's own entry where include_self; rows no
    index names keep x's."""
    onehot, s, d, spread = _scatter_parts(c, node, dim, index, src)
    x = c.f(x)
    hit = c.cond(spread(c.g.reduce_max(onehot, [d], 0)))
    picked = c.cond(onehot)
    if reduce in ("sum", "mean"):
        out = spread(c.g.reduce_sum(c.g.where(picked, s, c.const(0.0)), [d], 0))
        if include_self:
            out = c.g.add(out, x)
        if reduce == "mean":
            count = spread(c.g.reduce_sum(onehot, [d], 0))
            count = c.g.add(count, c.const(1.0)) if include_self else c.binary("Max", count, c.const(1.0))
            out = c.g.div(out, count)
            if not c.dtype(node).is_floating_point:
                out = c.unary("Floor", out)  # PyTorch's integer mean: rounded down
    elif reduce == "prod":
        n = c.shape(node.args[2])[d]
        out = spread(c.g.reshape(_product(c, c.g.where(picked, s, c.const(1.0)), d, n),
                                 [t for k, t in enumerate(onehot.shape) if k != d]))
        if include_self:
            out = c.g.mul(out, x)
    elif reduce in ("amax", "amin"):
        sign = 1.0 if reduce == "amax" else -1.0
        out = spread(c.g.reduce_max(c.g.where(picked, c.g.scale(s, sign), c.const(-np.inf)), [d], 0))
        if include_self:
            out = c.binary("Max", out, c.g.scale(x, sign))
        out = c.g.scale(out, sign)
    else:
        c.unmapped(f"scatter_reduce.two with reduce={reduce!r}")
    return c.g.where(hit, out, x)


@row("masked_scatter.default")
def _masked_scatter(c, node, x, mask, source):
    """source's entries, in order, into x where mask is true: the k-th true
    entry of mask (row-major) takes source's k-th, found by a prefix sum of
    the mask."""
    shape = c.shape(node)
    n = int(np.prod(shape))
    ns = int(np.prod(c.shape(node.args[2])))
    m = c.unary("CastBool", c.f(mask))
    if tuple(m.shape) != tuple(shape):
        m = c.g.add(m, c.const(np.zeros(shape, np.float32)))
    pos = _prefix_sum(c, c.g.reshape(m, [n]))  # the number of true entries up to each
    at = c.i(c.g.sub(pos, c.const(1.0)), 0, max(ns - 1, 0))
    taken = c.g.reshape(c.g.gather(c.g.reshape(c.f(source), [ns]), at, 0), list(shape))
    xe = c.f(x)
    if tuple(xe.shape) != tuple(shape):
        xe = c.g.add(xe, c.const(np.zeros(shape, np.float32)))
    return c.g.where(c.cond(m), taken, xe)


def _prefix_sum(c, y):
    """The inclusive prefix sums of 1-D y in log2(n) steps, each adding y
    shifted by 2^s (exact for integer counts below 2**24)."""
    n = y.shape[0]
    s = 1
    while s < n:
        y = c.g.add(y, c.g.pad(c.g.slice(y, 0, 0, n - s), [s, 0]))
        s *= 2
    return y


@row("as_strided.default")
def _as_strided(c, node, x, size, stride, storage_offset=None):
    """The view of x's storage at `size`, `stride` and `storage_offset`: a
    gather of x's entries (x contiguous, as every tensor of the graph)."""
    val = node.args[0].meta.get("val")
    if val is None or not val.is_contiguous() or val.storage_offset():
        c.unmapped("as_strided.default of a tensor that is not contiguous")
    at = np.full(tuple(size), int(storage_offset or 0), np.int64)
    for k, (n, st) in enumerate(zip(size, stride)):
        at = at + (np.arange(n) * st).reshape([-1] + [1] * (len(size) - k - 1))
    numel = int(np.prod(c.shape(node.args[0])))
    if at.size and (at.min() < 0 or at.max() >= numel):
        c.refuse(f"as_strided reads past the tensor's {numel} entries", "give a size and strides within it")
    if at.size == 0:
        return c.const(np.zeros(tuple(size), np.float32))
    flat = c.g.reshape(c.f(x), [numel])
    return c.g.reshape(c.g.gather(flat, _index_const(c, node, at.reshape(-1)), 0), list(size))


def _pnorm(c, diff, p, axis):
    """The p-norm of diff along axis (dropped), as torch.cdist: p = 0 counts
    the non-zero entries, inf takes the largest; the gradient of a norm of
    zero is zero, as PyTorch's."""
    a = c.g.abs(diff)
    if p == 0:
        return c.g.reduce_sum(c.unary("Not", c.binary("Equal", a, c.const(0.0))), [axis], 0)
    if p == 1:
        return c.g.reduce_sum(a, [axis], 0)
    if math.isinf(p):
        return c.g.reduce_max(a, [axis], 0)
    s = c.g.reduce_sum(c.g.mul(a, a) if p == 2 else c.g.pow(a, float(p)), [axis], 0)
    zero = c.cond(c.binary("Equal", s, c.const(0.0)))
    safe = c.g.where(zero, c.const(1.0), s)  # no 1/0 in the gradient of the root at 0
    root = c.g.sqrt(safe) if p == 2 else c.g.pow(safe, 1.0 / float(p))
    return c.g.where(zero, c.const(0.0), root)


@row("_cdist_forward.default")
def _cdist(c, node, x1, x2, p, compute_mode=None):
    """The p-norm distance of each row of x1 [..., P, M] to each of x2
    [..., R, M]: [..., P, R], from their differences [..., P, R, M]."""
    s1, s2 = c.shape(node.args[0]), c.shape(node.args[1])
    a = c.g.reshape(c.f(x1), list(s1[:-1]) + [1, s1[-1]])
    b = c.g.reshape(c.f(x2), list(s2[:-2]) + [1] + list(s2[-2:]))
    return _reshaped(c, node, _pnorm(c, c.g.sub(a, b), float(p), len(c.shape(node))))


@row("_pdist_forward.default")
def _pdist(c, node, x, p=2.0):
    """The p-norm distances of the rows i < j of x [N, M], in that order."""
    n = c.shape(node.args[0])[0]
    i, j = np.triu_indices(n, 1)
    if not len(i):
        return c.const(np.zeros(c.shape(node), np.float32))
    y = c.f(x)
    diff = c.g.sub(c.g.gather(y, _index_const(c, node, i), 0), c.g.gather(y, _index_const(c, node, j), 0))
    return _pnorm(c, diff, float(p), 1)


@row("_embedding_bag.default", "_embedding_bag_forward_only.default")
def _embedding_bag(c, node, weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                   per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    """The bags of rows of weight [V, D] that `offsets` cut `indices` [N]
    into, summed (mode 0), averaged (1) or their maximum (2): each bag a
    row of a [B, N] membership of the positions (padding_idx's left out);
    an empty bag gives zeros, as PyTorch's."""
    if scale_grad_by_freq:
        c.refuse("nn.EmbeddingBag(scale_grad_by_freq=True): tensorscope does not scale an embedding's "
                 "gradient by frequency", "use scale_grad_by_freq=False")
    v = c.shape(node.args[0])[0]
    (n,) = c.shape(node.args[1])
    nb = c.shape(node.args[2])[0] - (1 if include_last_offset else 0)
    rows = c.g.embedding(c.f(weight), c.i(indices, 0, v - 1))  # [N, D]
    if per_sample_weights is not None:
        rows = c.g.mul(rows, c.g.reshape(c.f(per_sample_weights), [n, 1]))
    off = c.f(offsets)
    starts = c.g.reshape(c.g.slice(off, 0, 0, nb), [nb, 1])
    if include_last_offset:
        ends = c.g.slice(off, 0, 1, nb)
    else:  # the last bag runs to the end
        ends = c.const(np.array([n], np.float32))
        ends = c.g.concat([c.g.slice(off, 0, 1, nb - 1), ends], 0) if nb > 1 else ends
    ends = c.g.reshape(ends, [nb, 1])
    j = c.const(np.arange(n, dtype=np.float32).reshape(1, n))
    member = c.binary("And", c.binary("GreaterOrEqual", j, starts), c.binary("Less", j, ends))
    if padding_idx is not None and padding_idx >= 0:
        kept = c.unary("Not", c.binary("Equal", c.f(indices), c.const(float(padding_idx))))
        member = c.binary("And", member, c.g.reshape(kept, [1, n]))
    count = c.g.reduce_sum(member, [1], 1)  # [B, 1]
    if mode == 2:
        m3 = c.cond(c.g.reshape(member, [nb, n, 1]))
        top = c.g.reduce_max(c.g.where(m3, c.g.reshape(rows, [1] + list(rows.shape)), c.const(-np.inf)), [1], 0)
        out = c.g.where(c.cond(c.binary("Greater", count, c.const(0.0))), top, c.const(0.0))
    else:
        out = c.g.matmul(member, rows)
        if mode == 1:
            out = c.g.div(out, c.binary("Max", count, c.const(1.0)))
    what = "embedding_bag's"
    return [out] + [_Unavailable(f"{what} {k}") for k in ("offset2bag", "bag sizes", "max indices")]


@row("col2im.default")
def _col2im(c, node, x, output_size, kernel_size, dilation, padding, stride):
    """nn.Fold: the blocks of x [N, C*kh*kw, L] summed into [N, C, H, W], by
    a constant 0/1 matrix [kh*kw*L, H*W] saying where each entry lands."""
    shape = c.shape(node.args[0])
    (h, w), (kh, kw) = _pairs(output_size), _pairs(kernel_size)
    (dh, dw), (ph, pw), (sh, sw) = _pairs(dilation), _pairs(padding), _pairs(stride)
    bh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    bw = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    ch = shape[-2] // (kh * kw)
    lands = np.zeros((kh * kw * bh * bw, h * w), np.float32)
    for ki in range(kh):
        for kj in range(kw):
            for bi in range(bh):
                for bj in range(bw):
                    r, q = bi * sh - ph + ki * dh, bj * sw - pw + kj * dw
                    if 0 <= r < h and 0 <= q < w:
                        lands[((ki * kw + kj) * bh + bi) * bw + bj, r * w + q] = 1.0
    lead = list(shape[:-2])
    y = c.g.reshape(c.f(x), lead + [ch, kh * kw * bh * bw])
    y = c.g.matmul_batched(y, c.const(lands)) if lead else c.g.matmul(y, c.const(lands))
    return c.g.reshape(y, lead + [ch, h, w])


@row("grid_sampler_2d.default")
def _grid_sampler(c, node, x, grid, interpolation_mode, padding_mode, align_corners):
    """F.grid_sample of x [N, C, H, W] at grid [N, Ho, Wo, 2] (x, y in
    [-1, 1]), bilinear or nearest, zeros or border padding: each corner's
    entries gathered at its flat index, weighted; the gradient reaches x
    and, through the weights, the grid."""
    if interpolation_mode not in (0, 1) or padding_mode not in (0, 1):
        c.unmapped("grid_sampler_2d.default with mode='bicubic' or padding_mode='reflection' "
                   "(bilinear and nearest, zeros and border are mapped)")
    n, ch, h, w = c.shape(node.args[0])
    _, ho, wo, _ = c.shape(node.args[1])
    g = c.f(grid)

    def coord(k, size):
        t = c.g.reshape(c.g.slice(g, 3, k, 1), [n, 1, ho * wo])
        t = c.g.scale(c.g.add(t, c.const(1.0)), (size - 1) / 2.0) if align_corners else \
            c.g.scale(c.g.sub(c.g.scale(c.g.add(t, c.const(1.0)), float(size)), c.const(1.0)), 0.5)
        if padding_mode == 1:  # border: clipped to the edge
            t = c.binary("Min", c.binary("Max", t, c.const(0.0)), c.const(float(size - 1)))
        return t
    ix, iy = coord(0, w), coord(1, h)
    flat = c.g.reshape(c.f(x), [n, ch, h * w])
    spread = c.const(np.zeros((n, ch, ho * wo), np.float32))

    def corner(cx, cy, weight):
        inside = c.binary("And", c.binary("And", c.binary("GreaterOrEqual", cx, c.const(0.0)),
                                                 c.binary("LessOrEqual", cx, c.const(w - 1.0))),
                            c.binary("And", c.binary("GreaterOrEqual", cy, c.const(0.0)),
                                       c.binary("LessOrEqual", cy, c.const(h - 1.0))))
        at = c.g.add(c.g.add(c.g.scale(cy, float(w)), cx), spread)
        v = c.g.gather_elements(flat, c.unary("CastIndex", at, 0.0, float(h * w - 1)), 2)
        return c.g.mul(v, c.g.mul(weight, inside) if weight is not None else inside)
    if interpolation_mode == 1:  # nearest: half to even, as PyTorch's
        out = corner(c.unary("Round", ix), c.unary("Round", iy), None)
    else:
        x0, y0 = c.unary("Floor", ix), c.unary("Floor", iy)
        x1, y1 = c.g.add(x0, c.const(1.0)), c.g.add(y0, c.const(1.0))
        wx1, wy1 = c.g.sub(ix, x0), c.g.sub(iy, y0)
        wx0, wy0 = c.g.sub(c.const(1.0), wx1), c.g.sub(c.const(1.0), wy1)
        out = None
        for cx, cy, wt in ((x0, y0, c.g.mul(wx0, wy0)), (x1, y0, c.g.mul(wx1, wy0)),
                           (x0, y1, c.g.mul(wx0, wy1)), (x1, y1, c.g.mul(wx1, wy1))):
            t = corner(cx, cy, wt)
            out = t if out is None else c.g.add(out, t)
    return c.g.reshape(out, [n, ch, ho, wo])


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


# ATen ops that have a row of their own and that the decomposition to
# Core ATen would take apart (silu into a sigmoid and a mul): kept whole
# where this PyTorch allows it
_KEPT = ("silu.default", "rms_norm.default")


def _decompositions(torch):
    """run_decompositions' arguments: the default table less _KEPT's ops
    (PyTorch 2.6 on), else none (the default)."""
    default = getattr(torch.export, "default_decompositions", None)
    if default is None:
        return ()
    table = default()
    for name in _KEPT:
        packet, overload = name.split(".")
        op = getattr(getattr(torch.ops.aten, packet, None), overload, None)
        if op is not None:
            table.pop(op, None)
    return (table,)


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
    ep = ep.run_decompositions(*_decompositions(torch))
    c = _Capture(torch, module, ep, list(input_names))
    outputs = c.build()
    c.g._outputs = outputs
    c.g._origins = origins_class()(module, c.lines)
    return c.g, outputs, ep
