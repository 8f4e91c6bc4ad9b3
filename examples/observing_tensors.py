"""observing_tensors.py -- PopTorch's "observing tensors" tutorial in Python,
line for line with examples/observing_tensors.c.

Builds the tutorial MLP (784-320-100-10), lists every tensor name of the
compiled model, anchors the gradients of the six parameters, trains one
epoch of MNIST with SGD (lr 0.01, batch 1000) and plots the histogram of
log2|gradient| of the last step to ./GradientHistogram.png (with matplotlib
when it is installed, else with the library's plot).

    python examples/observing_tensors.py [MNIST_DIR]     (default: the repository's data/mnist)
"""
import os
import sys

import numpy as np

import tensorscope as ts

BATCH = 1000

GRADIENTS = ["Gradient___fc1.weight", "Gradient___fc1.bias", "Gradient___fc2.weight",
             "Gradient___fc2.bias", "Gradient___fc3.weight", "Gradient___fc3.bias"]


def plot(gradients, path):
    """The tutorial's plot: log2|g| of every value, zeros at min - 2, 50 bins."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        ts.plot_gradient_histogram(path, gradients)
        return
    g = np.concatenate([a.ravel() for a in gradients]).astype(np.float64)
    nonzero = np.abs(g[g != 0])
    logs = np.log2(nonzero)
    zero_bucket = logs.min() - 2 if logs.size else -2.0
    values = np.concatenate([logs, np.full(g.size - nonzero.size, zero_bucket)])
    plt.figure()
    plt.hist(values, bins=50)
    plt.title("Gradient Histogram")
    plt.ylabel("Frequency")
    plt.xlabel("log2(|gradient|)")
    plt.savefig(path)


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    directory = argv[1] if len(argv) > 1 else os.path.join(here, "..", "data", "mnist")  # from any directory
    data = ts.Dataset.mnist(directory)
    loader = ts.DataLoader(data, batch_size=BATCH, shuffle=True, seed=0)

    # the tutorial's network: fc1..fc3 with relu, log_softmax and nll_loss
    g = ts.Graph(seed=0)
    x = g.input("x", "f32", [BATCH, 1, 28, 28])
    labels = g.input("labels", "i32", [BATCH])
    h = g.flatten(x, 1)
    h = g.relu(g.linear(h, 320, "fc1"))
    h = g.relu(g.linear(h, 100, "fc2"))
    h = g.log_softmax(g.linear(h, 10, "fc3"), 1)
    loss = g.nll_loss(h, labels)
    loss.name = "loss"

    opts = ts.Options()
    model = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.01, momentum=0.0))
    model.compile()

    # every tensor of the compiled model, the names anchors refer to
    names = model.get_tensor_names()
    print(f"Tensor names ({len(names)}):")
    for name in names:
        print(f"  {name}")

    # anchoring after compile recompiles once, before the first run
    for name in GRADIENTS:
        model.anchor_tensor(name, name)

    batches = len(loader)
    loss_sum = 0.0
    steps = 0
    for images, targets in loader:
        value = float(model(images, targets))
        loss_sum += value
        steps += 1
        print(f"batch {steps}/{batches} loss {value:.4f}")
    print(f"epoch 1: mean loss {loss_sum / (steps or 1):.4f} over {steps} batches")

    # the gradients of the last step, as the tutorial plots them
    grads = []
    print("Anchored gradients:")
    for name in GRADIENTS:
        grads.append(model.get_anchored_tensor(name))
        print(f"  {name} f32[{','.join(str(d) for d in grads[-1].shape)}]")
    plot(grads, "GradientHistogram.png")
    print("Saved histogram to ./GradientHistogram.png")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except ts.TensorscopeError as e:
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
