"""Checkpoints from Python in the CLI's .tsck format: a run stopped and
resumed writes the weights of a run never stopped, whether the CLI or
Python wrote the checkpoint and whichever resumes it (the CLI binary of
the build: TS_BUILD_DIR, as ctest sets it)."""
import os
import subprocess

import numpy as np
import pytest

import tensorscope as ts

B, N, EPOCHS, LR, WARMUP, SEED = 8, 64, 2, 0.05, 2, 3
RUNS_PER_EPOCH = N // B
TOTAL, STOP = EPOCHS * RUNS_PER_EPOCH, 11  # STOP: past the first epoch's end
PARAMS = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"]


def cli():
    build = os.environ.get("TS_BUILD_DIR")
    exe = os.path.join(build or "", "tensorscope")
    if not build or not os.path.exists(exe):
        pytest.skip("TS_BUILD_DIR has no tensorscope CLI (run through ctest)")
    return exe


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, 1, 28, 28)).astype(np.float32)
    labels = rng.integers(0, 10, N).astype(np.int32)
    d = tmp_path / "data"
    d.mkdir()
    np.save(d / "x.npy", x)
    np.save(d / "labels.npy", labels)
    return str(d), x, labels


def train_cli(data_dir, *flags):
    """`tensorscope train` of the built-in mlp: SGD with momentum, cosine
    schedule after a warmup, one thread."""
    p = subprocess.run([cli(), "train", "--model", "mlp", "--data", data_dir, "--holdout", "0",
                        "--batch-size", str(B), "--epochs", str(EPOCHS), "--lr", str(LR),
                        "--momentum", "0.9", "--lr-schedule", "cosine", "--warmup-steps",
                        str(WARMUP), "--seed", str(SEED), "--threads", "1", "--quiet", *flags],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def python_mlp(x, labels, device="cpu"):
    """The CLI's mlp (tools/models.c) built in Python, trained as the CLI
    trains it: same names, seed, optimizer, schedule and data loader (on
    `device`, as `--device`)."""
    g = ts.Graph(seed=SEED)
    xt = g.input("x", "f32", [B, 1, 28, 28])
    lt = g.input("labels", "i32", [B])
    h = g.relu(g.linear(g.flatten(xt, 1), 320, "fc1"))
    h = g.relu(g.linear(h, 100, "fc2"))
    loss = g.nll_loss(g.log_softmax(g.linear(h, 10, "fc3"), 1), lt)
    loss.name = "loss"
    schedule = ts.LRSchedule("cosine", warmup_steps=WARMUP, total_steps=TOTAL - WARMUP)
    model = ts.training_model(g, ts.Options().threads(1).device(device), optimizer=ts.SGD(LR, momentum=0.9),
                              lr_schedule=schedule)
    loader = ts.DataLoader(ts.Dataset.from_arrays(x, labels), batch_size=B, shuffle=True,
                           seed=SEED)  # drop_last=False, as the CLI without --drop-last
    return g, model, loader


def train_python(model, loader, until):
    """Runs until the model has made `until` runs, epoch after epoch."""
    while model.runs < until:
        for xs, ys in loader:
            model(xs, ys)
            if model.runs == until:
                return


def assert_weights(g, weights_dir):
    for name in PARAMS:
        np.testing.assert_allclose(g.tensor(name).numpy(),
                                   np.load(os.path.join(weights_dir, name + ".npy")),
                                   rtol=1e-6, atol=1e-7, err_msg=name)


def test_python_resumes_a_cli_checkpoint(tmp_path, data):
    data_dir, x, labels = data
    train_cli(data_dir, "--max-steps", str(STOP), "--save-weights", str(tmp_path / "straight"))
    train_cli(data_dir, "--max-steps", "5", "--checkpoint-dir", str(tmp_path / "ck"))
    g, model, loader = python_mlp(x, labels)
    model.load_checkpoint(tmp_path / "ck", loader)  # DIR: DIR/checkpoint.tsck, as --resume DIR
    assert (model.runs, model.steps) == (5, 5)
    train_python(model, loader, STOP)
    assert_weights(g, tmp_path / "straight")


def test_the_cli_resumes_a_python_checkpoint(tmp_path, data):
    data_dir, x, labels = data
    train_cli(data_dir, "--max-steps", str(STOP), "--save-weights", str(tmp_path / "straight"))
    g, model, loader = python_mlp(x, labels)
    train_python(model, loader, 5)
    (tmp_path / "ck").mkdir()
    written = model.save_checkpoint(tmp_path / "ck", loader)
    assert written == str(tmp_path / "ck" / "checkpoint.tsck")
    train_cli(data_dir, "--max-steps", str(STOP), "--resume", str(tmp_path / "ck"),
              "--save-weights", str(tmp_path / "resumed"))
    for name in PARAMS:
        np.testing.assert_allclose(np.load(tmp_path / "resumed" / (name + ".npy")),
                                   np.load(tmp_path / "straight" / (name + ".npy")),
                                   rtol=1e-6, atol=1e-7, err_msg=name)


def test_python_resumes_its_own_checkpoint_exactly(tmp_path, data):
    _, x, labels = data
    g, model, loader = python_mlp(x, labels)
    train_python(model, loader, STOP)
    straight = {n: g.tensor(n).numpy() for n in PARAMS}
    g, model, loader = python_mlp(x, labels)
    train_python(model, loader, 5)
    path = model.save_checkpoint(tmp_path / "state.tsck", loader)
    g, model, loader = python_mlp(x, labels)
    model.load_checkpoint(path, loader)
    train_python(model, loader, STOP)
    for n in PARAMS:
        np.testing.assert_array_equal(g.tensor(n).numpy(), straight[n], err_msg=n)


def test_a_checkpoint_that_does_not_fit_changes_nothing(tmp_path, data):
    _, x, labels = data
    g, model, loader = python_mlp(x, labels)
    train_python(model, loader, 2)
    path = model.save_checkpoint(tmp_path / "state.tsck", loader)
    g, model, loader = python_mlp(x, labels)
    model.base_lr = 0.5  # another base rate: another schedule
    w0 = g.tensor("fc1.weight").numpy()
    with pytest.raises(ts.InvalidArgumentError, match="resume with the same learning rate"):
        model.load_checkpoint(path, loader)
    np.testing.assert_array_equal(g.tensor("fc1.weight").numpy(), w0)
    assert model.steps == 0
    with pytest.raises(ts.FileError):
        model.load_checkpoint(tmp_path / "missing.tsck")
