"""Choosing the device: Options().device names it ("cpu", "cuda",
"cuda:N"); a name tensorscope does not know is a ValueError at once; a
device this build or machine lacks fails when the model is made, saying
which. With a GPU, training there gives the CPU's weights (1e-4) and the
anchors and watches read the same.

What the CLI's `train --device` tests check (tests/test_cli_device.sh,
test_cli_tensorboard.sh, test_trace_device.c), from Python, on each device
of DEVICES: "cpu-staged" (the CPU's kernels, its memory treated as a
GPU's: the device path, bit for bit) on every machine, "cuda" where there
is a GPU (skipped, saying why, where there is none): the weights and the
anchors of every output mode, the CLI's own training from Python, a
checkpoint saved there and resumed on the device and on the CPU, the
metrics (runs recorded and replayed, summaries taken on the device, its
memory), and the timeline's kernel track."""
import json
import re

import numpy as np
import pytest

import tensorscope as ts

B = 16


def model(device, seed=5):
    g = ts.Graph(seed=seed)
    x = g.input("x", "f32", [B, 12])
    labels = g.input("labels", "i32", [B])
    h = g.relu(g.linear(x, 24, "fc1"))
    loss = g.cross_entropy(g.linear(h, 5, "fc2"), labels)
    loss.name = "loss"
    opts = ts.Options().device(device).anchor_tensor("l", "loss", "sum").device_iterations(2)
    return g, ts.training_model(g, opts, optimizer=ts.Adam(lr=1e-2))


def data():
    rng = np.random.default_rng(1)
    return rng.standard_normal((2 * B, 12)).astype(np.float32), rng.integers(0, 5, 2 * B).astype(np.int32)


def gpu_or_skip():
    try:
        ts.check_device("cuda")
    except ts.UnsupportedError as e:
        pytest.skip(str(e))


def test_describe_device():
    """describe_device: the CPU in one line; a GPU's name, compute capability
    and memory, or the error check_device raises; describe_gpus: every GPU,
    or one line saying why there is none."""
    assert re.fullmatch(r"cpu: [1-9]\d* threads, [\d.]+ GiB memory", ts.describe_device("cpu"))
    with pytest.raises(ValueError, match="cuda:N"):
        ts.describe_device("cuda:x")
    gpus = ts.describe_gpus()
    try:
        ts.check_device("cuda")
    except ts.UnsupportedError as e:
        with pytest.raises(ts.UnsupportedError) as d:
            ts.describe_device("cuda")
        assert str(d.value) == str(e)
        why = "built with CUDA" if not ts.has_feature("cuda") else "no usable GPU here"
        assert len(gpus) == 1 and why in gpus[0] and why in str(e), gpus
        return
    line = ts.describe_device("cuda:0")
    assert re.match(r"cuda:0: .+, sm_\d+, [\d.]+ GiB", line), line
    assert gpus[0].startswith(line.split(", sm_")[0] + ", sm_"), (gpus, line)


@pytest.mark.parametrize("name", ["tpu", "cuda:", "cuda:x", "gpu:0", ""])
def test_unknown_device_names_the_choices(name):
    with pytest.raises(ValueError, match="cpu, cuda and cuda:N"):
        ts.Options().device(name)


def test_cpu_is_the_default_and_trains():
    g, m = model("cpu")
    xs, ys = data()
    m(x=xs, labels=ys)
    assert np.isfinite(m.get_anchored_tensor("l")).all()


def test_check_device():
    ts.check_device("cpu")
    with pytest.raises(ValueError, match="cuda:N"):
        ts.check_device("cuda:x")
    if not ts.has_feature("cuda"):
        with pytest.raises(ts.UnsupportedError, match="built with CUDA"):
            ts.check_device("cuda")


def test_missing_device_says_which():
    if ts.has_feature("cuda"):
        try:
            model("cuda:1023")
        except ts.UnsupportedError as e:
            assert "cuda:1023" in str(e)
        else:
            pytest.fail("cuda:1023 made a model")
    else:
        with pytest.raises(ts.UnsupportedError, match="built with CUDA"):
            model("cuda")


def test_cuda_trains_as_the_cpu():
    gpu_or_skip()
    xs, ys = data()
    gc, mc = model("cpu")
    gg, mg = model("cuda")
    for _ in range(5):
        mc(x=xs, labels=ys)
        mg(x=xs, labels=ys)
    for name in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"):
        a, b = gc.tensor(name).numpy(), gg.tensor(name).numpy()
        assert np.abs(a - b).max() <= 1e-4 * (np.abs(a).max() + 1e-6), name
    assert np.allclose(mc.get_anchored_tensor("l"), mg.get_anchored_tensor("l"), rtol=1e-4)


def test_device_watches_and_outfeeds_as_the_cpu():
    """On a device's path a watch's stats, histograms and range counts are
    taken there and the outfeed's records captured there (pushed after the
    run, in the order they were made) with the print op's lines: what the CPU gives, bit for bit on
    cpu-staged (the CPU's kernels, its memory treated as a GPU's), to float
    tolerance on a GPU where there is one."""
    xs, ys = data()
    devices = ["cpu-staged"] + (["cuda"] if ts.has_feature("cuda") and _gpu_here() else [])
    seen = {}
    for dev in ["cpu"] + devices:
        g = ts.Graph(seed=5)
        x = g.input("x", "f32", [B, 12])
        labels = g.input("labels", "i32", [B])
        h = g.relu(g.linear(x, 24, "fc1"))
        loss = g.cross_entropy(ts.print_tensor(g.linear(h, 5, "fc2"), "scores"), labels)
        loss.name = "loss"
        q = ts.OutfeedQueue("grads", depth=4096)
        opts = (ts.Options().device(dev).device_iterations(2).watch("Gradient___fc*", "stats|histogram|range")
                .outfeed(q, pre_accumulated=True))
        m = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.1, momentum=0.9))
        lines = []
        ts.set_log_callback(lambda level, message: lines.append(message))
        try:
            for _ in range(3):
                m(x=xs, labels=ys)
        finally:
            ts.set_log_callback(None)
        recs = [(r.run, r.sample, r.key, np.array(r.array)) for r in q]
        seen[dev] = (m.watches(), recs, [s for s in lines if s.startswith("scores")])
    want_w, want_r, want_p = seen["cpu"]
    assert len(want_p) == 3 * 2 * 2 and want_p[1].startswith("scores_gradient"), want_p[:2]
    for dev in devices:
        w, r, p = seen[dev]
        # the print op's lines, in their order (a device's recorded run logs them after it)
        assert [s.split(":")[0] for s in p] == [s.split(":")[0] for s in want_p], dev
        if dev == "cpu-staged":
            assert p == want_p
        exact = dev == "cpu-staged"
        assert sorted(w) == sorted(want_w) and len(w) >= 4, dev
        for name, s in w.items():
            t = want_w[name]
            assert s["count"] == t["count"] and s["nans"] == t["nans"], (dev, name)
            if exact:
                assert s["std"] == t["std"] and np.array_equal(s["tb_counts"], t["tb_counts"]), (dev, name)
                assert np.array_equal(s["log2_counts"], t["log2_counts"]) and s["range"] == t["range"], (dev, name)
            else:
                assert abs(s["std"] - t["std"]) <= 1e-4 * t["std"] + 1e-9, (dev, name)
                assert s["tb_counts"].sum() == t["tb_counts"].sum(), (dev, name)
        assert [k[:3] for k in r] == [k[:3] for k in want_r] and len(r) == 3 * 2 * 4, dev
        for a, b in zip(r, want_r):
            assert np.array_equal(a[3], b[3]) if exact else np.allclose(a[3], b[3], rtol=1e-4, atol=1e-6), (dev, a[2])


def test_allow_tf32():
    """Options().allow_tf32(): the CPU computes in float32 either way; a
    GPU's products stay within TF32's rounding of float32's."""
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((64, 512)).astype(np.float32)
    devices = ["cpu"] + (["cuda"] if ts.has_feature("cuda") and _gpu_here() else [])
    for dev in devices:
        out = []
        for allow in (False, True):
            g = ts.Graph(seed=9)
            x = g.input("x", "f32", [64, 512])
            y = g.linear(x, 64, "fc")
            y.name = "y"
            m = ts.inference_model(g, ts.Options().device(dev).allow_tf32(allow), outputs=[y])
            out.append(np.array(m(x=xs)))
        rel = np.abs(out[0] - out[1]).max() / np.abs(out[0]).max()
        assert rel == 0 if dev == "cpu" else rel <= 1e-2, (dev, rel)
    assert "allow_tf32=True" in repr(ts.Options().allow_tf32())


def _gpu_here():
    try:
        ts.check_device("cuda")
        return True
    except ts.UnsupportedError:
        return False


DEVICES = ["cpu-staged", "cuda"]


def device_or_skip(dev):
    if dev == "cuda":
        gpu_or_skip()


def same(dev, a, b, rtol=1e-4):
    """Bit for bit on cpu-staged; within rtol of the largest value on a GPU."""
    a, b = np.asarray(a), np.asarray(b)
    if dev == "cpu-staged":
        return a.shape == b.shape and np.array_equal(a, b)
    return a.shape == b.shape and np.abs(a - b).max() <= rtol * (np.abs(b).max() + 1e-6)


def anchored_model(device, optimizer):
    g = ts.Graph(seed=5)
    x = g.input("x", "f32", [B, 12])
    labels = g.input("labels", "i32", [B])
    h = g.relu(g.linear(x, 24, "fc1"))
    h.name = "hidden"
    loss = g.cross_entropy(g.linear(h, 5, "fc2"), labels)
    loss.name = "loss"
    opts = (ts.Options().device(device).device_iterations(2).gradient_accumulation(2)
            .anchor_tensor("loss_sum", "loss", "sum").anchor_tensor("hidden_all", "hidden", "all")
            .anchor_tensor("grad_final", "Gradient___fc2.weight", "final").anchor_tensor("w", "fc1.weight"))
    return g, ts.training_model(g, opts, optimizer=optimizer)


def run_data(runs=1):
    rng = np.random.default_rng(7)
    return [(rng.standard_normal((4 * B, 12)).astype(np.float32), rng.integers(0, 5, 4 * B).astype(np.int32))
            for _ in range(runs)]


@pytest.mark.parametrize("dev", DEVICES)
def test_trains_and_anchors_as_the_cpu(dev):
    """D = 2, A = 2, momentum: the weights after 4 runs and every anchor
    after each run (sum, all, final, a parameter) are the CPU's."""
    device_or_skip(dev)
    gc, mc = anchored_model("cpu", ts.SGD(lr=0.1, momentum=0.9))
    gd, md = anchored_model(dev, ts.SGD(lr=0.1, momentum=0.9))
    for xs, ys in run_data(4):
        mc(x=xs, labels=ys)
        md(x=xs, labels=ys)
        for a in ("loss_sum", "hidden_all", "grad_final", "w"):
            want, got = mc.get_anchored_tensor(a), md.get_anchored_tensor(a)
            assert same(dev, got, want), (dev, a)
    assert md.get_anchored_tensor("hidden_all").shape == (4, B, 24)
    for name in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"):
        assert same(dev, gd.tensor(name).numpy(), gc.tensor(name).numpy()), (dev, name)


@pytest.mark.parametrize("dev", DEVICES)
def test_checkpoint_on_the_device(dev, tmp_path):
    """Adam's moments live on the device between runs: a checkpoint saved
    there after 2 runs, loaded into a new model on the device and into one
    on the CPU, trains on as the CPU that never stopped."""
    device_or_skip(dev)
    data = run_data(4)
    gc, mc = anchored_model("cpu", ts.Adam(lr=1e-2))
    for xs, ys in data:
        mc(x=xs, labels=ys)
    gd, md = anchored_model(dev, ts.Adam(lr=1e-2))
    for xs, ys in data[:2]:
        md(x=xs, labels=ys)
    path = md.save_checkpoint(tmp_path / "half")
    md.close()
    for where in (dev, "cpu"):
        gr, mr = anchored_model(where, ts.Adam(lr=1e-2))
        mr.load_checkpoint(path)
        for xs, ys in data[2:]:
            mr(x=xs, labels=ys)
        assert mr.steps == mc.steps == 8, (where, mr.steps)
        for name in ("fc1.weight", "fc2.weight", "fc2.bias"):
            assert same(dev, gr.tensor(name).numpy(), gc.tensor(name).numpy()), (dev, where, name)


def counters(report):
    return {k: int(v) for k, v in re.findall(r"^Counter: (\S+)\n +Value: (\d+)", report, re.M)}


@pytest.mark.parametrize("dev", DEVICES)
def test_metrics_and_memory_on_the_device(dev):
    """What --metrics says of a device: the runs recorded once and
    replayed, none launched call by call, the watches' summaries taken on
    the device, its memory after each run; memory() has the device's
    figures (a model on the CPU: none)."""
    device_or_skip(dev)
    g = ts.Graph(seed=5)
    x = g.input("x", "f32", [B, 12])
    labels = g.input("labels", "i32", [B])
    loss = g.cross_entropy(g.linear(g.relu(g.linear(x, 24, "fc1")), 5, "fc2"), labels)
    loss.name = "loss"
    opts = ts.Options().device(dev).device_iterations(2).watch("Gradient___fc*", "stats|histogram|range")
    m = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.1))
    ts.metrics_reset()
    xs, ys = data()
    for _ in range(5):  # the first run of each kind recorded (the first two differ), the rest replayed
        m(x=xs, labels=ys)
    report = m.metrics_report()
    c = counters(report)
    assert c.get("GraphCaptures", 0) >= 1 and c.get("GraphReplays", 0) >= 2, c
    assert "StepsNotRecorded" not in c, c
    assert c.get("SummaryTensors", 0) >= 4, c
    for metric in ("DeviceMemoryInUseBytes", "DeviceMemoryPeakBytes", "DeviceTime.Run"):
        assert f"Metric: {metric}\n" in report, metric
    mem = m.memory()
    assert 0 < mem["device_in_use"] <= mem["device_peak"] and mem["device_total"] > 0, mem
    held = mem["parameters"] + mem["gradients"] + mem["activations"]
    assert mem["device_in_use"] >= held, (mem["device_in_use"], held)
    assert re.search(rf" {re.escape(dev.split(':')[0])}\S* [\d.]+\w+ \(peak [\d.]+\w+, free ", m.memory_line()), m.memory_line()
    mc = ts.training_model(g, ts.Options(), optimizer=ts.SGD(lr=0.1))
    mc(x=xs[:B], labels=ys[:B])
    assert mc.memory()["device_total"] == 0 and "peak" not in mc.memory_line()


@pytest.mark.parametrize("dev", DEVICES)
def test_trace_has_the_kernels_track(dev, tmp_path):
    """Options().trace on a device: its kernels on a track of their own,
    one slice per op slice of each traced step (same tensor, pass and
    micro-batch) and one for the optimizer's step."""
    device_or_skip(dev)
    path = tmp_path / "run.json"
    g = ts.Graph(seed=5)
    x = g.input("x", "f32", [B, 12])
    labels = g.input("labels", "i32", [B])
    loss = g.cross_entropy(g.linear(g.relu(g.linear(x, 24, "fc1")), 5, "fc2"), labels)
    loss.name = "loss"
    m = ts.training_model(g, ts.Options().device(dev).trace(str(path), "2:2"), optimizer=ts.SGD(lr=0.1))
    xs, ys = data()
    for _ in range(3):
        m(x=xs[:B], labels=ys[:B])
    events = json.load(open(path))["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    want = "kernels (cuda:0)" if dev == "cuda" else f"kernels ({dev})"
    assert want in names.values(), names
    tid = [t for t, n in names.items() if n == want][0]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert kernels and all(e["tid"] == tid for e in kernels)
    ops = sorted((e["name"], e["cat"], e["args"]["micro_batch"]) for e in events
                 if e.get("cat") in ("forward", "backward") and "op" in e.get("args", {}))
    got = sorted((e["name"], e["args"]["pass"], e["args"]["micro_batch"]) for e in kernels if e["args"]["pass"] != "optimizer")
    assert ops and got == ops, (got, ops)
    assert [e["name"] for e in kernels if e["args"]["pass"] == "optimizer"] == ["optimizer"]


@pytest.mark.parametrize("dev", DEVICES)
def test_python_trains_as_the_cli(dev, tmp_path):
    """Options().device(DEV) trains what `tensorscope train --device DEV`
    trains: the CLI's mlp with its data loader, momentum and schedule
    (test_checkpoint.py's python_mlp), 5 steps, the same weights (bit for
    bit on cpu-staged)."""
    device_or_skip(dev)
    import test_checkpoint as tc
    rng = np.random.default_rng(0)
    x = rng.standard_normal((tc.N, 1, 28, 28)).astype(np.float32)
    labels = rng.integers(0, 10, tc.N).astype(np.int32)
    d = tmp_path / "data"
    d.mkdir()
    np.save(d / "x.npy", x)
    np.save(d / "labels.npy", labels)
    tc.train_cli(str(d), "--device", dev, "--max-steps", "5", "--save-weights", str(tmp_path / "cli"))
    g, model, loader = tc.python_mlp(x, labels, device=dev)
    tc.train_python(model, loader, 5)
    assert model.steps == 5
    for name in tc.PARAMS:
        want = np.load(tmp_path / "cli" / (name + ".npy"))
        assert same(dev, g.tensor(name).numpy(), want), (dev, name)
