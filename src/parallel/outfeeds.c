/* outfeeds.c -- outfeed records of every rank on rank 0
 * (docs/design.md#replicas-and-pipeline-stages):
 * in an MPI job (replicas or pipeline stages) each rank pushes its records
 * into its own queues as they are produced, tagged with its replica or
 * stage; the ranks other than 0 also pack them, as they come, into one
 * buffer sized at compile, and send it to rank 0 in one point-to-point
 * message after the run. Rank 0 receives every rank's message and pushes
 * their records, by rank and in the order they were produced, into its own
 * queues after its own records of the run, with the sender's tags.
 *
 * The message is one per rank and run, after the run's last step: the step
 * loop never waits on it (the run already ends with the exchange of
 * anchors, watches or stage parameters, which waits for every rank).
 * Nothing here allocates after compile. */
#include "observe/run.h"
#include "parallel/parallel.h"

#include "observe/outfeed.h"

#include <stdio.h>
#include <string.h>

/* One packed record, then its data padded to 8 bytes. Keys are not sent:
 * every rank compiled the same program, so (entry, link) names the same
 * key on rank 0. */
typedef struct packed_record {
    int64_t run, sample;
    int32_t entry, link;
    int32_t dtype, ndim;
    int64_t shape[TS_MAX_DIMS];
    int64_t bytes;
} packed_record;

static size_t padded(size_t bytes) { return (bytes + 7) & ~(size_t)7; }

/* Bytes of the records rank `rank` can produce in one run at most: every
 * outfeed link of the entries it computes, once per sample of the run. */
static size_t run_bytes(const ts_prog *p, int rank) {
    size_t total = 0;
    for (int e = 0; e < p->n_entries; e++) {
        const ts_entry *en = &p->entries[e];
        if (!en->n_outfeeds || (p->stage && p->stage[en->node] != rank)) continue;
        int64_t S = en->per_step ? p->samples_step : p->samples_mb;
        size_t one = sizeof(packed_record) + padded((size_t)en->numel * ts_dtype_size(ts_entry_view_dtype(en)));
        total += (size_t)S * (size_t)en->n_outfeeds * one;
    }
    return total;
}

ts_status ts_outfeeds_compile(ts_run *run, ts_prog *p) {
    const ts_collective *c = run->coll;
    if (!c) return TS_OK;
    bool any = false;
    for (int e = 0; e < p->n_entries && !any; e++) any = p->entries[e].n_outfeeds > 0;
    if (!any) return TS_OK;
    if (c->rank > 0) {
        p->fwd_cap = run_bytes(p, c->rank);
    } else {
        p->fwd_at = ts_calloc((size_t)c->size + 1, sizeof *p->fwd_at);
        p->fwd_got = ts_calloc((size_t)c->size, sizeof *p->fwd_got);
        if (!p->fwd_at || !p->fwd_got) return TS_ERR_OUT_OF_MEMORY;
        for (int r = 1; r < c->size; r++) p->fwd_at[r + 1] = p->fwd_at[r] + run_bytes(p, r);
        p->fwd_cap = p->fwd_at[c->size];
    }
    if (p->fwd_cap > INT32_MAX)
        return ts_error(TS_ERR_UNSUPPORTED, "outfeeds: one run's records take %zu bytes, more than one MPI message holds: outfeed fewer tensors or use fewer device iterations",
                        p->fwd_cap);
    if (p->fwd_cap && !(p->fwd = ts_malloc(p->fwd_cap))) return TS_ERR_OUT_OF_MEMORY;
    return TS_OK;
}

int ts_outfeeds_replica(const ts_run *run) { return run->coll && !run->prog->stage ? run->coll->rank : 0; }
int ts_outfeeds_stage(const ts_run *run) { return run->coll && run->prog->stage ? run->coll->rank : 0; }

ts_status ts_outfeeds_keep(ts_run *run, int entry, int link, int64_t sample, const ts_array *a) {
    ts_prog *p = run->prog;
    if (!p->fwd || !run->coll || run->coll->rank == 0) return TS_OK;
    const ts_outfeed_link *l = &p->entries[entry].outfeeds[link];
    if (!ts_outfeed_accepts(l->q, l->key)) return TS_OK;
    size_t bytes = (size_t)ts_array_numel(a) * ts_dtype_size(a->dtype), need = sizeof(packed_record) + padded(bytes);
    if (p->fwd_used + need > p->fwd_cap)
        return ts_error(TS_ERR_INTERNAL, "outfeeds: record '%s' of run %lld does not fit the %zu bytes sized at compile for rank 0", l->key,
                        (long long)run->runs, p->fwd_cap);
    packed_record h = {.run = run->runs, .sample = sample, .entry = entry, .link = link, .dtype = (int32_t)a->dtype, .ndim = a->ndim, .bytes = (int64_t)bytes};
    memcpy(h.shape, a->shape, sizeof h.shape);
    memcpy(p->fwd + p->fwd_used, &h, sizeof h);
    if (bytes) memcpy(p->fwd + p->fwd_used + sizeof h, a->data, bytes);
    p->fwd_used += need;
    return TS_OK;
}

/* Rank 0: pushes rank r's records from fwd[at, at + n). */
static ts_status push_from(ts_run *run, int r, size_t at, size_t n) {
    ts_prog *p = run->prog;
    for (size_t off = at; off < at + n;) {
        packed_record h;
        if (at + n - off < sizeof h) return ts_error(TS_ERR_DIST, "outfeeds: rank %d sent a truncated record", r);
        memcpy(&h, p->fwd + off, sizeof h);
        if (h.entry < 0 || h.entry >= p->n_entries || h.link < 0 || h.link >= p->entries[h.entry].n_outfeeds || h.bytes < 0 ||
            (size_t)h.bytes > at + n - off - sizeof h || h.ndim < 0 || h.ndim > TS_MAX_DIMS)
            return ts_error(TS_ERR_DIST, "outfeeds: rank %d sent a record rank 0 does not know: every rank must build the same model and outfeeds", r);
        const ts_outfeed_link *l = &p->entries[h.entry].outfeeds[h.link];
        ts_array a = {.dtype = (ts_dtype)h.dtype, .ndim = h.ndim, .data = p->fwd + off + sizeof h};
        memcpy(a.shape, h.shape, sizeof a.shape);
        int64_t numel = ts_array_numel(&a);
        const ts_entry *he = &p->entries[h.entry];
        if (h.dtype != (int32_t)(he->dtype == TS_BOOL ? TS_BOOL : ts_entry_view_dtype(he)) || numel < 0 || (size_t)numel * ts_dtype_size(a.dtype) != (size_t)h.bytes)
            return ts_error(TS_ERR_DIST, "outfeeds: rank %d sent a record of '%s' whose dtype or shape does not match its %lld bytes: every rank must build the same model and outfeeds",
                            r, l->key, (long long)h.bytes);
        ts_status st = ts_outfeed_push_from(l->q, h.run, h.sample, l->key, &a, p->stage ? 0 : r, p->stage ? r : 0);
        if (st) return st;
        off += sizeof h + padded((size_t)h.bytes);
    }
    return TS_OK;
}

ts_status ts_outfeeds_after_run(ts_run *run) {
    ts_prog *p = run->prog;
    if (!p->fwd_cap) return TS_OK;
    const ts_collective *c = run->coll;
    if (c->rank > 0) {
        size_t n = p->fwd_used;
        p->fwd_used = 0;
        ts_status st = c->send_start(0, TS_TAG_OUTFEED, p->fwd, n);
        return st ? st : c->send_wait(); /* rank 0 is receiving it now: the run's end waits for every rank */
    }
    for (int r = 1; r < c->size; r++) {
        p->fwd_got[r] = 0;
        if (p->fwd_at[r + 1] == p->fwd_at[r]) continue; /* a stage without outfeeds sends nothing */
        char what[64];
        snprintf(what, sizeof what, "the outfeed records of rank %d", r);
        ts_status st = c->recv(r, TS_TAG_OUTFEED, p->fwd + p->fwd_at[r], p->fwd_at[r + 1] - p->fwd_at[r], &p->fwd_got[r], what);
        if (st) return st;
    }
    for (int r = 1; r < c->size; r++) {
        ts_status st = push_from(run, r, p->fwd_at[r], p->fwd_got[r]);
        if (st) return st;
    }
    return TS_OK;
}
