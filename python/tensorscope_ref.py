"""Reference dumps from PyTorch for ``tensorscope compare``.

Needs only torch and numpy. ``dump`` runs a module once on given inputs and
writes, into a directory, the three .npz files that ``tensorscope compare``
takes::

    reference.npz  every submodule's output under its module path (``fc1``,
                   ``features.0``; a module called again, as ResNet's
                   ``layer1.0.relu``, its k-th call's under ``PATH#k``:
                   compare pairs it with the module's k-th occurrence in
                   graph order), the loss as ``loss``; with a loss also
                   ``Gradient___<module path>`` (the gradient of each output)
                   and ``Gradient___<parameter name>`` for every parameter.
                   A module that is the identity in this run (a Dropout
                   in eval mode or of probability 0, nn.Identity) is not
                   recorded: its output is its input, and an exporter
                   may leave it out of the file (the dynamo exporter does)
    inputs.npz     the inputs under their names (``x``; targets as ``labels``)
    weights.npz    the state dict (parameters and buffers) as float32, a tied
                   weight once under its first name

The names match tensorscope's: a module path is a scope there, and
``compare`` matches it with the last op output of that scope
(``fc1`` -> ``fc1/Add:0`` for a built-in model, ``features.0`` -> its
``Conv`` output for a model imported from ONNX). Where names differ, give
``compare --map``. The module runs in the mode it is in (call ``.train()``
or ``.eval()`` first): batch norm and dropout behave accordingly.

Example::

    import torch, tensorscope_ref
    net = MyNet().eval()
    x = torch.randn(8, 1, 28, 28); y = torch.randint(0, 10, (8,))
    tensorscope_ref.dump(net, {"x": x}, "ref", loss_fn=torch.nn.functional.nll_loss,
                         targets=y)
    # tensorscope compare --model net.onnx --weights ref/weights.npz \\
    #     --inputs ref/inputs.npz --reference ref/reference.npz --grads
"""

import argparse
import importlib
import importlib.util
import os
import sys

import numpy as np

__all__ = ["dump", "main"]


def _np(t):
    return t.detach().cpu().numpy()


def dump(module, inputs, path, loss_fn=None, targets=None, targets_name="labels"):
    """Runs ``module`` once and writes reference.npz, inputs.npz and weights.npz
    into directory ``path`` (created if needed). ``inputs``: a tensor (named
    ``x``) or a dict of name -> tensor, passed to ``module`` as keyword-free
    positional arguments in the dict's order. ``loss_fn(output, targets)``
    gives a scalar loss; with it, gradients are recorded too. Returns the
    reference dict (name -> numpy array)."""
    import torch
    if isinstance(inputs, torch.Tensor):
        inputs = {"x": inputs}
    if not isinstance(inputs, dict) or not inputs:
        raise TypeError("inputs must be a tensor or a non-empty dict of name -> tensor")
    if (loss_fn is None) != (targets is None):
        raise ValueError("loss_fn and targets go together")
    os.makedirs(path, exist_ok=True)
    ref, hooks = {}, []
    want_grads = loss_fn is not None

    calls = {}

    def record(name):
        def hook(_mod, _args, out):
            if not isinstance(out, torch.Tensor):
                return  # tuples (e.g. attention with weights) are not recorded
            calls[name] = calls.get(name, 0) + 1
            key = name if calls[name] == 1 else f"{name}#{calls[name]}"
            ref[key] = _np(out).astype(np.float32)
            if want_grads and out.requires_grad:
                def grad_hook(g):
                    ref["Gradient___" + key] = _np(g).astype(np.float32)
                out.register_hook(grad_hook)
        return hook

    def identity(sub):
        if isinstance(sub, torch.nn.Identity):
            return True
        return isinstance(sub, torch.nn.modules.dropout._DropoutNd) and (not sub.training or sub.p == 0)

    for name, sub in module.named_modules():
        if name and not identity(sub):  # the root's output is the last module's
            hooks.append(sub.register_forward_hook(record(name)))
    try:
        module.zero_grad(set_to_none=True)
        with torch.set_grad_enabled(want_grads):
            out = module(*inputs.values())
            if want_grads:
                loss = loss_fn(out, targets)
                ref["loss"] = _np(loss).astype(np.float32)
                loss.backward()
                for pname, p in module.named_parameters():
                    if p.grad is not None:
                        ref["Gradient___" + pname] = _np(p.grad).astype(np.float32)
    finally:
        for h in hooks:
            h.remove()
    np.savez(os.path.join(path, "reference.npz"), **ref)
    ins = {k: _np(v) for k, v in inputs.items()}
    if targets is not None:
        ins[targets_name] = _np(targets)
    np.savez(os.path.join(path, "inputs.npz"), **ins)
    weights, seen = {}, set()
    for k, v in module.state_dict(keep_vars=True).items():
        # a tied weight (lm_head.weight = wte.weight) is one parameter, saved once
        if v.is_floating_point() and v.data_ptr() not in seen:
            seen.add(v.data_ptr())
            weights[k] = _np(v).astype(np.float32)
    np.savez(os.path.join(path, "weights.npz"), **weights)
    return ref


USAGE = """tensorscope_ref MODULE OUT_DIR --input NAME:SHAPE [...] [--loss nll|cross_entropy|mse] [--onnx FILE]

Writes the reference dump of a PyTorch module (tensorscope_ref.dump) on random
inputs, for `tensorscope compare`, and with --onnx the module's ONNX export
to compare it with. MODULE is FILE.py:NAME or package.module:NAME, NAME a
class or function that, called with no arguments, returns the module.

example:
  tensorscope_ref net.py:Net ref --input x:8x1x28x28 --loss nll --onnx net.onnx
  tensorscope compare --model net.onnx --inputs ref/inputs.npz \\
      --weights ref/weights.npz --reference ref/reference.npz --grads"""


def _module_factory(spec):
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        raise SystemExit(f"tensorscope_ref: MODULE '{spec}': give FILE.py:NAME or package.module:NAME")
    if where.endswith(".py"):
        if not os.path.isfile(where):
            raise SystemExit(f"tensorscope_ref: MODULE '{spec}': no file {where}")
        sys.path.insert(0, os.path.dirname(os.path.abspath(where)))
        loader = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(where))[0], where)
        mod = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(mod)
    else:
        mod = importlib.import_module(where)
    if not hasattr(mod, name):
        raise SystemExit(f"tensorscope_ref: MODULE '{spec}': {where} has no '{name}'")
    return getattr(mod, name)


def _input_spec(text):
    """NAME:D0xD1x...[:iN] -> (name, shape, N or None: int64 ids below N)."""
    parts = text.split(":")
    try:
        if len(parts) not in (2, 3) or not parts[0] or (len(parts) == 3 and not parts[2].startswith("i")):
            raise ValueError
        shape = tuple(int(d) for d in parts[1].split("x"))
        high = int(parts[2][1:]) if len(parts) == 3 else None
        if any(d < 1 for d in shape) or (high is not None and high < 1):
            raise ValueError
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}': want NAME:SHAPE (x:8x1x28x28, float32 normal values) "
                                         "or NAME:SHAPE:iN (tokens:4x16:i100, int64 ids below N)") from None
    return parts[0], shape, high


def main(argv=None):
    """The command `tensorscope_ref` (USAGE above)."""
    p = argparse.ArgumentParser(prog="tensorscope_ref", usage=USAGE.split("\n")[0],
                                description="\n".join(USAGE.split("\n")[2:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("module", metavar="MODULE", help="FILE.py:NAME or package.module:NAME")
    p.add_argument("out", metavar="OUT_DIR", help="where reference.npz, inputs.npz and weights.npz go")
    p.add_argument("--input", action="append", type=_input_spec, required=True, metavar="NAME:SHAPE[:iN]",
                   help="an input of forward, in order; :iN for int64 ids below N")
    p.add_argument("--loss", choices=("nll", "cross_entropy", "mse"),
                   help="a loss on the output (random labels as 'labels'), so gradients are recorded too")
    p.add_argument("--train", action="store_true", help="run the module in train() mode (default eval())")
    p.add_argument("--seed", type=int, default=0, help="torch.manual_seed for the weights and inputs (default 0)")
    p.add_argument("--onnx", metavar="FILE", help="also export the module to this ONNX file (opset 17)")
    a = p.parse_args(argv)
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        raise SystemExit("tensorscope_ref: needs PyTorch (pip install torch)") from None
    torch.manual_seed(a.seed)
    module = _module_factory(a.module)()
    if not isinstance(module, torch.nn.Module):
        raise SystemExit(f"tensorscope_ref: {a.module}() gave a {type(module).__name__}, not a torch.nn.Module")
    module.train(a.train)
    inputs = {name: torch.randint(0, high, shape) if high else torch.randn(shape) for name, shape, high in a.input}
    loss_fn = targets = None
    if a.loss:
        with torch.no_grad():
            out = module(*inputs.values())
        if not isinstance(out, torch.Tensor) or (a.loss != "mse" and out.dim() < 2):
            raise SystemExit(f"tensorscope_ref: --loss {a.loss} needs forward to return one tensor "
                             f"{'' if a.loss == 'mse' else 'of scores [B, C] or [B, ..., C]'}")
        if a.loss == "mse":
            loss_fn, targets = F.mse_loss, torch.randn(out.shape)
        else:
            base = F.nll_loss if a.loss == "nll" else F.cross_entropy
            loss_fn = lambda o, t: base(o.reshape(-1, o.shape[-1]), t.reshape(-1))  # noqa: E731
            targets = torch.randint(0, out.shape[-1], out.shape[:-1])
    ref = dump(module, inputs, a.out, loss_fn=loss_fn, targets=targets)
    if a.onnx:
        torch.onnx.export(module, tuple(inputs.values()), a.onnx, input_names=list(inputs), opset_version=17,
                          do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE)
    print(f"{a.out}: {len(ref)} reference tensors, inputs.npz ({', '.join(inputs)}"
          f"{', labels' if targets is not None else ''}) and weights.npz" + (f"; {a.onnx}" if a.onnx else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
