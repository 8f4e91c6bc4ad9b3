"""Replicas and pipeline stages from Python (docs/design.md#replicas-and-pipeline-stages). Outside mpirun a
process is a job of one rank: asking for replicas or stages is an error that
says how to start the job (the numbers under mpirun are tests/test_dist.c's)."""
import pytest

import tensorscope as ts
from conftest import small_mlp


def test_outside_mpirun_a_job_of_one_rank():
    assert ts.dist_init() == (0, 1)


@pytest.mark.parametrize("configure", [lambda o: o.replication(2),
                                       lambda o: o.pipeline(2, ["fc2"]),
                                       lambda o: o.pipeline(2, ["fc2"], schedule="1f1b")])
def test_replicas_or_stages_need_mpirun(configure):
    m = ts.training_model(small_mlp(), configure(ts.Options()), optimizer=ts.SGD(lr=0.01))
    with pytest.raises((ts.StateError, ts.UnsupportedError), match="mpirun -np 2"):
        m.compile()


def test_bad_settings_are_value_errors():
    with pytest.raises(ts.InvalidArgumentError, match="replicas"):
        ts.Options().replication(0)
    with pytest.raises(ts.InvalidArgumentError, match="split at 1 scope"):
        ts.Options().pipeline(2, [])
    with pytest.raises(ValueError, match="1f1b"):
        ts.Options().pipeline(2, ["fc2"], schedule="interleaved")
