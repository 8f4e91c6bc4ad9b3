"""Outfeed records of every rank on rank 0, from Python, under
`mpirun -np 2 python mpi_outfeed.py` (tests/test_python.sh runs it when
mpirun and an MPI build are there; pytest does not collect it): 2 replicas,
then a 2-stage pipeline, each against the same model in one process."""
import sys

import numpy as np

import tensorscope as ts
from conftest import batches, small_mlp

A, B = 2, 4


def trained(batch, configure, key, tensor):
    g = small_mlp(batch=batch)
    q = ts.OutfeedQueue("q", depth=64)
    g.outfeed(q, key, g.tensor(tensor))
    opts = configure(ts.Options().gradient_accumulation(A).threads(1))
    return g, q, ts.training_model(g, opts, optimizer=ts.SGD(lr=0.05))


def main():
    ts.set_log_level(1)
    rank, size = ts.dist_init()
    assert size == 2, f"run under mpirun -np 2, not {size}"
    x, y = batches(A * size, seed=3)  # every rank passes the combined batch

    # replicas: rank 0 gets its own records, then replica 1's
    g, q, m = trained(B, lambda o: o.replication(2), "relu", "Relu:0")
    g1, q1, m1 = trained(2 * B, lambda o: o, "relu", "Relu:0")
    m(x, y)
    m1(x, y)
    recs, ref = list(q), list(q1)
    want = [(r, a) for r in range(size) for a in range(A)] if rank == 0 else [(rank, a) for a in range(A)]
    assert [(r.replica, r.sample) for r in recs] == want, [(r.replica, r.sample) for r in recs]
    for rec in recs:
        assert rec.stage == 0
        np.testing.assert_allclose(rec.array, ref[rec.sample].array[rec.replica * B:(rec.replica + 1) * B], rtol=1e-5, atol=1e-6)
    print(f"ok   rank {rank}: {len(recs)} replica records, tagged and equal to one process's rows")

    # a 2-stage pipeline: fc2's output is stage 1's, and reaches rank 0
    g, q, m = trained(B, lambda o: o.pipeline(2, ["fc2"]), "logits", "fc2/Add:0")
    g1, q1, m1 = trained(B, lambda o: o, "logits", "fc2/Add:0")
    m(x[:A * B], y[:A * B])
    m1(x[:A * B], y[:A * B])
    recs, ref = list(q), list(q1)
    assert len(recs) == (A if rank in (0, 1) else 0) and len(ref) == A, (len(recs), len(ref))
    for rec, r1 in zip(recs, ref):
        assert (rec.stage, rec.replica, rec.sample, rec.key) == (1, 0, r1.sample, "logits"), rec[:3]
        np.testing.assert_allclose(rec.array, r1.array, rtol=1e-5, atol=1e-6)
    print(f"ok   rank {rank}: {len(recs)} records of stage 1, tagged and equal to the unpipelined model's")
    ts.dist_finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
