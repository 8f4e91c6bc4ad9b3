"""Every output mode's shape and values (docs/architecture.md#output-modes), checked against
each other and against NumPy computing the same gradients and updates."""
import numpy as np
import pytest

import tensorscope as ts
from conftest import batches, small_mlp

D, A, B, C = 2, 2, 4, 3
LR = 0.1


def softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.fixture
def run():
    g = small_mlp(batch=B, classes=C)
    opts = (ts.Options().device_iterations(D).gradient_accumulation(A)
            .anchor_tensor("g_all", "Gradient___fc2.bias", "all")
            .anchor_tensor("g_final", "Gradient___fc2.bias", ts.OutputMode.Final)
            .anchor_tensor("g_sum", "Gradient___fc2.bias", "sum")
            .anchor_tensor("g_every", "Gradient___fc2.bias", "every_n", 2)
            .anchor_tensor("g_default", "Gradient___fc2.bias")
            .anchor_tensor("acc_all", "Accum___fc2.bias", "all")
            .anchor_tensor("upd_all", "UpdatedVar___fc2.bias", "all")
            .anchor_tensor("logits", "fc2/Add:0", "all")
            .anchor_tensor("loss_all", "loss", "all"))
    model = ts.training_model(g, opts, optimizer=ts.SGD(lr=LR))
    model.compile()
    bias0 = g.tensor("fc2.bias").numpy()
    x, y = batches(D * A, batch=B, classes=C)
    loss = model(x, y)
    return model, g, bias0, x, y, loss


def test_shapes_per_mode(run):
    model, *_ = run
    S = D * A  # per micro-batch; per step: D
    assert model.get_anchored_tensor("g_all").shape == (S, C)
    assert model.get_anchored_tensor("g_final").shape == (C,)
    assert model.get_anchored_tensor("g_sum").shape == (C,)
    assert model.get_anchored_tensor("g_every").shape == (S // 2, C)
    assert model.get_anchored_tensor("g_default").shape == (C,)  # training: FINAL
    assert model.get_anchored_tensor("acc_all").shape == (D, C)
    assert model.get_anchored_tensor("upd_all").shape == (D, C)
    assert model.get_anchored_tensor("logits").shape == (S, B, C)
    assert model.get_anchored_tensor("loss").shape == ()
    assert model.get_anchored_tensor("g_all").dtype == np.float32


def test_modes_select_and_sum_the_samples(run):
    model, *_ = run
    g_all = model.get_anchored_tensor("g_all")
    np.testing.assert_array_equal(model.get_anchored_tensor("g_final"), g_all[-1])
    np.testing.assert_array_equal(model.get_anchored_tensor("g_default"), g_all[-1])
    np.testing.assert_array_equal(model.get_anchored_tensor("g_every"), g_all[1::2])
    np.testing.assert_allclose(model.get_anchored_tensor("g_sum"), g_all.sum(0), rtol=1e-5,
                               atol=1e-7)


def test_values_against_numpy(run):
    model, g, bias0, x, y, loss = run
    logits = model.get_anchored_tensor("logits").astype(np.float64)  # [S,B,C]
    onehot = np.eye(C)[y.reshape(D * A, B)]
    # d mean_b(-log softmax(z)[y]) / d bias = mean_b(softmax(z) - onehot)
    expected_grad = (softmax(logits) - onehot).mean(axis=1)
    g_all = model.get_anchored_tensor("g_all")
    np.testing.assert_allclose(g_all, expected_grad, rtol=1e-4, atol=1e-6)
    # Accum___: the mean over the A micro-batches of each step
    acc = model.get_anchored_tensor("acc_all")
    np.testing.assert_allclose(acc, g_all.reshape(D, A, C).mean(axis=1), rtol=1e-5, atol=1e-7)
    # UpdatedVar___: plain SGD, one step per accumulated gradient
    upd = model.get_anchored_tensor("upd_all")
    np.testing.assert_allclose(upd[0], bias0 - LR * acc[0], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(upd[1], upd[0] - LR * acc[1], rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(g.tensor("fc2.bias").numpy(), upd[-1])
    # the loss of each micro-batch, and the returned loss is the last one (FINAL)
    logp = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    expected_loss = -(logp * onehot).sum(-1).mean(-1)
    np.testing.assert_allclose(model.get_anchored_tensor("loss_all"), expected_loss, rtol=1e-5)
    assert loss == pytest.approx(expected_loss[-1], rel=1e-5)


def test_global_output_mode_applies_to_anchors_without_their_own():
    g = small_mlp()
    opts = ts.Options().device_iterations(3).output_mode("sum")
    opts.anchor_tensor("own", "Gradient___fc1.bias", "all")
    opts.anchor_tensor("global", "Gradient___fc1.bias")
    model = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.01))
    model.compile()
    loss = model(*batches(3))
    own = model.get_anchored_tensor("own")
    assert own.shape == (3, 5)
    np.testing.assert_allclose(model.get_anchored_tensor("global"), own.sum(0), rtol=1e-5,
                               atol=1e-7)
    assert np.shape(loss) == ()  # the loss, anchored under the global mode too: a sum of 3


def test_every_n_must_divide_the_samples():
    g = small_mlp()
    opts = ts.Options().device_iterations(3).anchor_tensor("e", "Gradient___fc1.bias",
                                                            "every_n", 2)
    model = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.01))
    with pytest.raises(ts.TensorscopeError, match="2"):
        model.compile()
        model(*batches(3))


def test_inference_returns_every_batch_and_matches_numpy():
    g = small_mlp()
    params = g.state_dict()
    model = ts.inference_model(g, ts.Options().device_iterations(2),
                               outputs=["LogSoftmax:0"])
    model.compile()
    x, _ = batches(2)
    out = model(x=x)
    assert out.shape == (8, 3)  # PopTorch's: both micro-batches' samples on axis 0
    assert model.get_anchored_tensor("LogSoftmax:0").shape == (2, 4, 3)  # the anchor: ALL
    h = np.maximum(x @ params["fc1.weight"].T + params["fc1.bias"], 0)
    z = h @ params["fc2.weight"].T + params["fc2.bias"]
    expected = z - np.log(np.exp(z).sum(-1, keepdims=True))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode,shape", [("all", (4, 3)), ("final", (4, 3)), ("sum", (4, 3))])
def test_one_batch_of_inference_has_no_extra_axis(mode, shape):
    g = small_mlp()
    model = ts.inference_model(g, ts.Options().output_mode(mode), outputs=["LogSoftmax:0"])
    x, _ = batches(1)
    out = model(x)
    assert out.shape == shape
    assert np.exp(out).sum(-1) == pytest.approx(1, rel=1e-5)  # each row: probabilities


def test_inference_of_a_scalar_output_gives_one_value_per_batch():
    g = small_mlp()
    model = ts.inference_model(g, ts.Options().device_iterations(3), outputs=["loss"])
    x, y = batches(3)
    out = model(x, y)
    assert out.shape == (3,)
    assert np.isfinite(out).all() and len(set(out.tolist())) == 3


def test_anchor_after_compile_recompiles_and_returns_it():
    g = small_mlp()
    model = ts.training_model(g, ts.Options(), optimizer=ts.SGD(lr=0.01))
    model.compile()
    names = model.get_tensor_names()
    assert names == sorted(names)
    for n in ["x", "labels", "loss", "fc1.weight", "fc1/MatMul:0", "Relu:0",
              "Gradient___fc1.weight", "Accum___fc2.bias", "UpdatedVar___fc2.bias"]:
        assert n in names
    model.anchor_tensor("r", "Relu:0", "final")
    model(*batches(1))
    assert model.get_anchored_tensor("r").shape == (4, 5)
    assert "r" in model.anchors()
