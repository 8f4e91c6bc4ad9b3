"""Stopping a run: Ctrl-C (SIGINT) during a model call stops the run
between micro-batches and raises KeyboardInterrupt promptly, and
Model.cancel() from another thread raises CancelledError; either way the
model stays usable and what the run computed is there (the weights of the
completed steps, the anchors' completed rows, other rows NaN)."""
import os
import signal
import threading
import time

import numpy as np
import pytest

import tensorscope as ts

import long_runs

D, B = 3000, 32  # a run of 3000 micro-batches: tens of seconds if not stopped


def long_model():
    g, m = long_runs.mlp(B, 512, D, lambda o: o.anchor_tensor("losses", "loss", "all"))
    xs, ys = long_runs.data(D * B)
    return g, m, xs, ys


def once_running(m, act):
    """A thread that calls act() once m's run has completed a step past the
    steps m had (polled, at most a minute): an event, not a slice of time."""
    before = m.steps
    sent = []

    def watch():
        t0 = time.monotonic()
        while m.steps == before and time.monotonic() - t0 < 60:
            time.sleep(0.002)
        sent.append(time.monotonic())
        act()

    t = threading.Thread(target=watch)
    t.start()
    return t, sent


def completed_rows(m):
    losses = m.get_anchored_tensor("losses")
    done = int(np.isfinite(losses).sum())
    assert losses.shape == (D,)
    assert np.isfinite(losses[:done]).all() and np.isnan(losses[done:]).all()
    return done


def test_ctrl_c_stops_the_run_promptly_and_keeps_its_results():
    g, m, xs, ys = long_model()
    w0 = g.tensor("fc1.weight").numpy()
    timer, sent = once_running(m, lambda: os.kill(os.getpid(), signal.SIGINT))
    with pytest.raises(KeyboardInterrupt, match="cancelled after"):
        m(xs, ys)
    took = time.monotonic() - sent[0]
    timer.join()
    assert took < 30, f"the call returned {took:.2f} s after Ctrl-C"  # a generous bound: steps < D below says it stopped early
    steps = m.steps
    assert 0 < steps < D, "stopped between micro-batches, after some work"
    assert m.runs == 1
    assert completed_rows(m) == steps, "the losses of the completed steps, the rest NaN"
    assert not np.array_equal(g.tensor("fc1.weight").numpy(), w0), "the completed steps trained"
    # the model is usable: cancelled again from another thread, then an inference model
    timer, _ = once_running(m, m.cancel)
    with pytest.raises(ts.CancelledError, match="cancelled after"):
        m(xs, ys)
    timer.join()
    assert steps < m.steps < steps + D and m.runs == 2
    infer = ts.inference_model(g, ts.Options().device_iterations(1), outputs=["loss"])
    assert np.isfinite(infer(xs[:B], ys[:B]))


def test_a_call_off_the_main_thread_is_cancelled_by_model_cancel():
    g, m, xs, ys = long_model()
    out = []

    def call():
        try:
            m(xs, ys)
        except ts.CancelledError as e:
            out.append(e)

    watcher, _ = once_running(m, m.cancel)
    worker = threading.Thread(target=call)
    worker.start()
    watcher.join()
    worker.join(60)
    assert not worker.is_alive() and out and out[0].status == "TS_ERR_CANCELLED"
    assert completed_rows(m) == m.steps > 0


def test_a_cancel_between_calls_has_no_effect():
    g = ts.Graph(seed=1)
    x = g.input("x", "f32", [2, 3])
    y = g.relu(x)
    m = ts.inference_model(g, ts.Options().device_iterations(2), outputs=[y])
    m.cancel()
    out = m(np.ones((4, 3), np.float32))
    assert out.shape == (4, 3) and (out == 1).all()
