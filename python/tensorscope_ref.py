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

import os

import numpy as np
import torch

__all__ = ["dump"]


def _np(t):
    return t.detach().cpu().numpy()


def dump(module, inputs, path, loss_fn=None, targets=None, targets_name="labels"):
    """Runs ``module`` once and writes reference.npz, inputs.npz and weights.npz
    into directory ``path`` (created if needed). ``inputs``: a tensor (named
    ``x``) or a dict of name -> tensor, passed to ``module`` as keyword-free
    positional arguments in the dict's order. ``loss_fn(output, targets)``
    gives a scalar loss; with it, gradients are recorded too. Returns the
    reference dict (name -> numpy array)."""
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
