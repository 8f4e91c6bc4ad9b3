"""What a PyTorch program says about training beyond its ops, carried by
ts.training_model(module): each case trains 10 steps here and in PyTorch's
own loop (zero_grad, backward, step) from the same weights and the same
batches, and the losses and the weights agree within 1e-5 relative."""
import copy

import numpy as np
import pytest

import tensorscope as ts

torch = pytest.importorskip("torch")
F = torch.nn.functional
pytestmark = pytest.mark.skipif(not hasattr(ts._capi.lib, "ts_graph_from_onnx"),
                                reason="this library does not import ONNX")
STEPS = 10
RTOL = 1e-5
from tensorscope._torch import CAPTURES, capture_of  # noqa: E402

CAPTURE = capture_of(ts.Options())  # the capture these tests run through (TS_TEST_CAPTURE)


def train_beside_torch(module, make_optimizer, make_inputs, steps=STEPS, make_scheduler=None, **wrap):
    """`steps` steps of `module` through ts.training_model and of a copy in
    PyTorch's loop, each with the optimizer make_optimizer(module) and the
    inputs make_inputs(step) (a tuple of tensors; forward returns its loss,
    last), and the LR scheduler make_scheduler(optimizer) stepped after
    each step. Returns (the wrapped module after copy_weights_to_torch, the
    reference module, the losses here, PyTorch's)."""
    ref = copy.deepcopy(module)
    ref_opt = make_optimizer(ref)
    ref_sched = make_scheduler(ref_opt) if make_scheduler else None
    opt = make_optimizer(module)
    model = ts.training_model(module, ts.Options(), optimizer=opt, example_inputs=make_inputs(0),
                              lr_schedule=make_scheduler(opt) if make_scheduler else None, **wrap)
    ours, theirs = [], []
    for step in range(steps):
        inputs = make_inputs(step)
        out = model(*[t.numpy() for t in inputs])
        ours.append(float(out[-1] if isinstance(out, tuple) else out))
        ref_opt.zero_grad()
        loss = ref(*inputs)
        loss = loss[-1] if isinstance(loss, tuple) else loss
        loss.backward()
        ref_opt.step()
        if ref_sched:
            ref_sched.step()
        theirs.append(loss.item())
    np.testing.assert_allclose(ours, theirs, rtol=RTOL)
    model.copy_weights_to_torch()
    for (name, p), (_, q) in zip(module.state_dict().items(), ref.state_dict().items()):
        if p.is_floating_point():  # parameters and buffers (BatchNorm's running statistics)
            np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=RTOL, atol=1e-7, err_msg=name)
    return module, ref, ours, theirs


# ---- detach: a stop-gradient

class GanDiscriminatorStep(torch.nn.Module):
    """A GAN's discriminator step: the generator's samples detached, so only
    the discriminator learns from this loss."""

    def __init__(self):
        super().__init__()
        self.generator = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 6))
        self.discriminator = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))

    def forward(self, z, real):
        fake = self.generator(z).detach()
        return F.softplus(-self.discriminator(real)).mean() + F.softplus(self.discriminator(fake)).mean()


def gan_inputs(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(8, 4, generator=g), torch.randn(8, 6, generator=g) + 1.0


def test_detach_stops_the_gradient_as_in_torch():
    torch.manual_seed(0)
    net = GanDiscriminatorStep()
    generator = {n: p.detach().clone() for n, p in net.generator.named_parameters()}
    discriminator = {n: p.detach().clone() for n, p in net.discriminator.named_parameters()}
    # Adam over every parameter: PyTorch skips the generator's (their .grad
    # is None), and a zero gradient here would still move them
    train_beside_torch(net, lambda m: torch.optim.Adam(m.parameters(), lr=0.01, weight_decay=0.1), gan_inputs)
    for n, p in net.generator.named_parameters():
        assert torch.equal(p, generator[n]), f"generator.{n} was trained through a detach()"
    assert not all(torch.equal(p, discriminator[n]) for n, p in net.discriminator.named_parameters())


def test_the_stop_gradient_is_a_named_tensor_with_no_gradient():
    torch.manual_seed(0)
    net = GanDiscriminatorStep()
    model = ts.training_model(net, ts.Options(), optimizer=ts.SGD(lr=0.1), example_inputs=gan_inputs(0))
    model.compile()
    names = model.get_tensor_names()
    stops = [n for n in names if "StopGradient" in n and not n.startswith("Gradient___")]
    assert stops and model.graph.tensor(stops[0]).op == "StopGradient"
    assert not any(n.startswith("Gradient___generator.") for n in names), names


class NoGradRegion(torch.nn.Module):
    """A `torch.no_grad()` region inside forward: the scale it computes
    from fc1's output passes no gradient back into fc1."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(6, 8), torch.nn.Linear(8, 3)

    def forward(self, x, labels):
        h = torch.tanh(self.fc1(x))
        with torch.no_grad():
            scale = 1.0 + h.pow(2).mean(dim=1, keepdim=True)
        return F.cross_entropy(self.fc2(h * scale), labels)


@pytest.mark.skipif(CAPTURE != "export", reason="the ONNX capture does not see a no_grad region")
def test_a_no_grad_region_in_forward_passes_no_gradient_as_in_torch():
    torch.manual_seed(0)
    net = NoGradRegion()
    model = ts.training_model(net, ts.Options(), optimizer=ts.SGD(lr=0.1), example_inputs=classifier_inputs(0))
    assert any(t.op == "StopGradient" for t in model.graph.tensors())
    model.close()
    train_beside_torch(NoGradRegion(), lambda m: torch.optim.SGD(m.parameters(), lr=0.5), classifier_inputs)


def test_the_graph_builder_has_the_stop_gradient():
    g = ts.Graph(seed=1)
    x = g.input("x", "f32", [4, 3])
    a = g.linear(x, 3, "a")
    b = g.linear(g.stop_gradient(a), 2, "b")
    loss = g.mean(b)
    loss.name = "loss"
    model = ts.training_model(g, optimizer=ts.SGD(lr=0.5))
    before = g.tensor("a.weight").numpy()
    model(np.ones((4, 3), np.float32))
    assert np.array_equal(g.tensor("a.weight").numpy(), before)
    assert not np.array_equal(g.tensor("b.bias").numpy(), np.zeros(2, np.float32))


# ---- the optimizer's parameters and parameter groups

class Backbone(torch.nn.Module):
    """A small classifier: a backbone (frozen or slower) and a head."""

    def __init__(self):
        super().__init__()
        self.backbone = torch.nn.Sequential(torch.nn.Linear(6, 10), torch.nn.ReLU(), torch.nn.Linear(10, 8), torch.nn.ReLU())
        self.neck = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x, labels):
        return F.cross_entropy(self.head(F.relu(self.neck(self.backbone(x)))), labels)


def classifier_inputs(step):
    g = torch.Generator().manual_seed(200 + step)
    return torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g)


@pytest.mark.parametrize("kind", ["SGD", "Adam", "AdamW"])
def test_a_frozen_backbone_fine_tune_with_two_parameter_groups_matches_torch(kind):
    torch.manual_seed(1)
    net = Backbone()
    for p in net.backbone[0].parameters():
        p.requires_grad_(False)  # frozen; backbone[2] is only missing from the optimizer

    def optimizer(m):
        groups = [{"params": m.neck.parameters(), "lr": 0.02, "weight_decay": 0.05},
                  {"params": m.head.parameters()}]
        if kind == "SGD":
            groups[0]["momentum"] = 0.5
            return torch.optim.SGD(groups, lr=0.1, momentum=0.9, weight_decay=0.01)
        groups[0]["betas"] = (0.8, 0.99)
        return getattr(torch.optim, kind)(groups, lr=0.01, weight_decay=0.01)

    before = {n: p.detach().clone() for n, p in net.named_parameters()}
    train_beside_torch(net, optimizer, classifier_inputs)
    for n, p in net.named_parameters():
        assert torch.equal(p, before[n]) == n.startswith("backbone."), f"{n}: trained or not as PyTorch"


def test_a_frozen_parameter_gets_no_gradient_unless_asked():
    torch.manual_seed(1)
    net = Backbone()
    for p in net.backbone.parameters():
        p.requires_grad_(False)
    model = ts.training_model(net, ts.Options(), optimizer=ts.SGD(lr=0.1),
                              example_inputs=classifier_inputs(0))
    model.compile()
    names = set(model.get_tensor_names())
    assert "Gradient___neck.weight" in names
    assert not any(n.startswith("Gradient___backbone.") for n in names), sorted(names)
    assert not model.graph.tensor("backbone.0.weight").trainable
    assert model.graph.tensor("neck.weight").trainable


class ScaledByBuffer(torch.nn.Module):
    """A float buffer that forward multiplies by, as rotary embeddings use
    inv_freq: PyTorch never trains a buffer."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 3)
        self.register_buffer("scale", torch.linspace(0.5, 2.0, 6))

    def forward(self, x, labels):
        return F.cross_entropy(self.fc(x * self.scale), labels)


@pytest.mark.parametrize("kind", ["SGD", "AdamW"])
def test_a_buffer_used_in_forward_is_not_trained(kind):
    torch.manual_seed(1)
    net = ScaledByBuffer()
    scale = net.scale.clone()
    train_beside_torch(net, lambda m: getattr(torch.optim, kind)(m.parameters(), lr=0.1),
                       classifier_inputs)  # compares the buffer too
    assert torch.equal(net.scale, scale)


def test_an_optimizer_option_we_do_not_have_is_refused():
    net = Backbone()
    with pytest.raises(ValueError, match="amsgrad"):
        ts.training_model(net, ts.Options(), optimizer=torch.optim.Adam(net.parameters(), amsgrad=True),
                          example_inputs=classifier_inputs(0))
    with pytest.raises(TypeError, match="RMSprop"):
        ts.training_model(net, ts.Options(), optimizer=torch.optim.RMSprop(net.parameters()),
                          example_inputs=classifier_inputs(0))


@pytest.mark.parametrize("scheduler", ["StepLR", "CosineAnnealingLR", "LinearLR"])
def test_a_torch_lr_scheduler_scales_every_group_as_in_torch(scheduler):
    torch.manual_seed(2)
    net = Backbone()

    def optimizer(m):
        return torch.optim.SGD([{"params": m.backbone.parameters(), "lr": 0.02},
                                {"params": list(m.neck.parameters()) + list(m.head.parameters())}],
                               lr=0.1, momentum=0.9)

    def make(opt):
        if scheduler == "StepLR":
            return torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
        if scheduler == "LinearLR":  # a warmup of 4 steps
            return torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, end_factor=1.0, total_iters=3)
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=STEPS, eta_min=0.001)

    train_beside_torch(net, optimizer, classifier_inputs, make_scheduler=make)


def test_a_torch_lr_scheduler_we_do_not_have_is_refused():
    net = Backbone()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="ExponentialLR: tensorscope follows StepLR"):
        ts.training_model(net, ts.Options(), optimizer=opt, example_inputs=classifier_inputs(0),
                          lr_schedule=torch.optim.lr_scheduler.ExponentialLR(opt, 0.9))
    with pytest.raises(ValueError, match=r"LinearLR\(opt, 1 / 5, 1.0, 4\)"):
        ts.training_model(net, ts.Options(), optimizer=opt, example_inputs=classifier_inputs(0),
                          lr_schedule=torch.optim.lr_scheduler.LinearLR(opt, 0.5, 1.0, 4))


# ---- Embedding's padding_idx

class Tagger(torch.nn.Module):
    """Token embeddings with a padding row, a linear layer over them."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(12, 6, padding_idx=0)
        self.out = torch.nn.Linear(6, 4)

    def forward(self, tokens, labels):
        return F.cross_entropy(self.out(self.embed(tokens)).reshape(-1, 4), labels.reshape(-1))


def tagger_inputs(step):
    g = torch.Generator().manual_seed(300 + step)
    tokens = torch.randint(0, 12, (4, 5), generator=g)
    tokens[:, -2:] = 0  # padded
    return tokens, torch.randint(0, 4, (4, 5), generator=g)


@pytest.mark.parametrize("kind", ["SGD", "Adam"])
def test_the_padding_row_of_an_embedding_is_not_trained(kind):
    torch.manual_seed(3)
    net = Tagger()
    with torch.no_grad():
        net.embed.weight[0] = 0.5  # the padding row's value is the user's
    before = net.embed.weight.detach().clone()
    make = (lambda m: torch.optim.SGD(m.parameters(), lr=0.2, momentum=0.9)) if kind == "SGD" else (
        lambda m: torch.optim.Adam(m.parameters(), lr=0.02))
    train_beside_torch(net, make, tagger_inputs)
    assert torch.equal(net.embed.weight[0], before[0])
    assert not torch.equal(net.embed.weight[1:], before[1:])


# ---- losses, BatchNorm's settings, each module's train/eval mode

class Classifier(torch.nn.Module):
    def __init__(self, **loss):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 10)
        self.fc2 = torch.nn.Linear(10, 3)
        self.loss = loss

    def forward(self, x, labels):
        return F.cross_entropy(self.fc2(torch.tanh(self.fc1(x))), labels, **self.loss)


def ignoring(ignored):
    """Inputs whose labels are `ignored` at every third sample."""
    def inputs(step):
        x, labels = classifier_inputs(step)
        labels[::3] = ignored
        return x, labels
    return inputs


WEIGHT = [0.5, 2.0, 1.0]


@pytest.mark.parametrize("loss, ignored", [
    ({}, -100), ({"ignore_index": 2}, 2), ({"weight": WEIGHT}, None), ({"weight": WEIGHT}, -100),
    ({"label_smoothing": 0.1}, None), ({"label_smoothing": 0.2, "weight": WEIGHT, "ignore_index": 2}, 2),
    ({"label_smoothing": 0.2, "ignore_index": 2}, 2)],
    ids=["ignore_index=-100", "ignore_index=2", "weight", "weight+ignored", "label_smoothing",
         "label_smoothing+weight+ignored", "label_smoothing+ignored"])
def test_cross_entropy_settings_train_as_in_torch(loss, ignored):
    torch.manual_seed(4)
    if "weight" in loss:
        loss = dict(loss, weight=torch.tensor(loss["weight"]))
    make_inputs = classifier_inputs if ignored is None else ignoring(ignored)
    train_beside_torch(Classifier(**loss), lambda m: torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
                       make_inputs)


class Normed(torch.nn.Module):
    """BatchNorm with its own momentum and eps, beside one held in eval
    mode and a Dropout in eval mode while the rest trains."""

    def __init__(self, eval_parts=False):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 10)
        self.bn = torch.nn.BatchNorm1d(10, momentum=0.3, eps=1e-3)
        self.fc2 = torch.nn.Linear(10, 10)
        self.bn_frozen = torch.nn.BatchNorm1d(10)
        self.drop = torch.nn.Dropout(0.5)
        self.head = torch.nn.Linear(10, 3)
        if eval_parts:
            with torch.no_grad():
                self.bn_frozen.running_mean.uniform_(-0.5, 0.5)
                self.bn_frozen.running_var.uniform_(0.5, 2.0)
            self.bn_frozen.eval()
            self.drop.eval()

    def forward(self, x, labels):
        h = self.bn(torch.relu(self.fc1(x)))
        h = self.drop(self.bn_frozen(self.fc2(h)))
        return F.cross_entropy(self.head(h), labels)


def test_batch_norm_momentum_and_eps_train_as_in_torch():
    torch.manual_seed(5)
    net = Normed()
    net.drop.p = 0.0  # masks differ from PyTorch's
    train_beside_torch(net, lambda m: torch.optim.SGD(m.parameters(), lr=0.1), classifier_inputs)


def test_each_module_trains_in_its_own_mode():
    torch.manual_seed(6)
    net = Normed(eval_parts=True)
    running = net.bn_frozen.running_mean.clone()
    train_beside_torch(net, lambda m: torch.optim.SGD(m.parameters(), lr=0.1), classifier_inputs)
    assert torch.equal(net.bn_frozen.running_mean, running)  # eval: its statistics used, not updated
    assert net.bn.training and not net.bn_frozen.training and not net.drop.training


# ---- what cannot be carried is refused, never approximated

def test_a_hook_on_a_module_is_refused_naming_it():
    net = Backbone()
    handle = net.neck.register_forward_hook(lambda m, i, o: o * 2)
    with pytest.raises(ts.UnsupportedError, match="module 'neck' has a forward hook .*remove it"):
        ts.training_model(net, ts.Options(), optimizer=ts.SGD(lr=0.1), example_inputs=classifier_inputs(0))
    handle.remove()
    handle = net.head.weight.register_hook(lambda g: g * 0)
    with pytest.raises(ts.UnsupportedError, match="parameter 'head.weight' has a gradient hook"):
        ts.training_model(net, ts.Options(), optimizer=ts.SGD(lr=0.1), example_inputs=classifier_inputs(0))
    handle.remove()
    ts.training_model(net, ts.Options(), optimizer=ts.SGD(lr=0.1), example_inputs=classifier_inputs(0))


class Branches(torch.nn.Module):
    """forward takes a branch by the data: the capture would keep one."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 3)
        self.gate = Gate()

    def forward(self, x, labels):
        return F.cross_entropy(self.gate(self.fc(x)), labels)


class Gate(torch.nn.Module):
    def forward(self, h):
        if h.sum() > 0:  # data-dependent
            return h * 2
        return h


def test_data_dependent_control_flow_is_refused_naming_the_module_and_line():
    with pytest.raises(ts.UnsupportedError, match=r"module 'gate', forward at .*test_torch_semantics.py:\d+: "
                                                  r"data-dependent control flow.*torch.where"):
        ts.training_model(Branches(), ts.Options(), optimizer=ts.SGD(lr=0.1), example_inputs=classifier_inputs(0))


def test_dropout_says_once_that_its_masks_differ(monkeypatch):
    monkeypatch.setattr(ts._torch, "_told_dropout", False)
    lines = []
    ts.set_log_level(3)
    ts.set_log_callback(lambda level, message: lines.append((level, message)))
    try:
        for _ in range(2):
            ts.training_model(Normed(), ts.Options(), optimizer=ts.SGD(lr=0.1), example_inputs=classifier_inputs(0))
    finally:
        ts.set_log_callback(None)
    told = [m for level, m in lines if "Dropout" in m]
    assert len(told) == 1 and "p=0" in told[0] and "eval()" in told[0], lines
    assert any(f"captured through {CAPTURES[CAPTURE]}" in m for _, m in lines)


# ---- hygiene: a capture prints nothing, and its program can be saved

def test_a_capture_prints_nothing(capfd):
    ts.training_model(GanDiscriminatorStep(), ts.Options(), optimizer=ts.SGD(lr=0.1), example_inputs=gan_inputs(0))
    ts.training_model(Normed(), ts.Options(), optimizer=ts.SGD(lr=0.1), example_inputs=classifier_inputs(0))
    out, err = capfd.readouterr()
    assert out == "" and err == "", (out[:2000], err[:2000])


def test_the_captured_program_can_be_saved(tmp_path):
    torch.manual_seed(7)
    net = Normed()
    with torch.no_grad():
        net.bn.running_mean.uniform_(-1, 1)
    running = net.bn.running_mean.clone()
    model = ts.training_model(net, ts.Options(), optimizer=ts.SGD(lr=0.1), example_inputs=classifier_inputs(0))
    model(*[t.numpy() for t in classifier_inputs(1)])  # training does not change the saved program
    name = "net.onnx" if CAPTURE == "onnx" else "net.pt2"  # the ONNX file, or the ExportedProgram
    path = model.save_program(tmp_path / name)
    assert torch.equal(net.bn.running_mean, running)  # wrapping left the module as it was
    if CAPTURE == "onnx":
        state = ts.Graph.from_onnx(path, {"x": [8, 6], "labels": [8]}).state_dict()
    else:
        state = {k: v.detach().numpy() for k, v in torch.export.load(path).state_dict.items()}
    np.testing.assert_array_equal(state["bn.running_mean"], running.numpy())  # not moved by the trace
    np.testing.assert_array_equal(state["fc1.weight"], net.fc1.weight.detach().numpy())
    assert [p for p in tmp_path.iterdir()] == [tmp_path / name]  # nothing half-written beside it
