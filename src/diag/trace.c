/* trace.c -- the timeline's file (trace.h, docs/trace.md): the events the
 * recorder kept (core/trace.c) as Trace Event Format JSON, written
 * atomically. */
#include "diag/trace.h"

#include "core/atomic_file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A JSON string with escapes. */
static void json_str(FILE *f, const char *prefix, const char *s) {
    fputc('"', f);
    fputs(prefix, f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static const char *const cat_names[TS_TRACE_CAT_COUNT] = {"step", "forward", "backward", "optimizer", "accumulate",
                                                          "observe", "worker", "outfeed", "recompile", "communication", "kernel"};

static void write_event(FILE *f, const ts_trace_record *r, const ts_trace_event *e, int pid) {
    double ts = (double)(int64_t)(e->t0 - r->t_base) / 1e3;
    if (e->counter) {
        if (!isfinite(e->value)) return; /* JSON has no NaN or Inf */
        fputs(",\n{\"ph\":\"C\",\"name\":", f);
        json_str(f, "", e->label);
        fprintf(f, ",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"args\":{\"value\":%.17g}}", pid, e->tid + 1, ts, e->value);
        return;
    }
    ts_trace_cat cat = (ts_trace_cat)e->cat;
    fputs(",\n{\"ph\":\"X\",\"cat\":", f);
    json_str(f, "", cat_names[cat]);
    fputs(",\"name\":", f);
    if (cat == TS_TRACE_STEP) fprintf(f, "\"step %lld\"", (long long)e->number);
    else if (cat == TS_TRACE_OBSERVE) json_str(f, "observe ", e->label);
    else if (cat == TS_TRACE_SINK) json_str(f, "outfeed ", e->label);
    else if (cat == TS_TRACE_KERNEL && e->pass == TS_PASS_OPTIMIZER) json_str(f, "", "optimizer");
    else if (e->label[0] && cat != TS_TRACE_RECOMPILE) json_str(f, "", e->label);
    else json_str(f, "", cat_names[cat]);
    fprintf(f, ",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{", pid, e->tid + 1, ts, (double)e->dur / 1e3);
    const char *sep = "";
    if (e->op) {
        fputs("\"op\":", f);
        json_str(f, "", e->op);
        sep = ",";
    }
    if (cat == TS_TRACE_RECOMPILE) {
        fprintf(f, "%s\"cause\":", sep);
        json_str(f, "", e->label);
        sep = ",";
    }
    if (e->ndim >= 0) {
        fprintf(f, "%s\"shape\":[", sep);
        for (int k = 0; k < e->ndim; k++) fprintf(f, "%s%lld", k ? "," : "", (long long)e->d[k]);
        fputc(']', f);
        sep = ",";
    }
    if (e->value > 0) {
        fprintf(f, "%s\"flops\":%.17g", sep, e->value);
        sep = ",";
    }
    if (cat == TS_TRACE_STEP || cat == TS_TRACE_OPTIMIZER) fprintf(f, "%s\"step\":%lld", sep, (long long)e->number);
    else if (cat == TS_TRACE_FORWARD || cat == TS_TRACE_BACKWARD || cat == TS_TRACE_ACCUMULATE)
        fprintf(f, "%s\"micro_batch\":%lld", sep, (long long)e->number);
    else if (cat == TS_TRACE_KERNEL) {
        static const char *const passes[] = {"", "forward", "backward", "optimizer"};
        fprintf(f, "%s\"pass\":\"%s\",\"%s\":%lld", sep, passes[e->pass & 3], e->pass == TS_PASS_OPTIMIZER ? "step" : "micro_batch",
                (long long)e->number);
    }
    fputs("}}", f);
}

static ts_status write_events(const ts_trace_record *r) {
    ts_atomic_file af;
    ts_status st = ts_atomic_open(&af, r->path);
    if (st) return st;
    FILE *f = af.f;
    int pid = (int)getpid();
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"tensorscope\",\"dropped_events\":%lld},\n\"traceEvents\":[\n",
            (long long)r->dropped);
    fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":", pid);
    if (r->rank >= 0) fprintf(f, "\"tensorscope rank %d\"}}", r->rank);
    else fputs("\"tensorscope\"}}", f);
    for (int t = 0; t < r->tracks; t++) {
        if (!r->track_name[t]) continue;
        fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", pid, t + 1);
        json_str(f, "", r->track_name[t]);
        fprintf(f, "}},\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}", pid, t + 1, t);
    }
    for (int64_t i = 0; i < r->kept; i++) write_event(f, r, &r->ev[i], pid);
    fputs("\n]}\n", f);
    if (ferror(f)) {
        int err = errno ? errno : EIO;
        ts_atomic_abort(&af);
        return ts_error(TS_ERR_IO, "%s", strerror(err));
    }
    st = ts_atomic_commit(&af);
    if (st) return st;
    if (r->dropped)
        ts_logf(TS_LOG_WARN, "trace %s: %lld events did not fit and were dropped; trace fewer steps (--trace-steps A:B)", r->path,
                (long long)r->dropped);
    ts_logf(TS_LOG_INFO, "trace written to %s (%lld events)", r->path, (long long)r->kept);
    return TS_OK;
}

/* The file, or an error; a regular file left at the path by an earlier run
 * is removed then, so that it is not taken for this run's timeline. */
static ts_status write_file(const ts_trace_record *r) {
    errno = 0;
    ts_status st = write_events(r);
    if (!st) return TS_OK;
    struct stat sb;
    bool stale = lstat(r->path, &sb) == 0 && S_ISREG(sb.st_mode) && unlink(r->path) == 0;
    return ts_error_wrap(st, "trace: writing %s failed%s", r->path, stale ? "; the previous trace there was removed" : "");
}

ts_status ts_trace_finish(const void *owner) { return ts_trace_end(owner, write_file); }
