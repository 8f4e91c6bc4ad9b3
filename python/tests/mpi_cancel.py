"""Ctrl-C on one rank of an MPI job, from Python, under `mpirun -np 2
python mpi_cancel.py` (tests/test_python.sh runs it when mpirun and an MPI
build are there; pytest does not collect it): during a long run, rank 1
gets SIGINT; its call raises KeyboardInterrupt, rank 0's raises
CancelledError, both after the same step (2 replicas, then a 2-stage
pipeline), and the next run is whole on both, the replicas' weights
checked equal before it."""
import os
import signal
import sys
import threading
import time


import tensorscope as ts

import long_runs

D, B = 20000, 16  # a run of seconds: the signal at 0.5 s lands in it on a fast machine too (2000 took 0.34 s)


def model(configure):
    return long_runs.mlp(B, 256, D, configure)[1]


def interrupted(m, x, y, rank, label):
    t0 = time.monotonic()
    if rank == 1:  # Ctrl-C once the run has completed a step (an event, not a slice of time)
        before = m.steps

        def interrupt():
            while m.steps == before and time.monotonic() - t0 < 60:
                time.sleep(0.002)
            os.kill(os.getpid(), signal.SIGINT)

        threading.Thread(target=interrupt, daemon=True).start()
    try:
        m(x, y)
        raise AssertionError(f"{label}: rank {rank}: the run was not stopped")
    except KeyboardInterrupt as e:
        assert rank == 1, f"{label}: KeyboardInterrupt on rank {rank}"
        message = str(e)
    except ts.CancelledError as e:
        assert rank == 0, f"{label}: CancelledError on rank {rank}"
        message = str(e)
    took = time.monotonic() - t0
    assert "cancelled after" in message, message
    assert 0 < m.steps < D and took < 60.0, (m.steps, took)  # generous: steps < D says it stopped early
    print(f"ok   {label}: rank {rank} stopped after {m.steps} of {D} steps, {took:.2f} s: {message}")


def main():
    ts.set_log_level(1)
    rank, size = ts.dist_init()
    assert size == 2, f"run under mpirun -np 2, not {size}"
    x, y = long_runs.data(D * B * 2)

    m = model(lambda o: o.replication(2, check_every=1))  # the weight checksum before every run
    interrupted(m, x, y, rank, "replicas")
    # the model is usable: its next run starts with the weight checksum (a
    # desync would be a DistError) and trains on until Model.cancel on rank 0
    steps = m.steps
    if rank == 0:
        threading.Timer(0.3, m.cancel).start()
    try:
        m(x, y)
    except ts.CancelledError:
        pass
    assert m.steps > steps, (steps, m.steps)
    print(f"ok   replicas: rank {rank}: the next run went on from the same weights ({steps} -> {m.steps} steps)")

    p = model(lambda o: o.pipeline(2, ["fc2"]))
    interrupted(p, x[:D * B], y[:D * B], rank, "pipeline")
    ts.dist_finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
