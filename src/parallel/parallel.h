/* parallel.h -- a model's split over the ranks of an MPI job
 * (docs/design.md#replicas-and-pipeline-stages):
 * replicas (replicas.c), pipeline stages (pipeline.c), every rank's outfeed
 * records on rank 0 (outfeeds.c), the ranks' agreement on what they run
 * (agree.c). The model layer calls these; compile, the executor and the
 * observers reach them through the runs' table (ts_run.par, parallel.c). */
#ifndef TS_PARALLEL_H
#define TS_PARALLEL_H

#include "observe/run.h"

/* parallel/replicas.c: a replica's part of a run (docs/design.md#replicas-and-pipeline-stages) */
/* Joins the job's collectives and sizes what the ranks exchange (compile). */
ts_status ts_replicas_compile(ts_run *run, ts_prog *p);
/* Before a run: the weight checksum when due. */
ts_status ts_replicas_before_run(ts_run *run);
/* The backward has finished parameter `node`'s gradient of micro-batch mb:
 * adds it to Accum___ (A > 1) and, at the step's last micro-batch, starts
 * averaging Accum___ over the replicas while the backward goes on. */
ts_status ts_replicas_grad_ready(ts_run *run, int node, int64_t mb);
/* Completes every parameter's average (before the step). */
ts_status ts_replicas_allreduce(ts_run *run);
/* After a step: every buffer (running statistics) becomes its mean over
 * the replicas. */
ts_status ts_replicas_sync_buffers(ts_run *run);
/* After a run: anchors and watch results of every replica, on every rank. */
ts_status ts_replicas_after_run(ts_run *run);

/* parallel/pipeline.c: a pipeline stage's part of a run (docs/design.md#replicas-and-pipeline-stages) */
/* Stages of the nodes, the tensors crossing them, the buffers (compile). */
ts_status ts_pipeline_compile(ts_run *run, ts_prog *p);
/* agree.c: with replicas or stages, every rank's options and graph compared
 * (a collective): TS_ERR_DIST naming the first that differs and both
 * values. Once per compile and after a new learning-rate schedule; a no-op
 * without a job or once agreed. */
ts_status ts_dist_agree(ts_run *run, const ts_prog *p);
/* Micro-batch a of the step: activations from the previous stage, to the
 * next one; gradients from the next stage, to the previous one. */
ts_status ts_pipeline_recv_forward(ts_run *run, int a);
ts_status ts_pipeline_send_forward(ts_run *run, int a);
ts_status ts_pipeline_recv_backward(ts_run *run, int a);
ts_status ts_pipeline_send_backward(ts_run *run, int a);
/* Op k (0 .. 2A - 1 training, A - 1 inference) of a step of this rank's
 * stage under the model's schedule: the forward or the backward of
 * micro-batch *a. */
void ts_pipeline_op(const ts_run *run, int stage, int k, bool *backward, int *a);
/* Keeps micro-batch a's activations until its backward (restore = back). */
void ts_pipeline_keep(ts_run *run, int a, bool restore);
/* After a run: every stage's parameters, anchors and watch results on every
 * rank; the bubble metric. */
ts_status ts_pipeline_after_run(ts_run *run, uint64_t run_ns);

/* parallel/outfeeds.c: every rank's outfeed records on rank 0 (docs/design.md#replicas-and-pipeline-stages) */
/* Sizes the buffer of one run's records (compile, after the two above). */
ts_status ts_outfeeds_compile(ts_run *run, ts_prog *p);
/* The replica and the stage this rank's records carry. */
int ts_outfeeds_replica(const ts_run *run);
int ts_outfeeds_stage(const ts_run *run);
/* A record of link `link` of `entry` this rank pushed: kept for rank 0. */
ts_status ts_outfeeds_keep(ts_run *run, int entry, int link, int64_t sample, const ts_array *a);
/* After a run: ranks > 0 send their records, rank 0 pushes them. */
ts_status ts_outfeeds_after_run(ts_run *run);

/* parallel.c: the table of the functions above (run->par). */
const ts_parallel *ts_dist_parallel(void);

#endif
