/* tb_log.c -- what `tensorscope train --tensorboard DIR` writes: one
 * subdirectory per run (DIR/<date>_<host>, or DIR/<name>), so a second run
 * never hides the first; tags grouped with `/` as TensorBoard's dashboards
 * group them (loss/, accuracy/, train/, grad/, weight/, act/, range/), and a
 * Custom Scalars layout that shows the losses first and each tensor's range
 * fractions on one chart; histograms of watched tensors; the
 * hyperparameters for the HParams dashboard. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

ts_status cli_tb_open(const char *root, const char *name, ts_tb_writer **out, char *dir, size_t n) {
    char run[256];
    if (name) {
        snprintf(run, sizeof run, "%s", name);
    } else { /* PyTorch's SummaryWriter names runs by time and host the same way */
        char host[128] = "host";
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = '\0';
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char when[64];
        strftime(when, sizeof when, "%Y-%m-%d_%H-%M-%S", &tm);
        snprintf(run, sizeof run, "%s_%s", when, host);
    }
    snprintf(dir, n, "%s/%s", root, run);
    struct stat sb;
    for (int k = 2; !name && stat(dir, &sb) == 0 && k < 1000; k++) snprintf(dir, n, "%s/%s_%d", root, run, k); /* same second */
    return ts_tb_open(out, dir);
}

void cli_tb_hparams(ts_tb_writer *tb, const cli_hparams *h) {
    const ts_tb_hparam hp[] = {
        {"model", h->model, 0},
        {"optimizer", h->optimizer, 0},
        {"lr", NULL, h->lr},
        {"lr_schedule", h->lr_schedule, 0},
        {"warmup_steps", NULL, (double)h->warmup_steps},
        {"momentum", NULL, h->momentum},
        {"weight_decay", NULL, h->weight_decay},
        {"batch_size", NULL, (double)h->batch_size},
        {"repeat_count", NULL, (double)h->repeat_count},
        {"gradient_accumulation", NULL, (double)h->grad_accum},
        {"epochs", NULL, (double)h->epochs},
        {"seed", NULL, (double)h->seed},
    };
    if (ts_tb_hparams(tb, hp, (int)(sizeof hp / sizeof hp[0])))
        fprintf(stderr, "tensorscope: warning: TensorBoard hyperparameters not written: %s\n", ts_last_error());
}

static ts_status range_scalars(ts_tb_writer *tb, const char *name, int64_t step, const ts_range *r) {
    const struct {
        const char *what;
        double v;
    } f[] = {{"fp16_underflow", r->fp16_underflow}, {"fp16_overflow", r->fp16_overflow}, {"bf16_underflow", r->bf16_underflow},
             {"bf16_overflow", r->bf16_overflow},   {"e4m3_underflow", r->e4m3_underflow}, {"e4m3_overflow", r->e4m3_overflow},
             {"e5m2_underflow", r->e5m2_underflow}, {"e5m2_overflow", r->e5m2_overflow}};
    char tag[600];
    ts_status st = TS_OK;
    for (size_t i = 0; i < sizeof f / sizeof f[0] && !st; i++) {
        snprintf(tag, sizeof tag, "range/%s/%s", name, f[i].what);
        st = ts_tb_scalar(tb, tag, step, f[i].v);
    }
    return st;
}

/* The group of a watched tensor's histogram: grad/ (Gradient___, Accum___),
 * weight/ (parameters and what the optimizer keeps of them), act/ (inputs
 * and op outputs, whose names hold ':'). */
static const char *tensor_group(const char *name) {
    static const char *const weight_prefixes[] = {"UpdatedVar___", "Accl___", "Accl1___", "Accl2___", "Step___"};
    if (strncmp(name, "Gradient___", 11) == 0 || strncmp(name, "Accum___", 8) == 0) return "grad";
    for (size_t i = 0; i < sizeof weight_prefixes / sizeof weight_prefixes[0]; i++)
        if (strncmp(name, weight_prefixes[i], strlen(weight_prefixes[i])) == 0) return "weight";
    return !strchr(name, ':') && strchr(name, '.') ? "weight" : "act";
}

/* `^<prefix><name>/` with the name's regular-expression characters escaped. */
static void tag_regex(char *buf, size_t n, const char *prefix, const char *name) {
    size_t k = (size_t)snprintf(buf, n, "^%s", prefix);
    for (const char *c = name; *c && k + 3 < n; c++) {
        if (strchr("\\^$.|?*+()[]{}", *c)) buf[k++] = '\\';
        buf[k++] = *c;
    }
    snprintf(buf + k, n - k, "/");
}

/* The Custom Scalars layout, written with a run's first scalars: the losses
 * first (training and held-out on one chart), then accuracy, the training
 * rates, the gradient norms on one chart, the process's memory and the
 * device's, and one chart per tensor of the eight low-precision range
 * fractions. */
static ts_status write_layout(ts_tb_writer *tb, const ts_watch_result *w, size_t nw) {
    enum { MAX_RANGE = 64 };
    enum { FIXED = 7 };
    static const char *const loss[] = {"^loss/"}, *const accuracy[] = {"^accuracy/"}, *const lr[] = {"^train/learning_rate$"},
                             *const sps[] = {"^train/samples_per_second$"}, *const norms[] = {"^grad/norm/"}, *const mem[] = {"^memory/"},
                             *const dev[] = {"^device_memory/"};
    ts_tb_chart charts[FIXED + MAX_RANGE] = {{"loss", "loss (training per run, held-out per epoch)", loss, 1},
                                             {"accuracy", "held-out accuracy (%)", accuracy, 1},
                                             {"train", "learning rate", lr, 1},
                                             {"train", "samples per second", sps, 1},
                                             {"grad", "gradient L2 norms (global and per parameter)", norms, 1},
                                             {"memory", "memory of this process and its children (MiB, --watch-memory)", mem, 1},
                                             {"memory", "device memory tensorscope holds, now and at peak (MiB)", dev, 1}};
    char regex[MAX_RANGE][600], title[MAX_RANGE][600];
    const char *regex_ptr[MAX_RANGE];
    int n = FIXED;
    for (size_t i = 0; i < nw && n < FIXED + MAX_RANGE; i++) {
        if (!(w[i].summary->what & TS_WATCH_RANGE)) continue;
        bool seen = false;
        for (int k = FIXED; k < n && !seen; k++) seen = strcmp(charts[k].title, w[i].name) == 0;
        if (seen) continue;
        int r = n - FIXED;
        tag_regex(regex[r], sizeof regex[r], "range/", w[i].name);
        snprintf(title[r], sizeof title[r], "%s", w[i].name);
        regex_ptr[r] = regex[r];
        charts[n++] = (ts_tb_chart){"range", title[r], &regex_ptr[r], 1};
    }
    return ts_tb_layout(tb, charts, n);
}

ts_status cli_tb_step(ts_tb_writer *tb, const ts_model *m, double loss, double samples_per_s, int replicas) {
    static const ts_tb_writer *laid_out; /* the writer whose layout is written */
    int64_t step = ts_model_steps(m);
    ts_status st = ts_tb_scalar(tb, "loss/train", step, loss);
    if (!st) st = ts_tb_scalar(tb, "train/learning_rate", step, ts_model_learning_rate(m));
    if (!st) st = ts_tb_scalar(tb, "train/samples_per_second", step, samples_per_s);
    const ts_watch_result *w = NULL;
    size_t nw = 0;
    double norm2 = 0;
    bool have_norm = false;
    char tag[600];
    if (!st && ts_model_watch_results(m, &w, &nw) != TS_OK) nw = 0;
    if (!st && laid_out != tb) {
        st = write_layout(tb, w, nw);
        laid_out = tb;
    }
    for (size_t i = 0; i < nw && !st; i++) {
        if (w[i].run != ts_model_runs(m) - 1) continue;
        const ts_summary *s = w[i].summary;
        if (cli_stability_row(w[i].name)) { /* stability/<layer>/<signal>: its value */
            st = ts_tb_scalar(tb, w[i].name, step, cli_stability_value(s));
            continue;
        }
        /* replicas: Accum___ is the same on each (replica 0's row); the rest from the rows over all of them */
        if (replicas > 1 ? w[i].replica != 0 && strncmp(w[i].name, "Accum___", 8) == 0 : false) continue;
        if (replicas > 1 && w[i].replica >= 0 && strncmp(w[i].name, "Accum___", 8) != 0) continue;
        if (strncmp(w[i].name, "Accum___", 8) == 0 && (s->what & TS_WATCH_STATS)) { /* the gradient of the step */
            norm2 += s->stats.l2 * s->stats.l2;
            have_norm = true;
            snprintf(tag, sizeof tag, "grad/norm/%s", w[i].name + 8);
            st = ts_tb_scalar(tb, tag, step, s->stats.l2);
        }
        snprintf(tag, sizeof tag, "%s/%s", tensor_group(w[i].name), w[i].name);
        if (!st && (s->what & TS_WATCH_HISTOGRAM)) st = ts_tb_histogram(tb, tag, step, s);
        if (!st && (s->what & TS_WATCH_RANGE)) st = range_scalars(tb, w[i].name, step, &s->range);
        if (!st && s->stored != TS_F32) { /* a 16-bit tensor: what its rounding lost, measured, in % */
            snprintf(tag, sizeof tag, "precision/%s/underflowed", w[i].name);
            st = ts_tb_scalar(tb, tag, step, 100 * s->stored_underflow);
            snprintf(tag, sizeof tag, "precision/%s/overflowed", w[i].name);
            if (!st) st = ts_tb_scalar(tb, tag, step, 100 * s->stored_overflow);
        }
    }
    double scale;
    int64_t skipped;
    if (!st && ts_model_loss_scale(m, &scale, &skipped)) { /* dynamic loss scaling (f16) */
        st = ts_tb_scalar(tb, "train/loss_scale", step, scale);
        if (!st) st = ts_tb_scalar(tb, "train/skipped_steps", step, (double)skipped);
    }
    if (!st && have_norm) st = ts_tb_scalar(tb, "grad/norm/global", step, sqrt(norm2));
    /* a device's memory (a GPU's, cpu-staged's): what its backend holds
     * after this run, and its peak; not asked again of a writer whose
     * model has none (the CPU: the process's memory is --watch-memory's) */
    static const ts_tb_writer *no_device;
    ts_model_memory mm;
    if (!st && no_device != tb && ts_model_memory_get(m, &mm) == TS_OK && mm.device_total > 0) {
        st = ts_tb_scalar(tb, "device_memory/in_use", step, (double)mm.device_in_use / (1024.0 * 1024.0));
        if (!st) st = ts_tb_scalar(tb, "device_memory/peak", step, (double)mm.device_peak / (1024.0 * 1024.0));
    } else if (!st) {
        no_device = tb;
    }
    ts_memwatch_stats mw;
    if (!st && ts_memwatch_latest(&mw) == TS_OK && mw.running && mw.samples > 0) { /* --watch-memory: its latest sample, MiB */
        const double MiB = 1024.0 * 1024.0;
        st = ts_tb_scalar(tb, "memory/rss", step, (double)mw.latest.rss / MiB);
        if (!st) st = ts_tb_scalar(tb, "memory/peak_rss", step, (double)mw.peak.rss / MiB);
        if (!st && mw.latest.pss >= 0) st = ts_tb_scalar(tb, "memory/pss", step, (double)mw.latest.pss / MiB);
        if (!st && mw.latest.uss >= 0) st = ts_tb_scalar(tb, "memory/uss", step, (double)mw.latest.uss / MiB);
        ts_process_memory procs[TS_MEMWATCH_PROCESSES];
        int n = 0;
        if (ts_memwatch_processes(procs, TS_MEMWATCH_PROCESSES, &n)) n = 0;
        for (int i = 0; !st && i < n; i++) { /* each process of the tree: memory/process/<pid>_<command>/... */
            const ts_memory_usage *u = &procs[i].usage;
            char ptag[128];
            snprintf(ptag, sizeof ptag, "memory/process/%d_%s/rss", procs[i].pid, procs[i].command);
            st = ts_tb_scalar(tb, ptag, step, (double)u->rss / MiB);
            snprintf(ptag, sizeof ptag, "memory/process/%d_%s/pss", procs[i].pid, procs[i].command);
            if (!st && u->pss >= 0) st = ts_tb_scalar(tb, ptag, step, (double)u->pss / MiB);
            snprintf(ptag, sizeof ptag, "memory/process/%d_%s/uss", procs[i].pid, procs[i].command);
            if (!st && u->uss >= 0) st = ts_tb_scalar(tb, ptag, step, (double)u->uss / MiB);
        }
    }
    return st;
}

ts_status cli_tb_eval(ts_tb_writer *tb, int64_t step, double loss, double accuracy) {
    ts_status st = ts_tb_scalar(tb, "loss/heldout", step, loss);
    return st ? st : ts_tb_scalar(tb, "accuracy/heldout", step, 100 * accuracy); /* percent, as the console prints it */
}
