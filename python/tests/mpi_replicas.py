"""Watches combined over replicas, from Python, under `mpirun -np 2 python
mpi_replicas.py` (tests/test_python.sh runs it when mpirun and an MPI build
are there; pytest does not collect it): the input x watched, with -1e6 in
replica 0's shard and 1e6, a NaN and an Inf in replica 1's. The summary
model.watches() gives is the one over both replicas, naming the replica of
its min, of its max and of the first NaN/Inf, with its NaN and Inf counts
summed, and each replica's own summary under `replicas`."""
import math

import tensorscope as ts
from conftest import batches, small_mlp

B = 4


def main():
    ts.set_log_level(1)
    rank, size = ts.dist_init()
    assert size == 2, f"run under mpirun -np 2, not {size}"
    x, y = batches(size, seed=5)  # the combined batch: replica r computes rows r*B .. r*B + B - 1
    x[1, 2] = -1e6
    x[B + 2, 0] = 1e6
    x[B + 3, 1] = math.nan
    x[B, 4] = math.inf
    g = small_mlp(batch=B)
    opts = ts.Options().threads(1).replication(2, check_every=1).watch("x")
    m = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.05))
    m(x, y)
    w = m.watches()["x"]
    assert w["min"] == -1e6 and w["min_replica"] == 0, w
    assert w["max"] == 1e6 and w["max_replica"] == 1, w
    assert w["nans"] == 1 and w["pos_infs"] == 1 and w["nonfinite_replica"] == 1, w
    assert [r["nans"] for r in w["replicas"]] == [0, 1] and [r["count"] for r in w["replicas"]] == [B * 6, B * 6], w["replicas"]
    assert w["count"] == size * B * 6
    print(f"ok   rank {rank}: x over 2 replicas: min from replica 0, max, NaN and Inf from replica 1, counts summed")
    ts.dist_finalize()


if __name__ == "__main__":
    main()
