"""Wrapping a PyTorch module, PopTorch-style: export it through ONNX in
training mode, import it, train it in tensorscope, copy the weights back.

torch is imported here only, when a module is wrapped."""
import inspect
import os
import tempfile

from . import _capi
from .errors import NotFoundError, StateError
from .graph import Graph
from .model import Model, new_training_model
from .options import SGD, Adam, AdamW


def _optimizer_of(optimizer):
    """A ts optimizer from itself or from a torch.optim SGD/Adam/AdamW."""
    if isinstance(optimizer, _capi.Optimizer):
        return optimizer
    import torch
    if isinstance(optimizer, torch.optim.Optimizer):
        if len(optimizer.param_groups) != 1:
            raise ValueError("tensorscope trains every parameter with one optimizer: pass a "
                             "torch optimizer with one parameter group")
        h = optimizer.param_groups[0]
        if type(optimizer) is torch.optim.SGD:
            return SGD(h["lr"], h["momentum"], h["weight_decay"], h["dampening"], h["nesterov"])
        if type(optimizer) is torch.optim.Adam:
            return Adam(h["lr"], h["betas"], h["eps"], h["weight_decay"])
        if type(optimizer) is torch.optim.AdamW:
            return AdamW(h["lr"], h["betas"], h["eps"], h["weight_decay"])
    raise TypeError(f"optimizer {type(optimizer).__name__}: use ts.SGD, ts.Adam, ts.AdamW or "
                    "torch.optim.SGD, Adam or AdamW")


def export_onnx(module, example_inputs, path, input_names):
    """torch.onnx.export in training mode with parameters kept as named
    initializers (no constant folding), the TorchScript exporter."""
    import torch
    kwargs = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    torch.onnx.export(module, tuple(example_inputs), path, input_names=input_names,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      **kwargs)


class TorchModel(Model):
    """A training model of a torch module; `module` is the wrapped module."""

    module = None

    def copy_weights_to_torch(self):
        """Writes the trained parameters (and buffers such as BatchNorm's
        running statistics) back into the module, by state_dict name."""
        import torch
        missing = []
        with torch.no_grad():
            for name, t in self.module.state_dict(keep_vars=True).items():
                if t.dtype not in (torch.float32, torch.float64):
                    continue  # counters (num_batches_tracked) stay torch's
                try:
                    values = self.graph.tensor(name).numpy()
                except (NotFoundError, StateError):  # absent, or not a parameter
                    missing.append(name)
                    continue
                t.copy_(torch.from_numpy(values).reshape(t.shape))
        if missing:
            raise NotFoundError(f"no parameter of the imported graph for {', '.join(missing)}: "
                                "the ONNX export folded or renamed them")

    def copy_weights_to_device(self):
        """Writes the module's current parameters into the graph."""
        self.graph.load_state_dict({n: p.detach().cpu().numpy()
                                    for n, p in self.module.named_parameters()})


_LOSSES = {"cross_entropy": "cross_entropy", "nll": "nll_loss"}  # loss= -> Graph method


def training_model_of_module(module, options, optimizer, example_inputs, loss):
    if example_inputs is None:
        raise TypeError("wrapping a torch module needs example_inputs=(x, ...): the inputs of "
                        "one micro-batch, as forward takes them")
    if optimizer is None:
        raise TypeError("training_model needs an optimizer (ts.SGD(...) or a torch.optim one)")
    if loss is not None and loss not in _LOSSES:
        raise ValueError(f"loss={loss!r}: for a torch module use None (forward returns its loss, "
                         f"last) or one of {', '.join(_LOSSES)}")
    _capi.function("ts_graph_from_onnx", "training_model(torch module)")  # fail before exporting
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    params = list(inspect.signature(module.forward).parameters)
    names = params[:len(example_inputs)]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "module.onnx")
        export_onnx(module, example_inputs, path, names)
        graph = Graph.from_onnx(path, {n: tuple(t.shape) for n, t in zip(names, example_inputs)})
    outputs = graph.outputs
    if not outputs:
        raise ValueError("the exported module has no output")
    if loss is None:
        loss_t = outputs[-1]  # PopTorch: forward returns (output, loss) or loss
    else:
        scores = outputs[0]
        labels = graph.input("labels", "i32", [scores.shape[0]])
        loss_t = getattr(graph, _LOSSES[loss])(scores, labels)
        loss_t.name = "loss"
    model = new_training_model(TorchModel, graph, options, _optimizer_of(optimizer), loss_t)
    model.module = module
    return model
