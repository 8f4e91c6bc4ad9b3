"""The memory watcher and per-module log levels from Python: the watcher's
peak covers a buffer this process touched while it sampled, and a child
process's memory is counted; set_log_vmodule raises one module's level
only, and refuses a module that is none."""
import subprocess
import sys
import time

import numpy as np
import pytest

import tensorscope as ts

from conftest import batches, small_mlp

MiB = 1 << 20


def wait_for(w, what, until, timeout=60.0):
    """The watcher's stats once until(stats) holds (polled; fails after timeout s)."""
    t0 = time.monotonic()
    while True:
        s = w.stats()
        if until(s):
            return s
        assert time.monotonic() - t0 < timeout, f"{what}: not within {timeout} s: {s}"
        time.sleep(0.005)


def test_peak_covers_a_touched_buffer_and_a_child():
    # each step waits for the samples it needs, never for a slice of time
    with ts.memory_watch(5) as w:
        base = wait_for(w, "a first sample", lambda s: s["samples"] >= 1)["latest"]["rss"]
        buf = np.ones(64 * MiB // 8)  # 64 MiB, every page touched
        n = w.stats()["samples"]
        wait_for(w, "two samples while the buffer is held", lambda s: s["samples"] >= n + 2)
        del buf
        child = subprocess.Popen([sys.executable, "-c",
                                  "import sys; b = bytearray(48 << 20); b[::4096] = b'x' * len(b[::4096]); "
                                  "print('touched', flush=True); sys.stdin.read()"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline() == "touched\n"
        n = w.stats()["samples"]
        during = wait_for(w, "two samples while the child holds its buffer", lambda s: s["samples"] >= n + 2)
        child.stdin.close()
        child.wait()
        wait_for(w, "ten samples", lambda s: s["samples"] >= 10)
    after = ts.memory_watch_stats()
    assert during["running"] and not after["running"]
    assert during["processes"] >= 2, during  # this process and the child
    assert after["peak"]["rss"] >= base + 60 * MiB, (base, after)
    assert during["latest"]["rss"] >= base + 40 * MiB, (base, during)  # the child's 48 MiB, ours freed
    assert after["samples"] >= 10 and after["period_ms"] == 5
    assert 0 <= after["peak_rss_s"] <= after["latest_s"]


def test_memory_watch_refuses_a_bad_period():
    with pytest.raises(ts.InvalidArgumentError):
        ts.memory_watch(-5).start()


def test_vmodule_raises_one_module_only():
    lines = []
    ts.set_log_callback(lambda level, message: lines.append((level, message)))
    try:
        ts.set_log_level(2)
        ts.set_log_vmodule("model=4")
        m = ts.training_model(small_mlp(), ts.Options(), optimizer=ts.SGD(lr=0.01))
        m.compile()
        m(*batches(1))
    finally:
        ts.set_log_vmodule("")
        ts.set_log_callback(None)
    debug = [msg for level, msg in lines if level == 4]
    assert any(msg.startswith("layer template") for msg in debug), lines
    assert not any(level == 5 for level, _ in lines), "no trace line: exec stays at warn"
    with pytest.raises(ts.InvalidArgumentError, match="onnx"):
        ts.set_log_vmodule("bogus=4")
