/* mpi.c -- the job of ranks a model runs in: the one file that talks to MPI
 * (docs/design.md#layers-and-the-flow-of-data,
 * docs/design.md#replicas-and-pipeline-stages). It implements the collective table the model calls
 * (core/collective.h) with non-blocking MPI calls polled against a
 * deadline, so a rank that died or hangs makes the others fail with
 * TS_ERR_DIST instead of waiting forever. Without MPI at build time the
 * public calls say how to get it. */
#include "core/collective.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double timeout_s = 60.0;

ts_status ts_dist_set_timeout(double seconds) {
    if (!(seconds > 0.0) || seconds > 1e6) return ts_error(TS_ERR_INVALID_ARGUMENT, "dist timeout must be in (0, 1e6] seconds, got %g", seconds);
    timeout_s = seconds;
    return TS_OK;
}

double ts_dist_timeout(void) { return timeout_s; }

/* The size of the job the launcher started, from its environment (1 when
 * none did). */
static int launcher_size(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    for (size_t i = 0; i < TS_ARRAY_LEN(vars); i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return atoi(v);
    }
    return 1;
}

#ifdef TS_HAVE_MPI

#include <mpi.h>
#include <sched.h>
#include <time.h>

#define MAX_PENDING 1024 /* all-reduces in flight: one per parameter */

/* A failure's notice to every other rank (TS_TAG_FAILURE): the failed
 * rank's status and message (a numeric check's whole report), cut to fit. */
typedef struct notice {
    int32_t status, rank;
    char why[8192];
} notice;

static struct {
    bool joined, owns, failed;
    bool told;            /* this rank sent its notice, or heard another's */
    notice heard;         /* another rank's, once heard (heard.status != 0) */
    notice mine;          /* what this rank sent (the sends read it) */
    MPI_Request *notices; /* its sends, one per other rank */
    int rank, size;
    ts_collective coll;
    MPI_Request req[MAX_PENDING];
    float *buf[MAX_PENDING];
    int64_t n[MAX_PENDING];
    int pending;
    MPI_Request sends[MAX_PENDING];
    int pending_sends;
} job = {.size = 1};

int ts_dist_available(void) { return 1; }
int ts_dist_rank(void) { return job.rank; }
int ts_dist_size(void) { return job.size; }

static ts_status mpi_fail(int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    job.failed = true;
    return ts_error(TS_ERR_DIST, "rank %d of %d: %s failed: %s (another rank probably died)", job.rank, job.size, what, msg);
}

/* Another rank's failure: its status and "rank R failed ...", once its
 * notice came (it may come while this rank waits for anything). */
static ts_status heard_failure(void) {
    return ts_error((ts_status)job.heard.status, "rank %d failed and stopped every rank of the job: %s", (int)job.heard.rank, job.heard.why);
}

static ts_status poll(MPI_Request *r, int n, MPI_Status *status, const char *what, bool listen);

/* Receives a failure's notice when one is there (listens while waiting). */
static ts_status listen_for_failure(void) {
    if (job.heard.status) return heard_failure();
    int there = 0;
    MPI_Status s;
    if (MPI_Iprobe(MPI_ANY_SOURCE, TS_TAG_FAILURE, MPI_COMM_WORLD, &there, &s) != MPI_SUCCESS || !there) return TS_OK;
    notice n = {0};
    MPI_Request r;
    if (MPI_Irecv(&n, (int)sizeof n, MPI_BYTE, s.MPI_SOURCE, TS_TAG_FAILURE, MPI_COMM_WORLD, &r) != MPI_SUCCESS ||
        poll(&r, 1, NULL, "the notice of another rank's failure", false))
        n = (notice){.status = TS_ERR_DIST, .why = "its notice did not arrive"};
    n.rank = s.MPI_SOURCE;
    n.why[sizeof n.why - 1] = '\0';
    if (!n.status) n.status = TS_ERR_DIST;
    job.heard = n;
    job.failed = job.told = true;
    return heard_failure();
}

/* Polls until every request is complete or the deadline passes. MPI
 * progresses a non-blocking collective only inside MPI calls, so it polls
 * back to back (yielding the CPU) for the first 50 ms, then sleeps a little
 * longer each round (up to a millisecond) so a rank that waits long does not
 * take a core from the ones still computing. While it waits (`listen`) a
 * notice of another rank's failure ends the wait with that failure: the
 * failed rank will not take part. */
static ts_status poll(MPI_Request *r, int n, MPI_Status *status, const char *what, bool listen) {
    struct timespec t0, now, nap = {0, 20000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int done = 0;
        int rc = MPI_Testall(n, r, &done, status ? status : MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, what);
        if (done) return TS_OK;
        ts_status st = listen ? listen_for_failure() : TS_OK;
        if (st) return st;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double waited = (double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec);
        if (waited > timeout_s) {
            job.failed = true;
            return ts_error(TS_ERR_DIST,
                            "rank %d of %d: %s did not complete within %.0f s: another rank died, hangs or runs a different model; stopping (ts_dist_set_timeout changes the limit)",
                            job.rank, job.size, what, timeout_s);
        }
        if (waited < 0.05) {
            sched_yield();
            continue;
        }
        nanosleep(&nap, NULL);
        if (nap.tv_nsec < 1000000) nap.tv_nsec *= 2;
    }
}

static ts_status wait_all(MPI_Request *r, int n, MPI_Status *status, const char *what) { return poll(r, n, status, what, true); }

/* A call after a failure: the failure it learnt of, or that one failed. */
static ts_status after_failure(void) {
    return job.heard.status ? heard_failure() : ts_error(TS_ERR_DIST, "rank %d: an earlier collective failed; the job must stop", job.rank);
}

static ts_status allreduce_mean_start(float *buf, int64_t n) {
    if (job.failed) return after_failure();
    if (n > INT32_MAX) return ts_error(TS_ERR_UNSUPPORTED, "all-reduce of %lld values: more than MPI's int count", (long long)n);
    if (job.pending == MAX_PENDING) {
        ts_status st = job.coll.allreduce_wait();
        if (st) return st;
    }
    int k = job.pending;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &job.req[k]);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Iallreduce");
    job.buf[k] = buf;
    job.n[k] = n;
    job.pending++;
    return TS_OK;
}

/* Lets the started all-reduces advance (MPI moves a non-blocking
 * collective on only inside MPI calls): the backward calls it between ops. */
static ts_status allreduce_progress(void) {
    if (job.pending == 0) return TS_OK;
    int done = 0, rc = MPI_Testall(job.pending, job.req, &done, MPI_STATUSES_IGNORE);
    return rc == MPI_SUCCESS ? TS_OK : mpi_fail(rc, "MPI_Testall");
}

static ts_status allreduce_wait(void) {
    int n = job.pending;
    job.pending = 0;
    if (n == 0) return TS_OK;
    ts_status st = wait_all(job.req, n, NULL, "the gradient all-reduce");
    if (st) return st;
    float inv = 1.0f / (float)job.size;
    for (int k = 0; k < n; k++)
        for (int64_t i = 0; i < job.n[k]; i++) job.buf[k][i] *= inv;
    return TS_OK;
}

static ts_status allgather(const void *send, void *recv, size_t bytes, const char *what) {
    if (job.failed) return after_failure();
    if (bytes > INT32_MAX) return ts_error(TS_ERR_UNSUPPORTED, "gather of %zu bytes: more than MPI's int count", bytes);
    MPI_Request r;
    int rc = MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD, &r);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Iallgather");
    return wait_all(&r, 1, NULL, what);
}

static ts_status send_wait(void) {
    int n = job.pending_sends;
    job.pending_sends = 0;
    return n ? wait_all(job.sends, n, NULL, "the sends to other ranks") : TS_OK;
}

static ts_status send_start(int peer, int tag, const void *buf, size_t bytes) {
    if (job.failed) return after_failure();
    if (bytes > INT32_MAX) return ts_error(TS_ERR_UNSUPPORTED, "message of %zu bytes: more than MPI's int count", bytes);
    if (job.pending_sends == MAX_PENDING) {
        ts_status st = send_wait();
        if (st) return st;
    }
    int rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &job.sends[job.pending_sends]);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Isend");
    job.pending_sends++;
    return TS_OK;
}

static ts_status recv_bytes(int peer, int tag, void *buf, size_t cap, size_t *got, const char *what) {
    if (job.failed) return after_failure();
    if (cap > INT32_MAX) return ts_error(TS_ERR_UNSUPPORTED, "message of %zu bytes: more than MPI's int count", cap);
    MPI_Request r;
    MPI_Status status;
    int rc = MPI_Irecv(buf, (int)cap, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Irecv");
    ts_status st = wait_all(&r, 1, &status, what);
    if (st) return st;
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (got) *got = (size_t)count;
    return TS_OK;
}

static void mark_failed(ts_status st, const char *why) {
    job.failed = true;
    if (job.told) return; /* sent already, or another rank's failure stopped this one */
    job.told = true;
    job.mine = (notice){.status = st ? (int32_t)st : TS_ERR_DIST, .rank = job.rank};
    snprintf(job.mine.why, sizeof job.mine.why, "%s", why && *why ? why : ts_status_name(st));
    if (!(job.notices = ts_calloc((size_t)job.size, sizeof *job.notices))) return; /* the others wait for the timeout */
    for (int r = 0; r < job.size; r++) {
        job.notices[r] = MPI_REQUEST_NULL;
        if (r != job.rank) MPI_Isend(&job.mine, (int)sizeof job.mine, MPI_BYTE, r, TS_TAG_FAILURE, MPI_COMM_WORLD, &job.notices[r]);
    }
}

/* After a failure, before MPI_Abort ends every rank: each rank's word that
 * it is leaving too (so every rank has said what stopped it before any is
 * ended), or the timeout for those that hang. Polling moves this rank's
 * notices on meanwhile. */
static void leave_together(void) {
    MPI_Request *r = ts_calloc(2 * (size_t)job.size, sizeof *r);
    char *bye = ts_calloc((size_t)job.size + 1, 1);
    if (!r || !bye) {
        ts_free(r);
        ts_free(bye);
        return;
    }
    for (int k = 0; k < job.size; k++) {
        r[k] = r[job.size + k] = MPI_REQUEST_NULL;
        if (k == job.rank) continue;
        MPI_Isend(&bye[job.size], 1, MPI_BYTE, k, TS_TAG_LEAVE, MPI_COMM_WORLD, &r[k]);
        MPI_Irecv(&bye[k], 1, MPI_BYTE, k, TS_TAG_LEAVE, MPI_COMM_WORLD, &r[job.size + k]);
    }
    poll(r, 2 * job.size, NULL, "leaving the job", false);
    ts_free(r);
    ts_free(bye);
}

ts_status ts_dist_init(int *argc, char ***argv) {
    if (job.joined) return TS_OK;
    if (launcher_size() <= 1) return TS_OK; /* not under mpirun: a job of one */
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return ts_error(TS_ERR_DIST, "MPI_Init_thread failed: is this process started by mpirun?");
        job.owns = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &job.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &job.size);
    job.coll = (ts_collective){.rank = job.rank, .size = job.size, .allreduce_mean_start = allreduce_mean_start,
                               .allreduce_wait = allreduce_wait, .allreduce_progress = allreduce_progress, .allgather = allgather, .send_start = send_start, .send_wait = send_wait, .recv = recv_bytes,
                               .mark_failed = mark_failed};
    job.joined = true;
    ts_collective_set(job.size > 1 ? &job.coll : NULL); /* the job's table, for every layer */
    ts_logf(TS_LOG_DEBUG, "rank %d of %d joined the MPI job", job.rank, job.size);
    return TS_OK;
}

ts_status ts_dist_finalize(void) {
    if (!job.joined) return TS_OK;
    if (job.failed) { /* a collective is pending somewhere: MPI_Finalize would hang */
        leave_together();
        fflush(NULL); /* what this rank printed, before MPI_Abort ends it */
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    job.joined = false;
    ts_collective_set(NULL);
    if (job.owns && MPI_Finalize() != MPI_SUCCESS) return ts_error(TS_ERR_DIST, "MPI_Finalize failed");
    job.rank = 0;
    job.size = 1;
    return TS_OK;
}

#else /* built without MPI */

int ts_dist_available(void) { return 0; }
int ts_dist_rank(void) { return 0; }
int ts_dist_size(void) { return 1; }

ts_status ts_dist_init(int *argc, char ***argv) {
    (void)argc, (void)argv;
    int n = launcher_size();
    if (n > 1)
        return ts_error(TS_ERR_UNSUPPORTED,
                        "started by mpirun with %d ranks, but this tensorscope was built without MPI: install libopenmpi-dev and openmpi-bin (scripts/install-deps.sh test) and reconfigure (cmake -S . -B build)",
                        n);
    return TS_OK;
}

ts_status ts_dist_finalize(void) { return TS_OK; }

#endif

/* Rank 0's bytes to every rank, over the collective table's gather (a few
 * bytes at a run boundary: no call of its own). */
ts_status ts_dist_broadcast(void *buf, size_t bytes) {
    const ts_collective *c = ts_collective_get();
    if (!c || bytes == 0) return TS_OK; /* a job of one: rank 0's bytes are there */
    if (!buf) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_dist_broadcast: buf is NULL; pass the bytes rank 0 sends (and the others receive)");
    unsigned char *all = ts_calloc((size_t)c->size, bytes);
    if (!all) return ts_error(TS_ERR_OUT_OF_MEMORY, "ts_dist_broadcast: no memory for %d copies of %zu bytes", c->size, bytes);
    ts_status st = c->allgather(buf, all, bytes, "the broadcast from rank 0");
    if (!st) memcpy(buf, all, bytes);
    ts_free(all);
    return st;
}
