"""Misuse raises an exception carrying the library's message; the
interpreter survives every case (these run in-process)."""
import numpy as np
import pytest

import tensorscope as ts
from conftest import batches, small_mlp


@pytest.fixture
def model():
    m = ts.training_model(small_mlp(), ts.Options(), optimizer=ts.SGD(lr=0.01))
    m.compile()
    return m


def test_one_class_per_status_of_the_header():
    classes = [ts.InvalidArgumentError, ts.OutOfMemoryError, ts.FileError, ts.FormatError,
               ts.ShapeError, ts.NotFoundError, ts.StateError, ts.NumericsError,
               ts.UnsupportedError, ts.InternalError, ts.DistError, ts.CancelledError]
    assert [c("m").status for c in classes] == [
        "TS_ERR_INVALID_ARGUMENT", "TS_ERR_OUT_OF_MEMORY", "TS_ERR_IO", "TS_ERR_FORMAT",
        "TS_ERR_SHAPE", "TS_ERR_NOT_FOUND", "TS_ERR_STATE", "TS_ERR_NUMERICS",
        "TS_ERR_UNSUPPORTED", "TS_ERR_INTERNAL", "TS_ERR_DIST", "TS_ERR_CANCELLED"]
    assert str(ts.FileError("no such file")) == "no such file"


def test_names_before_compile_is_a_state_error():
    m = ts.training_model(small_mlp(), ts.Options(), optimizer=ts.SGD(lr=0.01))
    with pytest.raises(ts.StateError, match="compile") as e:
        m.get_tensor_names()
    assert e.value.status == "TS_ERR_STATE"
    assert isinstance(e.value, RuntimeError)


def test_anchor_before_the_first_run(model):
    with pytest.raises(ts.StateError, match="run the model first"):
        model.get_anchored_tensor("loss")


def test_unknown_anchor_names_the_known_ones(model):
    model(*batches(1))
    with pytest.raises(ts.NotFoundError, match="'loss'") as e:
        model.get_anchored_tensor("nope")
    assert isinstance(e.value, LookupError)


def test_unknown_tensor_name_at_compile_lists_close_names():
    opts = ts.Options().anchor_tensor("g", "Gradient___fc1.wieght")
    m = ts.training_model(small_mlp(), opts, optimizer=ts.SGD(lr=0.01))
    with pytest.raises(ts.NotFoundError, match="Gradient___fc1.weight"):
        m.compile()


def test_wrong_dtype_of_an_input(model):
    x, y = batches(1)
    with pytest.raises(ts.InvalidArgumentError, match="'labels' must be i32 data, got f32"):
        model(x, y.astype(np.float32))
    # int64 labels and float64 samples are taken (converted for the run),
    # but a label beyond int32 is an error, never wrapped
    model(x.astype(np.float64), y.astype(np.int64))
    with pytest.raises(ts.InvalidArgumentError, match="4294967296"):
        model(x, y.astype(np.int64) + 2**32)


def test_wrong_shape_of_an_input(model):
    x, y = batches(1)
    with pytest.raises(ts.ShapeError, match="'x' is f32\\[4,7\\]"):
        model(np.zeros((4, 7), np.float32), y)


def test_missing_and_extra_inputs(model):
    x, y = batches(1)
    with pytest.raises(ts.InvalidArgumentError, match="'labels' is missing"):
        model(x)
    with pytest.raises(TypeError, match="the graph has 2"):
        model(x, y, y)
    with pytest.raises(TypeError, match="given twice"):
        model(x, y, x=x)


def test_arrays_numpy_cannot_pass(model):
    x, y = batches(1)
    with pytest.raises(TypeError, match="complex64"):
        model(x.astype(np.complex64), y)
    with pytest.raises(ValueError, match="at most 8"):
        model(np.zeros([1] * 9, np.float32), y)


def test_builder_errors_carry_the_python_line():
    g = ts.Graph()
    a = g.input("a", "f32", [2, 3])
    with pytest.raises(ts.ShapeError, match=r"inner dimensions differ.*test_errors\.py:\d+"):
        g.matmul(a, a)


def test_builder_argument_errors():
    g, other = ts.Graph(), ts.Graph()
    a = g.input("a", "f32", [2, 3])
    b = other.input("b", "f32", [3, 2])
    with pytest.raises(ValueError, match="another graph"):
        g.matmul(a, b)
    with pytest.raises(TypeError, match="Tensor"):
        g.relu(np.zeros(3))
    with pytest.raises(TypeError, match="dtype"):
        g.input("c", "complex", [2])
    with pytest.raises(ts.NotFoundError):
        g.tensor("nothing")
    with pytest.raises(ts.StateError, match="not a parameter"):
        a.numpy()


def test_bad_options():
    o = ts.Options()
    with pytest.raises(ts.InvalidArgumentError):
        o.device_iterations(0)
    with pytest.raises(ts.InvalidArgumentError, match="every_n"):
        o.output_mode("sometimes")
    with pytest.raises(ts.InvalidArgumentError):
        o.check_numerics("loud")
    with pytest.raises(ValueError, match="stats"):
        o.watch("fc1", "colours")


def test_param_set_with_a_wrong_shape():
    g = small_mlp()
    with pytest.raises(ts.TensorscopeError, match="fc1.weight"):
        g.tensor("fc1.weight").set_value(np.zeros((2, 2), np.float32))


def numerics_failure():
    """The NumericsError of a run whose Log gets negative inputs."""
    g = ts.Graph()
    x = g.input("x", "f32", [2, 2])
    labels = g.input("labels", "i32", [2])
    loss = g.cross_entropy(g.log(g.linear(x, 2, "fc")), labels)
    loss.name = "loss"
    m = ts.training_model(g, ts.Options().check_numerics("op"), optimizer=ts.SGD(lr=0.1))
    m.compile()
    with pytest.raises(ts.NumericsError) as e:
        m(np.full((2, 2), -100.0, np.float32), np.zeros(2, np.int32))
    return e.value


def test_numerics_error_names_the_tensor():
    e = numerics_failure()
    assert e.tensor
    assert e.tensor in str(e)


def test_numerics_report_shows_once(capfd):
    """The library logs the report and the exception carried it too: the
    user saw it twice. Now once, at every log level."""
    try:
        for level in (3, 0):  # info (the report logged), off (not logged)
            ts.set_log_level(level)
            e = numerics_failure()
            seen = capfd.readouterr().err + str(e)
            assert seen.count("value: Log:0 f32[2,2]") == 1, (level, seen)
            assert seen.count("input 0: fc/Add:0") == 1, (level, seen)
            assert "first non-finite value in 'Log:0'" in str(e)
            assert "input 0: fc/Add:0" in e.report and e.tensor == "Log:0"
    finally:
        ts.set_log_level(3)


def test_missing_files():
    with pytest.raises(ts.FileError):
        ts.Dataset.mnist("/nonexistent-directory")


def test_closed_graphs_and_models_raise_instead_of_crashing():
    g = small_mlp()
    m = ts.training_model(g, ts.Options(), optimizer=ts.SGD(lr=0.01))
    m.compile()
    fc1 = g.tensor("fc1.weight")
    g.close()  # closes m first
    with pytest.raises(ts.StateError, match="closed"):
        m(*batches(1))
    with pytest.raises(ts.StateError, match="closed"):
        fc1.numpy()
    with pytest.raises(ts.StateError, match="closed"):
        g.relu(fc1)
    m.close()
    g.close()  # twice is fine


def test_one_call_into_a_model_at_a_time():
    import threading
    m = ts.training_model(small_mlp(), ts.Options(), optimizer=ts.SGD(lr=0.01))
    m.compile()
    errors = []

    def work(seed):
        try:
            for i in range(5):
                m(*batches(1, seed=seed * 10 + i))
                m.get_anchored_tensor("loss")
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and m.runs == 20


def test_compile_checks_example_inputs_against_the_graph():
    m = ts.training_model(small_mlp(), ts.Options(), optimizer=ts.SGD(lr=0.01))
    x, y = batches(1)
    m.compile(x, y)  # fine
    with pytest.raises(TypeError, match="'labels' is int64 but the graph declares int32"):
        m.compile(x, y.astype(np.int64))


def test_builder_methods_have_signatures_and_keywords():
    import inspect
    assert str(inspect.signature(ts.Graph.linear)) == (
        "(self, x: 'Tensor', out_features: 'int', name: 'Optional[str]') -> 'Tensor'")
    assert inspect.signature(ts.Graph.print_tensor).parameters["title"].default == ""
    g = ts.Graph()
    x = g.input(name="x", dtype=np.float32, shape=(3, 4))
    h = g.linear(x, out_features=2, name="fc")
    assert h.shape == (3, 2) and h.name == "fc/Add:0"
    with pytest.raises(TypeError):
        g.linear(x, 2, "fc2", 7)
    assert g.flatten(x).shape == (3, 4)  # start_dim defaults to 1


def test_the_archive_limit_is_settable_and_named_in_the_refusal(tmp_path):
    g = small_mlp()
    path = str(tmp_path / "w.npz")
    g.save_weights(path)
    before = ts.get_limit("archive")
    assert before > 0
    try:
        ts.set_limit("archive", "1K")
        assert ts.get_limit("archive") == 1024
        ts.set_limit("archive", 200)  # fc1.weight's member alone is 248 bytes
        with pytest.raises(ts.FormatError, match="TS_MAX_ARCHIVE_BYTES") as e:
            small_mlp().load_weights(path)
        assert "over the limit of 200 bytes" in str(e.value)
        ts.set_limit("archive", 64 << 20)
        small_mlp().load_weights(path)  # under the raised limit it loads
    finally:
        ts.set_limit("archive", before)
    with pytest.raises(ts.InvalidArgumentError, match="one of archive, compile, import"):
        ts.set_limit("disk", 10)
    with pytest.raises(ts.InvalidArgumentError, match="0 bytes"):
        ts.set_limit("import", 0)
    with pytest.raises(ts.InvalidArgumentError, match="not a size"):
        ts.set_limit("import", "lots")
    assert ts.get_limit("import") > 0


def test_the_compile_limit_refuses_a_plan_before_allocating():
    g = small_mlp(batch=2048, features=64, hidden=2048)  # 16 MiB of f32 each [2048,2048] activation
    before = ts.get_limit("compile")
    assert before > 0
    try:
        ts.set_limit("compile", "16M")  # the plan needs more: refused before its arenas are allocated
        with pytest.raises(ts.FormatError, match="TS_MAX_COMPILE_BYTES") as e:
            ts.training_model(g, loss="loss", optimizer=ts.SGD(lr=0.1)).compile()
        assert "over the limit of 16777216 bytes" in str(e.value)
    finally:
        ts.set_limit("compile", before)
