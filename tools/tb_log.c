/* tb_log.c -- what `tensorscope train --tensorboard DIR` writes: one
 * subdirectory per run (DIR/<date>_<host>, or DIR/<name>), so a second run
 * never hides the first; tags grouped with `/` as TensorBoard's dashboards
 * group them (train/..., eval/..., grad_norm/..., range/...); histograms of
 * watched tensors; the hyperparameters for the HParams dashboard. */
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

ts_status cli_tb_step(ts_tb_writer *tb, const ts_model *m, double loss, double samples_per_s, int replicas) {
    int64_t step = ts_model_steps(m);
    ts_status st = ts_tb_scalar(tb, "train/loss", step, loss);
    if (!st) st = ts_tb_scalar(tb, "train/learning_rate", step, ts_model_learning_rate(m));
    if (!st) st = ts_tb_scalar(tb, "train/samples_per_second", step, samples_per_s);
    const ts_watch_result *w;
    size_t nw = 0;
    double norm2 = 0;
    bool have_norm = false;
    char tag[600];
    if (!st && ts_model_watch_results(m, &w, &nw) == TS_OK)
        for (size_t i = 0; i < nw && !st; i++) {
            if (w[i].run != ts_model_runs(m) - 1) continue;
            const ts_summary *s = w[i].summary;
            /* replicas: Accum___ is the same on each (replica 0's row); the rest from the rows over all of them */
            if (replicas > 1 ? w[i].replica != 0 && strncmp(w[i].name, "Accum___", 8) == 0 : false) continue;
            if (replicas > 1 && w[i].replica >= 0 && strncmp(w[i].name, "Accum___", 8) != 0) continue;
            if (strncmp(w[i].name, "Accum___", 8) == 0 && (s->what & TS_WATCH_STATS)) { /* the gradient of the step */
                norm2 += s->stats.l2 * s->stats.l2;
                have_norm = true;
                snprintf(tag, sizeof tag, "grad_norm/%s", w[i].name + 8);
                st = ts_tb_scalar(tb, tag, step, s->stats.l2);
            }
            if (!st && (s->what & TS_WATCH_HISTOGRAM)) st = ts_tb_histogram(tb, w[i].name, step, s);
            if (!st && (s->what & TS_WATCH_RANGE)) st = range_scalars(tb, w[i].name, step, &s->range);
        }
    if (!st && have_norm) st = ts_tb_scalar(tb, "grad_norm/global", step, sqrt(norm2));
    return st;
}

ts_status cli_tb_eval(ts_tb_writer *tb, int64_t step, double loss, double accuracy) {
    ts_status st = ts_tb_scalar(tb, "eval/loss", step, loss);
    return st ? st : ts_tb_scalar(tb, "eval/accuracy", step, 100 * accuracy); /* percent, as the console prints it */
}
