/* parallel.c -- the table through which compile, the executor and the
 * observers reach a model's split over a job's ranks (replicas.c,
 * pipeline.c, outfeeds.c): set on every model by the model layer. */
#include "observe/run.h"
#include "parallel/parallel.h"

static ts_status compile_job(ts_run *run, ts_prog *p) {
    ts_status st = ts_replicas_compile(run, p);
    if (!st) st = ts_pipeline_compile(run, p);
    if (!st) st = ts_outfeeds_compile(run, p); /* sized after the two above */
    return st;
}

static const ts_parallel parallel = {
    .compile = compile_job,
    .grad_ready = ts_replicas_grad_ready,
    .allreduce = ts_replicas_allreduce,
    .sync_buffers = ts_replicas_sync_buffers,
    .schedule_op = ts_pipeline_op,
    .keep = ts_pipeline_keep,
    .recv_forward = ts_pipeline_recv_forward,
    .send_forward = ts_pipeline_send_forward,
    .recv_backward = ts_pipeline_recv_backward,
    .send_backward = ts_pipeline_send_backward,
    .outfeed_replica = ts_outfeeds_replica,
    .outfeed_stage = ts_outfeeds_stage,
    .outfeed_keep = ts_outfeeds_keep,
};

const ts_parallel *ts_dist_parallel(void) { return &parallel; }
