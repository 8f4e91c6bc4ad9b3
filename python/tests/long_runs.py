"""The model the cancellation tests stop: a 3-layer MLP on 16 features
whose one call runs `runs` micro-batches of `batch` samples, and random
data for it (imported by test_cancel.py and mpi_cancel.py)."""
import numpy as np

import tensorscope as ts


def mlp(batch, width, runs, configure):
    """(graph, training model) of x[batch,16] -> fc1 -> fc2 -> fc3 (10 classes), SGD 0.01,
    the options given by configure(Options with `runs` device iterations, 1 thread)."""
    g = ts.Graph(seed=3)
    x = g.input("x", "f32", [batch, 16])
    labels = g.input("labels", "i32", [batch])
    h = g.relu(g.linear(g.relu(g.linear(x, width, "fc1")), width, "fc2"))
    loss = g.cross_entropy(g.linear(h, 10, "fc3"), labels)
    loss.name = "loss"
    opts = configure(ts.Options().device_iterations(runs).threads(1))
    return g, ts.training_model(g, opts, optimizer=ts.SGD(lr=0.01))


def data(n):
    """n random samples and labels (seed 0)."""
    rng = np.random.default_rng(0)
    return (rng.standard_normal((n, 16)).astype(np.float32),
            rng.integers(0, 10, n).astype(np.int32))
